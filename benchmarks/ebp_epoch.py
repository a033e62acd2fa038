"""EBP against BP: seconds per training epoch on one text task of the EBP chapter.

    python benchmarks/ebp_epoch.py [--task reuters_I654_I65] [--hidden 120]

One epoch of online training (minibatches of 10, the inputs sparse) of M -> hidden -> 1 by Real
and Binary EBP (lib.ebp.train_ebp) and by BP with cross-entropy (lib.ebp.train_bp, SGD), on the
whole task (the chapter trains on 7/8 of it per fold). Each method is timed as the difference of
a 3-epoch and a 1-epoch run (both compile and evaluate the same way), the median of 3 such
differences over 2. Writes results/benchmarks/ebp-epoch.json.
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial
import time

from common import Record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="reuters_I654_I65")
    parser.add_argument("--hidden", type=int, default=120)
    args = parser.parse_args(argv)
    import jax
    import numpy as np

    from lib.data import load_ebp
    from lib.ebp import check_inputs, init_ebp, train_bp, train_ebp

    data = load_ebp(args.task)
    x, y = check_inputs(data.x), np.asarray(data.y)
    sizes = [x.shape[1], args.hidden, 1]
    record = Record(
        "ebp-epoch",
        {
            "task": args.task,
            "examples": int(x.shape[0]),
            "features": int(x.shape[1]),
            "sizes": sizes,
            "batch_size": 10,
            "repeats": 3,
        },
        argv,
    )
    methods = {
        "Real EBP": (train_ebp, "real"),
        "Binary EBP": (train_ebp, "binary"),
        "BP (cross-entropy, SGD)": (partial(train_bp, learning_rate=0.1, loss="ce"), "real"),
    }

    def run(train, kind, epochs):
        began = time.perf_counter()
        net, _ = train(
            init_ebp(jax.random.key(0), sizes, kind=kind),
            x,
            y,
            seed=jax.random.key(1),
            epochs=epochs,
            batch_size=10,
        )
        jax.block_until_ready(net)
        return time.perf_counter() - began

    for name, (train, kind) in methods.items():
        per_epoch = statistics.median(
            (run(train, kind, 3) - run(train, kind, 1)) / 2 for _ in range(3)
        )
        record.add(
            method=name,
            seconds_per_epoch=round(per_epoch, 4),
            updates_per_second=round((x.shape[0] // 10) / per_epoch, 1),
        )
    bp = record.rows[-1]["seconds_per_epoch"]
    for row in record.rows:
        row["ratio_to_bp"] = round(row["seconds_per_epoch"] / bp, 3)
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
