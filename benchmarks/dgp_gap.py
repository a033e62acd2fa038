"""What a deep-GP gradient step spends beyond its floor, measured on one core and on two.

    python benchmarks/dgp_gap.py [--rounds 5] [--dtype float64] [--batch 10000]

The problem and the models of benchmarks/dgp_step.py (SGP, DGP 2, DGP 3; lib.dgp's default form:
one kernel per layer, whitened), at one precision and one batch. Each round times, on the machine's
cores and then in a child process held to one core (its affinity set to core 0, XLA's Eigen
products and its thread pool single-threaded):
- step: one gradient step (lib.dgp.time_gradient_step, the median of `repeats` steps);
- fixed: the same step on 100 rows, which go through the layers in one piece: the work that does
  not grow with the batch (the M x M Cholesky factorisations, their inverses and gradients, the
  KL, Adam's update, the call);
- rate: the best of 5 products of 2048 x 2048 matrices, as benchmarks/dgp_step.py measures it.
The floor is the step's floating-point operations (XLA's count, as in dgp_step.py) over the rate.
On one core the operations run one after another, so the step's time over its floor there is what
the step's work costs beyond the large product's speed: small products and the elementwise work
between them (the kernel's exponentials, the quadratic forms' sums, the likelihood, their
gradients). The rest of the gap is parallel: the large product runs r = rate(all cores) /
rate(one core) times faster on all the cores, the step s = step(one core) / step(all cores) times,
and

    step / floor (all cores) = [step / floor (one core)] x r / s,

an identity, each factor measured. Medians over rounds, which alternate the models.
Writes results/benchmarks/dgp-gap.json. The machine must be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from common import Record

ONE_CORE_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def measure(dtype: str, batch: int, repeats: int) -> list[dict]:
    """One round in this process: the rate, then each model's step and fixed part (seconds)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from dgp_step import data, matmul_rate

    from lib.dgp import build_dgp, time_gradient_step

    x, y = data()
    x, y = x[:batch].astype(dtype), y[:batch].astype(dtype)
    rate = matmul_rate(dtype)
    rows = []
    for layers in (1, 2, 3):
        times = {
            name: time_gradient_step(
                build_dgp(x[:n], y[:n], layers, whiten=True), x[:n], y[:n], repeats=repeats
            )
            for name, n in (("step", batch), ("fixed", 100))
        }
        rows.append({"layers": layers, "rate": rate, **times})
    return rows


def one_core(args) -> list[dict]:
    """measure() in a child process held to core 0, with XLA single-threaded."""
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + ONE_CORE_XLA))
    command = [sys.executable, __file__, "--child", "--dtype", args.dtype]
    command += ["--batch", str(args.batch), "--repeats", str(args.repeats)]
    done = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {0}),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the one-core run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", help="results file (default: results/benchmarks/dgp-gap.json)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # one round, printed for the parent
        print(json.dumps(measure(args.dtype, args.batch, args.repeats)))
        return 0
    import jax

    jax.config.update("jax_enable_x64", True)
    from dgp_step import data

    from lib.dgp import build_dgp, gradient_step_flops

    config = {k: getattr(args, k) for k in ("dtype", "batch", "repeats", "rounds")}
    record = Record("dgp-gap", dict(config, N=10_000, D=8, M=100, samples=1), argv)
    x, y = data()
    x, y = x[: args.batch].astype(args.dtype), y[: args.batch].astype(args.dtype)
    flops = {L: gradient_step_flops(build_dgp(x, y, L, whiten=True), x, y) for L in (1, 2, 3)}
    for r in range(args.rounds):
        for cores, rows in (
            ("all", measure(args.dtype, args.batch, args.repeats)),
            ("one", one_core(args)),
        ):
            for row in rows:
                record.add(round=r, cores=cores, **row)
    summary = []
    for L in (1, 2, 3):
        med = {
            (cores, k): statistics.median(
                row[k] for row in record.rows if (row["layers"], row["cores"]) == (L, cores)
            )
            for cores in ("all", "one")
            for k in ("step", "fixed", "rate")
        }
        floor = {cores: flops[L] / med[cores, "rate"] for cores in ("all", "one")}
        s = {
            "layers": L,
            "flops": flops[L],
            **{f"{k}_{cores}_cores": v for (cores, k), v in med.items()},
            "floor_all_cores": floor["all"],
            "floor_one_core": floor["one"],
            "ours_over_floor": med["all", "step"] / floor["all"],
            "one_core_over_floor": med["one", "step"] / floor["one"],
            "matmul_speedup": med["all", "rate"] / med["one", "rate"],
            "step_speedup": med["one", "step"] / med["all", "step"],
            "fixed_share": med["all", "fixed"] / med["all", "step"],
        }
        s["parallel_factor"] = s["matmul_speedup"] / s["step_speedup"]
        summary.append(s)
        print(
            f"{'SGP' if L == 1 else f'DGP {L}'}: ours/floor {s['ours_over_floor']:.2f} = one core "
            f"{s['one_core_over_floor']:.2f} x parallel {s['parallel_factor']:.2f} (products "
            f"{s['matmul_speedup']:.2f}x faster on all cores, the step {s['step_speedup']:.2f}x); "
            f"fixed part {s['fixed_share']:.0%} of the step"
        )
    record.write(args.out, summary=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
