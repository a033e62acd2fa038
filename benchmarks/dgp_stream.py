"""A DGP 2 trained on 10 million points streamed from a memory-mapped file: throughput and memory.

    python benchmarks/dgp_stream.py [--points 10000000] [--steps 300] [--batch 10000] [--folder DIR]

Writes a synthetic regression set to DIR in chunks (default: a temporary folder, removed at the
end): x standard normal in D = 8 (float64, 640 MB for 10 million points), y = sin(sum x) + 0.1
noise. Builds DGP 2 (M = 100 inducing points, inner width 8) from the first 10,000 points (k-means,
PCA) with the bound scaled to all N points, then trains `steps` Adam steps on minibatches of `batch`
rows that `minibatches(..., stream=True)` reads from the file (lib.dgp.train_dgp(..., stream=True)),
and writes results/benchmarks/dgp-stream.<points>.json: points per second and seconds per step (the
time of a run of `steps` steps minus that of a run of 20: both compile and warm up the same way),
the peak of the process's anonymous resident memory (what it holds itself; the pages of the mapped
file are the kernel's page cache, which it can drop) and of its whole resident set. What grows
with N in memory is the epoch's permutation of the row indices (4 bytes per point, drawn in
place); the rows themselves are read batch by batch.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from common import RESULTS, Record


def status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (Linux), 0 elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakMemory:
    """Samples the anonymous and total resident memory every 20 ms in a thread; keeps the peaks
    (MB)."""

    def __init__(self):
        self.anon = self.rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.anon = max(self.anon, status_kb("RssAnon"))
            self.rss = max(self.rss, status_kb("VmRSS"))
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def megabytes(self) -> dict:
        return {
            "peak_anonymous_mb": round(self.anon / 1024, 1),
            "peak_resident_mb": round(self.rss / 1024, 1),
        }


def write_dataset(folder: Path, n: int, d: int = 8, chunk: int = 1_000_000, seed: int = 0):
    """x (n, d) and y (n, 1) as .npy files in `folder`, written chunk by chunk; returns read-only
    memmaps."""
    rng = np.random.default_rng(seed)
    x = np.lib.format.open_memmap(folder / "x.npy", mode="w+", dtype=np.float64, shape=(n, d))
    y = np.lib.format.open_memmap(folder / "y.npy", mode="w+", dtype=np.float64, shape=(n, 1))
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        xs = rng.standard_normal((stop - start, d))
        x[start:stop] = xs
        y[start:stop] = np.sin(xs.sum(1, keepdims=True)) + 0.1 * rng.standard_normal(
            (stop - start, 1)
        )
    x.flush()
    y.flush()
    del x, y
    return np.load(folder / "x.npy", mmap_mode="r"), np.load(folder / "y.npy", mmap_mode="r")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--folder", help="where to write the dataset (default: a temporary folder)")
    parser.add_argument(
        "--out", help="results file (default: results/benchmarks/dgp-stream.<points>.json)"
    )
    args = parser.parse_args(argv)
    warmup = 20
    if args.steps <= warmup:
        parser.error(f"--steps must exceed the {warmup} warm-up steps")

    import jax

    jax.config.update("jax_enable_x64", True)
    from lib.dgp import build_dgp, train_dgp

    record = Record(
        "dgp-stream",
        {
            "points": args.points,
            "D": 8,
            "layers": 2,
            "inducing": 100,
            "whiten": False,
            "batch": args.batch,
            "steps": args.steps,
            "warmup_steps": warmup,
            "dtype": "float64",
            "storage": "np.memmap (.npy)",
        },
        argv,
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.folder or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        x, y = write_dataset(folder, args.points)
        write_seconds = time.perf_counter() - t0
        file_mb = sum(f.stat().st_size for f in (folder / "x.npy", folder / "y.npy")) / 2**20

        def train(steps):
            """A fresh model trained `steps` steps; (model, history, seconds including
            compilation)."""
            model = build_dgp(
                np.asarray(x[:10_000]), np.asarray(y[:10_000]), 2, num_inducing=100, whiten=False
            )
            model.num_data = args.points  # the bound of all N points, estimated from each minibatch
            t = time.perf_counter()
            model, history = train_dgp(
                model, x, y, steps=steps, batch_size=args.batch, stream=True, progress=False
            )
            return model, history, time.perf_counter() - t

        before_mb = round(
            status_kb("RssAnon") / 1024, 1
        )  # the interpreter, jax and the dataset writer's leftovers
        with PeakMemory() as memory:
            _, _, short = train(warmup)
            _, history, full = train(args.steps)
        timed = (
            full - short
        )  # the same compilation and warm-up in both: the difference is steps - warmup steps
    steps = args.steps - warmup
    record.add(
        points=args.points,
        file_mb=round(file_mb, 1),
        write_seconds=round(write_seconds, 1),
        seconds_per_step=round(timed / steps, 4),
        points_per_second=round(steps * args.batch / timed),
        anonymous_mb_before_training=before_mb,
        **memory.megabytes(),
        final_loss=float(np.mean(history["loss"][-20:])),
    )
    record.write(args.out or RESULTS / f"dgp-stream.{args.points}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
