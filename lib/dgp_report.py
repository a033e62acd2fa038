# GENERATED FILE: do not edit. Source: book/dgp_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of Doubly Stochastic Variational Inference for Deep GPs, exported from
book/dgp_report.md.

The paper-scale experiments that `python -m lib` runs (dgp-uci, dgp-kin8nm, dgp-mnist), the
result parts of the UCI grid and the claims of the scorecard; the method itself is lib.dgp.
"""

# %% book/dgp_report.md
from __future__ import annotations

import math
import time
from functools import partial

import jax
import numpy as np

from lib.data import UCI_DATASETS
from lib.dgp import UCI_MODELS, RobustMax, build_dgp, evaluate_classifier, mnist_flat
from lib.dgp import run_uci_model, train_dgp
from lib.record import PAIRED_Z, Claim, Paired, paired_difference, run_unit
from lib.record import experiment as _experiment


# %% book/dgp_report.md
@_experiment(
    "dgp-uci",
    chapter="dgp",
    book={
        "datasets": ["energy"],
        "splits": [0],
        "models": ["SGP", "DGP 2"],
        "steps": 2500,
        "batch_size": 10_000,
        "test_samples": 100,
        "whiten": True,
    },
    paper={
        "datasets": list(UCI_DATASETS),
        "splits": "all",
        "models": list(UCI_MODELS),
        "steps": 10_000,
        "batch_size": 10_000,
        "test_samples": 100,
        "whiten": False,
    },
)
def run_dgp_uci(config: dict) -> list:
    """UCI regression, SGP / SGP 500 / DGP 2-5, the paper's Figure 1 grid (splits "all": every
    split); one row per dataset, split and model, from lib.dgp.run_uci_model."""
    rows = []
    for name in config["datasets"]:
        splits = range(UCI_DATASETS[name][2]) if config["splits"] == "all" else config["splits"]
        for split in splits:
            for model in config["models"]:
                rows.append(
                    run_unit(
                        f"{name} split {split} {model}",
                        lambda checkpoint_dir: run_uci_model(
                            name,
                            model,
                            split,
                            steps=config["steps"],
                            batch_size=config["batch_size"],
                            test_samples=config["test_samples"],
                            whiten=config["whiten"],
                            checkpoint_dir=checkpoint_dir,
                        ),
                    )
                )
    return rows


# %% book/dgp_report.md
@_experiment(
    "dgp-kin8nm",
    chapter="dgp",
    book={"models": ["SGP", "DGP 2"], "steps": 200, "split": 0, "whiten": False, "ard": True},
    paper={"models": list(UCI_MODELS), "steps": 5000, "split": 0, "whiten": False, "ard": True},
)
def run_dgp_kin8nm(config: dict) -> list:
    """kin8nm, one split, the settings of the authors' notebook (5,000 Adam steps, full batch);
    ard=False for its kernels' single lengthscale (Section 1)."""

    def unit(model, checkpoint_dir):
        return run_uci_model(
            "kin8nm",
            model,
            config["split"],
            steps=config["steps"],
            whiten=config["whiten"],
            ard=config.get("ard", True),
            checkpoint_dir=checkpoint_dir,
        )

    return [
        run_unit(f"kin8nm split {config['split']} {model}", partial(unit, model))
        for model in config["models"]
    ]


# %% book/dgp_report.md
# the results files of dgp-uci at the paper's settings, by dataset (Sections 11 and 13)
_UCI_PARTS = {
    "bostonHousing": (
        "boston-splits0-4",
        "boston-splits5-9",
        "boston-splits10-14",
        "boston-splits15-19",
    ),
    "concrete": (
        "concrete-splits0-2",
        "concrete-splits3-4",
        "concrete-splits5-6",
        "concrete-splits7-8",
        "concrete-split19",
    ),
    "energy": (
        "energy-splits0-2",
        "energy-splits3-6",
        "energy-splits7-8",
        "energy-splits9-13",
        "energy-split19",
    ),
    "wine-quality-red": (
        "wine-splits0-4",
        "wine-splits5-9",
        "wine-splits10-14",
        "wine-splits15-19",
    ),
    "power-plant": (
        "power-split0",
        "power-split0-dgp3",
        "power-split1-sgp-dgp2-dgp3",
        *(f"power-split{k}-{m}" for k in range(3) for m in ("sgp500", "dgp4", "dgp5")),
    ),
    "naval-propulsion-plant": (
        "naval-split0",
        "naval-split1-sgp-dgp2",
        "naval-split1-dgp3",
        *(f"naval-split{k}-{m}" for k in (2, 3, 4) for m in ("sgp-dgp2", "dgp3")),
    ),
    "protein-tertiary-structure": (
        "protein-sgp-splits0-2",
        "protein-sgp-splits3-4",
        *(f"protein-split{k}-dgp3" for k in range(5)),
        *(f"protein-split{k}-dgp2" for k in range(5)),
        *(f"protein-split{k}-{m}" for k in range(3) for m in ("sgp500", "dgp4", "dgp5")),
    ),
}


# %% book/dgp_report.md
def uci_paired(records: dict, dataset: str, model: str, baseline: str = "SGP") -> Paired:
    """Test log-lik(model) - test log-lik(baseline), paired by split over the splits in `records`
    that have both: their mean, its standard error (nan for one split) and their number.

    records: {path: results record} of dgp-uci or dgp-kin8nm runs. The book's reading of "worse"
    and "better" is the result's `reading` (lib.record.paired_difference).
    """
    by_split: dict = {}
    for path, record in records.items():
        for row in record["rows"]:
            if row["dataset"] != dataset:
                continue
            cell = by_split.setdefault(row["split"], {})
            if row["model"] in cell:
                raise ValueError(
                    f"{dataset} split {row['split']} {row['model']} is in two files ({path})"
                )
            cell[row["model"]] = row["test_log_likelihood"]
    pairs = [
        (m[model], m[baseline]) for _, m in sorted(by_split.items()) if model in m and baseline in m
    ]
    if not pairs:
        raise ValueError(
            f"no split of {dataset} has both {model} and {baseline} in {sorted(records)}"
        )
    if len(pairs) == 1:
        return Paired(pairs[0][0] - pairs[0][1], math.nan, 1)
    return paired_difference(*zip(*pairs))


def uci_paired_mean(records: dict, dataset: str, model: str, baseline: str = "SGP") -> float:
    """The mean of `uci_paired`: model minus baseline, averaged over the splits that have both."""
    return uci_paired(records, dataset, model, baseline).mean


# %% book/dgp_report.md
MNIST_MODELS = {"SGP": 1, "DGP 2": 2, "DGP 3": 3}


@_experiment(
    "dgp-mnist",
    chapter="dgp",
    book={
        "models": ["SGP"],
        "steps": 300,
        "batch_size": 1000,
        "test_points": 2000,
        "test_samples": 10,
    },
    paper={
        "models": list(MNIST_MODELS),
        "steps": 20_000,
        "batch_size": 1000,
        "test_points": 10_000,
        "test_samples": 100,
    },
)
def run_dgp_mnist(config: dict) -> list:
    """MNIST, robust-max likelihood, SGP and DGP 2-3 with the authors' run_mnist.py settings."""
    jax.config.update("jax_enable_x64", True)
    x, y = mnist_flat("train")
    xt, yt = mnist_flat("test")
    xt, yt = xt[: config["test_points"]], yt[: config["test_points"]]

    def unit(name, checkpoint_dir):
        model = build_dgp(
            x,
            y,
            MNIST_MODELS[name],
            likelihood=RobustMax(10),
            lengthscale=2.0,
            kernel_variance=2.0,
            whiten=False,  # the paper's layers
        )
        began = time.perf_counter()
        model, hist = train_dgp(
            model,
            x,
            y,
            steps=config["steps"],
            batch_size=config["batch_size"],
            checkpoint_dir=checkpoint_dir,
        )
        row = {
            "model": name,
            "steps": config["steps"],
            "train_seconds": round(time.perf_counter() - began, 1),
            "final_loss": float(np.mean(hist["loss"][-100:])),
        }
        row.update(evaluate_classifier(model, xt, yt, num_samples=config["test_samples"]))
        return row

    return [run_unit(name, partial(unit, name)) for name in config["models"]]


# %% book/dgp_report.md
_KIN8NM = ("results/dgp/dgp-kin8nm.json",) + tuple(
    f"results/dgp/dgp-kin8nm.split{k}.json" for k in range(1, 5)
)


# %% book/dgp_report.md
_WORSE_BASIS = (
    "the book's reading of worse: a mean paired difference more than two standard errors below "
    "zero (the paper reports no uncertainty for Figure 1)"
)


def _never_worse(dataset: str, label: str, files: tuple[str, ...], model: str, **kw) -> Claim:
    return Claim(
        "dgp",
        "Figure 1, Sec. 4",
        f"{label} {model} − SGP",
        "paired test log-lik difference, mean over the splits run (nats)",
        "DGP never worse than SGP",
        target=0.0,
        tolerance=lambda r: PAIRED_Z * uci_paired(r, dataset, model).se,
        tolerance_basis=_WORSE_BASIS,
        direction="at least",
        sources=files,
        ours=lambda r: uci_paired(r, dataset, model).mean,
        section="dgp_report#dgp-paper-scale",
        **kw,
    )


_DEEP = ("DGP 2", "DGP 3", "DGP 4", "DGP 5")


def _uci_files(dataset: str) -> tuple[str, ...]:
    return tuple(f"results/dgp/dgp-uci.{part}.json" for part in _UCI_PARTS[dataset])


_NAVAL = (
    "the runs do not count: with the authors' settings the deep models end training with a lower "
    "bound than the SGP's on every split, though they nest it, so the optimiser fell short on "
    "naval's nearly noiseless targets (Section 1); the paired test cannot tell them apart either"
)
_POWER_SGP500 = (
    "the SGP 500 is ahead of every DGP, DGP 2 to DGP 5, on every power split run (Section 1)"
)
_PROTEIN_SGP500 = (
    "DGP 3 to DGP 5 beat the SGP 500 on every protein split run; DGP 2 only ties it, its mean "
    "gain less than two standard errors above zero (Section 1)"
)
_SGP_SHORT = "the single-layer GP falls short of the paper's accuracy; SGP < DGP 2 < DGP 3 holds"


# %% book/dgp_report.md
def _mnist_accuracy(model: str, part: str, value: float, **kw) -> Claim:
    """Sec. 4's MNIST test accuracy of `model` (%), read from results/dgp/dgp-mnist.<part>.json."""
    path = f"results/dgp/dgp-mnist.{part}.json"
    return Claim(
        "dgp",
        "Sec. 4 (MNIST)",
        model,
        "test accuracy (%)",
        value,
        tolerance=0.1,
        tolerance_basis=(
            "one run on each side on the same 10,000 test images, so the test set's sampling error "
            "is shared; what separates them is the spread between training runs, which neither "
            "the paper nor the book measures: the band, ten test images, was set before the runs"
        ),
        direction="at least",
        sources=(path,),
        section="dgp_report#dgp-mnist",
        ours=lambda r: 100 * r[path]["rows"][0]["test_accuracy"],
        **kw,
    )


# %% book/dgp_report.md
_UCI_NEVER_WORSE = [  # Figure 1: a DGP is never worse than the SGP, per dataset and depth
    *(
        _never_worse(d, label, _uci_files(d), m)
        for d, label in (
            ("bostonHousing", "boston"),
            ("concrete", "concrete"),
            ("energy", "energy"),
            ("wine-quality-red", "wine"),
        )
        for m in ("DGP 2", "DGP 3")
    ),
    *(_never_worse("power-plant", "power", _uci_files("power-plant"), m) for m in _DEEP),
    *(
        _never_worse(
            "naval-propulsion-plant",
            "naval",
            _uci_files("naval-propulsion-plant"),
            m,
            expect="not reproduced",
            note=_NAVAL,
            unreliable=_NAVAL,
        )
        for m in ("DGP 2", "DGP 3")
    ),
    *(
        _never_worse(
            "protein-tertiary-structure", "protein", _uci_files("protein-tertiary-structure"), m
        )
        for m in _DEEP
    ),
    *(_never_worse("kin8nm", "kin8nm (notebook settings)", _KIN8NM, m) for m in ("DGP 2", "DGP 3")),
]


# %% book/dgp_report.md
_UCI_BEAT_SGP500 = [
    Claim(
        "dgp",
        "Figure 1, Sec. 4",
        "kin8nm every DGP − SGP 500",
        "smallest test log-lik gain of DGP 2-5 over SGP 500, split 0, notebook settings (nats)",
        "all DGPs beat SGP 500",
        target=0.0,
        direction="at least",
        section="dgp_report#dgp-paper-scale",
        sources=(
            "results/dgp/dgp-kin8nm.json",
            "results/dgp/dgp-kin8nm.sgp500.json",
            "results/dgp/dgp-kin8nm.dgp4.json",
            "results/dgp/dgp-kin8nm.dgp5.json",
        ),
        ours=lambda r: min(uci_paired_mean(r, "kin8nm", m, "SGP 500") for m in _DEEP),
        tolerance_basis=(
            "one split on each side (the notebook's), so no spread to judge by: a gain of any size "
            "counts, as in the paper's figure"
        ),
    ),
    *(
        Claim(
            "dgp",
            "Figure 1, Sec. 4",
            f"{label} every DGP − SGP 500",
            "smallest over DGP 2-5 of the mean paired test log-lik gain over SGP 500 less two "
            "of its standard errors (nats)",
            "all DGPs beat SGP 500",
            target=0.0,
            direction="at least",
            section="dgp_report#dgp-sgp500",
            sources=_uci_files(d),
            ours=lambda r, d=d: min(uci_paired(r, d, m, "SGP 500").margin for m in _DEEP),
            tolerance_basis=(
                "the book's reading of better: each DGP's mean paired gain over the SGP 500 more "
                "than two standard errors above zero, so ours, the smallest of those margins, "
                "must be positive"
            ),
            **kw,
        )
        for d, label, kw in (
            ("power-plant", "power", {"expect": "not reproduced", "note": _POWER_SGP500}),
            (
                "protein-tertiary-structure",
                "protein",
                {"expect": "not reproduced", "note": _PROTEIN_SGP500},
            ),
        )
    ),
    *(
        Claim(
            "dgp",
            "authors' notebook",
            f"kin8nm {m}",
            "test log-lik, split 0, 5,000 steps, shared lengthscale (nats)",
            v,
            tolerance=0.05,
            tolerance_basis=(
                "one run on each side, the same split and settings, so only the optimiser's "
                "randomness (minibatches, samples) separates them; neither the notebook nor the "
                "book measures its spread: the band was set before the runs, well below the "
                "gains of depth the notebook shows"
            ),
            section="dgp_report#dgp-paper-scale",
            ours=f"results/dgp/dgp-kin8nm.{part}.json:rows/model={m}/test_log_likelihood",
        )
        for m, v, part in (
            ("SGP", 0.967, "shared-lengthscale"),
            ("SGP 500", 1.135, "shared-lengthscale-sgp500"),
            ("DGP 2", 1.302, "shared-lengthscale"),
            ("DGP 3", 1.330, "shared-lengthscale"),
        )
    ),
]


# %% book/dgp_report.md
CLAIMS = [
    *_UCI_NEVER_WORSE,
    *_UCI_BEAT_SGP500,
    *(
        _mnist_accuracy(model, part, value, **kw)
        for model, part, value, kw in (
            ("SGP", "sgp", 97.48, {"expect": "not reproduced", "note": _SGP_SHORT}),
            ("DGP 2", "dgp2", 98.06, {}),
            ("DGP 3", "dgp3", 98.11, {}),
        )
    ),
    Claim(
        "dgp",
        "Sec. 4 (MNIST)",
        "SGP 500",
        "test accuracy (%)",
        97.9,
        expect="not run",
        note="not run: a 500-inducing-point model is GPU-scale on this CPU",
    ),
    *(
        Claim(
            "dgp",
            "Table 1",
            f"Rectangles-Images {m}",
            "test accuracy (%)",
            v,
            expect="not run",
            note="the Rectangles-Images dataset is not among the book's data",
        )
        for m, v in (("DGP 2", 77.3), ("DGP 3", 77.8), ("DGP 4", 77.9))
    ),
    *(
        Claim(
            "dgp",
            "Table 2",
            f"{d} SGP",
            "test RMSE",
            v,
            expect="not run",
            note="the large-scale datasets (year, airline, taxi) are not among the book's data",
        )
        for d, v in (("year", 10.67), ("airline", 25.6), ("taxi", 337.5))
    ),
]


__all__ = [
    "CLAIMS",
    "MNIST_MODELS",
    "run_dgp_kin8nm",
    "run_dgp_mnist",
    "run_dgp_uci",
    "uci_paired",
    "uci_paired_mean",
]
