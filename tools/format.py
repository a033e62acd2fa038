#!/usr/bin/env python3
"""Format the chapters' code cells with the formatter of lib/ (ruff, settings in pyproject.toml).

    python tools/format.py            format every chapter's code cells, in book/<name>.md and
                                      in its executed twin book/<name>.ipynb (outputs kept)
    python tools/format.py --check    write nothing; fail if a cell would change or a line of
                                      a code cell is longer than the line length

lib/ is generated from the chapters' `#| export` cells (tools/export.py), so formatting the
cells formats lib/; `make format` runs this, then the export, then `ruff format` on tools/,
tests/ and benchmarks/. Formatting changes no output: the notebooks keep theirs, and nbval
compares outputs, not sources. A cell that must keep its own layout (a hand-aligned table)
says `# fmt: off` / `# fmt: on` around it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chapters import ROOT, chapter_sources, read_md, rel  # noqa: E402

FENCE_OPEN = re.compile(r"^```\{code-cell\}")


def _ruff(*args: str) -> subprocess.CompletedProcess:
    """Run the ruff of this environment (the version pinned in pyproject.toml)."""
    exe = Path(sys.executable).with_name("ruff")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "ruff"]
    return subprocess.run(
        [*cmd, *args, "--config", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def _as_notebook(sources: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def formatted_sources(sources: list[str]) -> list[str]:
    """The code cells' sources as the formatter writes them (IPython magics understood)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.ipynb"
        path.write_text(nbformat.writes(_as_notebook(sources)))
        done = _ruff("format", "--no-cache", "--quiet", str(path))
        if done.returncode != 0:
            raise SystemExit(f"format: ruff could not format the cells:\n{done.stderr}")
        cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells]


def long_lines(md: Path, sources: list[str], limit: int = 100) -> list[str]:
    """`file: cell N line M (K columns)` for every code line over the limit."""
    out = []
    for i, source in enumerate(sources):
        for j, line in enumerate(source.splitlines()):
            if len(line) > limit and not _unbreakable(line):
                out.append(f"{rel(md)}: code cell {i} line {j + 1} has {len(line)} columns")
    return out


def _unbreakable(line: str) -> bool:
    """A line that is one long token (a URL in a string of its own): nothing to break."""
    return len(line.strip().split()) == 1


def _replace_in_md(text: str, old: list[str], new: list[str]) -> str:
    """Replace the code cells' sources in the MyST text, block by block, in order."""
    lines = text.split("\n")
    out: list[str] = []
    i = k = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if not FENCE_OPEN.match(line):
            continue
        start = i
        while lines[i] != "```":
            i += 1
        block = "\n".join(lines[start:i])
        if old[k] != new[k]:
            at = block.rfind(old[k])
            if at < 0:
                raise SystemExit(f"format: cell {k} of the chapter not found verbatim in its block")
            block = block[:at] + new[k] + block[at + len(old[k]) :]
        out.extend(block.split("\n") if block else [])
        k += 1
    if k != len(old):
        raise SystemExit(f"format: found {k} code blocks, jupytext reads {len(old)} code cells")
    return "\n".join(out)


def format_chapter(md: Path, check: bool) -> list[str]:
    """Format one chapter (or, with check, list what would change). Returns the problems."""
    cells = [c for c in read_md(md).cells if c.cell_type == "code"]
    old = [c.source for c in cells]
    new = formatted_sources(old)
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    if check:
        problems = [
            f"{rel(md)}: code cell {i} is not formatted (first line {old[i].splitlines()[0]!r}): "
            "run `make format`"
            for i in changed
        ]
        return problems + long_lines(md, old)
    if changed:
        md.write_text(_replace_in_md(md.read_text(), old, new))
        if [c.source for c in read_md(md).cells if c.cell_type == "code"] != new:
            raise SystemExit(f"format: {rel(md)} does not read back as formatted")
        ipynb = md.with_suffix(".ipynb")
        if ipynb.exists():
            nb = nbformat.read(ipynb, as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            for i in changed:
                if code[i].source.strip() == old[i].strip():
                    code[i].source = new[i]
            ipynb.write_text(nbformat.writes(nb) + "\n")
    return long_lines(md, new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all)")
    args = parser.parse_args(argv)
    sources = chapter_sources()
    if args.chapters:
        sources = [p for p in sources if p.stem in args.chapters]
    problems = []
    for md in sources:
        problems += format_chapter(md, args.check)
    for p in problems:
        print(f"format: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
