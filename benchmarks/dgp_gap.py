"""What lib.dgp's gradient step spends beyond its floor: the products' own rates, the fixed cost of
a step, and the rest.

    python benchmarks/dgp_gap.py [--rounds 5]

The configurations of benchmarks/dgp_step.py at batch 10,000 (N = 10,000 points in D = 8, M = 100,
inner layers of width 8, whitened, one sample, Adam), float64 and float32, SGP, DGP 2 and DGP 3.
For each, in rounds that alternate the configurations (the median over rounds):

- step: the median seconds of a gradient step (`time_gradient_step`), and its floor as
  dgp_step.py defines it (XLA's count of the step's flops over the rate of a 2048 x 2048 product);
- products: the step's matrix products, each timed alone at the shape it has in the step (a chunk
  of rows, mapped over the chunks as the step maps them), summed; their flops over the same rate
  give the products' own floor;
- fixed: the part of a step that does not grow with the batch (the O(M^3) operators, the KL, the
  optimiser, the launch of the step): the intercept of a line through the step's seconds at
  batches of 2,500, 5,000, 7,500 and 10,000;
- rest: step - products - fixed: the elementwise work between the products (the kernel's
  exponentials, the quadratic forms' sums, the sampling, the likelihood) and the loop over chunks.

The products are listed from the algorithm (Section 10 of the deep-GP chapter: per chunk and layer
the cross term of the kernel, alpha = T k(Z, x), the mean, the stacked quadratic form, and in the
backward pass their transposes); their flops are printed beside XLA's count of the whole step.
Writes results/benchmarks/dgp-gap.json. The machine must be otherwise idle.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import Record
from dgp_step import data, matmul_rate


def products(n: int, d_in: int, P: int, M: int, first: bool, last: bool) -> list:
    """The matrix products of one chunk of n rows through one whitened layer and back: (name,
    lhs shape, rhs shape, transpose lhs). The first layer's input needs no gradient."""
    out = [
        ("kernel cross term x Z^T", (n, d_in), (d_in, M), False),
        ("alpha = k(x, Z) T^T", (n, M), (M, M), False),
        ("mean = alpha q_mu", (n, M), (M, P), False),
        ("C = alpha [B_1 ... B_P]", (n, M), (M, P * M), False),
        ("dB = alpha^T G", (n, M), (n, P * M), True),
        ("dq_mu = alpha^T g", (n, M), (n, P), True),
        ("dalpha += g q_mu^T", (n, P), (P, M), False),
        ("dk = dalpha T", (n, M), (M, M), False),
        ("dT = dalpha^T k(x, Z)", (n, M), (n, M), True),
        ("dZ = dsq^T x", (n, M), (n, d_in), True),
    ]
    if not last:  # an inner layer has a mean function x W
        out += [("mean function x W", (n, d_in), (d_in, P), False)]
        out += [("dW = x^T g", (n, d_in), (n, P), True)]
    if not first:  # the gradient reaches the layer's input, the samples of the layer before
        out += [("dx = dsq Z", (n, M), (M, d_in), False)]
        if not last:
            out += [("dx += g W^T", (n, P), (P, d_in), False)]
    return out


def time_products(listing, chunks: int, dtype: str, repeats: int = 20) -> float:
    """Seconds of all the products of `listing`, each mapped over `chunks` chunks in one jitted
    call (as the step's loop runs them), the median of `repeats` calls, summed."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    total = 0.0
    for _, lhs, rhs, transposed in listing:
        a = jnp.asarray(rng.standard_normal((chunks, *lhs)), dtype)
        b = jnp.asarray(rng.standard_normal((chunks, *rhs)), dtype)
        f = jax.jit(
            lambda a, b, t=transposed: jax.lax.map(
                lambda ab: (ab[0].T if t else ab[0]) @ ab[1], (a, b)
            )
        )
        jax.block_until_ready(f(a, b))
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            jax.block_until_ready(f(a, b))
            times.append(time.perf_counter() - began)
        total += float(np.median(times))
    return total


def product_flops(listing, chunks: int) -> float:
    flops = 0.0
    for _, lhs, rhs, transposed in listing:
        m, k = (lhs[1], lhs[0]) if transposed else lhs
        flops += 2.0 * m * k * rhs[-1]
    return chunks * flops


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    from lib.dgp import build_dgp, gradient_step_flops, time_gradient_step

    x0, y0 = data()
    N, D, M, W = len(x0), x0.shape[1], 100, 8
    batches = (2500, 5000, 7500, 10_000)
    record = Record(
        "dgp-gap",
        {"N": N, "D": D, "M": M, "width": W, "rounds": args.rounds, "fixed_batches": batches},
        argv,
    )
    configs = [(dtype, L) for dtype in ("float64", "float32") for L in (1, 2, 3)]
    times = {(c, b): [] for c in configs for b in batches}
    prod_times = {c: [] for c in configs}
    rates = {"float64": [], "float32": []}
    meta = {}
    for c in configs:
        dtype, L = c
        x, y = x0.astype(dtype), y0.astype(dtype)
        model = build_dgp(x, y, L)
        rows = min(layer.rows_per_chunk(x.dtype) for layer in model.layers)
        chunks = -(-N // rows)
        n = -(-N // chunks)
        listing = [
            item
            for layer in range(L)
            for item in products(
                n, D if layer == 0 else W, 1 if layer == L - 1 else W, M, layer == 0, layer == L - 1
            )
        ]
        meta[c] = {
            "rows": n,
            "chunks": chunks,
            "flops": gradient_step_flops(model, x, y),
            "product_flops": product_flops(listing, chunks),
            "listing": listing,
        }
    for r in range(args.rounds):
        for dtype in rates:
            rates[dtype].append(matmul_rate(dtype))
        for c in configs:
            dtype, L = c
            for b in batches:
                x, y = x0[:b].astype(dtype), y0[:b].astype(dtype)
                times[c, b].append(time_gradient_step(build_dgp(x, y, L), x, y, repeats=10))
            prod_times[c].append(time_products(meta[c]["listing"], meta[c]["chunks"], dtype))
            print(
                f"round {r} {c}: step {times[c, N][-1]:.4f} s, products {prod_times[c][-1]:.4f} s"
            )
    for c in configs:
        dtype, L = c
        rate = float(np.median(rates[dtype]))
        med = [float(np.median(times[c, b])) for b in batches]
        slope, fixed = np.polyfit(batches, med, 1)
        step, prods = med[-1], float(np.median(prod_times[c]))
        record.add(
            dtype=dtype,
            layers=L,
            rows_per_chunk=meta[c]["rows"],
            chunks=meta[c]["chunks"],
            step_seconds=step,
            floor_seconds=meta[c]["flops"] / rate,
            product_flops=meta[c]["product_flops"],
            xla_flops=meta[c]["flops"],
            products_seconds=prods,
            products_floor_seconds=meta[c]["product_flops"] / rate,
            fixed_seconds=float(fixed),
            rest_seconds=step - prods - float(fixed),
            seconds_by_batch=dict(zip(map(str, batches), med)),
        )
    record.write(matmul_flops_per_second=rates)


if __name__ == "__main__":
    main()
