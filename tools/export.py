#!/usr/bin/env python3
"""Export the `#| export` cells of the chapters into the package `lib`.

    python tools/export.py            write lib/<module>.py for every chapter
    python tools/export.py --check    write nothing; fail if lib/ differs from the chapters

Rules (DESIGN.md, "Notebook -> library export"):
- a chapter names its module once, in a code cell `#| default_exp <module>`; a string literal
  below that line in the same cell (ended by `;`, so that the notebook does not echo it) is the
  module's docstring (what it holds, which chapter derives it), written first in
  `lib/<module>.py`;
- a code cell whose first line is `#| export` goes, verbatim and in order, into
  `lib/<module>.py`, after a header saying the file is generated, each cell preceded by a
  provenance marker `# %% book/<chapter>.md`;
- a name bound twice at the top level of one module (def, class, assignment, or an import that
  rebinds a defined name) is an error, and so is a chapter importing its own module;
- `__all__` is the public API. A chapter states it in an exported cell (`__all__ = [...]`, a list
  of string literals, each a name the module defines); the module's other names are its helpers,
  importable but not promised. A chapter that states none gets every name not starting with `_`;
- `--check` also fails on generated files that no chapter produces any more and on generated
  files that git does not track.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chapters import ROOT, chapter_sources, read_md, rel  # noqa: E402

HEADER = (
    "# GENERATED FILE: do not edit. Source: {src}.\n"
    "# Edit the source, then run `make export` (tools/export.py copies its exported cells here).\n"
)
GENERATED_MARK = "# GENERATED FILE: do not edit."


class ExportError(Exception):
    pass


def _directive(source: str, name: str) -> str | None:
    """The argument of `#| <name> ...` if the cell's first line is that directive."""
    first = source.lstrip("\n").split("\n", 1)[0].strip()
    prefix = f"#| {name}"
    if first == prefix or first.startswith(prefix + " "):
        return first[len(prefix) :].strip()
    return None


def _strip_first_line(source: str) -> str:
    body = source.lstrip("\n").split("\n", 1)
    return body[1] if len(body) > 1 else ""


def _module_docstring(src: str, body: str) -> str | None:
    """The string literal of a `#| default_exp` cell (its source text), or None if it has none."""
    body = body.strip().removesuffix(";")  # the chapter's `;` keeps the notebook from echoing it
    if not body:
        return None
    try:
        tree = ast.parse(body)
    except SyntaxError as err:
        raise ExportError(f"{src}: the `#| default_exp` cell does not parse: {err.msg}") from err
    if not (
        len(tree.body) == 1
        and isinstance(tree.body[0], ast.Expr)
        and isinstance(tree.body[0].value, ast.Constant)
        and isinstance(tree.body[0].value.value, str)
    ):
        raise ExportError(
            f"{src}: the `#| default_exp` cell may hold only the module's docstring below the "
            "directive"
        )
    return body


def _bindings(tree: ast.Module):
    """Top-level bindings of a cell: (name, kind, import-text) for each bound name."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, "def", None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        yield sub.id, "assign", None
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
        ):
            yield node.target.id, "assign", None
        # an AugAssign (x += 1) updates an existing name: not a second definition
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                yield bound, "import", ast.unparse(node) + f" [{alias.name}]"


def export_chapter(md: Path, root: Path = ROOT) -> tuple[str, str] | None:
    """Return (module name, generated text) for one chapter, or None if it exports nothing."""
    nb = read_md(md)
    md_lines = md.read_text().splitlines()
    src = rel(md, root)
    module = None
    docstring = None
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        arg = _directive(cell.source, "default_exp")
        if arg is not None:
            if module is not None:
                raise ExportError(f"{src}: `#| default_exp` appears twice ({module!r} and {arg!r})")
            if not arg.isidentifier():
                raise ExportError(f"{src}: `#| default_exp {arg}` is not a valid module name")
            module = arg
            docstring = _module_docstring(src, _strip_first_line(cell.source).strip("\n"))
        if _directive(cell.source, "export") is not None:
            cells.append(cell.source)
    if not cells:
        return None
    if module is None:
        raise ExportError(f"{src}: has `#| export` cells but no `#| default_exp <module>` cell")
    own = re.compile(
        rf"^\s*(from\s+lib\.{module}\b|import\s+lib\.{module}\b"
        rf"|from\s+lib\s+import\s+.*\b{module}\b)",
        re.M,
    )
    for cell in nb.cells:
        if cell.cell_type == "code" and own.search(cell.source):
            line = own.search(cell.source).group(0).strip()
            raise ExportError(
                f"{src}: the chapter imports its own module ({line!r}); "
                f"use the names its cells define, lib.{module} is generated from them"
            )

    seen: dict[str, tuple[str, str | None, int]] = {}
    explicit: list[str] | None = None
    search_from = 0
    parts = [HEADER.format(src=src)]
    if docstring is not None:
        parts.append(docstring)  # the first cell's "\n\n# %%" leaves one blank line after it
    for source in cells:
        # the line of the cell in the chapter, for error messages (not written to lib/: a prose
        # edit above a cell would otherwise change every generated file below it)
        line_no = next(
            (
                i + 1
                for i in range(search_from, len(md_lines))
                if md_lines[i].strip() == "#| export"
            ),
            None,
        )
        if line_no is None:  # pragma: no cover - jupytext and the file disagree
            raise ExportError(f"{src}: could not locate an `#| export` line")
        search_from = line_no
        body = _strip_first_line(source).strip("\n")
        try:
            tree = ast.parse(body)
        except SyntaxError as err:
            raise ExportError(
                f"{src}:{line_no + (err.lineno or 0)}: syntax error in exported cell: {err.msg}"
            ) from err
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                try:
                    stated = ast.literal_eval(node.value)
                except ValueError:
                    stated = None
                if not (
                    isinstance(stated, (list, tuple)) and all(isinstance(n, str) for n in stated)
                ):
                    raise ExportError(
                        f"{src}:{line_no}: `__all__` must be a list of string literals"
                    )
                explicit = list(stated)
        for name, kind, text in _bindings(tree):
            if name in seen:
                prev_kind, prev_text, prev_line = seen[name]
                if kind == "import" and prev_kind == "import" and text == prev_text:
                    continue  # the same import repeated in a later cell is harmless
                raise ExportError(
                    f"{src}:{line_no}: `{name}` is defined twice in lib/{module}.py "
                    f"(first at {src}:{prev_line})"
                )
            seen[name] = (kind, text, line_no)
        parts.append(f"\n\n# %% {src}\n{body}\n")
    if explicit is not None:
        doubled = sorted({n for n in explicit if explicit.count(n) > 1})
        unknown = [n for n in explicit if n not in seen or seen[n][0] == "import"]
        if doubled or unknown:
            raise ExportError(
                f"{src}: `__all__` of lib/{module}.py "
                + (f"names {', '.join(doubled)} twice" if doubled else "")
                + ("; " if doubled and unknown else "")
                + (
                    f"names what the module does not define: {', '.join(unknown)}"
                    if unknown
                    else ""
                )
            )
        return module, "".join(parts)
    public = sorted(
        n for n, (kind, _, _) in seen.items() if kind != "import" and not n.startswith("_")
    )
    names = "".join(f'    "{n}",\n' for n in public)
    parts.append(f"\n\n__all__ = [\n{names}]\n")
    return module, "".join(parts)


def generate(root: Path = ROOT) -> dict[Path, str]:
    """All generated files: {path under lib/: text}."""
    out: dict[Path, str] = {}
    owners: dict[str, Path] = {}
    for md in chapter_sources(root):
        result = export_chapter(md, root)
        if result is None:
            continue
        module, text = result
        if module in owners:
            raise ExportError(
                f"{rel(md, root)} and {rel(owners[module], root)} both export lib/{module}.py"
            )
        if module in ("__init__", "__main__"):
            raise ExportError(
                f"{rel(md, root)}: lib/{module}.py is hand-written, not a chapter module"
            )
        owners[module] = md
        out[root / "lib" / f"{module}.py"] = text
    return out


def _untracked(root: Path, paths: list[Path]) -> list[Path]:
    """The paths that git does not track (none outside a git checkout)."""
    if not (root / ".git").exists():
        return []
    listed = subprocess.run(
        ["git", "ls-files", "lib"], cwd=root, capture_output=True, text=True, check=True
    )
    tracked = set(listed.stdout.split())
    return [p for p in paths if rel(p, root) not in tracked]


def stale_generated(root: Path, wanted: dict[Path, str]) -> list[Path]:
    """Generated files in lib/ that no chapter produces any more."""
    return [
        p
        for p in sorted((root / "lib").glob("*.py"))
        if p not in wanted and p.read_text().startswith(GENERATED_MARK)
    ]


def check(root: Path = ROOT) -> list[str]:
    """Problems that make lib/ differ from what the chapters export (empty list: in sync)."""
    wanted = generate(root)
    problems = []
    for path, text in wanted.items():
        if not path.exists():
            problems.append(f"{rel(path, root)} is missing: run `make export`")
        elif path.read_text() != text:
            problems.append(
                f"{rel(path, root)} differs from its chapter: run `make export` (never edit lib/ "
                "by hand)"
            )
    for path in stale_generated(root, wanted):
        problems.append(
            f"{rel(path, root)} is generated but no chapter exports it any more: delete it"
        )
    for path in _untracked(root, [p for p in wanted if p.exists()]):
        problems.append(f"{rel(path, root)} is not tracked by git: `git add` it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if lib/ is out of sync"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.check:
            problems = check(root)
            for p in problems:
                print(f"export --check: {p}", file=sys.stderr)
            if not problems:
                print("export --check: lib/ is in sync with the chapters")
            return 1 if problems else 0
        wanted = generate(root)
        for path, text in wanted.items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {rel(path, root)}")
        for path in stale_generated(root, wanted):
            path.unlink()
            print(f"removed {rel(path, root)} (no chapter exports it)")
        return 0
    except ExportError as err:
        print(f"export: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
