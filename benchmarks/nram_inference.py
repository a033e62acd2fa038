"""NRAM inference: seconds per timestep of the discretised against the fuzzy machine as the tape
grows.

    python benchmarks/nram_inference.py [--sizes 50 100 200 500 1000 2000] [--timesteps 40]

The hand-written Copy circuit of the NRAM chapter (Section 1) runs one example on a tape of M cells
in both machines (time_machines below: the fastest of the calls made in a quarter of a second, at
least 5, after a compiling one). The discretised machine reads and writes one cell per access,
O(1) in M up to the cost of carrying the tape; the fuzzy one reads and writes every cell with a
probability (O(M) per access, and its gates on distributions over {0..M-1} cost O(M log M) to
O(M^2)). Writes results/benchmarks/nram-inference.json; the chapter's Section 7 reads it.
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from common import Record

from lib.nram import make_batch, run_discrete, run_fuzzy, run_output


def time_machines(
    spec,
    policy,
    sizes: Sequence[int] = (50, 100, 500),
    *,
    timesteps: int = 40,
    min_seconds: float = 0.25,
    min_repeats: int = 5,
) -> list[dict]:
    """Seconds per timestep of the discretised and the fuzzy machine running `policy` on Copy, per
    tape size M (Sec. 3.4: the discretised machine's memory access is O(1) in M, the fuzzy one's
    O(M^2)).

    Each machine is called until the calls have taken `min_seconds` and there were at least
    `min_repeats` of them, and the fastest call counts: a call of the discretised machine lasts tens
    of microseconds, so a fixed handful of calls measures the scheduler's noise (a factor of 3 on a
    shared CPU) more than the machine."""
    if not min_seconds >= 0 or int(min_repeats) < 1:
        raise ValueError(
            f"time_machines needs min_seconds >= 0 and min_repeats >= 1, got {min_seconds}, "
            f"{min_repeats}"
        )

    def fastest(fn, args):
        jax.block_until_ready(fn(*args))
        best, spent, calls = float("inf"), 0.0, 0
        while calls < min_repeats or spent < min_seconds:
            began = time.perf_counter()
            jax.block_until_ready(fn(*args))
            took = time.perf_counter() - began
            best, spent, calls = min(best, took), spent + took, calls + 1
        return best

    rows = []
    for M in sizes:
        n = min((M - 1) // 2, timesteps)
        batch = make_batch("copy", [n], M, np.random.default_rng(0))
        memory = jnp.asarray(batch.memory)
        discrete = jax.jit(lambda m: run_discrete(spec, policy, m, timesteps))
        fuzzy = jax.jit(lambda m, y: run_output(run_fuzzy(spec, policy, m, y, timesteps)))
        rows.append(
            {
                "M": M,
                "discrete_seconds_per_step": fastest(discrete, (memory[0],)) / timesteps,
                "fuzzy_seconds_per_step": fastest(fuzzy, (memory, memory)) / timesteps,
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 500, 1000, 2000])
    parser.add_argument("--timesteps", type=int, default=40)
    args = parser.parse_args(argv)
    from lib.nram import NRAMSpec, copy_program

    record = Record(
        "nram-inference",
        {
            "task": "copy",
            "program": "hand-written (copy_program)",
            "registers": 4,
            "sizes": args.sizes,
            "timesteps": args.timesteps,
            "repeats": 5,
        },
        argv,
    )
    spec = NRAMSpec(registers=4)
    for row in time_machines(spec, copy_program(spec), args.sizes, timesteps=args.timesteps):
        record.add(**row, ratio=row["fuzzy_seconds_per_step"] / row["discrete_seconds_per_step"])
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
