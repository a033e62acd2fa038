#!/usr/bin/env python3
"""Run the chapters as a reader outside the checkout does (Colab's "Run all"), under nbval.

    python tools/outside.py [pytest options...]

1. builds the library's wheel (lib, and the committed results/ as lib/_results);
2. makes a new virtual environment in a temporary folder, outside the checkout, with that wheel
   installed (not editable) and the other packages of this environment visible (jax, flax,
   pytest, nbval...: a `.pth` path, which does not activate this environment's editable `lib`);
3. copies book/*.ipynb, and nothing else, into an empty folder of that temporary folder;
4. runs pytest's nbval over the copies with the new environment's Python, whose kernel imports
   `lib` from the wheel: no checkout above it, the results from the package.

This is the book's one nbval run (`make test`'s nbval stage): every chapter executes once per
run, outside the checkout. The options after the script's name go to pytest (e.g. -n 2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chapters import ROOT, chapter_sources  # noqa: E402

# The order in which the two nbval workers take the chapters, from the seconds of their cells in
# the last runs of `make test` (its log's --durations). With `--dist loadscope
# --no-loadscope-reorder` (the Makefile's NBVAL) pytest-xdist hands each free worker the next
# notebook in this order. The two longest (darn and nram, about 350 s each, November 2026) run one
# after the other on one worker while the other takes partition, dgp and ebp (about 255, 255 and
# 160 s), the short ones filling in at the end: about 740 s each, where longest first (nram, darn,
# dgp, partition, ebp) left one worker running ebp alone for the last minute.
NBVAL_ORDER = (
    *("darn", "partition", "dgp", "nram", "ebp"),
    *("performance", "toolkit", "record", "data", "reproduces"),
    *("nram_report", "nram_hard_report"),
    *("ebp_report", "darn_report", "partition_report", "dgp_report"),
)


def nbval_order(notebooks: list[Path]) -> list[Path]:
    """`notebooks` in NBVAL_ORDER, the chapters it does not name after them by name."""
    rank = {name: i for i, name in enumerate(NBVAL_ORDER)}
    return sorted(notebooks, key=lambda p: (rank.get(p.stem, len(rank)), p.name))


def build_wheel(dest: Path) -> Path:
    """The wheel of this checkout (lib, and results/ as lib/_results), built into `dest`."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(dest), str(ROOT)],
        check=True,
    )
    return next(dest.glob("rederived-*.whl"))


def make_environment(work: Path) -> Path:
    """A venv in `work` with the wheel of this checkout; returns its python."""
    wheel = build_wheel(work / "dist")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site)]
        + [str(wheel)],
        check=True,
    )
    # this environment's packages, after the wheel's lib on the path (a path in a .pth file is
    # added as it is: the .pth files inside it, such as the editable install's, are not run)
    (site / "zz_shared_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def main(argv: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="rederived-outside-"))
    try:
        python = make_environment(work)
        book = work / "book"
        book.mkdir()
        for md in chapter_sources():
            shutil.copy2(md.with_suffix(".ipynb"), book)
        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import lib.record as R; print(R.project_root(), R.results_root())",
            ],
            cwd=book,
            capture_output=True,
            text=True,
        )
        root, results = (probe.stdout.split() + ["?", "?"])[:2]
        if probe.returncode != 0 or root != "None" or "_results" not in results:
            print(
                f"outside: the new environment does not see lib as installed outside the "
                f"checkout (project_root {root}, results {results})\n{probe.stderr}",
                file=sys.stderr,
            )
            return 1
        print(f"outside: lib from the wheel, results from {results}; notebooks in {book}")
        env = dict(os.environ, LIB_PROGRESS="0", TQDM_DISABLE="1")
        env.pop("PYTHONPATH", None)
        command = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(work)]
        command += ["--nbval-lax", "--nbval-sanitize-with", str(ROOT / "tests/nbval_sanitize.cfg")]
        command += argv + [str(p) for p in nbval_order(list(book.glob("*.ipynb")))]
        return subprocess.call(command, cwd=work, env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
