"""Sphinx extension: roles for numbers typed by hand in a chapter's text.

{paper}`-89.96` marks a number quoted from a paper, {setting}`0.01` a setting the book chose. Both
render the text as it is (classes "paper-value" and "setting-value"). Their purpose is the prose
check (`tools/prose.py`): a measured number in a chapter's text must come from the cell that
computed it (myst-nb's `{glue:text}` role); a number typed by hand must be a quotation of a paper
or a setting, and says so with one of these roles.
"""

from __future__ import annotations

from docutils import nodes


def paper_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    node = nodes.inline(rawtext, text, classes=[f"{name}-value"])
    return [node], []


def setup(app):
    app.add_role("paper", paper_role)
    app.add_role("setting", paper_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
