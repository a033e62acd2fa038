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


def library_version(root: Path = ROOT) -> str:
    """`lib.__version__`, read from lib/__init__.py without importing the library."""
    text = (root / "lib" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


COLAB_CELL = """\
# Colab only: install the book's library `lib` {version} (the release this notebook was built
# with, git tag v{version}), keeping Colab's GPU build of jax.
# (Generated from _config.yml and lib/__init__.py by tools/chapters.py; `make sync` checks it.)
import sys

if "google.colab" in sys.modules:
    import subprocess

    pip = [sys.executable, "-m", "pip"]
    frozen = subprocess.run([*pip, "freeze"], capture_output=True, text=True, check=True)
    keep = ("jax==", "jaxlib==", "jax-cuda")
    jax = [l for l in frozen.stdout.splitlines() if l.startswith(keep)]
    with open("/tmp/keep-jax.txt", "w") as f:
        f.write("\\n".join(jax) + "\\n")
    lib = "rederived @ git+{url}@v{version}"
    done = subprocess.run([*pip, "install", "-c", "/tmp/keep-jax.txt", lib], capture_output=True)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
        raise RuntimeError(
            f"pip could not install the book's library {version} beside this runtime's "
            f"{{', '.join(jax) or 'jax'}}, which it keeps (its GPU build): the library needs "
            "Python >= 3.11, jax >= 0.6.2 and flax >= 0.11. pip said:\\n" + said
        )"""


def colab_cell_source(root: Path = ROOT) -> str:
    """The hidden first cell of every chapter: installs `lib` in Colab, does nothing elsewhere.

    The repository URL comes from `_config.yml` (`repository.url`) and the version from
    `lib.__version__`, the one place each is written: the cell installs the release tag
    v<version>, so a notebook and the library it installs agree. The install keeps Colab's own
    jax/jaxlib (its GPU build): pip is constrained to the versions already installed, so it picks a
    compatible flax rather than replacing jax with a CPU wheel; when pip cannot, the cell says
    why in plain words, with pip's own message.
    """
    url = read_config(root)["repository"]["url"].rstrip("/")
    return COLAB_CELL.format(url=url, version=library_version(root))


if __name__ == "__main__":
    print(colab_cell_source())
