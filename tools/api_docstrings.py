"""Sphinx extension for the API reference (book/api*.md): docstrings shown as they are written.

The library's docstrings are plain text (shapes, formulas like `p(x | h)`, aligned lists), not
reStructuredText: read as RST they would be mangled or warned about (`|x|` is a substitution).
Each docstring is rendered as a plain-text block, verbatim, under the signature autodoc gives
(a Flax NNX class's is its __init__'s: lib.toolkit.constructor_signatures). The directive
`.. lib-helpers:: lib.<module>` documents the module's helpers: the names it defines (functions,
classes, constants) that its `__all__` leaves out.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import _bindings  # noqa: E402  (the exporter's reading of a cell's top-level names)


def literal_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if not any(line.strip() for line in lines):
        return
    body = [f"   {line}" if line.strip() else "" for line in lines]
    lines[:] = [".. code-block:: text", "", *body, ""]


def helper_names(module_name: str) -> list[str]:
    """Names bound at the top level of the module's source (not imports, not `_private`) that its
    `__all__` leaves out, in source order."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__).read_text())
    names = [name for name, kind, _ in _bindings(tree) if kind != "import"]
    public = set(module.__all__)
    return [n for n in dict.fromkeys(names) if not n.startswith("_") and n not in public]


class LibHelpers(SphinxDirective):
    """`.. lib-helpers:: lib.dgp`: autodoc of the module's helpers (see helper_names)."""

    required_arguments = 1

    def run(self):
        from docutils import nodes

        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        lines = [f".. currentmodule:: {module_name}", ""]
        for name in helper_names(module_name):
            obj = getattr(module, name)
            kind = (
                "autoclass"
                if inspect.isclass(obj)
                else "autofunction"
                if callable(obj)
                else "autodata"
            )
            lines += [f".. {kind}:: {name}", ""]
        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), 0, container)
        return container.children


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", literal_docstring)
    app.add_directive("lib-helpers", LibHelpers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
