"""Seconds per gradient step of a deep GP: lib.dgp against GPflux and GPyTorch, same machine, same run.

    python benchmarks/dgp_step.py [--peers PYTHON] [--quick]

The problem of the deep-GP chapter, Section 10: N = 10,000 synthetic points in D = 8 (x standard
normal, y = sin(sum x) + noise), M = 100 inducing points, one sample, Adam; batches of 1,000 and
10,000; SGP (1 layer), DGP 2 and DGP 3; float64 and float32. Each step is compiled or warmed up
once, then the median of `repeats` timed steps is reported. The peers run in their own
environment (`make bench-peers` builds .venv-peers from benchmarks/peers/requirements.txt);
without it only lib.dgp is timed.
GPflux's architecture builder is whitened only, so the comparison is whitened; lib.dgp is also
timed non-whitened (the authors' setting). Writes results/benchmarks/dgp-step.json.
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
                out.append({"layers": layers, "batch": batch, "dtype": dtype, "repeats": 20 if batch == 1000 else 10})
    return out


def ours(x, y, cfgs):
    import jax

    jax.config.update("jax_enable_x64", True)
    from lib.dgp import build_dgp, time_gradient_step

    rows = []
    for c in cfgs:
        for whiten in (True, False):
            xb, yb = x[: c["batch"]].astype(c["dtype"]), y[: c["batch"]].astype(c["dtype"])
            model = build_dgp(xb, yb, c["layers"], whiten=whiten)
            s = time_gradient_step(model, xb, yb, repeats=c["repeats"])
            rows.append(dict(c, library="lib.dgp", whiten=whiten, seconds=round(s, 5)))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def peer(python: str, script: str, path: str, cfgs) -> tuple[list, dict]:
    cfgs = [dict(c, whiten=True) for c in cfgs]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
    done = subprocess.run([python, str(ROOT / "benchmarks" / "peers" / script), path, json.dumps(cfgs)],
                          capture_output=True, text=True, env=env)
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
    parser.add_argument("--peers", default=str(default_peers) if default_peers.exists() else None,
                        help="python of an environment with gpflux and gpytorch (default: .venv-peers if built)")
    parser.add_argument("--quick", action="store_true", help="float64 only")
    parser.add_argument("--out", help="results file (default: results/benchmarks/dgp-step.json)")
    args = parser.parse_args(argv)

    x, y = data()
    cfgs = configs(args.quick)
    record = Record("dgp-step", {"N": len(x), "D": x.shape[1], "M": 100, "samples": 1, "optimizer": "adam"}, argv)
    rows, peers = ours(x, y, cfgs), {}
    if args.peers:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "data.npz")
            np.savez(path, x=x, y=y)
            for script in ("gpflux_dgp.py", "gpytorch_dgp.py"):
                r, meta = peer(args.peers, script, path, cfgs)
                rows += r
                peers[meta["library"]] = meta
    else:
        print("no peers' environment (make bench-peers): timing lib.dgp only", file=sys.stderr)
    record.rows = rows
    print(table(rows))
    record.write(args.out, reduced=bool(args.quick), peers=peers)


def table(rows) -> str:
    keys = sorted({(r["dtype"], r["batch"], r["layers"]) for r in rows})
    libs = [("lib.dgp", True), ("lib.dgp", False), ("gpflux", True), ("gpytorch", True)]
    head = f"{'dtype':8s} {'batch':>6s} {'model':6s}" + "".join(
        f"{lib + ('' if w else ' (plain)'):>18s}" for lib, w in libs)
    lines = [head]
    for dtype, batch, layers in keys:
        line = f"{dtype:8s} {batch:6d} {'SGP' if layers == 1 else f'DGP {layers}':6s}"
        for lib, w in libs:
            hit = [r["seconds"] for r in rows if r["library"] == lib and r.get("whiten", True) == w
                   and (r["dtype"], r["batch"], r["layers"]) == (dtype, batch, layers)]
            line += f"{hit[0]:18.4f}" if hit else f"{'-':>18s}"
        lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
