"""NRAM inference: seconds per timestep of the discretised against the fuzzy machine as the tape
grows.

    python benchmarks/nram_inference.py [--sizes 50 100 200 500 1000 2000] [--timesteps 40]

The hand-written Copy circuit of the NRAM chapter (Section 3) runs one example on a tape of M cells
in both machines (lib.nram.time_machines: the best of 5 timed runs after a compiling one). The
discretised machine reads and writes one cell per access, O(1) in M up to the cost of carrying
the tape; the fuzzy one reads and writes every cell with a probability (O(M) per access, and its
gates on distributions over {0..M-1} cost O(M log M) to O(M^2)). Writes
results/benchmarks/nram-inference.json.
"""

from __future__ import annotations

import argparse

from common import Record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 500, 1000, 2000])
    parser.add_argument("--timesteps", type=int, default=40)
    args = parser.parse_args(argv)
    from lib.nram import NRAMSpec, copy_program, time_machines

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
