#!/usr/bin/env python3
"""Execute chapters and store their outputs in `book/<name>.ipynb`, deterministically.

    python tools/execute.py data toolkit     run these chapters
    python tools/execute.py --all            run every chapter

The inputs come from the MyST source `book/<name>.md`; the result is written to its twin
`book/<name>.ipynb` with stable metadata (no timestamps, no interpreter version, fixed cell ids),
so re-running an unchanged chapter whose computations are seeded leaves git clean. Progress reports
are switched off while executing (TQDM_DISABLE=1, LIB_PROGRESS=0): their rates would differ on
every run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chapters import ROOT, chapter_sources, read_md, rel  # noqa: E402

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# Colab opens the notebook on a GPU runtime; elsewhere these keys are ignored.
NOTEBOOK_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": KERNELSPEC,
    "language_info": {"name": "python"},
}


KEPT_METADATA = ("tags", "mystnb")


def normalise(nb) -> None:
    """Make a notebook's bytes a function of its inputs and outputs only."""
    nb.metadata = nbformat.from_dict(NOTEBOOK_METADATA)
    nb.nbformat, nb.nbformat_minor = 4, 5
    count = 0
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"
        # kept: the tags (hide-input, remove-cell...) and myst-nb's options (a figure's caption
        # and name), which the book renders from the notebook
        kept = {k: cell.get("metadata", {}).get(k) for k in KEPT_METADATA}
        cell.metadata = nbformat.from_dict({k: v for k, v in kept.items() if v})
        if cell.cell_type == "code":
            if cell.get("outputs") is not None and cell.get("execution_count") is not None:
                count += 1
                cell.execution_count = count
                for out in cell.outputs:
                    if "execution_count" in out:
                        out.execution_count = count
            else:
                cell.execution_count = None
            merged = []
            for out in cell.get("outputs", []):
                # a stream is split wherever the kernel happened to flush: join the pieces
                if (
                    out.get("output_type") == "stream"
                    and merged
                    and merged[-1].get("output_type") == "stream"
                    and merged[-1].name == out.name
                ):
                    merged[-1].text += out.text
                    continue
                merged.append(out)
            if "outputs" in cell:
                cell.outputs = merged
            for out in cell.get("outputs", []):
                if out.get("output_type") in ("display_data", "execute_result"):
                    out.metadata = nbformat.from_dict(out.get("metadata", {}))


def cell_seconds(nb) -> list[tuple[float, int, str]]:
    """(seconds, cell index, first line) of each executed code cell, from nbclient's timing
    record."""
    from datetime import datetime

    rows = []
    for i, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        if (
            cell.cell_type == "code"
            and "iopub.execute_input" in timing
            and "shell.execute_reply" in timing
        ):
            start, end = (
                datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                for k in ("iopub.execute_input", "shell.execute_reply")
            )
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            rows.append(((end - start).total_seconds(), i, first[:70]))
    return rows


def execute(md: Path, timeout: int = 1200, slowest: int = 0) -> float:
    """Run one chapter in a fresh kernel (cwd book/); return the wall time in seconds.

    slowest: print that many of the slowest cells with their times (where the chapter's minutes go).
    """
    from nbclient import NotebookClient

    nb = read_md(md)
    normalise(nb)
    env_before = {
        k: os.environ.get(k)
        for k in ("TQDM_DISABLE", "LIB_PROGRESS", "PYTHONHASHSEED", "MPLBACKEND", "LIB_DATA_DIR")
    }
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["LIB_PROGRESS"] = "0"  # no progress reports in the stored outputs
    os.environ["PYTHONHASHSEED"] = "0"
    os.environ.pop("MPLBACKEND", None)
    if os.environ.get("LIB_DATA_DIR"):
        os.environ["LIB_DATA_DIR"] = str(Path(os.environ["LIB_DATA_DIR"]).resolve())
    start = time.perf_counter()
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(md.parent)}},
        )
        client.execute()
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - start
    for cell_time, index, first in sorted(cell_seconds(nb), reverse=True)[:slowest]:
        print(f"  {cell_time:7.1f} s  cell {index:3d}  {first}")
    normalise(nb)
    nbformat.validate(nb)
    ipynb = md.with_suffix(".ipynb")
    ipynb.write_text(nbformat.writes(nb) + "\n")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter names (book/<name>.md)")
    parser.add_argument("--all", action="store_true", help="execute every chapter")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed per cell")
    parser.add_argument(
        "--slowest", type=int, default=0, metavar="N", help="print the N slowest cells"
    )
    args = parser.parse_args(argv)
    known = {p.stem: p for p in chapter_sources(ROOT)}
    names = sorted(known) if args.all else args.chapters
    if not names:
        parser.error(f"name chapters or pass --all (chapters: {', '.join(sorted(known))})")
    for name in names:
        name = Path(name).stem
        if name not in known:
            print(
                f"execute: no chapter {name!r}; chapters are {', '.join(sorted(known))}",
                file=sys.stderr,
            )
            return 2
        seconds = execute(known[name], timeout=args.timeout, slowest=args.slowest)
        print(
            f"executed {rel(known[name])} -> {rel(known[name].with_suffix('.ipynb'))} in "
            f"{seconds:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
