"""NRAM training throughput: paper-length runs per hour, one seed at a time against several seeds
side by side.

    python benchmarks/nram_train.py [--tasks access ... swap] [--seeds 1 4 8 16] [--steps 150]

For each task at its paper configuration (lib.nram_report.NRAM_CONFIGS: memory, timesteps, batch,
controller), trains `k` seeds side by side (lib.nram.train_nram_seeds; k = 1 is one run on its
own, lib.nram.train_nram) for `steps` steps, twice: the first run compiles the training step, the
second, timed, reuses it (train_nram caches its compiled step) and includes everything a training
run does on the host (drawing the batches, the curriculum, keeping the best controller). From the
timed run: seconds per step of the k runs together, and the paper-length runs (the steps of
`python -m lib nram --preset paper`, 20,000) that this rate trains per hour. The search and the
hard tasks of the NRAM chapter train the seeds of a setting side by side; this is what that buys.
Writes results/benchmarks/nram-train.json. The machine must be otherwise idle.
"""

from __future__ import annotations

import argparse
import dataclasses

from common import Record


def main(argv=None) -> int:
    from lib.nram import EASY_TASKS, train_nram, train_nram_seeds
    from lib.nram_report import NRAM_CONFIGS
    from lib.record import EXPERIMENTS

    paper_steps = EXPERIMENTS["nram"].presets["paper"]["steps"]  # a run of `python -m lib nram`

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(EASY_TASKS), choices=list(EASY_TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=150, help="timed steps (whole chunks)")
    args = parser.parse_args(argv)
    if min(args.seeds) < 1 or args.steps < 1:
        parser.error("--seeds and --steps must be positive")
    record = Record(
        "nram-train", {"tasks": args.tasks, "seeds": args.seeds, "steps": args.steps}, argv
    )
    for task in args.tasks:
        paper = NRAM_CONFIGS[task]
        config = dataclasses.replace(paper, steps=-(-args.steps // paper.chunk) * paper.chunk)
        for k in args.seeds:
            for _ in range(2):  # the first compiles the step, the second is timed
                if k == 1:
                    results = [train_nram(config, progress=False)]
                else:
                    results = train_nram_seeds(config, list(range(k)), progress=False)
            seconds = results[0].wall_seconds / config.steps
            record.add(
                task=task,
                seeds=k,
                steps=config.steps,
                seconds_per_step=round(seconds, 6),
                paper_steps=paper_steps,
                runs_per_hour=round(3600 * k / (seconds * paper_steps), 3),
            )
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
