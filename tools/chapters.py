"""Shared helpers of the notebook tooling: where the chapters are, how to read them, the Colab cell.

A chapter is a pair `book/<name>.md` (MyST markdown notebook, the reviewed source) and
`book/<name>.ipynb` (its executed twin). A `book/*.md` without code cells is a plain page.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = "book"
MD_FMT = "md:myst"
CODE_FENCE = re.compile(r"^```\{code-cell\}")


def read_config(root: Path = ROOT) -> dict:
    """The Jupyter Book configuration `_config.yml` as a dict."""
    return yaml.safe_load((root / "_config.yml").read_text())


def is_notebook_md(path: Path) -> bool:
    """True if a MyST markdown file holds code cells, i.e. is a chapter rather than a page."""
    return any(CODE_FENCE.match(line) for line in path.read_text().splitlines())


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """Every `book/*.md` that is a notebook, sorted by name."""
    return sorted(p for p in (root / BOOK).glob("*.md") if is_notebook_md(p))


def read_md(path: Path):
    """Read a chapter's MyST markdown as an nbformat notebook (jupytext)."""
    import jupytext

    return jupytext.read(path, fmt=MD_FMT)


def rel(path: Path, root: Path = ROOT) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def colab_cell_source(root: Path = ROOT) -> str:
    """The hidden first cell of every chapter: installs `lib` in Colab, does nothing elsewhere.

    The repository URL and branch come from `_config.yml` (`repository.url`, `repository.branch`),
    the one place they are written. The install keeps Colab's own jax/jaxlib (its GPU build):
    pip is constrained to the versions already installed, so it picks a compatible flax rather
    than replacing jax with a CPU wheel.
    """
    repo = read_config(root)["repository"]
    url = repo["url"].rstrip("/")
    branch = repo.get("branch", "main")
    return (
        "# Colab only: install the book's library `lib`, keeping Colab's GPU build of jax.\n"
        "# (Generated from _config.yml by tools/chapters.py; `make sync` checks it.)\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        '    pip = [sys.executable, "-m", "pip"]\n'
        '    frozen = subprocess.run([*pip, "freeze"], capture_output=True, text=True,'
        " check=True)\n"
        '    keep = ("jax==", "jaxlib==", "jax-cuda")\n'
        "    jax = [l for l in frozen.stdout.splitlines() if l.startswith(keep)]\n"
        '    with open("/tmp/keep-jax.txt", "w") as f:\n'
        '        f.write("\\n".join(jax) + "\\n")\n'
        f'    lib = "rederived @ git+{url}@{branch}"\n'
        '    subprocess.run([*pip, "install", "-q", "-c", "/tmp/keep-jax.txt", lib], check=True)'
    )


if __name__ == "__main__":
    print(colab_cell_source())
