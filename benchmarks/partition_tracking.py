"""Tracking log Z against AIS: the compute each needs to know log Z of an RBM to the same accuracy.

    python benchmarks/partition_tracking.py [--steps 20000] [--repeats 5]

Trains the partition chapter's 25-hidden RBM on binarised MNIST by SML-PT (10 temperatures, 20
chains each, eps_0 = 0.01, alpha = 1e3) for `steps` updates with the tracker on, then measures:
- the tracker's error |tracked - exact| log Z at the end (exact: enumerating 2^25 hidden states);
- the tracker's cost: its share of an update (lib.partition.time_sml_pt, best of 5 alternating runs
  of 2,000 updates with and without tracking), times `steps`: the compute spent to have log Z at
  every one of the `steps` updates. The share is a few percent, below the noise of a loaded
  machine: run this on an idle one (a negative cost in the file means the noise won);
- AIS on the final model (100 runs, the base-rate model as start, the schedule of footnote 5 scaled
  to K intermediate distributions) for K from 100 to 30,000: its mean absolute error over `repeats`
  independent estimates and its seconds per estimate (after a compiling run).
Reports the smallest K whose AIS error is at most the tracker's, and the ratio of the times.
Writes results/benchmarks/partition-tracking.json.
"""

from __future__ import annotations

import argparse
import time

from common import Record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--ladder", type=int, nargs="+", default=[100, 300, 1000, 3000, 10_000, 30_000]
    )
    args = parser.parse_args(argv)
    import jax
    import numpy as np
    from flax import nnx

    from lib.data import load_binarized_mnist
    from lib.partition import (
        RBM,
        ais_betas,
        ais_log_z,
        exact_log_z,
        linear_betas,
        log_odds_of_mean,
        time_sml_pt,
        train_sml_pt,
    )

    settings = dict(
        learning_rate=0.01, alpha=1e3, betas=linear_betas(10), n_chains=20, batch_size=20
    )
    record = Record(
        "partition-tracking",
        {
            "n_hidden": 25,
            "steps": args.steps,
            "lr0": 0.01,
            "alpha": 1e3,
            "n_temps": 10,
            "n_chains": 20,
            "ais_runs": 100,
            "ais_ladder": args.ladder,
            "repeats": args.repeats,
        },
        argv,
    )
    data = load_binarized_mnist()
    base = log_odds_of_mean(data.train)
    rbm = RBM(784, 25, rngs=nnx.Rngs(0), visible_bias=base)
    res = train_sml_pt(rbm, data.train, seed=0, steps=args.steps, eval_every=args.steps, **settings)
    exact = exact_log_z(res.model)
    tracked = res.history.evals[-1]["log_z"]
    tracker_error = abs(tracked - exact)
    timing = time_sml_pt(
        RBM(784, 25, rngs=nnx.Rngs(0), visible_bias=base),
        data.train,
        seed=1,
        steps=2000,
        repeats=5,
        **settings,
    )
    tracker_seconds = (timing["train_and_track"] - timing["train"]) * args.steps
    record.add(
        method="tracker",
        exact_log_z=exact,
        estimate=tracked,
        abs_error=tracker_error,
        seconds_per_update_training=timing["train"],
        seconds_per_update_tracking=timing["train_and_track"],
        overhead=timing["overhead"],
        seconds=tracker_seconds,
    )
    for K in args.ladder:
        betas = ais_betas([max(1, round(K * f)) for f in (1 / 21, 10 / 21, 10 / 21)])
        ais_log_z(
            res.model, jax.random.key(10_000), base_bias=base, betas=betas, n_runs=100
        )  # compiles
        errors, seconds = [], []
        for r in range(args.repeats):
            began = time.perf_counter()
            est = ais_log_z(res.model, jax.random.key(r), base_bias=base, betas=betas, n_runs=100)
            seconds.append(time.perf_counter() - began)
            errors.append(abs(est.log_z - exact))
        record.add(
            method="AIS",
            intermediate=int(betas.shape[0] - 1),
            abs_error=float(np.mean(errors)),
            abs_error_max=float(np.max(errors)),
            seconds=float(np.median(seconds)),
        )
    enough = [r for r in record.rows if r["method"] == "AIS" and r["abs_error"] <= tracker_error]
    summary = {
        "tracker_abs_error": tracker_error,
        "tracker_seconds": tracker_seconds,
        "ais_intermediate_needed": enough[0]["intermediate"] if enough else None,
        "ais_seconds_needed": enough[0]["seconds"] if enough else None,
        "ais_over_tracker": enough[0]["seconds"] / tracker_seconds if enough else None,
    }
    print(summary)
    record.write(summary=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
