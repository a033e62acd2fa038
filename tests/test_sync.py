"""Chapter sources and executed notebooks agree; the check catches a difference."""

import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import chapters  # noqa: E402
import sync  # noqa: E402


def test_repository_sources_and_notebooks_agree():
    assert sync.check(ROOT) == []


def test_compare_detects_an_edited_source(tmp_path):
    md = ROOT / "book" / "data.md"
    copy = tmp_path / "data.md"
    shutil.copy(md, copy)
    shutil.copy(md.with_suffix(".ipynb"), tmp_path / "data.ipynb")
    assert sync.compare(copy, tmp_path / "data.ipynb", tmp_path) == []
    copy.write_text(copy.read_text().replace("def read_idx(", "def read_idx_renamed(", 1))
    problems = sync.compare(copy, tmp_path / "data.ipynb", tmp_path)
    assert (
        len(problems) == 1
        and "source" in problems[0]
        and "make execute CHAPTER=data" in problems[0]
    )


def test_compare_detects_changed_tags(tmp_path):
    md = ROOT / "book" / "data.md"
    shutil.copy(md, tmp_path / "data.md")
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    nb.cells[1].metadata["tags"] = []
    nbformat.write(nb, tmp_path / "data.ipynb")
    problems = sync.compare(tmp_path / "data.md", tmp_path / "data.ipynb", tmp_path)
    assert problems and "tags" in problems[0]


def test_colab_cell_keeps_jax_and_names_the_configured_repository():
    source = chapters.colab_cell_source(ROOT)
    url = chapters.read_config(ROOT)["repository"]["url"]
    assert f"git+{url}@" in source
    assert '"-c", "/tmp/keep-jax.txt"' in source  # constrained to Colab's own jax/jaxlib
    compile(source, "colab", "exec")
    exec(compile(source, "colab", "exec"), {})  # outside Colab it does nothing


def test_executed_notebooks_have_stable_metadata():
    for ipynb in sorted((ROOT / "book").glob("*.ipynb")):
        nb = nbformat.read(ipynb, as_version=4)
        assert set(nb.metadata) == {"accelerator", "colab", "kernelspec", "language_info"}, ipynb
        assert [c.id for c in nb.cells] == [f"cell-{i:03d}" for i in range(len(nb.cells))]
        for cell in nb.cells:
            assert "execution" not in cell.metadata
            if cell.cell_type == "code":
                assert cell.execution_count is not None, f"{ipynb.name}: a cell was not executed"
                assert not any(o.output_type == "error" for o in cell.outputs), (
                    f"{ipynb.name}: stored error"
                )
