"""Sphinx extension: the book's equation numbers are per chapter section, "(3.2)".

Sphinx numbers labelled equations across the whole book (the deep-GP chapter's first display
would be "(35)"), beside the papers' own "(1)"..."(20)" in the same sentences. Here every
numbered display takes the number of the section it sits in (the chapters' `## 3. ...` headings)
and its place in that section: the second numbered equation of Section 3 is "(3.2)", on the page
and in every `{eq}` reference to it. An integer never appears, so no number of ours reads as the
paper's. A numbered equation outside a numbered section is a warning (an error in the book's
build). Needs `math_numfig: false`, so that Sphinx shows the numbers set here.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)
SECTION = re.compile(r"(\d+)\.\s")


def section_number(node: nodes.Node) -> str | None:
    """The number of the nearest enclosing section whose title starts "N. ", or None."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.section) and parent.children:
            title = parent.children[0]
            if isinstance(title, nodes.title):
                match = SECTION.match(title.astext())
                if match:
                    return match.group(1)
        parent = parent.parent
    return None


def number_equations(app, doctree: nodes.document) -> None:
    """Renumber the page's numbered displays "(section.k)", in the page and in the math domain."""
    domain = app.env.get_domain("math")
    docname = app.env.docname
    counts: dict[str, int] = {}
    for node in doctree.findall(nodes.math_block):
        if not node.get("number"):
            continue
        section = section_number(node)
        if section is None:
            logger.warning(
                "numbered equation %r outside a numbered section ('## N. ...')",
                node.get("label"),
                location=node,
            )
            continue
        counts[section] = counts.get(section, 0) + 1
        number = f"{section}.{counts[section]}"
        node["number"] = number
        label = node.get("label")
        if label and domain.equations.get(label, (None,))[0] == docname:
            domain.equations[label] = (docname, number)


def setup(app):
    app.connect("doctree-read", number_equations)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
