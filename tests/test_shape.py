"""The book's shape (DESIGN.md, "Anatomy of a chapter"): pages a reader can take in.

- no page over 3,500 lines, and a paper's chapter (book/<paper>.md) at most 2,500, with its
  reproduction report (book/<paper>_report.md) listed under it in _toc.yml;
- no code cell over 80 lines;
- every figure of an executed notebook numbered and captioned (the cell's `mystnb.figure`
  metadata, or a glued figure that the text places with a name), and every chapter that shows a
  figure cites one with {numref};
- the API of every module of lib stated (`__all__`, docstrings), and no record (claims,
  experiments, results files) in a paper's method module.

The chapters are being reshaped one by one: SHORT_OF_THE_BAR lists, per page, what it still
breaks. Each count may only go down, and must be lowered (or its entry removed) when the page
gets better, so that the list is always the exact state of the book; a page's line count is a
ceiling, and its entry goes once the page is under the limit.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from chapters import chapter_sources, read_md  # noqa: E402

PAPERS = ("darn", "partition", "ebp", "nram", "dgp")
PAGE_LINES, CHAPTER_LINES, CELL_LINES = 3500, 2500, 80

# page: {what: count} for the pages not yet at the bar (what: "lines" of a page over its limit,
# "long cells", "uncaptioned figures", "no report", "no numref")
SHORT_OF_THE_BAR: dict = {}  # every page meets the bar


def toc_sections() -> dict[str, list[str]]:
    """{page: the pages listed under it} in _toc.yml (stems of book/ files)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out = {}
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            out[Path(entry["file"]).name] = [
                Path(s["file"]).name for s in entry.get("sections", [])
            ]
    return out


def figures(ipynb: Path) -> tuple[int, int]:
    """(figures, of them without a caption) among the outputs of an executed notebook."""
    nb = nbformat.read(ipynb, as_version=4)
    total = uncaptioned = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        caption = cell.metadata.get("mystnb", {}).get("figure", {}).get("caption")
        for out in cell.get("outputs", []):
            if not {"image/png", "image/svg+xml"} & set(out.get("data", {})):
                continue
            total += 1
            glued = "scrapbook" in out.get("metadata", {})
            uncaptioned += not (caption or glued)
    return total, uncaptioned


def shortfalls(md: Path) -> dict[str, int]:
    """What a page breaks of the bar, as counts (see SHORT_OF_THE_BAR)."""
    text = md.read_text()
    name, lines = md.stem, len(text.split("\n"))
    out = {}
    limit = CHAPTER_LINES if name in PAPERS else PAGE_LINES
    if lines > limit:
        out["lines"] = lines
    cells = [c for c in read_md(md).cells if c.cell_type == "code"]
    long = sum(len(c.source.split("\n")) > CELL_LINES for c in cells)
    if long:
        out["long cells"] = long
    shown, uncaptioned = figures(md.with_suffix(".ipynb"))
    if uncaptioned:
        out["uncaptioned figures"] = uncaptioned
    if shown and "{numref}" not in text:
        out["no numref"] = 1
    if name in PAPERS and f"{name}_report" not in toc_sections().get(name, []):
        out["no report"] = 1
    return out


@pytest.mark.parametrize("md", chapter_sources(), ids=lambda p: p.stem)
def test_each_page_meets_the_bar_or_is_listed_exactly(md):
    found, allowed = shortfalls(md), SHORT_OF_THE_BAR.get(md.stem, {})
    worse = {k: v for k, v in found.items() if v > allowed.get(k, 0)}
    assert not worse, f"book/{md.name} breaks the book's shape: {worse} (allowed {allowed})"
    # a page's lines are a ceiling (every edit moves them); the other counts must be exact
    better = {k: v for k, v in allowed.items() if found.get(k, 0) < v and k != "lines"}
    better |= {"lines": 0} if "lines" in allowed and "lines" not in found else {}
    assert not better, (
        f"book/{md.name} got better ({found}): lower SHORT_OF_THE_BAR[{md.stem!r}] to match"
    )


def test_every_report_is_a_page_under_its_chapter():
    sections = toc_sections()
    for md in chapter_sources():
        if md.stem.endswith("_report"):  # <paper>_report, or a further part <paper>_<part>_report
            paper = md.stem.split("_")[0]
            assert paper in PAPERS and md.stem in sections.get(paper, []), md.name


def test_the_shape_checks_see_what_they_count(tmp_path):
    """A long cell, an uncaptioned figure and a page too long are each counted."""
    page = tmp_path / "ebp.md"
    body = "\n".join(f"x{i} = {i}" for i in range(CELL_LINES + 1))
    page.write_text("# T\n\n```{code-cell} ipython3\n" + body + "\n```\n" + "\n" * CHAPTER_LINES)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "AAAA"})]
    nb.cells = [cell]
    nbformat.write(nb, page.with_suffix(".ipynb"))
    found = shortfalls(page)
    assert found["long cells"] == 1 and found["uncaptioned figures"] == 1
    assert found["lines"] > CHAPTER_LINES and found["no numref"] == 1
    cell.metadata["mystnb"] = {"figure": {"caption": "A plot.", "name": "fig-t"}}
    nbformat.write(nb, page.with_suffix(".ipynb"))
    assert "uncaptioned figures" not in shortfalls(page)


# The API (issue 61): in every module of lib, each public top-level name (not starting with "_") is
# in `__all__`, and every public function, class and method has a docstring. The modules not yet
# there, with their exact counts (which may only go down, as above):
API_SHORT_OF_THE_BAR: dict[str, dict[str, int]] = {}


def _own_doc(obj) -> str:
    """The docstring an object states itself (not inherited, not dataclass's generated one)."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and doc:
        doc = "" if doc.startswith(f"{obj.__name__}(") else doc
    return (doc or "").strip()


def api_shortfalls(module: str) -> dict[str, list[str]]:
    """{"not in __all__": names, "no docstring": names} of lib.<module>."""
    tree = ast.parse((ROOT / "lib" / f"{module}.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    names = sorted(n for n in names if not n.startswith("_"))
    lib_module = importlib.import_module(f"lib.{module}")
    out = {"not in __all__": [n for n in names if n not in lib_module.__all__], "no docstring": []}
    for name in names:
        obj = getattr(lib_module, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not _own_doc(obj):
            out["no docstring"].append(name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                fn = (
                    value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                )
                if inspect.isfunction(fn) and not (fn.__doc__ or "").strip():
                    out["no docstring"].append(f"{name}.{attr}")
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize("module", __import__("lib").MODULES)
def test_each_module_states_its_api_or_is_listed_exactly(module):
    found = {k: len(v) for k, v in api_shortfalls(module).items()}
    allowed = API_SHORT_OF_THE_BAR.get(module, {})
    worse = {k: v for k, v in found.items() if v > allowed.get(k, 0)}
    assert not worse, f"lib.{module}: {api_shortfalls(module)} (allowed counts {allowed})"
    better = {k: v for k, v in allowed.items() if found.get(k, 0) < v}
    assert not better, f"lib.{module} got better ({found}): lower API_SHORT_OF_THE_BAR to match"


# The record lives apart (issue 61): a paper's method module defines no claim, registers no
# experiment and names no results file; its report's module lib.<paper>_report holds them. The
# papers whose record is still in the method module:
RECORD_IN_METHOD: set[str] = set()


def record_in(module: str) -> list[str]:
    """What of the record lib.<module> holds: Claim(...) calls, experiment registrations, paths
    under results/."""
    tree = ast.parse((ROOT / "lib" / f"{module}.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in ("Claim", "experiment", "_experiment"):
                found.append(f"{name}() at line {node.lineno}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("results/"):
                found.append(f"{node.value!r} at line {node.lineno}")
    return found


@pytest.mark.parametrize("paper", PAPERS)
def test_a_method_module_holds_no_record(paper):
    found = record_in(paper)
    if paper in RECORD_IN_METHOD:
        assert found, f"lib.{paper} holds no record any more: remove it from RECORD_IN_METHOD"
    else:
        assert not found, f"lib.{paper} holds the record: {found[:5]}"


def test_importing_a_method_module_registers_no_experiment():
    """`import lib.<paper>` loads no experiment; `import lib.<paper>_report` registers them."""
    import subprocess

    for paper in sorted(set(PAPERS) - RECORD_IN_METHOD):
        mine = f"{{n for n, e in R.EXPERIMENTS.items() if e.chapter == {paper!r}}}"
        code = (
            f"import lib.{paper}, lib.record as R; a = {mine}; "
            f"import lib.{paper}_report; b = {mine}; "
            "assert not a and b, (sorted(a), sorted(b))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, (paper, done.stderr[-2000:])
