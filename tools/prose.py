#!/usr/bin/env python3
"""The prose check: no measured number typed by hand in a chapter's text.

    python tools/prose.py                 list, per chapter, the numbers its prose types by hand
    python tools/prose.py dgp partition   only these chapters

A number the book measured reaches the text from the cell that computed it, through myst-nb's
`{glue:text}` role (`lib.record.glue(name, value)` in the cell, {glue:text}`name:.2f` in the
text); a number quoted from a paper is marked as such with the `{paper}` role
({paper}`-89.96`, rendered as it is by tools/paper_role.py) next to its citation, and a setting
the book chose (a learning rate, a probability of the curriculum) with the `{setting}` role.
This script scans the text of every chapter (markdown outside code cells, math, inline code and
roles) for what looks like a measured figure: a number with a decimal point, a percentage, a
number with a unit of time, or a number after ±. References (eq. 3.15, Section 4.1, Table 2,
version numbers) are skipped. Integers without a unit (counts, sizes, settings) are not flagged:
the check cannot tell a count that was measured from one that was chosen, and the text must state
those from cells by habit. A number alone in inline math ($-83.92$) counts as prose; a formula
does not.

`tests/test_prose.py` runs it on every chapter: each must be at zero (a chapter being cleaned may be
listed there with a count that can only go down).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NUMBER = re.compile(
    r"±\s*\d[\d,]*(?:\.\d+)?"  # an uncertainty
    r"|(?<![\w.])[−-]?\d[\d,]*\.\d+(?:\s*%)?"  # a decimal (maybe a percentage)
    r"|(?<![\w.])\d[\d,]*\s*%"  # an integer percentage
    r"|(?<![\w.])\d[\d,]*\s*(?:ns|ms|µs|seconds?|minutes?|min|hours?|h)\b"  # a time
)
REFERENCE = re.compile(
    r"\b(?:eqs?|Eqs?|Secs?|Sections?|sections?|Appendix|appendix|Tables?|Figures?|Figs?|footnote|"
    r"Python|jax|jaxlib|flax|optax|orbax|GPflux|GPyTorch|GPflow|TensorFlow|PyTorch|version|v)"
    r"\.?\s*[A-Z]?\d+(?:\.\d+)*(?:\s*(?:[–,-]|and|to)\s*[A-Z]?\d+(?:\.\d+)*)*"
    r"|\b\d+\.\d+\.\d+\b"  # a version number
)
ROLE = re.compile(r"\{[\w:.-]+\}`[^`]*`")  # {glue:text}`...`, {paper}`...`, {eq}`...`, {cite}`...`


MATH_NUMBER = re.compile(
    r"\$\s*([−-]?\d[\d,{}]*(?:\.\d+)?(?:\s*\\(?:pm|times)\s*[\d^{}.-]+)*)\s*\$"
)


def _blank(match: re.Match) -> str:
    return " " + "\n" * match.group(0).count("\n")  # keep the line count


def _strip(text: str) -> str:
    """`text` without roles, code, formulas and references; inline math may span lines."""
    text = ROLE.sub(_blank, text)
    text = re.sub(r"`[^`]*`", _blank, text)  # inline code
    text = MATH_NUMBER.sub(
        lambda m: " " + m.group(1).replace("{,}", ",") + " ", text
    )  # $-83.92$ is a number
    text = re.sub(r"\$[^$]*\$", _blank, text)  # inline math
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"<!--.*?-->", _blank, text, flags=re.S)
    return REFERENCE.sub(_blank, text)


def typed_numbers(path: Path) -> list[tuple[int, str, str]]:
    """(line number, the number, the line) for each measured-looking number in `path`'s prose."""
    lines = path.read_text().split("\n")
    prose, in_code, in_math = [], False, False
    for line in lines:
        stripped = line.strip()
        keep = ""
        if stripped.startswith(
            "```"
        ):  # a fence opens with ```{code-cell} or ```text, closes with ```
            in_code = stripped != "```" if not in_code else stripped != "```"
        elif stripped.startswith("$$"):
            in_math = not in_math if stripped.count("$$") == 1 else in_math
        elif not (in_code or in_math or re.fullmatch(r"\(.*\)=", stripped)):
            keep = line
        prose.append(keep)
    hits = []
    for number, text in enumerate(_strip("\n".join(prose)).split("\n"), start=1):
        for m in NUMBER.finditer(text):
            hits.append((number, m.group(0).strip(), lines[number - 1].strip()))
    return hits


def chapters() -> list[str]:
    return sorted(p.stem for p in (ROOT / "book").glob("*.md") if p.stem not in ("references",))


def main(argv: list[str]) -> int:
    names = argv or chapters()
    total = 0
    for name in names:
        hits = typed_numbers(ROOT / "book" / f"{name}.md")
        total += len(hits)
        for line, token, text in hits:
            print(f"book/{name}.md:{line}: {token!r}: {text[:100]}")
    print(f"{total} number(s) typed by hand in the prose of {len(names)} chapter(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
