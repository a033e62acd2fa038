#!/usr/bin/env python3
"""Check that every chapter's MyST source and its executed notebook agree.

    python tools/sync.py                       check
    python tools/sync.py --write-colab-cell    first write the Colab cell into every chapter

Fails (exit 1) when
- a `book/<name>.md` chapter has no `book/<name>.ipynb`, or a notebook has no source;
- their inputs differ: cell types, sources, or tags (outputs are not compared);
- a chapter's first code cell is not the Colab install cell generated from `_config.yml`;
- `_config.yml` does not exclude exactly the chapter sources from the book build (the book is
  rendered from the executed `.ipynb`; the `.md` is the source reviewed in diffs), or `_toc.yml`
  names a page that does not exist.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
# noqa: E402
from chapters import ROOT, chapter_sources, colab_cell_source, read_config, read_md, rel


def cell_inputs(nb) -> list[tuple[str, str, tuple[str, ...], str]]:
    """What must be identical in a pair: per cell (type, stripped source, sorted tags, myst-nb's
    options such as a figure's caption)."""
    return [
        (
            c.cell_type,
            c.source.strip(),
            tuple(sorted(c.get("metadata", {}).get("tags", []))),
            json.dumps(c.get("metadata", {}).get("mystnb", {}), sort_keys=True),
        )
        for c in nb.cells
    ]


def compare(md: Path, ipynb: Path, root: Path = ROOT) -> list[str]:
    a = cell_inputs(read_md(md))
    b = cell_inputs(nbformat.read(ipynb, as_version=4))
    if a == b:
        return []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            what = "type" if x[0] != y[0] else ("tags" if x[2] != y[2] else "source")
            what = "myst-nb options" if x[:3] == y[:3] else what
            first = x[1].splitlines()[0] if x[1] else "(empty)"
            return [
                f"{rel(ipynb, root)} differs from {rel(md, root)} at cell {i} ({what}; "
                f"source cell starts {first[:60]!r}): run `make execute CHAPTER={md.stem}`"
            ]
    return [
        f"{rel(ipynb, root)} has {len(b)} cells, {rel(md, root)} has {len(a)}: "
        f"run `make execute CHAPTER={md.stem}`"
    ]


def toc_files(toc: dict) -> list[str]:
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))
            for part in e.get("parts", []) or []:
                walk(part.get("chapters"))

    for part in toc.get("parts", []) or []:
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def check(root: Path = ROOT) -> list[str]:
    problems = []
    sources = chapter_sources(root)
    cell = colab_cell_source(root)
    for md in sources:
        ipynb = md.with_suffix(".ipynb")
        if not ipynb.exists():
            problems.append(
                f"{rel(md, root)} has no executed twin: run `make execute CHAPTER={md.stem}`"
            )
            continue
        problems += compare(md, ipynb, root)
        code = [c for c in read_md(md).cells if c.cell_type == "code"]
        if not code or code[0].source.strip() != cell.strip():
            problems.append(
                f"{rel(md, root)}: the first code cell must be the Colab install cell "
                f"(`python tools/sync.py --write-colab-cell` writes it into every chapter)"
            )
        elif "remove-cell" not in code[0].metadata.get("tags", []):
            problems.append(f"{rel(md, root)}: the Colab install cell must be tagged remove-cell")
    for ipynb in sorted((root / "book").glob("*.ipynb")):
        if not ipynb.with_suffix(".md").exists():
            problems.append(
                f"{rel(ipynb, root)} has no MyST source {rel(ipynb.with_suffix('.md'), root)}"
            )
    excluded = {p for p in read_config(root).get("exclude_patterns", []) if p.startswith("book/")}
    wanted = {rel(md, root) for md in sources}
    if excluded != wanted:
        problems.append(
            f"_config.yml exclude_patterns must list exactly the chapter sources {sorted(wanted)} "
            f"(it lists {sorted(excluded)})"
        )
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    for f in toc_files(toc):
        if not any((root / (f + ext)).exists() for ext in ("", ".md", ".ipynb")):
            problems.append(f"_toc.yml names {f}, which does not exist")
    return problems


def write_colab_cell(root: Path = ROOT) -> None:
    """Make the first code cell of every chapter (source and notebook) the Colab cell of
    _config.yml and lib.__version__ (after a release's version bump)."""
    from format import _replace_in_md

    cell = colab_cell_source(root)
    for md in chapter_sources(root):
        old = [c.source for c in read_md(md).cells if c.cell_type == "code"]
        md.write_text(_replace_in_md(md.read_text(), old, [cell] + old[1:]))
        ipynb = md.with_suffix(".ipynb")
        if ipynb.exists():
            nb = nbformat.read(ipynb, as_version=4)
            next(c for c in nb.cells if c.cell_type == "code").source = cell
            ipynb.write_text(nbformat.writes(nb) + "\n")


def main() -> int:
    if sys.argv[1:] == ["--write-colab-cell"]:
        write_colab_cell(ROOT)
    problems = check(ROOT)
    for p in problems:
        print(f"sync: {p}", file=sys.stderr)
    if not problems:
        print(f"sync: {len(chapter_sources(ROOT))} chapters, sources and notebooks agree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
