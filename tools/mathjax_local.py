"""Sphinx extension: serve MathJax 3 from the built site, so the book's math renders offline.

MathJax comes from the PyPI package `django-static-mathjax` (a plain copy of MathJax 3.2, no
Django needed). `_config.yml` sets `mathjax_path: mathjax/tex-chtml.js`, relative to `_static/`;
this extension copies the files that component loads into `<outdir>/_static/mathjax/`.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

PARTS = ["tex-chtml.js", "input", "output/chtml", "ui", "a11y", "sre", "adaptors"]


def mathjax_dir() -> Path:
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "MathJax is not installed: `pip install django-static-mathjax` (the book extra has it)"
        )
    es5 = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").exists():
        raise RuntimeError(f"MathJax's tex-chtml.js not found under {es5}")
    return es5


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    src, dst = mathjax_dir(), Path(app.outdir) / "_static" / "mathjax"
    for part in PARTS:
        s, d = src / part, dst / part
        if not s.exists():
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d, dirs_exist_ok=True)
        else:
            shutil.copy2(s, d)


def check_path(app, config) -> None:
    mathjax_dir()
    if str(config.mathjax_path).startswith(("http:", "https:", "//")):
        raise RuntimeError(
            "mathjax_path points at a network address; the book serves MathJax itself"
        )


def setup(app):
    app.connect("config-inited", check_path)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
