"""Sphinx extension: the interactive tables of itables (DataTables) work offline in the built book.

A notebook's table comes from `itables.to_html_datatable(..., connected=False)`: its HTML waits for
the DataTables bundle, which itables would otherwise inline into every notebook (about a megabyte)
or fetch from a CDN. This extension writes that bundle once, as a classic script
`_static/itables_offline.js` (the bundle's module imported from a blob URL, which works on file://
too), generated from the installed itables package, and adds it to the pages that hold such a
table.
"""

from __future__ import annotations

import re
from pathlib import Path

SCRIPT = "itables_offline.js"


def bundle_script() -> str:
    """The JavaScript of itables' offline initialisation, without its <script> tags."""
    from itables.javascript import generate_init_offline_itables_html
    from itables.options import dt_bundle

    html = generate_init_offline_itables_html(dt_bundle)
    match = re.match(r"\s*<script>(.*?)</script>", html, flags=re.S)  # (then a <noscript> note)
    if match is None or "injectModule" not in match.group(1):
        raise RuntimeError("itables' offline initialisation does not start with its <script>")
    return match.group(1)


def add_to_pages_with_tables(app, pagename, templatename, context, doctree) -> None:
    if "_itables_" in context.get("body", ""):
        app.add_js_file(SCRIPT)


def write_script(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / SCRIPT).write_text(bundle_script(), encoding="utf-8")


def setup(app):
    app.connect("html-page-context", add_to_pages_with_tables)
    app.connect("build-finished", write_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
