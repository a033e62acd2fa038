"""Sphinx extension: the references list labelled by author and year ("Gregor et al. 2014"),
the form of the citations in the text, with each entry's DOI or URL as a link.

Registers the pybtex formatting style `authoryear` (unsrt's entries, which print the `doi` and
`url` fields, sorted by author and year) that `_config.yml` selects with `bibtex_default_style`.
"""

from __future__ import annotations

from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    return str(Text.from_latex(" ".join(person.prelast_names + person.last_names)))


def _label(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in people]
    if len(names) > 2:
        who = f"{names[0]} et al."
    else:
        who = " and ".join(names) or entry.key
    return f"{who} {entry.fields.get('year', '')}".strip()


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [_label(e) for e in entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:  # two works of the same authors and year: 2011a, 2011b
                seen[label] += 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabels
    default_sorting_style = "author_year_title"


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
