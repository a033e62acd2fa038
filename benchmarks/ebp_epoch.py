"""EBP against BP: seconds per training epoch on one text task of the EBP chapter.

    python benchmarks/ebp_epoch.py [--task reuters_I654_I65] [--hidden 120]

One epoch of online training (minibatches of 10; Reuters' inputs are dense) of M -> hidden -> 1
by Real and Binary EBP (lib.ebp.train_ebp) and by BP with cross-entropy (lib.ebp.train_bp, SGD),
on the whole task (the chapter trains on 7/8 of it per fold). Each method is timed as the
difference of a 3-epoch and a 1-epoch run over 2 (both compiled beforehand), in --rounds rounds
that alternate the methods, so that a slow spell of the machine falls on all of them; the median
over rounds. A last row times what Binary EBP computes that Real EBP does not, the
mean tanh(h) of every first-layer weight at every minibatch, alone: one epoch's worth of it (as
many passes as updates, in one lax.scan); and another the product it adds for the variance of
the pre-activation, x^2 @ tanh(h)^2, with the square of its right side, alike.
Writes results/benchmarks/ebp-epoch.json.
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
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp
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
            "rounds": args.rounds,
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
            progress=False,
        )
        jax.block_until_ready(net)
        return time.perf_counter() - began

    for train, kind in methods.values():  # compile
        run(train, kind, 1)
    times = {name: [] for name in methods}
    for _ in range(args.rounds):
        for name, (train, kind) in methods.items():
            times[name].append((run(train, kind, 3) - run(train, kind, 1)) / 2)
    for name in methods:
        per_epoch = statistics.median(times[name])
        record.add(
            method=name,
            seconds_per_epoch=round(per_epoch, 4),
            updates_per_second=round((x.shape[0] // 10) / per_epoch, 1),
        )
    updates = x.shape[0] // 10
    field = init_ebp(jax.random.key(0), sizes, kind="binary").fields[0]

    def alone(method: str, passes) -> None:
        """A row for `passes` (jitted, one epoch's worth of passes over the first layer's field):
        the median of 5 timed calls after a compiling one."""
        jax.block_until_ready(passes(field))

        def epoch():
            began = time.perf_counter()
            jax.block_until_ready(passes(field))
            return time.perf_counter() - began

        per_epoch = statistics.median(epoch() for _ in range(5))
        record.add(
            method=method,
            seconds_per_epoch=round(per_epoch, 4),
            updates_per_second=round(updates / per_epoch, 1),
        )

    alone(
        "tanh of the first layer (within Binary EBP)",
        jax.jit(
            lambda h: jax.lax.scan(
                lambda c, _: (c + 1e-9 * jnp.tanh(h + c), None), h, None, updates
            )[0]
        ),
    )
    # the product Binary EBP adds for the variance, x^2 @ tanh(h)^2, with the square of its right
    # side (which depends on the carry, so that it is formed at every pass as in training)
    xs = jnp.asarray(x[: updates * 10].reshape(updates, 10, -1))
    alone(
        "second product of the first layer (within Binary EBP)",
        jax.jit(
            lambda h: jax.lax.scan(
                lambda c, xb: (c + 1e-9 * jnp.sum((xb**2) @ (c**2)), None), h, xs
            )[0]
        ),
    )
    bp = next(r for r in record.rows if r["method"].startswith("BP"))["seconds_per_epoch"]
    for row in record.rows:
        row["ratio_to_bp"] = round(row["seconds_per_epoch"] / bp, 3)
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
