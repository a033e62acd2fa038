"""Training across processes with JAX's own runtime (jax.distributed, Appendix B, "Many devices"):
two CPU processes on this machine, joined by gloo, train the DGP (streaming path) and DARN; their
loss of every step is that of one process, and a checkpoint written by the two resumes in one."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("distributed_worker.py")
ROOT = WORKER.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(model: str, processes: int, steps: int, out: Path, checkpoint_dir=None) -> np.ndarray:
    """The loss of each step, trained by `processes` processes of one CPU device each."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env |= {"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    port = str(_free_port())
    args = [model, None, str(processes), port, str(steps), str(out)]
    args += [str(checkpoint_dir)] if checkpoint_dir else []
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), *[str(i) if a is None else a for a in args]],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(processes)
    ]
    for w in workers:
        said, _ = w.communicate(timeout=300)
        assert w.returncode == 0, said[-3000:]
    return np.load(out)


@pytest.mark.slow
@pytest.mark.network  # the processes meet on a loopback port
@pytest.mark.parametrize("model", ["dgp", "darn"])
def test_two_processes_train_as_one_and_their_checkpoint_resumes_in_one(model, tmp_path):
    one = _run(model, 1, 8, tmp_path / "one.npy")
    two = _run(model, 2, 8, tmp_path / "two.npy", tmp_path / "ckpt")
    np.testing.assert_allclose(two, one, rtol=2e-5, atol=2e-6)
    # the two processes' checkpoint (steps 3, 6, 8) resumes to 11 steps in one process, and in two
    shutil.copytree(tmp_path / "ckpt", tmp_path / "ckpt2")
    straight = _run(model, 1, 11, tmp_path / "straight.npy")
    for processes, folder in ((1, "ckpt"), (2, "ckpt2")):
        resumed = _run(
            model, processes, 11, tmp_path / f"resumed{processes}.npy", tmp_path / folder
        )
        np.testing.assert_allclose(resumed, straight, rtol=2e-5, atol=2e-6)  # its history too
