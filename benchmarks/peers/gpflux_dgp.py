"""Seconds per gradient step of GPflux's deep GP (run by benchmarks/dgp_step.py in the peers' venv).

Usage: python gpflux_dgp.py DATA.npz CONFIGS_JSON  -> prints one JSON list of results on the last
line. Each config: {"layers": L, "batch": B, "dtype": "float64" | "float32", "whiten": bool,
"xla": bool}. The model is GPflux's own constant-input-dimension deep GP (shared RBF kernel and
inducing inputs per layer, M = 100, inner q_sqrt factor 1e-5, likelihood variance 0.05), one
sample, Adam, under tf.function, compiled by XLA (`jit_compile=True`) when "xla" is true.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import gpflow  # noqa: E402
import gpflux  # noqa: E402
import gpflux.architectures  # noqa: E402


def step_seconds(x, y, layers, batch, dtype, whiten, xla, repeats):
    gpflow.config.set_default_float(dtype)
    x, y = x[:batch].astype(dtype), y[:batch].astype(dtype)
    config = gpflux.architectures.Config(
        num_inducing=100,
        inner_layer_qsqrt_factor=1e-5,
        likelihood_noise_variance=0.05,
        whiten=whiten,
    )
    dgp = gpflux.architectures.build_constant_input_dim_deep_gp(x, num_layers=layers, config=config)
    opt = tf.optimizers.Adam(0.01)
    data = (tf.constant(x), tf.constant(y))
    variables = dgp.f_layers.trainable_variables + dgp.likelihood_layer.trainable_variables

    @tf.function(jit_compile=xla)
    def step():
        with tf.GradientTape() as tape:
            loss = -dgp.elbo(data)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    step()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        step().numpy()
        times.append(time.perf_counter() - began)
    return float(np.median(times))


def main():
    data = np.load(sys.argv[1])
    configs = json.loads(sys.argv[2])
    out = []
    for c in configs:
        s = step_seconds(
            data["x"],
            data["y"],
            c["layers"],
            c["batch"],
            getattr(np, c["dtype"]),
            c["whiten"],
            bool(c.get("xla", False)),
            c.get("repeats", 10),
        )
        out.append(dict(c, seconds=s))
    print(
        json.dumps(
            {
                "library": "gpflux",
                "version": gpflux.__version__,
                "tensorflow": tf.__version__,
                "results": out,
            }
        )
    )


if __name__ == "__main__":
    main()
