"""The exporter: chapters -> lib/, provenance markers, duplicate names, and --check."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import export  # noqa: E402


def chapter(*cells: str) -> str:
    parts = ["# A chapter\n"]
    for c in cells:
        parts.append("```{code-cell} ipython3\n" + textwrap.dedent(c).strip("\n") + "\n```\n")
    return "\n".join(parts)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "book" / "demo.md").write_text(
        chapter(
            "#| default_exp demo",
            """
        #| export
        import math

        def area(r):
            return math.pi * r * r
        """,
            "print(area(1.0))  # not exported",
            """
        #| export
        import math

        class Circle:
            pass
        """,
        )
    )
    return tmp_path


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "export.py"), "--root", str(root), *args],
        capture_output=True,
        text=True,
    )


def test_export_writes_cells_in_order_with_markers(repo):
    assert run(repo).returncode == 0
    text = (repo / "lib" / "demo.py").read_text()
    assert text.startswith(export.GENERATED_MARK) and "book/demo.md" in text.splitlines()[0]
    assert text.count("\n# %% book/demo.md\n") == 2  # one provenance marker per exported cell
    assert text.index("def area") < text.index("class Circle")
    assert "not exported" not in text and "#| export" not in text
    assert '__all__ = [\n    "Circle",\n    "area",\n]' in text
    namespace = {}
    exec(compile(text, "demo.py", "exec"), namespace)
    assert abs(namespace["area"](2.0) - 12.566370614359172) < 1e-12


def test_check_passes_in_sync_and_fails_when_chapter_and_lib_disagree(repo):
    run(repo)
    assert run(repo, "--check").returncode == 0
    md = repo / "book" / "demo.md"
    md.write_text(md.read_text().replace("math.pi * r * r", "math.pi * r ** 2"))
    res = run(repo, "--check")
    assert res.returncode == 1 and "lib/demo.py differs from its chapter" in res.stderr
    run(repo)
    assert run(repo, "--check").returncode == 0
    (repo / "lib" / "demo.py").write_text(
        (repo / "lib" / "demo.py").read_text() + "# edited by hand\n"
    )
    assert run(repo, "--check").returncode == 1


def test_check_fails_on_missing_stale_and_untracked_files(repo):
    res = run(repo, "--check")
    assert res.returncode == 1 and "lib/demo.py is missing" in res.stderr
    run(repo)
    (repo / "lib" / "old.py").write_text(export.GENERATED_MARK + " Source: book/old.md.\n")
    res = run(repo, "--check")
    assert res.returncode == 1 and "lib/old.py is generated but no chapter exports it" in res.stderr
    (repo / "lib" / "old.py").unlink()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    res = run(repo, "--check")
    assert res.returncode == 1 and "lib/demo.py is not tracked by git" in res.stderr
    subprocess.run(["git", "add", "lib/demo.py"], cwd=repo, check=True)
    assert run(repo, "--check").returncode == 0


@pytest.mark.parametrize(
    "second, message",
    [
        ("def area(r):\n    return r", "`area` is defined twice"),
        ("area = 3", "`area` is defined twice"),
        ("from os import path as area", "`area` is defined twice"),
        ("import lib.demo", "imports its own module"),
        ("from lib.demo import area as a2", "imports its own module"),
    ],
)
def test_export_rejects_redefinitions_and_self_imports(repo, second, message):
    md = repo / "book" / "demo.md"
    md.write_text(md.read_text() + "\n```{code-cell} ipython3\n#| export\n" + second + "\n```\n")
    res = run(repo)
    assert res.returncode == 2 and message in res.stderr


def test_export_rejects_a_self_import_in_any_cell(repo):
    md = repo / "book" / "demo.md"
    md.write_text(
        md.read_text()
        + "\n```{code-cell} ipython3\nfrom lib.demo import area\nprint(area(2))\n```\n"
    )
    res = run(repo)
    assert res.returncode == 2 and "imports its own module" in res.stderr


def test_export_requires_default_exp(repo):
    md = repo / "book" / "demo.md"
    md.write_text(md.read_text().replace("#| default_exp demo", "# no module named"))
    res = run(repo)
    assert res.returncode == 2 and "no `#| default_exp" in res.stderr


def test_the_default_exp_cell_gives_the_module_its_docstring(repo):
    md = repo / "book" / "demo.md"
    text = md.read_text().replace(
        "#| default_exp demo", '#| default_exp demo\n"""Circles (derived in book/demo.md)."""'
    )
    md.write_text(text)
    assert run(repo).returncode == 0
    module = (repo / "lib" / "demo.py").read_text()
    namespace = {}
    exec(compile(module, "demo.py", "exec"), namespace)
    assert namespace["__doc__"] == "Circles (derived in book/demo.md)."
    md.write_text(text.replace('"""Circles (derived in book/demo.md)."""', "x = 1"))
    out = run(repo)
    assert out.returncode != 0 and "only the module's docstring" in out.stderr


def test_every_module_of_lib_has_a_docstring_naming_its_chapter():
    import importlib

    import lib

    for name in lib.MODULES:
        doc = importlib.import_module(f"lib.{name}").__doc__
        assert doc and f"book/{name}.md" in doc, name


def test_every_module_has_its_page_in_the_api_reference():
    import lib

    toc = (ROOT / "_toc.yml").read_text()
    for name in lib.MODULES:
        page = ROOT / "book" / f"api_{name}.md"
        assert page.exists() and f".. automodule:: lib.{name}" in page.read_text(), name
        assert f"file: book/api_{name}\n" in toc, name


def test_the_repository_is_in_sync():
    """The check CI runs: lib/ is exactly what the chapters export, and tracked."""
    problems = export.check(ROOT)
    assert problems == []


def test_a_stated_all_is_the_public_api_and_must_name_defined_names(repo):
    md = repo / "book" / "demo.md"
    base = md.read_text()
    md.write_text(base + chapter('#| export\n__all__ = ["area"]  # Circle is a helper'))
    assert run(repo).returncode == 0
    text = (repo / "lib" / "demo.py").read_text()
    assert text.count("__all__ =") == 1 and '__all__ = ["area"]' in text
    namespace = {}
    exec(compile(text, "demo.py", "exec"), namespace)
    assert namespace["__all__"] == ["area"] and "Circle" in namespace
    for stated, said in (
        ('["area", "cube"]', "does not define: cube"),
        ('["area", "math"]', "does not define: math"),  # an import is not the module's own
        ('["area", "area"]', "names area twice"),
        ("[n for n in ('area',)]", "list of string literals"),
    ):
        md.write_text(base + chapter(f"#| export\n__all__ = {stated}"))
        res = run(repo)
        assert res.returncode != 0 and said in res.stderr, (stated, res.stderr)
