"""The catalogue of misconceptions: the mistakes learners really make, each named, explained and sent back to the
lesson section that fixes it (issue 53).

A ``Misconception`` is an id (``mean-of-means``), a one-line name, a two-sentence explanation of why it is wrong and
the lesson section that teaches the right thing (``lessons/01_theory.ipynb``, its section title and the section's
cell id). Its name, explanation and section title are English templates marked with ``N_()``: they are in the
package's catalog (``locale/pt_BR/LC_MESSAGES/gradacc.po``) and ``Misconception.hint()`` says them in the learner's
language (``gradacc.i18n``).

Every module of this package may define misconceptions: ``catalogue()`` imports each module (``pkgutil``) and
collects every module-level ``Misconception`` it holds, so a new module (``reading.py`` for the questions in the
lessons) adds entries without touching the others. Ids are unique across the package (``catalogue()`` raises on a
second one).

The checks recognise a misconception from numbers only (``gradacc.course.checks.mistakes``): never from the code.
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from dataclasses import dataclass
from functools import cache

from ...i18n import N_, language, translate

__all__ = ["Misconception", "catalogue", "lookup", "named_in", "WIDTH", "wrap"]

WIDTH = 100
"""Printed lines of a check are wrapped at word boundaries to this many characters (JupyterLab breaks a longer line
inside words: issue 55, item 5)."""


def wrap(text: str, indent: str = "") -> str:
    """``text`` wrapped at word boundaries to ``WIDTH`` characters; the lines after the first start with ``indent``.
    Never breaks a word (or a long code span) in two."""
    return textwrap.fill(text, width=WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


@dataclass(frozen=True)
class Misconception:
    """One misconception: what a learner believes, why it is wrong, and where the course teaches the right thing.

    Attributes:
        id: short kebab-case key, e.g. ``"mean-of-means"``; the gradebook's ``misconceptions`` column lists these.
        name: one line, an English template marked ``N_()`` (``"a mean of micro-batch means"``).
        why: two sentences, English, marked ``N_()``: why it is wrong, true in general (or saying when).
        lesson: the lesson that fixes it, ``"lessons/NN_topic.ipynb"``.
        section: that section's heading as the lesson writes it (``"3. Unequal micro-batches: weight by counts"``),
            marked ``N_()``.
        cell: the id of the section's heading cell in the lesson (``"theory-16"``).
    """

    id: str
    name: str
    why: str
    lesson: str
    section: str
    cell: str

    def where(self, lang: str | None = None) -> str:
        """The lesson file of ``lang``'s edition (``pt-BR/lessons/...`` for Brazilian Portuguese) and its section."""
        lang = lang or language()
        path = self.lesson if lang == "en" else f"pt-BR/{self.lesson}"
        return translate(_SECTION, lang).format(notebook=path, section=translate(self.section, lang))

    def hint(self, lang: str | None = None) -> str:
        """What a check prints after its detail when it recognises this misconception, in ``lang`` (default: the
        learner's language), wrapped at word boundaries: its name, why it is wrong, and where the lesson fixes it."""
        lang = lang or language()
        lines = [
            translate(_RECOGNISED, lang).format(name=translate(self.name, lang)),
            translate(self.why, lang),
            translate(_FIXED_IN, lang).format(where=self.where(lang)),
        ]
        return "\n".join(wrap(line, "  ") for line in lines)


_RECOGNISED = N_("This looks like a known misconception: {name}.")
_FIXED_IN = N_("The lesson that fixes it: {where}.")
_SECTION = N_('{notebook}, section "{section}"')


@cache
def catalogue() -> dict[str, Misconception]:
    """Every misconception of every module of this package, by id.

    Raises:
        ValueError: two entries share an id (naming it and both modules).
    """
    found: dict[str, tuple[Misconception, str]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Misconception):
                if value.id in found and found[value.id][0] is not value:
                    raise ValueError(
                        f"misconception {value.id!r} is defined twice: in {found[value.id][1]} and {module.__name__}"
                    )
                found[value.id] = (value, module.__name__)
    return {key: found[key][0] for key in sorted(found)}


def lookup(misconception_id: str) -> Misconception:
    """The catalogued misconception ``misconception_id``.

    Raises:
        KeyError: no such id (naming it and the closest known ids).
    """
    entries = catalogue()
    if misconception_id not in entries:
        import difflib

        close = difflib.get_close_matches(misconception_id, list(entries), n=3)
        raise KeyError(f"no misconception {misconception_id!r} in the catalogue; did you mean {close}?")
    return entries[misconception_id]


def named_in(text: str, lang: str) -> list[str]:
    """The ids of the misconceptions whose hint ``text`` holds (what a check cell printed, in ``lang``), in the order
    printed; the wrapping of the printed lines does not matter. The grader reads the visible check's output with it
    (``gradacc grade``'s ``misconceptions`` column): no computation of its own."""
    flat = " ".join(text.split())
    found = []
    for entry in catalogue().values():
        line = translate(_RECOGNISED, lang).format(name=translate(entry.name, lang))
        at = flat.find(" ".join(line.split()))
        if at >= 0:
            found.append((at, entry.id))
    return [key for _, key in sorted(found)]
