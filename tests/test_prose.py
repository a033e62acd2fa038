"""The book's text: no measured number typed by hand (tools/prose.py), no wall of output, glued
values that exist, and a paper-scale cell that fails without its results file."""

import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import prose  # noqa: E402

# Chapters whose prose may still type measured numbers, with how many (a ratchet for a chapter being
# cleaned: the count may only go down; at zero it leaves this list). Every chapter is clean today.
PENDING: dict[str, int] = {}


@pytest.mark.parametrize("name", prose.chapters())
def test_no_measured_number_is_typed_in_the_prose(name):
    hits = prose.typed_numbers(ROOT / "book" / f"{name}.md")
    listing = "\n".join(
        f"  line {line}: {token!r} in: {text[:90]}" for line, token, text in hits[:20]
    )
    if name in PENDING:
        assert 0 < len(hits) <= PENDING[name], (
            f"book/{name}.md types {len(hits)} measured-looking numbers "
            f"(at most {PENDING[name]} allowed; "
            f"at zero, remove it from PENDING):\n{listing}"
        )
    else:
        assert not hits, (
            f"book/{name}.md types measured numbers in its text: glue them from the cell that "
            f"computes them ({{glue:text}}), or mark a paper's value with {{paper}}:\n{listing}"
        )


def test_the_scan_flags_what_it_should_and_not_what_it_should_not(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "\n".join(
            [
                "We measured 0.41 nats, a gain of 12% and 3 ms per step;",
                "the paper gives {paper}`-89.96`.",
                "Ours is {glue:text}`gap:.2f` nats, $-83.92$ in math,",
                "$x^2 + 0.5$ a formula, `lr=0.01` code.",
                "See eq. 3.15, Section 4.1, Table 2, appendix E.2, jax 0.10.2,",
                "labels $\\pm 1$, and 250 rows.",
                "```{code-cell} ipython3",
                "x = 0.25  # code is not prose",
                "```",
                "$$",
                "a = 0.5",
                "$$",
                "learning rate {setting}`0.01`, ± 0.02 uncertainty",
            ]
        )
    )
    tokens = [token for _, token, _ in prose.typed_numbers(page)]
    assert tokens == ["0.41", "12%", "3 ms", "-83.92", "± 0.02"]


def _outputs_lines(cell) -> int:
    lines = 0
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += out["text"].count("\n")
        elif all(k.startswith("application/papermill.record/") for k in out.get("data", {"": 0})):
            continue  # a glued value (lib.record.glue): stored for the text, never shown
        elif "data" in out and not {"text/html", "image/png", "image/svg+xml"} & set(out["data"]):
            lines += str(out["data"].get("text/plain", "")).count("\n") + 1
    return lines


@pytest.mark.parametrize("path", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.stem)
def test_no_stored_output_is_longer_than_40_lines(path):
    nb = nbformat.read(path, as_version=4)
    long = [
        (i, _outputs_lines(c))
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and _outputs_lines(c) > 40
    ]
    assert not long, (
        f"{path.name}: cells {long} print more than 40 lines: show a table or a figure instead"
    )


@pytest.mark.parametrize("path", sorted((ROOT / "book").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_glued_name_the_text_uses_is_stored(path):
    nb = nbformat.read(path, as_version=4)
    stored = {
        out["metadata"]["scrapbook"]["name"]
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    }
    used = {
        m.group(1)
        for c in nb.cells
        if c.cell_type == "markdown"
        for m in re.finditer(r"\{glue:text\}`([\w-]+)(?::[^`]*)?`", c.source)
    }
    assert used <= stored, (
        f"{path.name}: glued in the text but never stored by a cell: {sorted(used - stored)}"
    )


def test_a_paper_scale_cell_fails_when_its_results_file_is_missing(tmp_path):
    """The EBP report's registry cell, run against a copy of results/ without one file, raises."""
    import lib.ebp_report
    from lib.record import check_claims

    shutil.copytree(ROOT / "results" / "ebp", tmp_path / "results" / "ebp")
    # complete: every status as the report states
    assert check_claims(lib.ebp_report.CLAIMS, tmp_path)
    (tmp_path / "results" / "ebp" / "ebp-text.amazon.json").unlink()
    with pytest.raises(FileNotFoundError, match="ebp-text.amazon.json is missing"):
        check_claims(lib.ebp_report.CLAIMS, tmp_path)
    from lib.record import require_results

    with pytest.raises(FileNotFoundError, match="results/ebp/ebp-text.amazon.json is missing"):
        require_results("ebp", "ebp-text", part="amazon", results_dir=tmp_path / "results")
    assert json.loads((ROOT / "results" / "ebp" / "ebp-text.amazon.json").read_text())["rows"]
