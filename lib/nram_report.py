# GENERATED FILE: do not edit. Source: book/nram_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of Neural Random-Access Machines, exported from book/nram_report.md.

The paper-scale experiments that `python -m lib` runs (nram, nram-search, nram-hard), the result
parts of Table 1, the hand-written programs for Swap and the hard tasks, and the claims of the
scorecard; the machine itself is lib.nram.
"""

# %% book/nram_report.md
from __future__ import annotations

import dataclasses
import json
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lib.nram import EASY_TASKS, HARD_TASKS, TASKS
from lib.toolkit import Trained
from lib.nram import NRAMSpec, TrainConfig, controller_text, evaluate, load_controller
from lib.nram import program_logits, run_fuzzy, train_nram, train_nram_seeds
from lib.toolkit import Instance, Int, OneOf, checks
from lib.record import require_results, run_unit
from lib.record import experiment as _experiment


# %% book/nram_report.md
NRAM_CONFIGS = {
    "access": TrainConfig(
        task="access", memory_size=22, timesteps=4, max_difficulty=20, entropy=0.01
    ),
    "increment": TrainConfig(
        task="increment", registers=5, memory_size=16, timesteps=18, max_difficulty=15, entropy=0.01
    ),
    "copy": TrainConfig(task="copy", memory_size=31, timesteps=20, max_difficulty=15, entropy=0.01),
    "reverse": TrainConfig(
        task="reverse", memory_size=31, timesteps=20, max_difficulty=15, entropy=0.01
    ),
    "swap": TrainConfig(task="swap", memory_size=24, timesteps=6, max_difficulty=20, entropy=0.01),
}
"""The five easy tasks at the paper's training lengths (Table 1: len(A) <= 20, 15, 15, 15, 20)."""

#: Copy (the chapter's run, Section 6) and Access sized to train in minutes on a laptop CPU
#: (Copy's seed: one that learns it, see the book-scale seed sweep below).
BOOK_CONFIGS = {
    "copy": TrainConfig(
        task="copy",
        memory_size=16,
        timesteps=12,
        max_difficulty=7,
        entropy=0.01,
        steps=1300,
        seed=5,
    ),
    "access": TrainConfig(
        task="access",
        memory_size=12,
        timesteps=4,
        max_difficulty=10,
        entropy=0.01,
        steps=2500,
        seed=0,
    ),
}

HARD_CONFIGS = {
    "permutation": TrainConfig(
        task="permutation", memory_size=13, timesteps=14, max_difficulty=6, entropy=0.01
    ),
    "listk": TrainConfig(
        task="listk", memory_size=23, timesteps=14, max_difficulty=10, entropy=0.01
    ),
    "listsearch": TrainConfig(
        task="listsearch", memory_size=15, timesteps=14, max_difficulty=6, entropy=0.01
    ),
    "merge": TrainConfig(
        task="merge", memory_size=25, timesteps=24, max_difficulty=10, entropy=0.01
    ),
    "walkbst": TrainConfig(
        task="walkbst", memory_size=43, timesteps=22, max_difficulty=10, entropy=0.01
    ),
}
"""The hard tasks at Table 1's training complexities (Permutation and ListSearch 6, the others
10)."""


# %% book/nram_report.md
@checks(
    task=OneOf(*TASKS),
    part=Instance(str),
    seed=Int(0),
    experiment=OneOf("nram", "nram-hard"),
)
def stored_controller(
    task: str, part: str, seed: int, results_dir=None, experiment: str = "nram"
) -> nnx.Module:
    """The controller that results/nram/<experiment>.<part>.json keeps for `task` and `seed` (the
    one row of that task and seed; results_dir as for require_results)."""
    record = require_results("nram", experiment, part=part, results_dir=results_dir)
    rows = [r for r in record["rows"] if (r["task"], r["seed"]) == (task, seed)]
    if len(rows) != 1:
        have = sorted({(r["task"], r["seed"]) for r in record["rows"]})
        raise ValueError(
            f"{experiment}.{part}.json has {len(rows)} rows of task {task!r} and seed {seed} "
            f"(need one); its rows: {have}"
        )
    return load_controller(TrainConfig(**rows[0]["train_config"]), rows[0]["controller"])


def _split_setting(setting: dict, experiment: str) -> tuple[dict, Callable]:
    """An experiment's setting as (the TrainConfig fields it changes, init(task)): init gives the
    controller that its "init_from" {"part": P, "seed": S} names in results/nram/<experiment>.P.json
    (stored_controller), or None if it names none."""
    fields = {k: v for k, v in setting.items() if k != "init_from"}

    def init(task: str) -> nnx.Module | None:
        if "init_from" not in setting:
            return None
        return stored_controller(task, **setting["init_from"], experiment=experiment)

    return fields, init


def _run_record(config: TrainConfig, result: Trained) -> dict:
    """What a results row keeps of one training run: its configuration, curriculum, history and the
    selected controller."""
    return {
        "train_config": dataclasses.asdict(config),
        "final_level": result.history.level,
        "selected_step": result.history.selected_step,
        "train_seconds": round(result.history.wall_seconds, 1),
        "history": {k: v.tolist() for k, v in result.history.items()},
        "controller": controller_text(result.model),
    }


def _evaluations(controller, run: TrainConfig, lengths, examples: int, mixed: bool = False):
    """What the paper-scale experiments measure of a trained run: the evaluation at its top
    training length (1,000 examples) and one at each of `lengths` (`examples` each), every one
    on fresh examples of its own seed (run.seed + 1, + the length)."""
    top = evaluate(
        controller, run, run.max_difficulty, examples=1000, seed=run.seed + 1, mixed=mixed
    )
    rest = [
        evaluate(controller, run, n, examples=examples, seed=run.seed + 1 + n, mixed=mixed)
        for n in lengths
    ]
    return top, rest


# %% book/nram_report.md
@_experiment(
    "nram",
    chapter="nram",
    book={
        "scale": "book",
        "tasks": ["copy", "access"],
        "seeds": None,
        "steps": None,
        "setting": {},
        "side_by_side": False,
        "test_lengths": [5, 10, 20, 30, 50],
        "test_examples": 200,
    },
    paper={
        "scale": "paper",
        "tasks": list(EASY_TASKS),
        "seeds": [0, 1, 2, 3],
        "steps": 20000,
        "setting": {},
        "side_by_side": False,
        "test_lengths": [5, 10, 15, 20, 25, 30, 40, 50],
        "test_examples": 200,
    },
)
def run_nram(config: dict) -> list:
    """Table 1 for the easy tasks: train each task with each seed (BOOK_CONFIGS or NRAM_CONFIGS,
    with the TrainConfig fields of `setting` changed), then the error at the top training length,
    the generalisation error up to length 50 and the discretised agreement; each row keeps the
    selected controller (read it back with load_controller). `setting` may also hold "init_from":
    {"part": P, "seed": S}: every run then starts from the
    controller that results/nram/nram.P.json keeps for its task and seed S (train_nram's `init`),
    to train it further under the rest of the setting.
    `side_by_side`: a task's seeds trained together in one compiled program (train_nram_seeds,
    faster than one after another, see the report's Section 1; a seed's run equals its own up to
    floating-point rounding; "train_seconds" the time of all over their number), a row per seed as
    before."""
    configs = {"book": BOOK_CONFIGS, "paper": NRAM_CONFIGS}[config["scale"]]
    setting = config.get("setting") or {}
    fields, init = _split_setting(setting, "nram")
    label = f" {json.dumps(setting, sort_keys=True)}" if setting else ""

    def row(task, train, result):
        top, tests = _evaluations(
            result.model, train, config["test_lengths"], config["test_examples"]
        )
        return {
            "task": task,
            "seed": train.seed,
            "setting": setting,
            **_run_record(train, result),
            "error_at_max_length": top["error"],
            "discrete_error_at_max_length": top["error_discrete"],
            "agreement_at_max_length": top["agreement"],
            "generalisation": tests,
        }

    rows = []
    for task in config["tasks"]:
        seeds = config["seeds"] or [configs[task].seed]  # None: the seed of the task's config
        base = dataclasses.replace(
            configs[task], steps=config["steps"] or configs[task].steps, **fields
        )
        if config.get("side_by_side") and len(seeds) > 1:

            def unit(checkpoint_dir, task=task, seeds=seeds, base=base):
                runs = _side_by_side(base, seeds, checkpoint_dir, init=init(task))
                return [row(task, train, result) for train, result in runs]

            rows += run_unit(f"{task} seeds {list(seeds)} side by side{label}", unit)
            continue
        for seed in seeds:
            train = dataclasses.replace(base, seed=seed)

            def unit(checkpoint_dir, task=task, train=train):
                result = train_nram(train, init=init(task), checkpoint_dir=checkpoint_dir)
                return row(task, train, result)

            rows.append(run_unit(f"{task} seed {seed}{label}", unit))
    return rows


# %% book/nram_report.md
SEARCH_SPACE = {
    "entropy": [0.003, 0.01, 0.03, 0.1],
    "noise_eta": [0.0, 0.01, 0.1, 0.3],
    "learning_rate": [0.003, 0.01, 0.03],
    "hidden": [64, 128],
    "registers": [4, 5, 6],
    "repeats": [1, 2],
    "controller": ["mlp", "lstm"],
    "noise_decay": [None, 0.9995, 0.9999],
    "entropy_decay": [0.999, 0.9997, 1.0],
    "batch_size": [16, 32, 64],
    "threshold": [0.05, 0.1, 0.2],
    "init_scale": [1.0, 4.0],
}
"""The hyper-parameters `nram-search` draws from, each uniformly from its list (the paper
gives none): those of Sec. 4.1 (learning rate, the gradient noise's scale and schedule, the
entropy bonus and its decay), the machine's (registers, modules once or twice), the
controller's (kind, width, the scale of its first circuits), the batch size and the curriculum's
threshold; `search_space` adds a task's own."""

TASK_SEARCH_SPACE = {"swap": {"timesteps": [6, 8, 10], "extra_timesteps": [0, 4]}}
"""What a task's search adds to SEARCH_SPACE: for Swap, whose learned programs did not stop
(the report's Section 1), the timesteps and the horizons beyond them (`extra_timesteps`)."""


@checks(task=OneOf(*TASKS))
def search_space(task: str) -> dict:
    """The space `nram-search` draws from for `task` when its config gives none: SEARCH_SPACE and
    the task's TASK_SEARCH_SPACE."""
    return {**SEARCH_SPACE, **TASK_SEARCH_SPACE.get(task, {})}


@checks(space=Instance(dict), count=Int(1), seed=Int(0))
def draw_settings(space: dict, count: int, seed: int) -> list[dict]:
    """`count` settings, each field drawn independently and uniformly from its list in `space`."""
    rng = np.random.default_rng(seed)
    empty = sorted(k for k, v in space.items() if not isinstance(v, list) or not v)
    if empty:
        raise ValueError(
            f"space must map every field to a non-empty list of values; not so for {empty}"
        )
    bad = set(space) - {f.name for f in dataclasses.fields(TrainConfig)} | (
        {"task", "seed", "steps"} & set(space)
    )
    if bad:
        raise ValueError(
            f"space names fields that are not searchable TrainConfig fields: {sorted(bad)}"
        )
    return [{k: v[int(rng.integers(len(v)))] for k, v in space.items()} for _ in range(count)]


# %% book/nram_report.md
def _side_by_side(train: TrainConfig, seeds: list, checkpoint_dir, init=None) -> list:
    """train_nram_seeds of `train` for `seeds` (from `init`, as train_nram's): per seed its config
    and its result, whose wall_seconds is the side-by-side training's over the number of seeds."""
    results = train_nram_seeds(train, seeds, init=init, checkpoint_dir=checkpoint_dir)
    for result in results:  # each run's own History
        result.history.wall_seconds /= len(seeds)
    return [(dataclasses.replace(train, seed=s), result) for s, result in zip(seeds, results)]


def _search_plan(config: dict) -> tuple:
    """(the task's paper configuration, whether its test lengths are mixed, the drawn settings) of
    an nram-search config, or a ValueError that says what is wrong with it."""
    task = config["task"]
    paper = {**NRAM_CONFIGS, **HARD_CONFIGS}
    if task not in paper:
        raise ValueError(f"task must be one of {sorted(paper)}, got {task!r}")
    space = search_space(task) if config["space"] is None else config["space"]
    drawn = draw_settings(space, config["count"], config["search_seed"])
    bad = [i for i in config["settings"] if not 0 <= i < len(drawn)]
    if bad:
        raise ValueError(f"settings must be indices below count={config['count']}, got {bad}")
    return paper[task], task in HARD_TASKS, drawn


# %% book/nram_report.md
@_experiment(
    "nram-search",
    chapter="nram",
    book={
        "task": "swap",
        "count": 2,
        "settings": [0, 1],
        "seeds": [0],
        "search_seed": 0,
        "steps": 200,
        "space": {"registers": [4, 5]},
        "examples": 200,
    },
    paper={
        "task": "swap",
        "count": 24,
        "settings": list(range(24)),
        "seeds": list(range(8)),
        "search_seed": 0,
        "steps": 5000,
        "space": None,
        "examples": 500,
    },
)
def run_nram_search(config: dict) -> list:
    """A random search for one task at its paper length (NRAM_CONFIGS, or HARD_CONFIGS for a hard
    task): `count` settings drawn from `space` (draw_settings; None: `search_space(task)`), of
    which those in `settings` (indices) are trained for `steps` steps, each with every seed offset
    s of `seeds` (the run's seed: index + 1000 s), the seeds of a setting side by side
    (train_nram_seeds); per run the curriculum level reached and the error of the selected
    controller at the top training length (fuzzy and discretised; for a hard task on lengths drawn
    uniformly up to it, "mixed", as Table 1 and Figure 3), and the controller (load_controller)."""
    base, mixed, drawn = _search_plan(config)
    rows = []
    for i in config["settings"]:
        setting = drawn[i]
        train = dataclasses.replace(base, steps=config["steps"], **setting)
        seeds = [i + 1000 * s for s in config["seeds"]]

        def unit(checkpoint_dir, i=i, setting=setting, train=train, seeds=seeds):
            runs = []
            for run, result in _side_by_side(train, seeds, checkpoint_dir):
                n, seed = run.max_difficulty, run.seed + 1
                top = evaluate(
                    result.model, run, n, examples=config["examples"], seed=seed, mixed=mixed
                )
                h = {
                    k: result.history[k].tolist() for k in ("step", "loss", "error_level", "level")
                }
                runs.append(
                    {
                        "task": run.task,
                        "setting_index": i,
                        "seed": run.seed,
                        "setting": setting,
                        "final_level": result.history.level,
                        "max_level": run.max_difficulty,
                        "selected_step": result.history.selected_step,
                        "train_seconds": round(result.history.wall_seconds, 1),
                        "error": top["error"],
                        "discrete_error": top["error_discrete"],
                        "agreement": top["agreement"],
                        "mixed": mixed,
                        "history": h,
                        "train_config": dataclasses.asdict(run),
                        "controller": controller_text(result.model),
                    }
                )
            return runs

        rows += run_unit(f"{train.task} {i} {json.dumps(setting, sort_keys=True)}", unit)
    return rows


# %% book/nram_report.md
NRAM_PARTS = {  # the pieces of the paper-scale run in results/nram/, nram.<piece>.json
    "access": ("access", "access-seed4"),
    "increment": tuple(f"increment-seed{s}" for s in range(5)),
    "copy": tuple(f"copy-seed{s}" for s in range(5)),
    "reverse": (
        "reverse-seed0",
        "reverse-seeds1-2",
        "reverse-seed3",
        "reverse-seed4",
        "reverse-init4-seeds0-7",
    ),
    "swap": (
        *(f"swap-seed{s}" for s in range(5)),
        "swap-init4-seeds0-7",
        "swap-init4-seeds8-23",  # sixteen more at that scale, side by side, 6,000 steps
        "swap-init4-h4-seeds0-3",  # trained at several horizons (extra_timesteps)
        "swap-init4-h4-seeds8-23",  # sixteen more there, side by side, 6,000 steps
        "swap-init4-h4-r5-seeds0-15",  # ... with five registers
        "swap-init4-h4-r6-seeds0-15",  # ... with six
        "swap-sharpen1e-3-from-h4-seed11",  # its learner trained on with an entropy penalty
        "swap-sharpen3e-3-from-h4-seed11",
        "swap-sharpen1e-3-lr1e-3-from-h4-seed11",  # ... at a tenth of the learning rate
        "swap-sharpen1e-3-lr1e-3-from-sharpened-seed2",
        "swap-sharpen1e-3-lr1e-3-again",  # the first of those sharpened on
        "swap-sharpen3e-3-lr1e-3-again",
        "swap-sharpen1e-3-lr1e-3-again-seeds4-19",  # sixteen more seeds of the first
        "swap-h4-from-init4-seed2",  # the controller of init4 seed 2 trained on at those horizons
        "swap-lstm-init4-h4-seeds0-5",  # at those horizons with an LSTM controller, which can count
        "swap-lstm-init4-seeds0-7",  # an LSTM at the training horizon (a learner to go on from)
        "swap-init4-repeats2-seeds0-7",  # the modules twice, as the paper's Swap circuits
        "swap-init4-repeats2-h4-seeds0-7",  # ... and at several horizons
        "swap-init4-repeats2-r2-seeds0-7",  # ... with two registers, as the paper's Swap
        "swap-init4-repeats2-r2-h4-seeds0-7",  # ... and at several horizons
        "swap-values1e-2-from-h4-seed11",  # seed 11 with footnote 7's penalty on the values
        "swap-values1e-1-from-h4-seed11",  # ... ten times stronger
        "swap-init4-h4-values1e-2-seeds0-15",  # ... from scratch, throughout
        "swap-sharpen1e-3-lr1e-3-from-again-seed1",  # the run that leaves the cells, trained on
        "swap-sharpen1e-3-lr1e-4-from-again-seed1",  # ... at a tenth of the learning rate
    ),
}
HARD_TABLE1 = {  # Table 1's hard tasks: name, training error as printed, and as a fraction
    "permutation": ("Permutation", "0", 0.0),
    "listk": ("ListK", "0", 0.0),
    "listsearch": ("ListSearch", "0", 0.0),
    "merge": ("Merge", "1%", 0.01),
    "walkbst": ("WalkBST", "0.3%", 0.003),
}
HARD_PARTS = {  # the hard tasks' runs at Table 1's lengths in results/nram/, nram-hard.<piece>.json
    "permutation": (
        "permutation",
        "permutation-init4",
        "permutation-repeats2",
        "permutation-lstm-finish3",
    ),
    "listk": ("listk", "listk-init4", "listk-lstm-finish3"),
    "listsearch": ("listsearch", "listsearch-init4", "listsearch-lstm-finish3"),
    "merge": ("merge", "merge-lstm-finish3"),
    "walkbst": (
        "walkbst",
        "walkbst-lstm-finish3",
        "walkbst-lstm-finish3-seeds8-15",
        "walkbst-lstm-finish3-from-seed12",  # the best seed trained on, at a tenth of the rate
        "walkbst-lstm-finish3-from-seed12-lr1e-2",  # ... and at the rate itself, the control
    ),
}


# %% book/nram_report.md
def setting_label(changed: dict) -> str:
    """How a run's setting reads in the tables: the fields it changed, and the run it began from."""
    return (
        ", ".join(
            f"from {v['part']} seed {v['seed']}" if k == "init_from" else f"{k} {v}"
            for k, v in changed.items()
        )
        or "default"
    )


# %% book/nram_report.md
@checks(spec=Instance(NRAMSpec))
def swap_program(spec: NRAMSpec) -> Callable:
    """A hand-written policy that solves Swap in five timesteps (Sec. 8 of the chapter). Needs R >=
    4 and the modules READ, ZERO, ONE, WRITE; the phase is read from the registers' zero tests."""
    phases = [
        jnp.asarray(
            program_logits(spec, inputs, registers + ["r5", "r6"][: spec.registers - 4], finish)
        )
        for inputs, registers, finish in (
            (
                {"READ": "r1", "WRITE": ("r3", "READ")},
                ["READ", "ONE", "r3", "r4"],
                False,
            ),  # r1 = p, r2 = 1
            (
                {"READ": "r2", "WRITE": ("r2", "READ")},
                ["r1", "READ", "r3", "ONE"],
                False,
            ),  # r2 = q, r4 = 1
            (
                {"READ": "r1", "WRITE": ("r1", "READ")},
                ["r1", "r2", "READ", "r4"],
                False,
            ),  # r3 = A[p]
            (
                {"READ": "r2", "WRITE": ("r2", "r3")},
                ["r1", "ZERO", "r3", "READ"],
                False,
            ),  # r4 = A[q], cell q = A[p]
            ({"READ": "r1", "WRITE": ("r1", "r4")}, ["r1", "r2", "r3", "r4"], True),
        )
    ]  # cell p = A[q]; finish

    def policy(bits, carry):
        """r1 = 0: first phase; r2 = 0: last; r3 and r4 = 0: second; r3 = 0: third; else fourth."""
        z1, z2, z3, z4 = (bits[..., i : i + 1] > 0.5 for i in range(4))
        return jnp.where(
            z1,
            phases[0],
            jnp.where(
                z2, phases[4], jnp.where(z3 & z4, phases[1], jnp.where(z3, phases[2], phases[3]))
            ),
        ), carry

    return policy


# %% book/nram_report.md
def plot_trace(rows: list[dict], ax=None, cells=None, title: str | None = None):
    """The rows of `trace` as a figure, like the paper's Tables 2 and 6: a line per timestep with
    the memory and the registers at its start, the cells that READ reads framed in blue and those
    that WRITE writes filled in orange (the value written beside the line), and the finish
    probability. cells: the memory cells to show (default all). Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if not rows:
        raise ValueError("rows must be a non-empty trace (the list that `trace` returns)")
    M, R = len(rows[0]["memory"]), len(rows[0]["registers"])
    cells = list(range(M)) if cells is None else [int(c) for c in cells]
    if not cells or min(cells) < 0 or max(cells) >= M:
        raise ValueError(f"cells must be memory cells in 0..{M - 1}, got {cells}")
    column = {c: j for j, c in enumerate(cells)}
    reg0 = len(cells) + 0.6  # the registers' first column
    right = reg0 + R + 0.4  # where the READ / WRITE / finish text starts
    if ax is None:
        _, ax = plt.subplots(figsize=(min(0.32 * (right + 9), 12), 0.32 * (len(rows) + 2)))
    for t, row in enumerate(rows):
        for c in cells:
            x = column[c]
            written = [a for p, a in row["writes"] if p == c]
            if written:
                ax.add_patch(Rectangle((x - 0.5, t - 0.5), 1, 1, color="#f6b26b", zorder=0))
            if c in row["reads"]:
                ax.add_patch(
                    Rectangle((x - 0.45, t - 0.45), 0.9, 0.9, fill=False, ec="#1f77b4", lw=1.5)
                )
            ax.text(x, t, str(int(row["memory"][c])), ha="center", va="center", fontsize=7)
        for j, v in enumerate(row["registers"]):
            ax.text(reg0 + j, t, str(int(v)), ha="center", va="center", fontsize=7, color="0.3")
        text = " ".join([f"R {p}" for p in row["reads"]] + [f"W {p}:{a}" for p, a in row["writes"]])
        ax.text(right, t, f"{text}   f {row['finish_probability']:.2f}", va="center", fontsize=7)
    for j, c in enumerate(cells):
        ax.text(j, -1, str(c), ha="center", va="center", fontsize=6, color="0.5")
    for j in range(R):
        ax.text(reg0 + j, -1, f"r{j + 1}", ha="center", va="center", fontsize=6, color="0.5")
    ax.text(right, -1, "READ / WRITE p:a, finish prob.", va="center", fontsize=6, color="0.5")
    ax.set_yticks(range(len(rows)), [f"{row['step']}" for row in rows], fontsize=7)
    ax.set_xticks([])
    ax.set_xlim(-0.6, right + 8)
    ax.set_ylim(len(rows) - 0.5, -1.6)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_ylabel("timestep", fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


# %% book/nram_report.md
@partial(
    jax.jit,  # at XLA's lowest backend optimisation, as _both_machines: faster to compile
    static_argnames=("graphdef", "spec", "timesteps", "hard"),
    compiler_options={"xla_backend_optimization_level": 0},
)
def _stored_run(graphdef, state, memory, target, *, spec, timesteps, hard):
    """run_fuzzy of a split controller (hard: the discretised machine), compiled once for every
    stored controller of one structure."""
    controller = nnx.merge(graphdef, state)
    carry = controller.initial_carry(memory.shape[0])
    return run_fuzzy(spec, controller, memory, target, timesteps, carry=carry, hard=hard)


# %% book/nram_report.md
from lib.record import Claim


def _best_seed(records: dict, measure) -> float:
    """The smallest `measure(row)` over the seeds (rows) of the nram results files in `records`."""
    return min(measure(row) for record in records.values() for row in record["rows"])


_MEASURES = {
    "train error": (
        "error at the longest training length (%), best run",
        lambda row: row["error_at_max_length"],
    ),
    "generalisation": (
        "largest error over lengths up to 50 (%), best run",
        lambda row: max(g["error"] for g in row["generalisation"]),
    ),
    "discretisation": (
        "largest error of the discretised machine over lengths up to 50 (%), best run",
        lambda row: max(g["error_discrete"] for g in row["generalisation"]),
    ),
}


# %% book/nram_report.md
HARD_NOTES = {  # the hard tasks learned to Table 1's error, and how
    "listk": "with the LSTM controller and the finish bias at -3 (report, part 2)",
    "walkbst": "the best LSTM seed (finish bias -3) trained on at a tenth of the learning rate, "
    "without entropy bonus or gradient noise (report, part 2)",
}
EASY_CHANGES = {  # the easy tasks reached only by what the paper did not do
    "reverse": "reached only from sharper initial circuits (init_scale 4, a knob the paper does "
    "not have) in shorter runs; no run at the paper's setting reaches it (Section 1)",
    "swap": "reached only by runs trained on from earlier ones, with an entropy penalty on the "
    "circuits (the paper's footnote 7 suggests one; it did not use it), extra timesteps and a "
    "tenth of the learning rate; no run at the paper's setting reaches it (Section 1)",
}
_EXACT = (
    "exact: the error counts the wrong cells of the test cases and the paper's value admits no "
    "more; ours is the best run, as the paper tests a model it selected for reaching its error"
)
_HARD_RATE_PARTS = {  # the best setting's runs from scratch, where one reached Table 1's error
    "listk": ("listk-lstm-finish3",),
    "walkbst": ("walkbst-lstm-finish3", "walkbst-lstm-finish3-seeds8-15"),
}


def _rate(measure, target: float, parts=None, which: str = "at the paper's setting"):
    """(runs whose measure is at most target %, runs, which) over the results files of `parts`,
    or, with parts None, over those made at the paper's setting (no deviations recorded)."""

    def rate(records: dict) -> tuple[int, int, str]:
        chosen = [
            rec
            for path, rec in records.items()
            if (not rec.get("deviations") if parts is None else path.split(".")[-2] in parts)
        ]
        rows = [row for rec in chosen for row in rec["rows"]]
        return sum(100 * measure(row) <= target for row in rows), len(rows), which

    return rate


# %% book/nram_report.md
def _easy(task: str, parts: tuple, column: str, quantity: str, measure) -> Claim:
    changes = EASY_CHANGES.get(task, "")
    return Claim(
        "nram",
        "Table 1",
        f"{task.capitalize()} ({column})",
        quantity,
        "0" if column == "train error" else "perfect",
        target=0.0,
        direction="at most",
        section="nram_report#nram-paper-scale",
        sources=tuple(f"results/nram/nram.{part}.json" for part in parts),
        ours=lambda r: 100 * _best_seed(r, measure),
        tolerance_basis=_EXACT,
        rate=_rate(measure, 0.0),
        expect="reproduced with changes" if changes else "reproduced",
        changes=changes,
        note=changes,
    )


def _hard(task: str, name: str, value: str, target: float) -> Claim:
    measure = lambda row: row["train_error"]  # noqa: E731
    reached = task in HARD_NOTES
    changes = HARD_NOTES[task] if task == "walkbst" else ""
    rate_parts = _HARD_RATE_PARTS.get(task, HARD_PARTS[task])
    which = "from scratch at the best setting" if task in _HARD_RATE_PARTS else "of every setting"
    return Claim(
        "nram",
        "Table 1",
        f"{name} (train error)",
        "training error at the paper's complexity (%), best run of any setting",
        value,
        target=100 * target,
        direction="at most",
        section="nram_hard_report#nram-hard",
        sources=tuple(f"results/nram/nram-hard.{part}.json" for part in HARD_PARTS[task]),
        ours=lambda r: 100 * _best_seed(r, measure),
        tolerance_basis=_EXACT,
        rate=_rate(measure, 100 * target, rate_parts, which),
        expect=("reproduced with changes" if changes else "reproduced")
        if reached
        else "not reproduced",
        changes=changes,
        note=HARD_NOTES.get(task, "no run of any setting reached Table 1's error (report, part 2)"),
    )


CLAIMS = [
    *(
        _easy(task, parts, column, quantity, measure)
        for task, parts in NRAM_PARTS.items()
        for column, (quantity, measure) in _MEASURES.items()
    ),
    *(_hard(task, *row) for task, row in HARD_TABLE1.items()),
]


# %% book/nram_report.md
__all__ = [
    "NRAM_CONFIGS",
    "BOOK_CONFIGS",
    "HARD_CONFIGS",
    "stored_controller",
    "run_nram",
    "SEARCH_SPACE",
    "TASK_SEARCH_SPACE",
    "search_space",
    "draw_settings",
    "run_nram_search",
    "NRAM_PARTS",
    "HARD_TABLE1",
    "HARD_PARTS",
    "swap_program",
    "setting_label",
    "plot_trace",
    "HARD_NOTES",
    "EASY_CHANGES",
    "CLAIMS",
]
