"""Sphinx extension for the API reference (book/api*.md): docstrings shown as they are written.

The library's docstrings are plain text (shapes, formulas like `p(x | h)`, aligned lists), not
reStructuredText: read as RST they would be mangled or warned about (`|x|` is a substitution).
Each docstring is rendered as a plain-text block, verbatim, under the signature autodoc gives.
A Flax NNX module's class signature is its __init__'s (autodoc would show the metaclass's
`(*args, **kwargs)`).
"""

from __future__ import annotations

import inspect


def literal_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if not any(line.strip() for line in lines):
        return
    body = [f"   {line}" if line.strip() else "" for line in lines]
    lines[:] = [".. code-block:: text", "", *body, ""]


def class_signature(app, what, name, obj, options, signature, return_annotation):
    if what != "class" or signature is None or "*args" not in signature:
        return None
    init = obj.__dict__.get("__init__") or getattr(obj, "__init__", None)
    if init is None or init is object.__init__:
        return None
    sig = inspect.signature(init)
    params = list(sig.parameters.values())[1:]  # without self
    text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    # string annotations (from __future__ import annotations) print quoted
    return text.replace("'", ""), None


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", literal_docstring)
    app.connect("autodoc-process-signature", class_signature)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
