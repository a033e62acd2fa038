"""One process of a data-parallel training run across processes (tests/test_distributed.py).

python tests/distributed_worker.py MODEL PROCESS_ID NUM_PROCESSES PORT STEPS OUT [CHECKPOINT_DIR]

MODEL: "dgp" (a 2-layer DGP, the streaming path: each process reads only its rows of each
minibatch from the memory-mapped data) or "darn". With NUM_PROCESSES > 1 the processes join with
jax.distributed (CPU collectives by gloo) and the toolkit's mesh spans them; process 0 writes the
loss of every step to OUT (.npy).
"""

import sys
from pathlib import Path

import jax

model_name, process_id, num_processes, port, steps, out = sys.argv[1:7]
checkpoint_dir = sys.argv[7] if len(sys.argv) > 7 else None
process_id, num_processes, steps = int(process_id), int(num_processes), int(steps)
if num_processes > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
    )

import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

rng = np.random.default_rng(0)
if model_name == "dgp":
    from lib.dgp import build_dgp, train_dgp

    x = rng.uniform(-2, 2, size=(96, 2)).astype(np.float32)
    y = (np.sin(2 * x[:, :1]) + 0.1 * rng.normal(size=(96, 1))).astype(np.float32)
    folder = Path(out).parent / f"data-{process_id}"
    folder.mkdir(exist_ok=True)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    x_disk, y_disk = (np.load(folder / f"{n}.npy", mmap_mode="r") for n in "xy")
    model = build_dgp(x, y, 2, num_inducing=8)
    model, history = train_dgp(
        model,
        x_disk,
        y_disk,
        steps=steps,
        batch_size=32,
        seed=0,
        stream=True,
        progress=False,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=3,
        log_every=1,
    )
else:
    from lib.darn import DARN, train_darn

    bits = (rng.random((128, 12)) < 0.3).astype(np.float32)
    model = DARN(12, 4, 8, rngs=nnx.Rngs(0))
    model, history = train_darn(
        model,
        bits,
        steps=steps,
        batch_size=32,
        learning_rate=0.01,
        seed=0,
        progress=False,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=3,
        log_every=1,
    )
assert jax.process_count() == num_processes and jax.device_count() == num_processes
if process_id == 0:
    np.save(out, np.asarray(history["loss"]))
if num_processes > 1:
    jax.distributed.shutdown()
