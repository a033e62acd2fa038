"""Seconds per gradient step of a deep GP: lib.dgp against GPflux and GPyTorch, same machine, same
run.

    python benchmarks/dgp_step.py [--peers PYTHON] [--rounds 3] [--quick]

The problem of the deep-GP chapter, Section 10: N = 10,000 synthetic points in D = 8 (x standard
normal, y = sin(sum x) + noise), M = 100 inducing points, one sample, Adam; batches of 1,000 and
10,000; SGP (1 layer), DGP 2 and DGP 3; float64 and float32. Each step is compiled or warmed up
once, then the median of `repeats` timed steps is taken. The libraries alternate: `rounds` times,
lib.dgp, then GPflux, then GPyTorch each time all configurations; a configuration's time is the
median over rounds, so a slow spell of the machine hits every library alike. The peers run in
their own environment (`make bench-peers` builds .venv-peers from
benchmarks/peers/requirements.txt); without it only lib.dgp is timed.
Each peer is timed in its own model form and at its best. GPflux's architecture builder is
whitened, with one kernel and one set of inducing inputs per layer, as lib.dgp's default: it is
timed as a plain tf.function and compiled by XLA (jit_compile=True), and the faster of the two is
its time. GPyTorch's deep GP has one kernel and one set of inducing inputs per output: it is
compared with lib.dgp built the same way (per_output_kernels=True, whitened). lib.dgp is also
timed non-whitened (the authors' setting). "ours / best peer" is the larger of lib.dgp over GPflux
and lib.dgp per output over GPyTorch: below 1, lib.dgp is faster than each peer like for like.
The floor of a configuration is its step's floating-point operations (XLA's count of lib.dgp's
compiled step) over the rate of a large matrix product on this machine in that precision (the
best of 5 products of 2048 x 2048 matrices, measured in every round): the time of the step if it
ran at the speed of the machine's best kernel. Writes results/benchmarks/dgp-step.json.
The machine must be otherwise idle: two processes sharing two cores distort every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from common import ROOT, Record


def data(n=10_000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    return x, np.sin(x.sum(1, keepdims=True)) + 0.1 * rng.standard_normal((n, 1))


def configs(quick: bool):
    out = []
    for dtype in ("float64",) if quick else ("float64", "float32"):
        for layers in (1, 2, 3):
            for batch in (1000, 10_000):
                out.append(
                    {
                        "layers": layers,
                        "batch": batch,
                        "dtype": dtype,
                        "repeats": 20 if batch == 1000 else 10,
                    }
                )
    return out


def matmul_rate(dtype: str, n: int = 2048, repeats: int = 5) -> float:
    """Floating-point operations per second of the best of `repeats` (n, n) @ (n, n) products with
    jax."""
    import time

    import jax
    import jax.numpy as jnp

    a = jnp.asarray(np.random.default_rng(0).standard_normal((n, n)), dtype)
    product = jax.jit(lambda u: u @ u)
    jax.block_until_ready(product(a))
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        jax.block_until_ready(product(a))
        best = min(best, time.perf_counter() - began)
    return 2.0 * n**3 / best


def ours(x, y, cfgs, with_flops: bool = False):
    import jax

    jax.config.update("jax_enable_x64", True)
    from lib.dgp import build_dgp, gradient_step_flops, time_gradient_step

    rows = []
    for c in cfgs:
        for whiten, per_output in ((True, False), (False, False), (True, True)):
            xb, yb = x[: c["batch"]].astype(c["dtype"]), y[: c["batch"]].astype(c["dtype"])
            model = build_dgp(xb, yb, c["layers"], whiten=whiten, per_output_kernels=per_output)
            row = dict(c, library="lib.dgp", whiten=whiten, per_output=per_output)
            if with_flops:
                row["flops"] = gradient_step_flops(model, xb, yb)
            row["seconds"] = round(time_gradient_step(model, xb, yb, repeats=c["repeats"]), 5)
            rows.append(row)
            print(json.dumps(rows[-1]), flush=True)
    return rows


def peer(python: str, script: str, path: str, cfgs) -> tuple[list, dict]:
    cfgs = [dict(c, whiten=True) for c in cfgs]
    if script.startswith("gpflux"):  # as a plain tf.function and compiled by XLA
        cfgs = [dict(c, xla=xla) for c in cfgs for xla in (False, True)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
    done = subprocess.run(
        [python, str(ROOT / "benchmarks" / "peers" / script), path, json.dumps(cfgs)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [dict(r, library=out["library"], seconds=round(r["seconds"], 5)) for r in out["results"]]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows, {k: v for k, v in out.items() if k != "results"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_peers = ROOT / ".venv-peers" / "bin" / "python"
    parser.add_argument(
        "--peers",
        default=str(default_peers) if default_peers.exists() else None,
        help="python of an environment with gpflux and gpytorch (default: .venv-peers if built)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds over all libraries"
    )
    parser.add_argument("--quick", action="store_true", help="float64 only, one round")
    parser.add_argument("--out", help="results file (default: results/benchmarks/dgp-step.json)")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    import jax

    jax.config.update("jax_enable_x64", True)  # before the first float64 matrix-product rate

    x, y = data()
    cfgs = configs(args.quick)
    record = Record(
        "dgp-step",
        {
            "N": len(x),
            "D": x.shape[1],
            "M": 100,
            "samples": 1,
            "optimizer": "adam",
            "rounds": rounds,
            "floor_matmul": 2048,
        },
        argv,
    )
    rows, peers, rates = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, x=x, y=y)
        for r in range(rounds):
            rates.append({d: matmul_rate(d) for d in sorted({c["dtype"] for c in cfgs})})
            rows += [dict(row, round=r) for row in ours(x, y, cfgs, with_flops=r == 0)]
            for script in ("gpflux_dgp.py", "gpytorch_dgp.py") if args.peers else ():
                got, meta = peer(args.peers, script, path, cfgs)
                rows += [dict(row, round=r) for row in got]
                peers[meta["library"]] = meta
    if not args.peers:
        print("no peers' environment (make bench-peers): timing lib.dgp only", file=sys.stderr)
    record.rows = rows
    summary = summarise(rows, rates)
    record.write(
        args.out,
        reduced=bool(args.quick),
        peers=peers,
        matmul_flops_per_second=rates,
        summary=summary,
    )
    print(table(summary))


COLUMNS = {  # summary column: (library, whiten, per output, XLA)
    "lib.dgp": ("lib.dgp", True, False, None),
    "lib.dgp plain": ("lib.dgp", False, False, None),
    "lib.dgp per output": ("lib.dgp", True, True, None),
    "gpflux": ("gpflux", True, False, False),
    "gpflux xla": ("gpflux", True, False, True),
    "gpytorch": ("gpytorch", True, True, None),
}
"""The forms each library is timed in; GPyTorch's layers are per output (benchmarks/peers)."""


def summarise(rows, rates) -> list:
    """Per configuration: the median over rounds of each library's seconds in each form (COLUMNS);
    lib.dgp over GPflux at its faster (shared kernels), lib.dgp per output over GPyTorch, and the
    larger of the two ("ours over best peer"); the floor (flops over the median matrix-product
    rate) with lib.dgp's shared, whitened step over it."""
    out = []
    for dtype, batch, layers in sorted({(r["dtype"], r["batch"], r["layers"]) for r in rows}):
        same = [r for r in rows if (r["dtype"], r["batch"], r["layers"]) == (dtype, batch, layers)]
        entry = {"dtype": dtype, "batch": batch, "layers": layers}
        for column, (lib, whiten, per_output, xla) in COLUMNS.items():
            times = [
                r["seconds"]
                for r in same
                if r["library"] == lib
                and r.get("whiten", True) == whiten
                and r.get("per_output", lib == "gpytorch") == per_output
                and (xla is None or r.get("xla", False) == xla)
            ]
            if times:
                entry[column] = float(np.median(times))
        flux = [entry[c] for c in ("gpflux", "gpflux xla") if c in entry]
        if flux:
            entry["ours_over_gpflux"] = entry["lib.dgp"] / min(flux)
        if "gpytorch" in entry and "lib.dgp per output" in entry:
            entry["ours_over_gpytorch"] = entry["lib.dgp per output"] / entry["gpytorch"]
        ratios = [entry[k] for k in ("ours_over_gpflux", "ours_over_gpytorch") if k in entry]
        if ratios:
            entry["ours_over_best_peer"] = max(ratios)
        flops = next(
            r["flops"]
            for r in same
            if r["library"] == "lib.dgp"
            and r["whiten"]
            and not r.get("per_output")
            and "flops" in r
        )
        rate = float(np.median([rate[dtype] for rate in rates]))
        entry.update(
            flops=flops, floor_seconds=flops / rate, ours_over_floor=entry["lib.dgp"] * rate / flops
        )
        out.append(entry)
    return out


def table(summary) -> str:
    """The summary as text: median seconds per library and form, ours over the best peer, the
    floor."""
    lines = [
        f"{'dtype':8s} {'batch':>6s} {'model':6s}"
        + "".join(f"{c:>19s}" for c in COLUMNS)
        + f"{'ours/peer':>10s}{'floor':>9s}{'ours/floor':>11s}"
    ]
    for e in summary:
        model = "SGP" if e["layers"] == 1 else f"DGP {e['layers']}"
        line = f"{e['dtype']:8s} {e['batch']:6d} {model:6s}"
        line += "".join(f"{e[c]:19.4f}" if c in e else f"{'-':>19s}" for c in COLUMNS)
        ratio = f"{e['ours_over_best_peer']:10.2f}" if "ours_over_best_peer" in e else f"{'-':>10s}"
        lines.append(line + ratio + f"{e['floor_seconds']:9.4f}{e['ours_over_floor']:11.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
