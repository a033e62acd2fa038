# GENERATED FILE: do not edit. Source: book/ebp_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of Expectation Backpropagation, exported from book/ebp_report.md.

The paper-scale experiments that `python -m lib` runs (ebp-text, ebp-arow, ebp-mnist), the
paper's Table 1, and the claims of the scorecard; the method itself is lib.ebp.
"""

# %% book/ebp_report.md
from __future__ import annotations

import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from lib.ebp import KINDS, check_inputs, fold_indices, init_ebp, one_vs_rest, train_arow, train_bp
from lib.data import load_ebp
from lib.ebp import train_ebp
from lib.toolkit import mnist_arrays
from lib.record import TOLERANCE_Z, Claim, Paired, experiment, paired_difference
from lib.record import run_unit


# %% book/ebp_report.md
PAPER_TABLE1 = {  # test error % (Table 1, 8-fold cross-validation, best of three epochs)
    "reuters_I654_I65": {
        "Real EBP-D": 14.5,
        "Real EBP-P": 11.35,
        "Binary EBP-D": 21.7,
        "Binary EBP-P": 9.95,
        "BP": 11.72,
        "AROW": 13.3,
        "Clipped BP": 26.15,
    },
    "reuters_I81_I83": {
        "Real EBP-D": 15.65,
        "Real EBP-P": 15.25,
        "Binary EBP-D": 23.15,
        "Binary EBP-P": 16.4,
        "BP": 15.27,
        "AROW": 18.2,
        "Clipped BP": 26.4,
    },
    "20News_comp": {
        "Real EBP-D": 5.06,
        "Real EBP-P": 4.96,
        "Binary EBP-D": 7.54,
        "Binary EBP-P": 4.44,
        "BP": 5.79,
        "AROW": 7.02,
        "Clipped BP": 13.07,
    },
    "apparel_books": {
        "Real EBP-D": 2.14,
        "Real EBP-P": 2.09,
        "Binary EBP-D": 2.45,
        "Binary EBP-P": 2.01,
        "BP": 2.24,
        "AROW": 2.96,
        "Clipped BP": 3.81,
    },
    "apparel_dvd": {
        "Real EBP-D": 2.06,
        "Real EBP-P": 2.14,
        "Binary EBP-D": 5.72,
        "Binary EBP-P": 2.27,
        "BP": 2.63,
        "AROW": 2.94,
        "Clipped BP": 5.15,
    },
}


# %% book/ebp_report.md
@experiment(
    "ebp-text",
    chapter="ebp",
    lists=("hidden",),  # a width, or the widths of the hidden layers
    book={
        "tasks": list(PAPER_TABLE1),
        "folds": [0],
        "hidden": 120,
        "epochs": 3,
        "batch_size": 10,
        "bp_losses": ["ce"],
        "bp_learning_rates": [0.01, 0.1],
        "seed": 0,
    },
    paper={
        "tasks": list(PAPER_TABLE1),
        "folds": list(range(8)),
        "hidden": 120,
        "epochs": 3,
        "batch_size": 10,
        "bp_losses": ["ce", "mse"],
        "bp_learning_rates": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3],
        "seed": 0,
    },
)
def run_ebp_text(config: dict) -> list:
    """Table 1: Real / Binary EBP (-D, -P) and BP (the losses `bp_losses` of "ce" and "mse", a
    learning-rate scan, and sign-clipped) on the text tasks, M -> hidden -> 1 with biases (hidden: a
    width, or a list of widths for a deeper network), per fold and epoch."""
    unknown = [loss for loss in config["bp_losses"] if loss not in ("ce", "mse")]
    if unknown:
        raise ValueError(f"bp_losses must hold 'ce' and/or 'mse', got {config['bp_losses']!r}")
    rows = []
    for task in config["tasks"]:
        data = load_ebp(task)
        x, y = check_inputs(data.x), np.asarray(data.y)
        hidden = config["hidden"] if isinstance(config["hidden"], list) else [config["hidden"]]
        sizes = [x.shape[1], *hidden, 1]
        for fold in config["folds"]:
            train, test = fold_indices(len(y), fold)
            key = jax.random.key(config["seed"] * 1000 + fold)
            common = dict(
                epochs=config["epochs"],
                batch_size=config["batch_size"],
                x_valid=x[test],
                y_valid=y[test],
                seed=jax.random.fold_in(key, 2),
            )
            runs = [(f"{kind.capitalize()} EBP", train_ebp, kind) for kind in KINDS]
            runs += [
                (f"BP {loss} {lr:g}", partial(train_bp, loss=loss, learning_rate=lr), "real")
                for loss in config["bp_losses"]
                for lr in config["bp_learning_rates"]
            ]
            for method, train_fn, kind in runs:

                def unit(checkpoint_dir, method=method, train_fn=train_fn, kind=kind):
                    began = time.perf_counter()
                    _, history = train_fn(
                        init_ebp(jax.random.fold_in(key, 1), sizes, kind=kind),
                        x[train],
                        y[train],
                        checkpoint_dir=checkpoint_dir,
                        **common,
                    )
                    seconds = time.perf_counter() - began
                    return [
                        {
                            "task": task,
                            "fold": fold,
                            "method": method,
                            **h,
                            "seconds_per_epoch": seconds / config["epochs"],
                        }
                        for h in history.rows()
                    ]

                rows += run_unit(f"{task} fold {fold} {method}", unit)
    return rows


# %% book/ebp_report.md
def best_epoch_errors(rows: list, method: str, column: str) -> dict:
    """{fold: test error %} of `method` (its `column`: "EBP-P", "BP", ...) at its best epoch, the
    epoch of the lowest error averaged over the folds; rows: one task's."""
    by_epoch: dict = {}
    for r in rows:
        if r["method"] == method:
            by_epoch.setdefault(r["epoch"], {})[r["fold"]] = 100 * r[column]
    if not by_epoch:
        raise ValueError(f"no rows of method {method!r}")
    return by_epoch[min(by_epoch, key=lambda e: np.mean(list(by_epoch[e].values())))]


def _cell(errors: dict) -> tuple[float, float, int]:
    e = np.asarray(list(errors.values()))
    se = float(e.std(ddof=1) / math.sqrt(len(e))) if len(e) > 1 else float("nan")
    return float(e.mean()), se, len(e)


def _column_source(table: dict, column: str) -> tuple[str, str]:
    """(method, row key) behind a column of `summarise_ebp_text`'s table for one task."""
    if column in ("BP", "Clipped BP"):
        return table["BP setting"], {"BP": "BP", "Clipped BP": "clipped BP"}[column]
    if column == "AROW":
        return table["AROW setting"], "AROW"
    kind, out = column.split(" EBP-")
    return f"{kind} EBP", f"EBP-{out}"


# %% book/ebp_report.md
def summarise_ebp_text(rows: list) -> dict:
    """{task: {column: (error %, standard error %, folds)}} as in Table 1: the error of each fold
    averaged over folds at each epoch, the best epoch kept; BP is the best (loss, learning rate) by
    that measure, and Clipped BP its sign-clipped copy; AROW the best regulariser r. Columns whose
    methods have no rows are left out; "BP setting" and "AROW setting" name the choices."""
    out = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        table = {}
        methods = list(dict.fromkeys(r["method"] for r in mine))
        for kind in ("Real", "Binary"):
            for out_kind in ("D", "P"):
                if f"{kind} EBP" in methods:
                    errors = best_epoch_errors(mine, f"{kind} EBP", f"EBP-{out_kind}")
                    table[f"{kind} EBP-{out_kind}"] = _cell(errors)
        for name, prefix, columns in (
            ("BP", "BP ", {"BP": "BP", "Clipped BP": "clipped BP"}),
            ("AROW", "AROW ", {"AROW": "AROW"}),
        ):
            settings = [m for m in methods if m.startswith(prefix)]
            if settings:
                chosen = min(settings, key=lambda m: _cell(best_epoch_errors(mine, m, name))[0])
                for column, key in columns.items():
                    table[column] = _cell(best_epoch_errors(mine, chosen, key))
                table[f"{name} setting"] = chosen
        out[task] = table
    return out


def compare_columns(rows: list, task: str, a: str, b: str) -> Paired:
    """How many fewer errors (%) column a makes than column b on `task`, paired by fold, each at
    the epoch (and setting) of its Table 1 cell: mean, standard error, folds. Its `reading` is
    a's: "better" when a makes fewer errors by more than two standard errors."""
    mine = [r for r in rows if r["task"] == task]
    table = summarise_ebp_text(mine)[task]
    ea, eb = (best_epoch_errors(mine, *_column_source(table, c)) for c in (a, b))
    folds = sorted(set(ea) & set(eb))
    return paired_difference([eb[f] for f in folds], [ea[f] for f in folds])


# %% book/ebp_report.md
@experiment(
    "ebp-arow",
    chapter="ebp",
    book={"tasks": list(PAPER_TABLE1), "folds": [0], "epochs": 3, "r": [1.0, 100.0]},
    paper={
        "tasks": list(PAPER_TABLE1),
        "folds": list(range(8)),
        "epochs": 3,
        "r": [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e6],
    },
)
def run_ebp_arow(config: dict) -> list:
    """Table 1's AROW column: diagonal AROW for each regulariser r on the folds of the text tasks,
    the test error after each epoch (rows like run_ebp_text's, method "AROW r=<r>")."""
    rows = []
    for task in config["tasks"]:
        data = load_ebp(task)
        x, y = check_inputs(data.x), np.asarray(data.y)
        for fold in config["folds"]:
            train, test = fold_indices(len(y), fold)
            for r in config["r"]:

                def unit(checkpoint_dir, r=r):
                    began = time.perf_counter()
                    _, history = train_arow(
                        x[train],
                        y[train],
                        r=r,
                        epochs=config["epochs"],
                        x_valid=x[test],
                        y_valid=y[test],
                    )
                    seconds = time.perf_counter() - began
                    return [
                        {
                            "task": task,
                            "fold": fold,
                            "method": f"AROW r={r:g}",
                            **h,
                            "seconds_per_epoch": seconds / config["epochs"],
                        }
                        for h in history.rows()
                    ]

                rows += run_unit(f"{task} fold {fold} AROW r={r:g}", unit)
    return rows


# %% book/ebp_report.md
@experiment(
    "ebp-mnist",
    chapter="ebp",
    book={"hidden": [[200]], "epochs": 3, "bp_learning_rates": [0.1], "seed": 0},
    paper={
        "hidden": [[1000], [500, 500]],
        "epochs": 20,
        "bp_learning_rates": [0.01, 0.03, 0.1],
        "seed": 0,
    },
)
def run_ebp_mnist(config: dict) -> list:
    """MNIST with one output per class: 784 -> hidden... -> 10 (each entry of `hidden` a list of
    widths), Real and Binary EBP and BP (cross-entropy per output, one row per learning rate),
    minibatches of 10; per epoch, the test error on the 10,000 test images."""
    (x, labels), (x_test, labels_test) = mnist_arrays("train"), mnist_arrays("test")
    x, y, x_test, y_test = (
        jnp.asarray(x),
        one_vs_rest(labels, 10),
        jnp.asarray(x_test),
        one_vs_rest(labels_test, 10),
    )
    rows = []
    for hidden in config["hidden"]:
        key = jax.random.key(config["seed"])
        runs = [(f"{kind.capitalize()} EBP", train_ebp, kind) for kind in KINDS]
        runs += [
            (f"BP ce {lr:g}", partial(train_bp, loss="ce", learning_rate=lr), "real")
            for lr in config["bp_learning_rates"]
        ]
        for method, train_fn, kind in runs:

            def unit(
                checkpoint_dir, hidden=hidden, method=method, train_fn=train_fn, key=key, kind=kind
            ):
                began = time.perf_counter()
                _, history = train_fn(
                    init_ebp(jax.random.fold_in(key, 1), [x.shape[1], *hidden, 10], kind=kind),
                    x,
                    y,
                    seed=jax.random.fold_in(key, 2),
                    epochs=config["epochs"],
                    batch_size=10,
                    x_valid=x_test,
                    y_valid=y_test,
                    checkpoint_dir=checkpoint_dir,
                )
                seconds = time.perf_counter() - began
                return [
                    {
                        "hidden": list(hidden),
                        "method": method,
                        **h,
                        "seconds_per_epoch": seconds / config["epochs"],
                    }
                    for h in history.rows()
                ]

            rows += run_unit(f"{'-'.join(map(str, hidden))} {method}", unit)
    return rows


# %% book/ebp_report.md
_TEXT_FILES = ("results/ebp/ebp-text.small.json", "results/ebp/ebp-text.amazon.json")
_AROW_FILE = "results/ebp/ebp-arow.json"
_TASK_NAMES = {
    "reuters_I654_I65": "Reuters I6",
    "reuters_I81_I83": "Reuters I8",
    "20News_comp": "20News comp",
    "apparel_books": "Amazon books",
    "apparel_dvd": "Amazon DVD",
}


def _table1(records: dict, files=_TEXT_FILES) -> dict:
    """summarise_ebp_text over the rows of `files` in `records` (Section 5)."""
    return summarise_ebp_text([row for f in files for row in records[f]["rows"]])


_FOLDS_BASIS = "two standard errors of ours over the eight folds; the paper reports no uncertainty"
_BETTER_BASIS = (
    "the book's reading of better, task by task: a mean paired difference over the folds more "
    "than two standard errors in the method's favour; ours is the smallest of those margins"
)


def _smallest_lead(records: dict, files, a: str, b: str) -> float:
    """The smallest over the tasks of column a's lead over column b (fewer errors, paired by
    fold) less PAIRED_Z standard errors: positive iff a is better than b on every task."""
    rows = [row for f in files for row in records[f]["rows"]]
    return min(
        compare_columns(rows, task, a, b).margin for task in dict.fromkeys(r["task"] for r in rows)
    )


_FEWER = "ours makes fewer errors than the paper's, beyond the tolerance"
_MORE = "ours makes more errors than the paper's, beyond the tolerance"
_TUNED_BP = "our tuned BP is worse than the paper's (six learning rates, two losses)"
_TABLE1_SHORT = {  # (task, column): why it is not reproduced
    ("apparel_dvd", "Binary EBP-D"): _FEWER,
    ("reuters_I81_I83", "BP"): _TUNED_BP,
    ("20News_comp", "BP"): _TUNED_BP,
    ("20News_comp", "Binary EBP-P"): _MORE,
}


def _table1_claim(task: str, column: str) -> Claim:
    note = _TABLE1_SHORT.get((task, column), "")
    expect = "not reproduced" if note else "reproduced"
    return Claim(
        "ebp",
        "Table 1",
        f"{_TASK_NAMES[task]} {column}",
        "test error %, 8 folds, best of 3 epochs",
        PAPER_TABLE1[task][column],
        tolerance=lambda r: TOLERANCE_Z * _table1(r)[task][column][1],
        tolerance_basis=_FOLDS_BASIS,
        sources=_TEXT_FILES,
        section="ebp_report#ebp-table1",
        ours=lambda r: _table1(r)[task][column][0],
        better="lower",
        expect=expect,
        note=note,
    )


# %% book/ebp_report.md
def _ranking(kind: str, files=_TEXT_FILES, **kw) -> Claim:
    return Claim(
        "ebp",
        kw.pop("where", "Table 1, Sec. 5"),
        kw.pop("item", f"{kind} EBP-P ≤ BP, all tasks"),
        "smallest over the tasks of BP − EBP-P, paired by fold, less two standard errors (points)",
        "EBP-P better than BP",
        target=0.0,
        direction="at least",
        sources=files,
        section="ebp_report#ebp-table1",
        ours=lambda r: _smallest_lead(r, files, f"{kind} EBP-P", "BP"),
        tolerance_basis=_BETTER_BASIS,
        **kw,
    )


_DEEP_EPOCHS = (
    "eight epochs rather than the paper's three: after three the three-layer network is still at "
    "chance (Section 3)"
)
_AROW_FEWER = (
    "our diagonal AROW, at the best regulariser of the scan, makes fewer errors than the paper's, "
    "beyond the tolerance"
)


def _beats_arow(kind: str) -> Claim:
    return Claim(
        "ebp",
        "Sec. 5",
        f"{kind} EBP-P ≤ AROW, all tasks",
        "smallest over the tasks of AROW − EBP-P, paired by fold, less two standard errors "
        "(points)",
        "EBP-P better than AROW",
        target=0.0,
        direction="at least",
        sources=(*_TEXT_FILES, _AROW_FILE),
        section="ebp_report#ebp-arow",
        ours=lambda r: _smallest_lead(r, (*_TEXT_FILES, _AROW_FILE), f"{kind} EBP-P", "AROW"),
        tolerance_basis=_BETTER_BASIS,
        expect="not reproduced",
        note={
            "Real": "Real EBP-P is better than our diagonal AROW on Reuters I6 and 20News; they "
            "tie on Reuters I8 and Amazon books, and AROW is better on Amazon DVD",
            "Binary": "Binary EBP-P is better than our diagonal AROW on Reuters I6; they tie on "
            "20News and Amazon books, and AROW is better on Reuters I8 and Amazon DVD",
        }[kind],
    )


# %% book/ebp_report.md
CLAIMS = [
    *(
        _table1_claim(task, column)
        for task in PAPER_TABLE1
        for column in ("Real EBP-D", "Real EBP-P", "Binary EBP-D", "Binary EBP-P", "BP")
    ),
    _ranking(
        "Real",
        expect="not reproduced",
        note="Real EBP-P is better than tuned BP on Reuters I6, I8 and 20News; on the two Amazon "
        "review tasks the two are not told apart",
    ),
    _ranking(
        "Binary",
        expect="not reproduced",
        note="Binary EBP-P is better than tuned BP on 20News; on Reuters I6, I8 and the two "
        "Amazon review tasks the two are not told apart",
    ),
    *(
        _ranking(
            kind,
            ("results/ebp/ebp-text.deep8-small.json",),
            where="Sec. 5, appendix E.2",
            item=f"3 layers: {kind} EBP-P ≤ BP (Reuters I6, I8, 20News)",
            expect="reproduced with changes",
            changes=_DEEP_EPOCHS,
            note=_DEEP_EPOCHS,
        )
        for kind in ("Real", "Binary")
    ),
    *(
        Claim(
            "ebp",
            "Table 1",
            f"{_TASK_NAMES[task]} AROW",
            "test error %, 8 folds, best of 3 epochs and of r",
            PAPER_TABLE1[task]["AROW"],
            tolerance=lambda r, task=task: TOLERANCE_Z * _table1(r, (_AROW_FILE,))[task]["AROW"][1],
            tolerance_basis=_FOLDS_BASIS,
            sources=(_AROW_FILE,),
            section="ebp_report#ebp-arow",
            ours=lambda r, task=task: _table1(r, (_AROW_FILE,))[task]["AROW"][0],
            better="lower",
            **(
                {"expect": "not reproduced", "note": _AROW_FEWER}
                if task in ("20News_comp", "apparel_books", "apparel_dvd")
                else {}
            ),
        )
        for task in PAPER_TABLE1
    ),
    _beats_arow("Real"),
    _beats_arow("Binary"),
    *(
        Claim(
            "ebp",
            "Table 1",
            f"{name} Binary EBP-P",
            "test error %",
            value,
            expect="not run",
            note="the authors' repository ships this task's data, the book's data folder does not",
        )
        for name, value in (("Spam d0", 0.76), ("Spam d1", 0.96), ("20News elec vs med", 2.08))
    ),
]


# %% book/ebp_report.md
__all__ = [
    "PAPER_TABLE1",
    "run_ebp_text",
    "summarise_ebp_text",
    "best_epoch_errors",
    "compare_columns",
    "run_ebp_arow",
    "run_ebp_mnist",
    "CLAIMS",
]
