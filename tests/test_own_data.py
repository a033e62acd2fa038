"""The examples of the API appendix's page "Using lib on your own data" (book/api_own_data.md) run
as written: its python code blocks, in order, in one namespace."""

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "book" / "api_own_data.md"


def code_blocks(text: str) -> list[str]:
    """The bodies of the page's ```python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


def test_the_page_has_an_example_for_each_of_the_five_models():
    text = "\n".join(code_blocks(PAGE.read_text()))
    for trainer in ("train_dgp", "train_darn", "train_sml_pt", "train_ebp", "train_nram"):
        assert f"{trainer}(" in text, trainer


@pytest.mark.slow
def test_the_examples_run(capsys):
    namespace = {"__name__": "own_data"}
    for k, block in enumerate(code_blocks(PAGE.read_text())):
        exec(compile(block, f"{PAGE.name} block {k + 1}", "exec"), namespace)
    assert "controller" in namespace and "predicted" in namespace
