"""DARN: wall time of the exact log-likelihood of 10,000 test images, summing over 2^16
representations.

    python benchmarks/darn_exact.py [--hidden 16] [--images 10000]

lib.darn.exact_log_prob on a DARN with n_h = 16 stochastic and 100 tanh units (784 visible; the
parameters do not change the cost, so the model is freshly initialised): the decoder's logits for
all 65,536 codes are computed once per chunk and each image's log p(x | h) is one matrix product
with them, then a log-sum-exp over the codes with the prior (DARN chapter, Section 6). Reports the
seconds for all images (after a compiling run on 1,000 of them) and the multiply-adds per second.
Writes results/benchmarks/darn-exact.json.
"""

from __future__ import annotations

import argparse
import time

from common import Record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--images", type=int, default=10_000)
    args = parser.parse_args(argv)
    import jax
    import numpy as np
    from flax import nnx

    from lib.darn import DARN, exact_log_prob

    record = Record(
        "darn-exact",
        {
            "n_visible": 784,
            "n_hidden": args.hidden,
            "n_deterministic": 100,
            "images": args.images,
            "dtype": "float32",
        },
        argv,
    )
    x = (np.random.default_rng(0).random((args.images, 784)) < 0.13).astype(
        np.float32
    )  # MNIST's mean pixel
    model = DARN(784, args.hidden, 100, rngs=nnx.Rngs(0))
    jax.block_until_ready(exact_log_prob(model, x[:1000]))  # compiles for batches of 1,000 images
    began = time.perf_counter()
    logp = jax.block_until_ready(exact_log_prob(model, x))
    seconds = time.perf_counter() - began
    codes = 2**args.hidden
    record.add(
        images=args.images,
        codes=codes,
        seconds=round(seconds, 3),
        seconds_per_image=seconds / args.images,
        multiply_adds_per_second=args.images * codes * 784 / seconds,
        finite=bool(np.isfinite(np.asarray(logp)).all()),
    )
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
