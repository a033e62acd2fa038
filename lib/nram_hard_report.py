# GENERATED FILE: do not edit. Source: book/nram_hard_report.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""The reproduction record of Neural Random-Access Machines' hard tasks, exported from
book/nram_hard_report.md.

The paper-scale experiment `nram-hard` that `python -m lib` runs, its configurations, and the
hand-written programs of Permutation, ListK and the other hard tasks; the machine itself is
lib.nram, the result parts and the claims lib.nram_report.
"""

# %% book/nram_hard_report.md
from __future__ import annotations

import dataclasses
import json
from typing import Callable

import jax.numpy as jnp

from lib.nram import HARD_TASKS, NRAMSpec, program_logits
from lib.nram_report import HARD_CONFIGS, _evaluations, _run_record, _side_by_side, _split_setting
from lib.toolkit import Instance, OneOf, checks
from lib.record import run_unit
from lib.record import experiment as _experiment


# %% book/nram_hard_report.md
@_experiment(
    "nram-hard",
    chapter="nram",
    book={
        "tasks": ["permutation"],
        "seeds": [0],
        "settings": [{}],
        "steps": 2000,
        "figure3": [6, 10],
        "test_examples": 200,
    },
    paper={
        "tasks": list(HARD_TASKS),
        "seeds": list(range(8)),
        "settings": [{}, {"repeats": 2}],
        "steps": 20000,
        "figure3": [10, 15, 20, 25, 30],
        "test_examples": 500,
    },
)
def run_nram_hard(config: dict) -> list:
    """The hard tasks: for each task and setting (TrainConfig fields changed from HARD_CONFIGS), all
    seeds trained side by side (train_nram_seeds); per run the error at the training complexities
    (uniform on 1..max), the discretised machine's, and Figure 3's points ("train_seconds": the
    side-by-side training's wall time over the number of seeds).
    A setting may also hold "init_from": {"part": P, "seed": S}: its runs then start from the
    controller that results/nram/nram-hard.P.json keeps for the task and seed S (train_nram's
    `init`), to train it further under the rest of the setting."""
    rows = []
    for task in config["tasks"]:
        for setting in config["settings"]:
            fields, init = _split_setting(setting, "nram-hard")
            train = dataclasses.replace(HARD_CONFIGS[task], steps=config["steps"], **fields)
            seeds = [int(s) for s in config["seeds"]]

            def unit(
                checkpoint_dir, task=task, setting=setting, train=train, seeds=seeds, init=init
            ):
                runs = []
                for run, result in _side_by_side(train, seeds, checkpoint_dir, init=init(task)):
                    top, curve = _evaluations(
                        result.model,
                        run,
                        config["figure3"],
                        config["test_examples"],
                        mixed=True,
                    )
                    runs.append(
                        {
                            "task": task,
                            "setting": setting,
                            "seed": run.seed,
                            **_run_record(run, result),
                            "train_error": top["error"],
                            "discrete_error": top["error_discrete"],
                            "agreement": top["agreement"],
                            "figure3": curve,
                        }
                    )
                return runs

            rows += run_unit(f"{task} {json.dumps(setting, sort_keys=True)} seeds {seeds}", unit)
    return rows


# %% book/nram_hard_report.md
@checks(spec=Instance(NRAMSpec))
def permutation_program(spec: NRAMSpec) -> Callable:
    """A hand-written policy that solves Permutation in n + 1 timesteps (Sec. 9 of the chapter):
    r1 = i, r2 = a, r3 = n - i. Needs R >= 3 and the modules twice (two READ and two WRITE gates a
    timestep: TrainConfig(repeats=2)); the phase is read from the zero tests of r1 and r3."""
    if spec.modules.count("READ") < 2 or spec.modules.count("WRITE") < 2 or spec.registers < 3:
        raise ValueError(
            "permutation_program needs two READ and two WRITE gates (the modules repeated) and "
            f"at least 3 registers, got {spec.modules.count('READ')} READ, "
            f"{spec.modules.count('WRITE')} WRITE and {spec.registers} registers"
        )
    rest = [f"r{j}" for j in range(4, spec.registers + 1)]
    # the first timestep: r1 = 0 reads cell 0, a, and both WRITEs put it back
    first = {"WRITE": ("r1", "READ"), "WRITE:2": ("r1", "READ"), "SUB": ("READ", "TWO")}
    # then cell r1 = A[P[r1 - 1]] (P[i] is at cell i + 1, A[j] at a + j); WRITE puts P back
    step = {
        "READ": "r1",
        "ADD": ("READ", "r2"),
        "READ:2": "ADD",
        "WRITE": ("r1", "READ"),
        "WRITE:2": ("r1", "READ:2"),
        "INC": "r1",
        "DEC": "r3",
    }
    phases = [
        jnp.asarray(program_logits(spec, inputs, registers + rest, finish))
        for inputs, registers, finish in (
            (first, ["ONE", "READ", "SUB"], False),  # r1 = 1, r2 = a, r3 = a - 2 = n - 1
            (step, ["INC", "r2", "DEC"], False),
            (step, ["INC", "r2", "DEC"], True),  # r3 = 0: cell n written, finish
        )
    ]

    def policy(bits, carry):
        """r1 = 0: the first timestep; r3 = 0: the last; else an element."""
        z1, z3 = bits[..., 0:1] > 0.5, bits[..., 2:3] > 0.5
        return jnp.where(z1, phases[0], jnp.where(z3, phases[2], phases[1])), carry

    return policy


# %% book/nram_hard_report.md
@checks(spec=Instance(NRAMSpec))
def listk_program(spec: NRAMSpec) -> Callable:
    """A hand-written policy that solves ListK in k + 3 timesteps (Sec. 9 of the chapter): r1 the
    node, r4 the address of its value, r2 the hops left, r3 = 1 once k is read. Needs R >= 4 and
    the modules READ, ONE, TWO, INC, DEC, WRITE; the phase is read from the zero tests."""
    if spec.registers < 4:
        raise ValueError(f"listk_program needs at least 4 registers, got {spec.registers}")
    rest = [f"r{j}" for j in range(5, spec.registers + 1)]
    first = {"READ": "r1", "INC": "READ", "WRITE": ("r1", "READ")}  # WRITE puts cell 0 back
    second = {"READ": "r2", "WRITE": ("r2", "READ")}  # and cell 1
    hop = {"READ": "r1", "INC": "READ", "DEC": "r2", "WRITE": ("r1", "READ")}
    last = {"READ": "r4", "WRITE": ("TWO", "READ")}  # out (cell 2) = the value at r4
    phases = [
        jnp.asarray(program_logits(spec, inputs, registers + rest, finish))
        for inputs, registers, finish in (
            (first, ["READ", "ONE", "r3", "INC"], False),  # r1 = head, r2 = 1, r4 = head + 1
            (second, ["r1", "READ", "ONE", "r4"], False),  # r2 = k, r3 = 1
            (hop, ["READ", "DEC", "r3", "INC"], False),  # r1 = next, r2 - 1, r4 = next + 1
            (last, ["r1", "r2", "r3", "r4"], True),
        )
    ]

    def policy(bits, carry):
        """r1 = 0: the first timestep; r3 = 0: the second; r2 = 0: the last; else a hop."""
        z1, z2, z3 = (bits[..., i : i + 1] > 0.5 for i in range(3))
        return jnp.where(
            z1, phases[0], jnp.where(z3, phases[1], jnp.where(z2, phases[3], phases[2]))
        ), carry

    return policy


# %% book/nram_hard_report.md
HARD_PROGRAMS = {  # task -> phases: (register that selects it when zero, gates, registers, stop)
    "permutation": (  # r1 = a, r2 = i (the cell of P[i]), r3 = a + P[i]
        ("r1", {"READ": "r1"}, ("READ", "ONE", "ZERO", "r4"), False),
        ("r3", {"READ": "r2", "ADD": ("r1", "READ")}, ("r1", "r2", "ADD", "r4"), False),
        (
            "",
            {"READ": "r3", "WRITE": ("r2", "READ"), "INC": "r2"},
            ("r1", "INC", "ZERO", "r4"),
            False,
        ),
    ),
    "listsearch": (  # r1 = node, r2 = node + 1 (0 once its value is read), r3 = v, r4 = value - v
        ("r1", {"READ": "r1", "INC": "READ"}, ("READ", "INC", "r3", "ONE"), False),
        ("r3", {"READ": "r4"}, ("r1", "r2", "READ", "ONE"), False),
        ("r4", {"WRITE": ("TWO", "r1")}, ("r1", "r2", "r3", "r4"), True),
        ("r2", {"READ": "r1", "INC": "READ"}, ("READ", "INC", "r3", "r4"), False),
        (
            "",
            {"READ": "r2", "SUB": ("READ", "r3"), "WRITE": ("TWO", "r1")},
            ("r1", "ZERO", "r3", "SUB"),
            False,
        ),
    ),
    "walkbst": (  # r1 = node, r2 = the path's next cell, r3 = node + step (0: not read), r4 = step
        ("r1", {"READ": "r1"}, ("READ", "TWO", "ZERO", "ONE"), False),
        ("r4", {"READ": "r3", "WRITE": ("ONE", "READ")}, ("r1", "r2", "r3", "r4"), True),
        (
            "r3",
            {"READ": "r2", "ADD": ("r1", "READ"), "INC": "r2"},
            ("r1", "INC", "ADD", "READ"),
            False,
        ),
        ("", {"READ": "r3"}, ("READ", "r2", "ZERO", "r4"), False),
    ),
}
"""Hand-written programs for three hard tasks with the modules once (Sec. 9 of the chapter; ListK's
is listk_program), read by `hard_program`."""


@checks(task=OneOf(*HARD_PROGRAMS), spec=Instance(NRAMSpec))
def hard_program(task: str, spec: NRAMSpec) -> Callable:
    """The policy of HARD_PROGRAMS[task]: the first phase whose register tests zero, else the last.
    Needs R >= 4 (registers past r4 keep their values) and the standard modules; a phase that names
    no WRITE writes 0 into cell 0, which every task reads only at its first timestep."""
    if spec.registers < 4:
        raise ValueError(f"hard_program needs at least 4 registers, got {spec.registers}")
    kept = tuple(f"r{i}" for i in range(5, spec.registers + 1))
    phases = [
        (
            int(when[1:]) - 1 if when else None,
            jnp.asarray(
                program_logits(spec, {"WRITE": ("ZERO", "ZERO"), **gates}, registers + kept, stop)
            ),
        )
        for when, gates, registers, stop in HARD_PROGRAMS[task]
    ]

    def policy(bits, carry):
        logits = phases[-1][1]
        for register, phase in reversed(phases[:-1]):
            logits = jnp.where(bits[..., register : register + 1] > 0.5, phase, logits)
        return logits, carry

    return policy


# %% book/nram_hard_report.md
__all__ = [
    "run_nram_hard",
    "permutation_program",
    "listk_program",
    "HARD_PROGRAMS",
    "hard_program",
]
