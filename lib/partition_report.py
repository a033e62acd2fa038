# GENERATED FILE: do not edit. Source: book/partition_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of On Tracking the Partition Function, exported from
book/partition_report.md.

The paper-scale experiments that `python -m lib` runs (partition-mnist, partition-uci,
partition-large), the paper's tables, the result parts and the claims of the scorecard; the
method itself is lib.partition.
"""

# %% book/partition_report.md
from __future__ import annotations

import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import lib.data
from lib.partition import RBM, adapt_betas, ais_betas, ais_log_z, exact_evaluator, linear_betas
from lib.partition import log_odds_of_mean, thin_history, time_sml_pt, train_sml_pt
from lib.record import TOLERANCE_Z, Claim, experiment, run_unit


# %% book/partition_report.md
MNIST_PRESETS = {  # python -m lib partition-mnist --preset book | paper
    "book": {
        "n_hidden": 25,
        "steps": 10000,
        "schedules": [[0.01, 1e3], [0.01, 1e5]],
        "eval_every": 5000,
        "ais_every": 10000,
        "ais_counts": [500, 2000, 2000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "trace_every": 50,
        "timing_steps": 2000,
        "timing_repeats": 1,
        "seed": 0,
    },
    "paper": {
        "n_hidden": 25,
        "steps": 300000,
        "schedules": [
            [0.001, 1e3],
            [0.001, 1e4],
            [0.001, 1e5],
            [0.01, 1e3],
            [0.01, 1e4],
            [0.01, 1e5],
        ],
        "eval_every": 10000,
        "ais_every": 50000,
        "ais_counts": [1000, 10000, 10000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "trace_every": 500,
        "timing_steps": 2000,
        "timing_repeats": 3,
        "seed": 0,
    },
}


# %% book/partition_report.md
@experiment("partition-mnist", chapter="partition", **MNIST_PRESETS)
def run_partition_mnist(config: dict) -> list:
    """Figure 3: SML-PT on binarised MNIST with the tracked, the exact and the AIS log Z along
    training."""
    data = lib.data.load_binarized_mnist()
    base_rate = log_odds_of_mean(data.train)
    common = {
        "betas": linear_betas(config["n_temps"]),
        "n_chains": config["n_chains"],
        "batch_size": config["batch_size"],
    }
    evaluate = exact_evaluator(
        data.test,
        base_bias=base_rate,
        ais_every=config["ais_every"],
        ais_counts=config["ais_counts"],
        ais_runs=config["ais_runs"],
    )

    def unit(lr0, alpha, checkpoint_dir):
        rbm = RBM(784, config["n_hidden"], rngs=nnx.Rngs(config["seed"]), visible_bias=base_rate)
        res = train_sml_pt(
            rbm,
            data.train,
            seed=config["seed"],
            steps=config["steps"],
            learning_rate=lr0,
            alpha=alpha,
            eval_every=config["eval_every"],
            evaluate=evaluate,
            checkpoint_dir=checkpoint_dir,
            **common,
        )
        about = {"lr0": lr0, "alpha": alpha}
        trace = {"kind": "trace", **about, **thin_history(res.history, config["trace_every"])}
        return [{"kind": "eval", **about, **r} for r in res.history.evals] + [trace]

    def timing(_):
        rbm = RBM(784, config["n_hidden"], rngs=nnx.Rngs(0), visible_bias=base_rate)
        steps, repeats = config["timing_steps"], config["timing_repeats"]
        lr = config["schedules"][0][0]
        seconds = time_sml_pt(
            rbm, data.train, seed=1, steps=steps, repeats=repeats, learning_rate=lr, **common
        )
        return {"kind": "timing", **seconds}

    rows = []
    for lr0, alpha in config["schedules"]:
        rows += run_unit(f"eps0={lr0} alpha={alpha}", partial(unit, lr0, alpha))
    rows.append(run_unit("timing", timing))
    return rows


# %% book/partition_report.md
# test log-likelihood in nats (Table 1): tracked (Kalman), AIS and its 3 sd, RBM-25, NADE
PAPER_TABLE1 = {
    "dna": {"Kalman": -87.97, "AIS": -88.51, "AIS_3sd": 0.97, "RBM-25": -96.90, "NADE": -84.81},
    "mushrooms": {
        "Kalman": -10.49,
        "AIS": -14.68,
        "AIS_3sd": 30.75,
        "RBM-25": -15.15,
        "NADE": -9.81,
    },
    "nips": {
        "Kalman": -270.10,
        "AIS": -271.23,
        "AIS_3sd": 0.58,
        "RBM-25": -277.37,
        "NADE": -273.08,
    },
}


def _ais_test_ll(model: RBM, x, key, base_bias, config) -> dict:
    """Mean test log-likelihood with log Z by AIS, and its interval from AIS's 3-sd interval."""
    ais = ais_log_z(
        model,
        key,
        base_bias=base_bias,
        betas=ais_betas(config["ais_counts"]),
        n_runs=config["ais_runs"],
    )
    f = float(jnp.mean(model.free_energy(jnp.asarray(x, jnp.float32))))
    return {
        "ais_log_z": ais.log_z,
        "test_ll_ais": -f - ais.log_z,
        "test_ll_ais_low": -f - ais.upper,
        "test_ll_ais_high": -f - ais.lower,
    }


# %% book/partition_report.md
LARGE_PRESETS = {  # python -m lib partition-large --preset book | paper
    "book": {
        "datasets": ["mnist"],
        "n_hidden": 500,
        "steps": 2000,
        "schedules": [[0.01, 1e3]],
        "eval_every": 1000,
        "ais_counts": [500, 2000, 2000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "trace_every": 100,
        "adapt": False,
        "seed": 0,
    },
    "paper": {
        "datasets": ["mnist", "caltech"],
        "n_hidden": 500,
        "steps": 200000,
        "schedules": [
            [0.01, 1e3],
            [0.01, 1e4],
            [0.01, 1e5],
            [0.001, 1e3],
            [0.001, 1e4],
            [0.001, 1e5],
        ],
        "eval_every": 10000,
        "ais_counts": [1000, 10000, 10000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "trace_every": 500,
        "adapt": False,
        "seed": 0,
    },
}


# %% book/partition_report.md
@experiment("partition-large", chapter="partition", **LARGE_PRESETS)
def run_partition_large(config: dict) -> list:
    """Sec. 4, 500 hidden units: tracked test likelihood along training against AIS at the end
    (MNIST, Caltech)."""
    from lib.data import load_binarized_mnist, load_caltech101_silhouettes

    loaders = {"mnist": load_binarized_mnist, "caltech": load_caltech101_silhouettes}
    rows = []
    for name in config["datasets"]:
        if name not in loaders:
            raise ValueError(
                f"partition-large: unknown dataset {name!r}; choose from {sorted(loaders)}"
            )
        data = loaders[name]()
        test = jnp.asarray(data.test, jnp.float32)
        base_rate = log_odds_of_mean(data.train)

        def evaluate(model, state, t):
            return {
                "test_ll_tracked": float(-jnp.mean(model.free_energy(test)))
                - float(state.tracker.mean[0])
            }

        def unit(lr0, alpha, checkpoint_dir):
            rbm = RBM(
                data.train.shape[1],
                config["n_hidden"],
                rngs=nnx.Rngs(config["seed"]),
                visible_bias=base_rate,
            )
            res = train_sml_pt(
                rbm,
                data.train,
                seed=config["seed"],
                steps=config["steps"],
                learning_rate=lr0,
                alpha=alpha,
                betas=linear_betas(config["n_temps"]),
                n_chains=config["n_chains"],
                batch_size=config["batch_size"],
                eval_every=config["eval_every"],
                evaluate=evaluate,
                checkpoint_dir=checkpoint_dir,
                adapt=config["adapt"],
            )
            about = {"dataset": name, "lr0": lr0, "alpha": alpha}
            return [{"kind": "eval", **about, **r} for r in res.history.evals] + [
                {"kind": "trace", **about, **thin_history(res.history, config["trace_every"])},
                {
                    "kind": "final",
                    **about,
                    **res.history.evals[-1],
                    **_ais_test_ll(res.model, data.test, jax.random.key(1), base_rate, config),
                },
            ]

        for lr0, alpha in config["schedules"]:
            rows += run_unit(f"{name} eps0={lr0} alpha={alpha}", partial(unit, lr0, alpha))
    return rows


# %% book/partition_report.md
UCI_PRESETS = {  # python -m lib partition-uci --preset book | paper
    "book": {
        "datasets": ["dna"],
        "n_hidden": [100],
        "schedules": [[0.01, 1e3]],
        "epochs": 50,
        "eval_epochs": 5,
        "patience": 5,
        "ais_counts": [500, 2000, 2000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "adapt": False,
        "seed": 0,
    },
    "paper": {
        "datasets": ["dna", "mushrooms", "nips"],
        "n_hidden": [100, 200, 500],
        "schedules": [
            [0.01, None],
            [0.001, None],
            [0.01, 1e3],
            [0.01, 1e4],
            [0.001, 1e3],
            [0.001, 1e4],
        ],
        "epochs": 500,
        "eval_epochs": 5,
        "patience": 10,
        "ais_counts": [1000, 10000, 10000],
        "ais_runs": 100,
        "n_temps": 10,
        "n_chains": 20,
        "batch_size": 20,
        "adapt": False,
        "seed": 0,
    },
}


# %% book/partition_report.md
@experiment("partition-uci", chapter="partition", **UCI_PRESETS)
def run_partition_uci(config: dict) -> list:
    """Table 1: early stopping on the tracked validation likelihood; tracked and AIS test
    likelihoods."""
    from lib.data import load_nade

    rows = []
    for name in config["datasets"]:
        data = load_nade(name)
        valid, test = (jnp.asarray(x, jnp.float32) for x in (data.valid, data.test))
        base_rate = log_odds_of_mean(data.train)
        per_epoch = max(1, data.train.shape[0] // config["batch_size"])

        def unit(n_hidden, lr0, alpha, checkpoint_dir):
            began = time.perf_counter()
            rbm = RBM(
                data.train.shape[1], n_hidden, rngs=nnx.Rngs(config["seed"]), visible_bias=base_rate
            )
            res = train_sml_pt(
                rbm,
                data.train,
                seed=config["seed"],
                steps=config["epochs"] * per_epoch,
                learning_rate=lr0,
                alpha=alpha,
                betas=linear_betas(config["n_temps"]),
                n_chains=config["n_chains"],
                batch_size=config["batch_size"],
                eval_every=config["eval_epochs"] * per_epoch,
                x_valid=valid,
                patience=config["patience"],
                checkpoint_dir=checkpoint_dir,
                adapt=config["adapt"],
            )
            at_best = next(r for r in res.history.evals if r["step"] == res.history.best_step)
            return {
                "kind": "candidate",
                "dataset": name,
                "n_hidden": n_hidden,
                "lr0": lr0,
                "alpha": alpha,
                "best_epoch": res.history.best_step // per_epoch,
                "epochs_run": res.history.evals[-1]["step"] // per_epoch,
                "valid_ll_tracked": at_best["valid_ll"],
                "test_ll_tracked": float(-jnp.mean(res.model.free_energy(test))) - at_best["log_z"],
                "valid_curve": [[r["step"] // per_epoch, r["valid_ll"]] for r in res.history.evals],
                "train_seconds": round(time.perf_counter() - began, 1),
                # acceptance of each neighbouring pair's swaps, averaged over the last evaluation's
                # updates
                "swap_rate": [
                    round(float(r), 3)
                    for r in res.history["swap_rate"][-config["eval_epochs"] * per_epoch :].mean(0)
                ],
                **_ais_test_ll(res.model, data.test, jax.random.key(1), base_rate, config),
            }

        candidates = [
            run_unit(
                f"{name} nh={n_hidden} eps0={lr0} alpha={alpha}",
                partial(unit, n_hidden, lr0, alpha),
            )
            for n_hidden in config["n_hidden"]
            for lr0, alpha in config["schedules"]
        ]
        rows += candidates
        rows.append({**max(candidates, key=lambda r: r["valid_ll_tracked"]), "kind": "chosen"})
    return rows


# %% book/partition_report.md
# Sec. 5: the paper's best 500-hidden RBM by AIS: tracked, AIS and AIS's 3-sd half-width
PAPER_LARGE = {
    "mnist": {"Kalman": -89.96, "AIS": -94.34, "AIS_3sd": 3.08},
    "caltech": {"Kalman": -114.31, "AIS": -134.23, "AIS_3sd": 21.14},
}
# the pieces of the paper-scale run in results/partition/, partition-large.<piece>.json
LARGE_PARTS = tuple(
    f"{d}-eps1e-{e}-a1e{a}" for d in ("mnist", "caltech") for e in (2, 3) for a in (3, 4, 5)
) + tuple(
    f"{d}-eps1e-{e}-a1e{a}-adapt"  # adaptive tempering (APT), all twelve schedules
    for d, e, a in (
        ("mnist", 2, 3),
        ("mnist", 2, 4),
        ("mnist", 2, 5),
        ("mnist", 3, 3),
        ("mnist", 3, 4),
        ("mnist", 3, 5),
        ("caltech", 2, 3),
        ("caltech", 2, 4),
        ("caltech", 2, 5),
        ("caltech", 3, 3),
        ("caltech", 3, 4),
        ("caltech", 3, 5),
    )
)


# %% book/partition_report.md
_SCHEDULES = {
    "eps1e-2-a1e3": (0.01, 1e3),
    "eps1e-2-a1e4": (0.01, 1e4),
    "eps1e-2-a1e5": (0.01, 1e5),
    "eps1e-3-a1e3": (0.001, 1e3),
    "eps1e-3-a1e4": (0.001, 1e4),
    "eps1e-3-a1e5": (0.001, 1e5),
}
_LARGE = {
    d: tuple(f"results/partition/partition-large.{p}.json" for p in LARGE_PARTS if p.startswith(d))
    for d in ("mnist", "caltech")
}


def _tracking_error(records: dict) -> float:
    """Largest |tracked - exact log Z| over a partition-mnist run's evaluations (Section 5)."""
    (record,) = records.values()
    return max(abs(r["log_z"] - r["exact_log_z"]) for r in record["rows"] if r["kind"] == "eval")


_CHOSEN_SEEDS = ("chosen-seed1", "chosen-seed2")  # the chosen RBM trained again from seeds 1, 2


def _uci_sources(name: str) -> tuple:
    """The partition-uci files of a Table 1 record: the grid (seed 0) and the chosen RBM's seeds."""
    parts = ("", "-wide", *(f"-{part}" for part in _CHOSEN_SEEDS))
    return tuple(f"results/partition/partition-uci.{name}{part}.json" for part in parts)


def _is_seed_run(path: str) -> bool:
    return path.endswith(tuple(f"-{part}.json" for part in _CHOSEN_SEEDS))


def _chosen_row(records: dict) -> dict:
    """The grid's candidate with the best tracked validation likelihood; the runs from other seeds
    take no part in the choice."""
    rows = [
        r
        for path, record in records.items()
        if not _is_seed_run(path)
        for r in record["rows"]
        if r["kind"] == "candidate"
    ]
    return max(rows, key=lambda r: r["valid_ll_tracked"])


def _chosen(records: dict, key: str) -> float:
    """`key` of the candidate with the best tracked validation likelihood in partition-uci files."""
    return _chosen_row(records)[key]


def _run_spread(records: dict, key: str) -> float:
    """The standard deviation of one training run's `key` at the chosen setting, from the chosen
    candidate (seed 0) and the same setting trained from the other seeds."""
    chosen = _chosen_row(records)
    setting = ("n_hidden", "lr0", "alpha")
    values = [chosen[key]]
    for path, record in records.items():
        if _is_seed_run(path):
            (row,) = (r for r in record["rows"] if r["kind"] == "chosen")
            if any(row[k] != chosen[k] for k in setting):
                raise ValueError(
                    f"{path} ran {[row[k] for k in setting]}, not the chosen setting "
                    f"{[chosen[k] for k in setting]}"
                )
            values.append(row[key])
    if len(values) < 2:
        raise ValueError(f"the spread of a run needs the seed runs {_CHOSEN_SEEDS}")
    return float(np.std(values, ddof=1))


def _best_by_ais(records: dict, key: str) -> float:
    """`key` of the partition-large model (any schedule, APT or not) with the best AIS test
    value among those whose AIS interval is bounded (an unbounded one is a value the report
    distrusts, Section 2)."""
    rows = [r for rec in records.values() for r in rec["rows"] if r["kind"] == "final"]
    trusted = [r for r in rows if np.isfinite([r["test_ll_ais_low"], r["test_ll_ais_high"]]).all()]
    return max(trusted, key=lambda r: r["test_ll_ais"])[key]


# %% book/partition_report.md
def _tolerance(col: str, paper_3sd: float, pick, seeds: bool = False) -> dict:
    """The tolerance and its basis of a record of column `col` ("AIS" or "Kalman"); pick(records,
    key) reads `key` of the model the record scores. An AIS record's tolerance is TOLERANCE_Z
    standard errors of the difference of two AIS estimates, from the paper's 3 sd and our
    interval (low, high) of 3 sd on either side. With `seeds` (Table 1), the spread of one
    training run, measured over our seeds, enters for each side: for a tracked value it is the
    whole band, TOLERANCE_Z sqrt(2) sd."""
    if col != "AIS":
        if not seeds:
            return {"tolerance": 3.0, "tolerance_basis": _TRACKED_BASIS}
        return {
            "tolerance": lambda r: TOLERANCE_Z * math.sqrt(2) * _run_spread(r, "test_ll_tracked"),
            "tolerance_basis": _TRACKED_SEEDS_BASIS,
        }

    def tolerance(records: dict) -> float:
        spread = pick(records, "test_ll_ais_high") - pick(records, "test_ll_ais_low")
        runs = math.sqrt(2) * _run_spread(records, "test_ll_ais") if seeds else 0.0
        return TOLERANCE_Z * math.sqrt((paper_3sd / 3) ** 2 + (spread / 6) ** 2 + runs**2)

    return {"tolerance": tolerance, "tolerance_basis": _AIS_SEEDS_BASIS if seeds else _AIS_BASIS}


_AIS_BASIS = (
    "two standard errors of the difference of the two AIS estimates: the paper's 3 sd and ours, "
    "each divided by three"
)
_AIS_SEEDS_BASIS = (
    "two standard errors of the difference of two trained RBMs' AIS estimates: the paper's 3 sd "
    "and ours, each divided by three, and the spread of one training run's AIS value, measured "
    "over three seeds of the chosen RBM (this data set's own; the paper's run taken to spread "
    "alike)"
)
_TRACKED_SEEDS_BASIS = (
    "two standard errors of the difference of two single runs: the paper reports no uncertainty "
    "for its tracked values, so the spread of one training run's tracked value, measured over "
    "three seeds of the chosen RBM (this data set's own), stands for both sides"
)
_TRACKED_BASIS = (
    "the paper reports no uncertainty for its tracked values, and ours has only the filter's own "
    "standard deviation, which measures the tracker, not the spread between training runs or "
    "grids; the band, set before the runs, is the book's allowance for one trained RBM against "
    "another, which the book has measured only for Table 1's smaller models"
)
_TRACKS_BASIS = (
    "Figure 3 gives no number and the exact log Z has no error: 'tracks' is read as never more "
    "than one nat apart over training (a factor e in Z), a band set before the runs"
)
_DIVERGES = (
    "at this fast schedule the tracker drifts from the exact value (the chapter's Section 9)"
)
_SMALL_GRID = (
    "ours is below the paper's beyond the tolerance; our grid is smaller than the paper's (at "
    "most 500 hidden units, two learning rates)"
)
_MUSHROOMS_TRACKED = (
    "ours is below the paper's beyond the spread of our seeds; neither value is mushrooms' test "
    "likelihood: both trackers lie far above AIS there, and a Markov bound on AIS says the "
    "trackers are off (Section 2)"
)
_LARGE_KALMAN = {
    "mnist": "the tracked value of the model AIS ranks best is below the paper's; the report "
    "shows where the tracker and AIS part",
    "caltech": "the tracked value of the model AIS ranks best is far below the paper's, whose "
    "own tracked value lies well above its AIS value; the report shows the tracker breaking on "
    "the fast-moving Caltech models",
}


# %% book/partition_report.md
_TRACKING_CLAIMS = [  # Figure 3 and the tracker's cost
    *(
        Claim(
            "partition",
            "Figure 3",
            f"25 hidden, eps0 = {eps:g}, alpha = {alpha:.0e}",
            "largest |tracked - exact log Z| over training (nats)",
            "tracks the exact log Z",
            target=0.0,
            tolerance=1.0,
            tolerance_basis=_TRACKS_BASIS,
            direction="at most",
            sources=(f"results/partition/partition-mnist.{part}.json",),
            ours=_tracking_error,
            section="partition_report#partition-paper-scale",
            **(
                {"expect": "not reproduced", "note": _DIVERGES}
                if part in ("eps1e-2-a1e4", "eps1e-2-a1e5")
                else {}
            ),
        )
        for part, (eps, alpha) in _SCHEDULES.items()
    ),
    Claim(
        "partition",
        "Abstract, Sec. 6",
        "tracker's cost",
        "time per SML-PT update with tracking / without, minus 1",
        "similar to training alone",
        target=0.0,
        tolerance=0.15,
        tolerance_basis=(
            "the paper gives no number for 'similar'; the book reads it as at most 15% more time "
            "per update, a band set before measuring"
        ),
        direction="at most",
        ours="results/benchmarks/partition-tracking.json:rows/method=tracker/overhead",
        section="performance#perf-tracking",
    ),
]


# %% book/partition_report.md
CLAIMS = [
    *_TRACKING_CLAIMS,
    *(
        Claim(
            "partition",
            "Table 1",
            f"{d} {col}",
            "test log-likelihood of the chosen RBM (nats)",
            PAPER_TABLE1[d][col],
            paper_error=PAPER_TABLE1[d]["AIS_3sd"] if col == "AIS" else None,
            **_tolerance(col, PAPER_TABLE1[d]["AIS_3sd"], _chosen, seeds=True),
            sources=_uci_sources(d),
            ours=lambda r, key=key: _chosen(r, key),
            section="partition_report#partition-paper-scale",
            **(
                {"expect": "not reproduced", "note": _SMALL_GRID}
                if d == "dna"
                else {"expect": "not reproduced", "note": _MUSHROOMS_TRACKED}
                if (d, col) == ("mushrooms", "Kalman")
                else {}
            ),
        )
        for d in PAPER_TABLE1
        for col, key in (("Kalman", "test_ll_tracked"), ("AIS", "test_ll_ais"))
    ),
    *(
        Claim(
            "partition",
            "Sec. 5",
            f"{d} 500 hidden, {col}",
            "test log-likelihood of the model best by AIS, of those with a bounded AIS interval "
            "(nats)",
            PAPER_LARGE[d][col],
            paper_error=PAPER_LARGE[d]["AIS_3sd"] if col == "AIS" else None,
            **_tolerance(col, PAPER_LARGE[d]["AIS_3sd"], _best_by_ais),
            sources=_LARGE[d],
            ours=lambda r, key=key: _best_by_ais(r, key),
            section="partition_report#partition-paper-scale",
            **(
                {"expect": "not reproduced", "note": _LARGE_KALMAN[d]}
                if col == "Kalman" and d in _LARGE_KALMAN
                else {}
            ),
        )
        for d in ("mnist", "caltech")
        for col, key in (("Kalman", "test_ll_tracked"), ("AIS", "test_ll_ais"))
    ),
]


__all__ = [
    "CLAIMS",
    "LARGE_PARTS",
    "LARGE_PRESETS",
    "MNIST_PRESETS",
    "PAPER_LARGE",
    "PAPER_TABLE1",
    "UCI_PRESETS",
    "run_partition_large",
    "run_partition_mnist",
    "run_partition_uci",
]
