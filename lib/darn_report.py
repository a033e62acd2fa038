# GENERATED FILE: do not edit. Source: book/darn_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of Deep AutoRegressive Networks, exported from book/darn_report.md.

The paper-scale experiments that `python -m lib` runs (darn-mnist, darn-uci), the paper's Table 1,
and the claims of the scorecard; the method itself is lib.darn.
"""

# %% book/darn_report.md
from __future__ import annotations

import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import lib.data
from lib.darn import DARN, NADE, AutoregressiveBernoulli, exact_log_prob
from lib.darn import fit_mixture_of_bernoullis, importance_estimate, init_visible_bias
from lib.darn import mean_description_length
from lib.darn import sampling_cost, train_darn, train_likelihood
from lib.record import TOLERANCE_Z, Claim, experiment, run_unit


# %% book/darn_report.md
MNIST_PRESETS = {  # python -m lib darn-mnist --preset book | paper
    "book": {
        "n_hidden": [9],
        "n_deterministic": 100,
        "steps": 2000,
        "eval_every": 1000,
        "learning_rate": 1e-3,
        "optimizer": "adam",
        "bound_samples": 10,
        "is_samples": 100,
        "is_repeats": 2,
        "seed": 0,
        "mixture_components": [16],
        "mixture_iterations": 200,
        "patience": 5,
        "fdarn_hidden": [],
        "sparsity_target": 0.05,
        "sparsity_weight": 1.0,
        "deep": [],
    },
    "paper": {
        "n_hidden": [9, 10, 16],
        "n_deterministic": 100,
        "steps": 300_000,
        "eval_every": 10_000,
        "learning_rate": 1e-3,
        "optimizer": "adam",
        "bound_samples": 10,
        "is_samples": 1000,
        "is_repeats": 10,
        "seed": 0,
        "mixture_components": [512, 1024, 65536],
        "mixture_iterations": 200,
        "patience": 10,
        "fdarn_hidden": [400],
        "sparsity_target": 0.05,
        "sparsity_weight": 1.0,
        "deep": [[12, 80, 400]],
    },
}


# %% book/darn_report.md
def _mnist_mob_unit(config: dict, data, K: int, _) -> dict:
    """A mixture of K Bernoullis by EM with early stopping: its validation curve and test log p."""
    began, batch = time.perf_counter(), max(100, 2**24 // K)
    mob, hist = fit_mixture_of_bernoullis(
        data.train,
        K,
        x_valid=data.valid,
        seed=config["seed"],
        batch=batch,
        steps=config["mixture_iterations"],
    )
    return {
        "model": "MoB",
        "components": K,
        "iterations": len(hist["train"]),
        "train_seconds": round(time.perf_counter() - began, 1),
        "valid_curve": hist["valid"].tolist(),
        "test_log_prob": float(jnp.mean(mob.log_prob(data.test, batch=batch))),
        "method": "exact",
    }


def _mnist_trained(config: dict, data, model, kind: str, checkpoint_dir, **train_kwargs):
    """(the model trained with early stopping, its row: sizes, curve, test bound)."""
    began = time.perf_counter()
    settings = {k: config[k] for k in ("steps", "learning_rate", "optimizer", "eval_every")}
    settings |= dict(patience=config.get("patience"), seed=config["seed"]) | train_kwargs
    model, hist = train_darn(
        model, data.train, x_valid=data.valid, checkpoint_dir=checkpoint_dir, **settings
    )
    hidden = model.decoder[0].hidden
    row = {
        "model": kind,
        "n_hidden": sum(model.sizes[1:]),
        "layers": len(model.sizes) - 1,
        "n_deterministic": hidden.out_features if hidden else 0,
        "steps": config["steps"],
        "best_step": int(hist.best_step),
        "train_seconds": round(time.perf_counter() - began, 1),
        "valid_curve": [[int(s), float(v)] for s, v in zip(hist["valid_step"], hist["valid"])],
        "test_bound": mean_description_length(
            model, data.test, jax.random.key(1), num_samples=config["bound_samples"]
        ),
    }
    return model, row


def _mnist_log_prob(config: dict, data, model, row: dict) -> dict:
    """`row` with the test log p: exact for n_h <= 16, else eq. darn-is (mean and 95% interval)."""
    if row["n_hidden"] <= 16:
        log_p = float(jnp.mean(exact_log_prob(model, data.test)))
        return {**row, "test_log_prob": log_p, "method": "exact"}
    S, R = config["is_samples"], config["is_repeats"]
    est = importance_estimate(model, data.test, jax.random.key(2), num_samples=S, repeats=R)
    method = f"importance, S={S}"
    return {**row, "test_log_prob": est["mean"], "ci95": est["ci95"], "method": method}


# %% book/darn_report.md
def _mnist_darn_unit(config: dict, data, nh: int, checkpoint_dir) -> dict:
    """A DARN with one stochastic layer of nh units (500 tanh units from nh = 500 on)."""
    nd = config["n_deterministic"] if nh <= 16 else max(config["n_deterministic"], 500)
    model = init_visible_bias(DARN(784, nh, nd, rngs=nnx.Rngs(config["seed"])), data.train)
    model, row = _mnist_trained(config, data, model, "DARN", checkpoint_dir)
    return _mnist_log_prob(config, data, model, row)


def _mnist_fdarn_unit(config: dict, data, nh: int, checkpoint_dir) -> dict:
    """fDARN: no tanh layer, the sparsity penalty; its activity and weights read per sample."""
    model = init_visible_bias(DARN(784, nh, 0, rngs=nnx.Rngs(config["seed"])), data.train)
    sparsity = {k: config[k] for k in ("sparsity_target", "sparsity_weight")}
    model, row = _mnist_trained(config, data, model, "fDARN", checkpoint_dir, **sparsity)
    (h,), _ = model.encode(jnp.asarray(data.test, model.dtype), jax.random.key(3))
    cost = sampling_cost(model, jax.random.key(4))
    row.update(
        **sparsity,
        test_activity=float(jnp.mean(h)),
        weights_read=cost["sparse"],
        weights_dense=cost["dense"],
        active_per_sample=cost["active"],
    )
    return _mnist_log_prob(config, data, model, row)


def _mnist_deep_unit(config: dict, data, layers: int, width: int, nd: int, checkpoint_dir):
    """A deep DARN, `layers` stochastic layers of `width` with skip connections: its bound."""
    rngs = nnx.Rngs(config["seed"])
    model = DARN(784, [width] * layers, nd, skip_connections=True, rngs=rngs)
    model = init_visible_bias(model, data.train)
    return _mnist_trained(config, data, model, "deep DARN", checkpoint_dir)[1]


@experiment("darn-mnist", chapter="darn", **MNIST_PRESETS)
def run_darn_mnist(config: dict) -> list:
    """Binarised MNIST (Table 2): DARN with one stochastic layer, exact (n_h <= 16) or
    importance-sampled test log p; mixtures of Bernoullis with K = 2^n_h components (EM, early
    stopping); fDARN (no tanh layer, the sparsity penalty; weights read per sample, eq. 16's
    estimate); deep DARNs [layers, width, tanh units] with skip connections (bound only, as in the
    paper)."""
    data = lib.data.load_binarized_mnist()
    units = [
        *((f"MoB K={K}", _mnist_mob_unit, K) for K in config["mixture_components"]),
        *((f"DARN nh={nh}", _mnist_darn_unit, nh) for nh in config["n_hidden"]),
        *((f"fDARN nh={nh}", _mnist_fdarn_unit, nh) for nh in config["fdarn_hidden"]),
        *((f"deep DARN {L}x{w}", _mnist_deep_unit, L, w, nd) for L, w, nd in config["deep"]),
    ]
    return [run_unit(name, partial(fn, config, data, *args)) for name, fn, *args in units]


# %% book/darn_report.md
ADANOISE_PRESETS = {  # python -m lib darn-adanoise --preset book | paper
    "book": {
        "n_hidden": 9,
        "n_deterministic": 100,
        "steps": 2000,
        "eval_every": 1000,
        "learning_rate": 1e-3,
        "optimizer": "adam",
        "weight_noise_std": 0.01,
        "bound_samples": 10,
        "is_samples": 100,
        "is_repeats": 2,
        "seed": 0,
    },
    "paper": {
        "n_hidden": 500,
        "n_deterministic": 500,
        "steps": 300_000,
        "eval_every": 10_000,
        "learning_rate": 1e-3,
        "optimizer": "adam",
        "weight_noise_std": 0.01,
        "bound_samples": 10,
        "is_samples": 1000,
        "is_repeats": 10,
        "seed": 0,
    },
}


@experiment("darn-adanoise", chapter="darn", **ADANOISE_PRESETS)
def run_darn_adanoise(config: dict) -> list:
    """Binarised MNIST (Table 2): a DARN with one stochastic layer trained with adaptive weight
    noise to the last step (no early stopping); its test bound and log p, as for darn-mnist."""
    data = lib.data.load_binarized_mnist()

    def unit(checkpoint_dir):
        nh, nd, seed = config["n_hidden"], config["n_deterministic"], config["seed"]
        model = init_visible_bias(DARN(784, nh, nd, rngs=nnx.Rngs(seed)), data.train)
        noise = dict(weight_noise_std=config["weight_noise_std"], keep_best=False)
        model, row = _mnist_trained(config, data, model, "DARN adaNoise", checkpoint_dir, **noise)
        return _mnist_log_prob(
            config, data, model, row | {"weight_noise_std": noise["weight_noise_std"]}
        )

    return [run_unit(f"DARN nh={config['n_hidden']} adaNoise", unit)]


# %% book/darn_report.md
# test log-likelihood, nats (Table 1 of the paper): MoB, RBM, FVSBN, NADE, EoNADE, DARN
UCI_TABLE1 = {
    "dna": {
        "MoB": -98.19,
        "RBM": -96.74,
        "FVSBN": -83.64,
        "NADE": -84.81,
        "EoNADE": -82.31,
        "DARN": -81.04,
    },
    "mushrooms": {
        "MoB": -14.46,
        "RBM": -15.15,
        "FVSBN": -10.27,
        "NADE": -9.81,
        "EoNADE": -9.68,
        "DARN": -9.55,
    },
    "nips": {
        "MoB": -290.02,
        "RBM": -277.37,
        "FVSBN": -276.88,
        "NADE": -273.08,
        "EoNADE": -272.38,
        "DARN": -274.68,
    },
}


# %% book/darn_report.md
UCI_PRESETS = {  # python -m lib darn-uci --preset book | paper
    "book": {
        "datasets": ["dna"],
        "darn_hidden": [12],
        "darn_deterministic": [100],
        "learning_rates": [1e-3],
        "components": [16, 32],
        "nade_hidden": [100],
        "epochs": 75,
        "eval_epochs": 25,
        "patience": 5,
        "valid_samples": 10,
        "is_samples": 1000,
        "is_repeats": 10,
        "seed": 0,
    },
    "paper": {
        "datasets": ["dna", "mushrooms", "nips"],
        "darn_hidden": [8, 12, 16, 32, 64, 128, 256],
        "darn_deterministic": [100, 300, 500],
        "learning_rates": [1e-3, 2.5e-4],
        "components": [8, 16, 32, 64, 128, 256, 512],
        "nade_hidden": [100, 500],
        "epochs": 1000,
        "eval_epochs": 10,
        "patience": 10,
        "valid_samples": 10,
        "is_samples": 1000,
        "is_repeats": 10,
        "seed": 0,
    },
}


# %% book/darn_report.md
def _uci_schedule(config: dict, data, lr: float) -> dict:
    """The training schedule of a UCI setting: epochs of minibatches of 100, early stopping."""
    per_epoch = data.train.shape[0] // 100
    return dict(
        steps=config["epochs"] * per_epoch,
        eval_every=config["eval_epochs"] * per_epoch,
        patience=config["patience"],
        learning_rate=lr,
        seed=config["seed"],
    )


def _uci_epochs(hist: dict, data) -> dict:
    """The best epoch and the epochs run, from a training history."""
    per_epoch = data.train.shape[0] // 100
    run = int(hist["valid_step"][-1]) // per_epoch if len(hist["valid_step"]) else 0
    return {"best_epoch": int(hist.best_step) // per_epoch, "epochs_run": run}


def _uci_test(data):
    """The validation and test rows as float32 arrays."""
    return jnp.asarray(data.valid, jnp.float32), jnp.asarray(data.test, jnp.float32)


def _uci_mob_unit(config: dict, data, K: int, _) -> dict:
    """A mixture of K Bernoullis fitted by EM: its validation and test log p."""
    began = time.perf_counter()
    mob, hist = fit_mixture_of_bernoullis(data.train, K, x_valid=data.valid, seed=config["seed"])
    x_valid, x_test = _uci_test(data)
    return {
        "components": K,
        "iterations": len(hist["train"]),
        "valid_log_prob": float(jnp.mean(mob.log_prob(x_valid))),
        "test_log_prob": float(jnp.mean(mob.log_prob(x_test))),
        "train_seconds": round(time.perf_counter() - began, 1),
    }


def _uci_likelihood_unit(config: dict, data, make, setting: dict, checkpoint_dir) -> dict:
    """An FVSBN or NADE setting (`make()` builds the model) trained with early stopping."""
    began = time.perf_counter()
    model, hist = train_likelihood(
        make(),
        data.train,
        x_valid=data.valid,
        checkpoint_dir=checkpoint_dir,
        **_uci_schedule(config, data, setting["learning_rate"]),
    )
    x_valid, x_test = _uci_test(data)
    return {
        **setting,
        **_uci_epochs(hist, data),
        "valid_log_prob": float(jnp.mean(model.log_prob(x_valid))),
        "test_log_prob": float(jnp.mean(model.log_prob(x_test))),
        "train_seconds": round(time.perf_counter() - began, 1),
    }


# %% book/darn_report.md
def _uci_darn(config: dict, data, setting: dict, checkpoint_dir):
    """The DARN of one setting (autoregressive visibles), trained on the description length."""
    D = data.train.shape[1]
    model = DARN(
        D,
        setting["n_hidden"],
        setting["n_deterministic"],
        autoregressive_visible=True,
        rngs=nnx.Rngs(config["seed"]),
    )
    return train_darn(
        init_visible_bias(model, data.train),
        data.train,
        x_valid=data.valid,
        valid_samples=config["valid_samples"],
        checkpoint_dir=checkpoint_dir,
        **_uci_schedule(config, data, setting["learning_rate"]),
    )


def _uci_darn_unit(config: dict, data, setting: dict, checkpoint_dir) -> dict:
    """One DARN setting of the grid: its validation and test description lengths."""
    began = time.perf_counter()
    model, hist = _uci_darn(config, data, setting, checkpoint_dir)
    return {
        **setting,
        **_uci_epochs(hist, data),
        "valid_bound": float(np.min(hist["valid"])),
        "test_bound": mean_description_length(
            model, _uci_test(data)[1], jax.random.key(1), num_samples=10
        ),
        "train_seconds": round(time.perf_counter() - began, 1),
    }


def _uci_darn_test_unit(config: dict, data, setting: dict, checkpoint_dir) -> dict:
    """The selected DARN trained again (the same model for a seed) and its test log p: exact for
    n_h <= 16, else eq. darn-is with is_samples codes per row, is_repeats times."""
    model, hist = _uci_darn(config, data, setting, checkpoint_dir)
    out, x_test = {"valid_bound_retrained": float(np.min(hist["valid"]))}, _uci_test(data)[1]
    if setting["n_hidden"] <= 16:
        log_p = float(jnp.mean(exact_log_prob(model, x_test)))
        return {**out, "test_log_prob": log_p, "method": "exact"}
    S, R = config["is_samples"], config["is_repeats"]
    est = importance_estimate(model, x_test, jax.random.key(2), num_samples=S, repeats=R)
    return {
        **out,
        "test_log_prob": est["mean"],
        "ci95": est["ci95"],
        "method": f"importance, S={S}, {R} repeats",
    }


# %% book/darn_report.md
@experiment("darn-uci", chapter="darn", **UCI_PRESETS)
def run_darn_uci(config: dict) -> list:
    """Table 1 on dna / mushrooms / nips: MoB (EM), FVSBN, NADE and DARN (AR visibles), test log p.

    Every setting of every model is a unit (`run_unit`: a resumed run skips the finished ones). One
    row per dataset and model: the setting with the best validation score (log p for MoB, FVSBN and
    NADE; the description length for DARN, as in the paper), with every setting tried under "grid".
    The selected DARN is trained again (training is deterministic for a seed:
    "valid_bound_retrained" repeats "valid_bound") and its test log p computed: exact for
    n_h <= 16, otherwise eq. darn-is with is_samples codes per image, repeated is_repeats times
    (mean and 95% interval).
    """
    rows, seed = [], config["seed"]
    for name in config["datasets"]:
        data = lib.data.load_nade(name)
        D = data.train.shape[1]

        def kept(kind, grid, best, name=name):
            return {"dataset": name, "model": kind, **best, "grid": grid}

        grid = [
            run_unit(f"{name} MoB K={K}", partial(_uci_mob_unit, config, data, K))
            for K in config["components"]
        ]
        rows.append(kept("MoB", grid, max(grid, key=lambda r: r["valid_log_prob"])))
        rates, nade = config["learning_rates"], config["nade_hidden"]
        for kind, make, settings in (
            (
                "FVSBN",
                lambda s: AutoregressiveBernoulli(D, rngs=nnx.Rngs(seed)),
                [{"learning_rate": lr} for lr in rates],
            ),
            (
                "NADE",
                lambda s: NADE(D, s["n_hidden"], rngs=nnx.Rngs(seed)),
                [{"n_hidden": H, "learning_rate": lr} for H in nade for lr in rates],
            ),
        ):
            grid = [
                run_unit(
                    f"{name} {kind} " + " ".join(f"{k}={v:g}" for k, v in s.items()),
                    partial(_uci_likelihood_unit, config, data, partial(make, s), s),
                )
                for s in settings
            ]
            rows.append(kept(kind, grid, max(grid, key=lambda r: r["valid_log_prob"])))
        settings = [
            {"n_hidden": nh, "n_deterministic": nd, "learning_rate": lr}
            for nh in config["darn_hidden"]
            for nd in config["darn_deterministic"]
            for lr in rates
        ]
        grid = [
            run_unit(
                f"{name} DARN nh={s['n_hidden']} nd={s['n_deterministic']} "
                f"lr={s['learning_rate']:g}",
                partial(_uci_darn_unit, config, data, s),
            )
            for s in settings
        ]
        best = min(grid, key=lambda r: r["valid_bound"])
        setting = {k: best[k] for k in ("n_hidden", "n_deterministic", "learning_rate")}
        selected = partial(_uci_darn_test_unit, config, data, setting)
        rows.append(kept("DARN", grid, {**best, **run_unit(f"{name} DARN selected", selected)}))
    return rows


# %% book/darn_report.md
_MNIST = "results/darn/darn-mnist.{}.json:rows/0/{}"
_UCI_NAMES = {"dna": "DNA", "mushrooms": "Mushrooms", "nips": "NIPS-0-12"}


_SEEDS = ("small-seed1", "small-seed2")  # the one-layer DARNs from seeds 1 and 2
_SEED_FILES = tuple(f"results/darn/darn-mnist.{part}.json" for part in _SEEDS)


def seed_spread(
    records: dict, key: str, *, model: str = "DARN", size: str = "n_hidden", sizes=(9, 10, 16)
) -> float:
    """The standard deviation of one training run's `key` (test_log_prob or test_bound), pooled
    over the rows of `model` whose `size` is one of `sizes` (default: the one-layer DARNs, n_h = 9,
    10, 16) and their seeds in the darn-mnist files of `records` (each size's runs about their own
    mean)."""
    runs: dict = {}
    for record in records.values():
        for row in record["rows"]:
            if row.get("model", "DARN") == model and row.get(size) in sizes:
                runs.setdefault(row[size], []).append(row[key])
    resid = [v - np.mean(vs) for vs in runs.values() for v in vs]
    dof = len(resid) - len(runs)
    if dof < 1:
        raise ValueError(f"seed_spread needs two runs of a model, got {runs}")
    return float(np.sqrt(np.sum(np.square(resid)) / dof))


def _table2(
    nh, key: str, value: float, part: str, expect="reproduced", note="", run="darn-mnist"
) -> Claim:
    sign = (
        -1 if key == "test_log_prob" else 1
    )  # the paper prints -log p and the bound as positive nats
    quantity = "test log p (nats)" if key == "test_log_prob" else "test bound, -log p <= (nats)"
    path = f"results/darn/{run}.{part}.json"
    files = tuple(
        dict.fromkeys([*(f"results/darn/darn-mnist.nh{n}.json" for n in (9, 10, 16)), path])
    )
    files += _SEED_FILES
    return Claim(
        "darn",
        "Table 2",
        f"DARN nh = {nh}",
        quantity,
        sign * value,
        tolerance=lambda r: TOLERANCE_Z * math.sqrt(2) * seed_spread(r, key),
        tolerance_basis=_SEEDS_BASIS,
        better="higher" if key == "test_log_prob" else "lower",
        sources=files,
        ours=lambda r: r[path]["rows"][0][key],
        section="darn_report#darn-paper-scale",
        expect=expect,
        note=note,
    )


_SEEDS_BASIS = (
    "two standard errors of the difference of two single runs: the spread of one run measured "
    "over three seeds of our one-layer DARNs (pooled over n_h = 9, 10, 16), the paper's single "
    "run taken to spread alike"
)
_ONE_RUN_BASIS = (
    "neither side reports an uncertainty: one training run each, on the same test images (log p "
    "exact up to n_h = 16); the spread between training runs, which would set the band, is "
    "measured neither here nor in the paper. The band is the book's allowance for one run "
    "against another, set before the runs; it is wider than some gaps between the paper's rows, "
    "so a record within it confirms a value, not the paper's ordering of models"
)
_BETTER = (
    "ours is better than the paper's by more than the tolerance "
    "(early stopping instead of adaptive weight noise)"
)
_LOOSER = "the bound is looser than the paper's: Adam overfits early; RMSprop at 3e-5 not tried"
_WORSE500 = (
    "ours is below the paper's by more than the spread of a run (measured on the smaller "
    "one-layer DARNs): Adam overfits early; RMSprop at 3e-5 not tried"
)


# %% book/darn_report.md
_TABLE2_CLAIMS = [
    _table2(9, "test_log_prob", 138.84, "nh9", "not reproduced", _BETTER),
    _table2(9, "test_bound", 145.36, "nh9", "not reproduced", _BETTER),
    _table2(10, "test_log_prob", 133.70, "nh10"),
    _table2(10, "test_bound", 140.86, "nh10", "not reproduced", _BETTER),
    _table2(16, "test_log_prob", 122.80, "nh16", "not reproduced", _BETTER),
    _table2(16, "test_bound", 130.94, "nh16", "not reproduced", _BETTER),
    _table2(500, "test_log_prob", 84.71, "nh500", "not reproduced", _WORSE500),
    _table2(500, "test_bound", 90.31, "nh500", "not reproduced", _LOOSER),
]


# %% book/darn_report.md
_ADA_LP = (
    "ours is below the paper's by more than the spread of a run: with Adam at 1e-3 for the "
    "paper's 300,000 steps the weight noise tightened the bound but not log p; the paper's "
    "RMSprop at 3e-5 with momentum not tried"
)
_ADA_BOUND = (
    "the bound is looser than the paper's by more than the spread of a run, though tighter than "
    "early stopping's: Adam at 1e-3 in place of the paper's RMSprop at 3e-5, not tried"
)


# %% book/darn_report.md
_FDARN_FILES = tuple(
    f"results/darn/darn-mnist.{part}.json"
    for part in ("fdarn400", "fdarn400-seed1", "fdarn400-seed2")
)
_FDARN_BASIS = (
    "two standard errors of the difference of two single runs: the spread of fDARN's bound "
    "measured over three seeds of it (fdarn400, fdarn400-seed1, fdarn400-seed2), the paper's "
    "single run taken to spread alike"
)


_FDARN_BETTER = (
    "ours is better than the paper's by more than the spread of a run, and each of the three "
    "seeds' bounds lies below the paper's (the report asserts it)"
)


def _fdarn_spread(records: dict) -> float:
    return seed_spread(records, "test_bound", model="fDARN", sizes=(400,))


# %% book/darn_report.md
_TABLE2_CLAIMS += [
    _table2(
        "500, adaNoise", "test_log_prob", 84.13, "nh500", "not reproduced", _ADA_LP, "darn-adanoise"
    ),
    _table2(
        "500, adaNoise", "test_bound", 88.30, "nh500", "not reproduced", _ADA_BOUND, "darn-adanoise"
    ),
    Claim(
        "darn",
        "Table 2",
        "fDARN nh = 400",
        "test bound (nats)",
        96.1,
        tolerance=lambda r: TOLERANCE_Z * math.sqrt(2) * _fdarn_spread(r),
        tolerance_basis=_FDARN_BASIS,
        better="lower",
        sources=_FDARN_FILES,
        ours=_MNIST.format("fdarn400", "test_bound"),
        section="darn_report#darn-paper-scale",
        expect="not reproduced",
        note=_FDARN_BETTER,
    ),
    Claim(
        "darn",
        "Sec. 5.2",
        "fDARN nh = 400",
        "weights read per sample",
        2.4e4,
        tolerance=2.4e3,
        tolerance_basis=(
            "the paper gives the cost as about 2.4e4, two significant digits; ours is counted "
            "over samples, and a tenth of the paper's value is the rounding its 'about' allows"
        ),
        ours=_MNIST.format("fdarn400", "weights_read"),
        section="darn_report#darn-paper-scale",
    ),
    Claim(
        "darn",
        "Table 2",
        "deep DARN 12 x 80",
        "test bound (nats)",
        87.72,
        tolerance=3.0,
        tolerance_basis=_ONE_RUN_BASIS,
        better="lower",
        ours=_MNIST.format("deep12x80", "test_bound"),
        section="darn_report#darn-paper-scale",
        expect="not reproduced",
        note="trained 20,000 of the paper's 300,000 steps (a reduced run), the bound still falling",
    ),
]


# %% book/darn_report.md
_MOB_FILES = tuple(
    f"results/darn/darn-mnist.{part}.json" for part in ("mob", "mob10", "mob-seed1", "mob-seed2")
)


def _mob_tolerance(records: dict) -> float:
    spread = seed_spread(records, "test_log_prob", model="MoB", size="components", sizes=(10, 512))
    return TOLERANCE_Z * math.sqrt(2) * spread


_MOB_BASIS = (
    "two standard errors of the difference of two single fits: the spread of one EM fit measured "
    "over three seeds of ours (pooled over K = 10 and 512), the paper's single fit taken to "
    "spread alike"
)
_MOB_BETTER = (
    "ours is better than the paper's by more than the spread of a fit: EM with early stopping "
    "on the validation images fits a better mixture than the value the paper quotes"
)
_TABLE2_CLAIMS += [
    Claim(
        "darn",
        "Table 2",
        "MoB K = 500 (ours K = 512)",
        "test log p (nats)",
        -137.64,
        tolerance=_mob_tolerance,
        tolerance_basis=_MOB_BASIS,
        better="higher",
        sources=_MOB_FILES,
        ours="results/darn/darn-mnist.mob.json:rows/components=512/test_log_prob",
        section="darn_report#darn-paper-scale",
        expect="not reproduced",
        note=_MOB_BETTER,
    ),
    Claim(
        "darn",
        "Table 2",
        "MoB K = 10",
        "test log p (nats)",
        -168.95,
        tolerance=_mob_tolerance,
        tolerance_basis=_MOB_BASIS,
        better="higher",
        sources=_MOB_FILES,
        ours="results/darn/darn-mnist.mob10.json:rows/components=10/test_log_prob",
        section="darn_report#darn-paper-scale",
        expect="not reproduced",
        note=_MOB_BETTER,
    ),
]


# %% book/darn_report.md
_UCI_SEEDS = ("", "-seed1", "-seed2")  # the parts' suffixes: seed 0 (the grid), seeds 1 and 2
_UCI_FILES = tuple(f"results/darn/darn-uci.{d}{s}.json" for d in UCI_TABLE1 for s in _UCI_SEEDS)


def _uci_tolerance(model: str):
    def tolerance(records: dict) -> float:
        spread = seed_spread(
            records, "test_log_prob", model=model, size="dataset", sizes=tuple(UCI_TABLE1)
        )
        return TOLERANCE_Z * math.sqrt(2) * spread

    return tolerance


_UCI_BASIS = (
    "two standard errors of the difference of two single runs: the spread of one run of this "
    "model measured over three seeds of ours at the settings seed 0 chose (pooled over dna, "
    "mushrooms and nips), the paper's single run taken to spread alike. It measures the seed "
    "alone: the baselines' values in the paper come from other papers' procedures"
)
_UCI_BETTER = "ours is better than the paper's by more than the spread of a run"
_UCI_WORSE = "ours is short of the paper's by more than the spread of a run"
_UCI_NOTES = {
    ("dna", "NADE"): f"{_UCI_BETTER}; the paper quotes NADE from Uria et al. (2013)",
    ("dna", "FVSBN"): f"{_UCI_WORSE}; the paper quotes FVSBN from Uria et al. (2013)",
    ("dna", "DARN"): f"{_UCI_WORSE}; the grid of n_h, widths and rates does not explain it",
    ("mushrooms", "MoB"): f"{_UCI_WORSE}; EM with early stopping on the validation rows",
    ("mushrooms", "FVSBN"): f"{_UCI_BETTER}, by a little: three seeds agree closely (convex fit)",
    ("mushrooms", "NADE"): f"{_UCI_BETTER}, by a little",
    ("nips", "MoB"): f"{_UCI_BETTER}: EM here fits a much better mixture than the one quoted",
    ("nips", "FVSBN"): f"{_UCI_WORSE}: 400 training rows for 125,000 weights, early stopping only",
    ("nips", "NADE"): f"{_UCI_WORSE}, by a little: NADE stays ahead of DARN, as in the paper",
    ("nips", "DARN"): _UCI_BETTER,
}
_TABLE1_CLAIMS = [
    *(
        Claim(
            "darn",
            "Table 1",
            f"{_UCI_NAMES[d]} {m}",
            "test log-likelihood (nats)",
            UCI_TABLE1[d][m],
            tolerance=_uci_tolerance(m),
            tolerance_basis=_UCI_BASIS,
            better="higher",
            sources=_UCI_FILES,
            ours=f"results/darn/darn-uci.{d}.json:rows/model={m}/test_log_prob",
            section="darn_report#darn-uci",
            **(
                {"expect": "not reproduced", "note": _UCI_NOTES[d, m]}
                if (d, m) in _UCI_NOTES
                else {}
            ),
        )
        for d in UCI_TABLE1
        for m in ("MoB", "FVSBN", "NADE", "DARN")
    ),
    *(
        Claim(
            "darn",
            "Table 1",
            f"{d} DARN",
            "test log-likelihood (nats)",
            v,
            expect="not run",
            note="this UCI set is not among the book's data",
        )
        for d, v in (
            ("Adult", -13.19),
            ("Connect4", -11.91),
            ("OCR-letters", -28.17),
            ("RCV1", -46.10),
            ("Web", -28.83),
        )
    ),
]
CLAIMS = [*_TABLE2_CLAIMS, *_TABLE1_CLAIMS]


# %% book/darn_report.md
__all__ = [
    "UCI_TABLE1",
    "UCI_PRESETS",
    "MNIST_PRESETS",
    "ADANOISE_PRESETS",
    "run_darn_uci",
    "seed_spread",
    "run_darn_mnist",
    "run_darn_adanoise",
    "CLAIMS",
]
