"""What a translation may not change, and the glossary: the checks of ``gradacc translate check`` and of
``tests/test_translation.py``. Each problem is one line naming the catalog, the cell id and the English text.

* **Finished** (the sources of ``locale/<lang>/translated.txt``, and ``gradacc.po``): no entry is empty or fuzzy.
* **Kept as they are** (every translated entry of every catalog): the numbers, inline code spans, math (``$...$``),
  link targets and URLs of ``msgstr`` are those of ``msgid`` (as multisets: the words around them may move); the
  leading markdown marker (heading level, list marker, indentation, table pipe) and a table row's cell count are the
  same; a comment that follows code stays on one line; a message of ``gradacc.po`` keeps its ``{placeholders}``; a
  string of code keeps its f-string ``{fields}`` (the words quoted inside a field may change) and its escapes.
  Numbers are compared as written, except thousands: ``1,797`` may be written ``1797`` or ``1 797`` (in Portuguese
  the comma is the decimal mark, so ``1,797`` would read as one point seven); decimals keep Python's point
  (``0.055``, as the outputs print them).
* **Glossary** (``locale/<lang>/glossary.csv``): where the English of a finished entry has a term, its Portuguese has
  the glossary's rendering and none of the forms to avoid; in a finished source (not ``gradacc.po``, whose messages
  are read one at a time), the first entry that uses a term marked ``beside`` also has the English term
  (``microlote (*micro-batch*)``). A translator comment ``# glossary-ignore: TERM`` on an entry lifts the rendering
  check of that term there (a verb "to weight", say).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import polib

from .catalogs import DOMAIN, LANGUAGE, catalog_path, read_catalog, scope, sources
from .units import field_key, string_fields

__all__ = [
    "prose",
    "invariants",
    "entry_problems",
    "GlossaryTerm",
    "read_glossary",
    "glossary_problems",
    "unfinished",
    "review",
]

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_URL = re.compile(r"<?(https?://[^\s)>\]`\"]+)>?")
_HTML = re.compile(r"<[a-zA-Z/!][^>\n]*>")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")
_EN_THOUSANDS = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?!\d|[.,]\d)")
_PT_THOUSANDS = re.compile(r"(?<![\w.,])\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?!\d|[.,]\d)")
_MARKER = re.compile(r"^\s*(?:#{1,6} |[-*+] |\d+[.)] |> ?|\|)?")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def prose(text: str) -> str:
    """``text`` without code spans, math, link targets, URLs and HTML tags, its blanks collapsed."""
    for pattern in (_CODE, _MATH):
        text = pattern.sub(" ", text)
    text = _TARGET.sub("] ", text)
    text = _URL.sub(" ", _HTML.sub(" ", text))
    return " ".join(text.split())


def invariants(text: str, *, english: bool = True) -> dict[str, list[str]]:
    """What a translation keeps, as sorted lists: ``code`` spans, ``math``, link ``targets`` and ``urls``, ``numbers``
    (thousands separators dropped: ``,`` in English, a space in Portuguese)."""
    bare = _MATH.sub(" ", _CODE.sub(" ", text))
    grouped = (_EN_THOUSANDS if english else _PT_THOUSANDS).sub(lambda m: re.sub(r"\D", "", m.group(0)), prose(text))
    return {
        "code": sorted(m.group(2) for m in _CODE.finditer(text)),
        "math": sorted(m.group(0) for m in _MATH.finditer(_CODE.sub(" ", text))),
        "targets": sorted(_TARGET.findall(bare)),
        "urls": sorted(u for u in _URL.findall(_TARGET.sub("]", bare))),
        "numbers": sorted(_NUMBER.findall(grouped)),
    }


def _where(source: str, message: polib.POEntry) -> str:
    cell = f", cell {message.msgctxt}" if message.msgctxt else ""
    english = " ".join(message.msgid.split())
    return f"{source}{cell}: {english[:90]!r}"


def entry_problems(source: str, message: polib.POEntry) -> list[str]:
    """What ``message``'s translation changed that it must keep (module docstring); empty for an untranslated entry."""
    if not message.msgstr:
        return []
    found = []
    english, translated = message.msgid, message.msgstr
    if source == DOMAIN:
        want, got = sorted(_PLACEHOLDER.findall(english)), sorted(_PLACEHOLDER.findall(translated))
        if want != got:
            found.append(f"placeholders {got} instead of {want}")
    if "a string the learner reads" in message.comment:  # fields compared by ``field_key`` below, not as numbers
        try:
            english, translated = (
                "".join(field_key(p) if field else p for p, field in string_fields(t)) for t in (english, translated)
            )
        except ValueError:
            english, translated = message.msgid, message.msgstr
    ours, theirs = invariants(english), invariants(translated, english=False)
    for kind in ours:
        if ours[kind] != theirs[kind]:
            missing = [x for x in ours[kind] if x not in theirs[kind]]
            extra = [x for x in theirs[kind] if x not in ours[kind]]
            found.append(f"{kind} differ: missing {missing}, added {extra}")
    if _MARKER.match(english).group(0) != _MARKER.match(translated).group(0):
        found.append(
            f"starts with {_MARKER.match(translated).group(0)!r}, the English with {_MARKER.match(english).group(0)!r}"
        )
    if english.lstrip().startswith("|") and _CODE.sub("", english).count("|") != _CODE.sub("", translated).count("|"):
        found.append("a table row with another number of cells")
    if "a string the learner reads" in message.comment:
        try:
            want = sorted(field_key(p) for p, field in string_fields(english) if field)
            got = sorted(field_key(p) for p, field in string_fields(translated) if field)
        except ValueError as exc:
            found.append(str(exc))
        else:
            if want != got:
                found.append(f"f-string fields {got} instead of {want} (the quoted words inside one may change)")
        if english.count("\\") != translated.count("\\"):
            found.append("another number of backslashes (escapes such as \\n stay as they are)")
    if "after code" in message.comment and "\n" in translated:
        found.append("a comment after code translated on several lines (keep it on one)")
    return [f"{_where(source, message)}: {p}" for p in found]


@dataclass(frozen=True)
class GlossaryTerm:
    """A row of ``glossary.csv``: the English ``term``, its Portuguese rendering, whether the English goes beside it at
    its first use, and case-insensitive patterns: where the English uses the term, what a translation must hold, and
    forms to avoid."""

    term: str
    portuguese: str
    beside: bool
    english_pattern: re.Pattern
    portuguese_pattern: re.Pattern
    avoid: re.Pattern | None


def read_glossary(root: Path, lang: str = LANGUAGE) -> list[GlossaryTerm]:
    """The rows of ``locale/<lang>/glossary.csv``: ``english, portuguese, beside, english_pattern,
    portuguese_pattern, avoid, note``; an empty pattern is the term itself (``\\b`` before the English).

    Raises:
        ValueError: a row whose ``beside`` is not ``yes`` or ``no``, or with an invalid regular expression.
    """
    terms = []
    with (root / "locale" / lang / "glossary.csv").open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["beside"] not in ("yes", "no"):
                raise ValueError(f"glossary.csv, {row['english']!r}: beside must be yes or no, got {row['beside']!r}")
            try:
                terms.append(
                    GlossaryTerm(
                        row["english"],
                        row["portuguese"],
                        row["beside"] == "yes",
                        re.compile(row["english_pattern"] or r"\b" + re.escape(row["english"]), re.I),
                        re.compile(row["portuguese_pattern"] or re.escape(row["portuguese"]), re.I),
                        re.compile(row["avoid"], re.I) if row["avoid"] else None,
                    )
                )
            except re.error as exc:
                raise ValueError(f"glossary.csv, {row['english']!r}: {exc}") from exc
    return terms


def _ignored(message: polib.POEntry) -> set[str]:
    lines = message.tcomment.splitlines()
    return {c.split(":", 1)[1].strip() for c in lines if c.strip().startswith("glossary-ignore:")}


def _words(message: polib.POEntry, text: str) -> str:
    """``text`` without its f-string fields when ``message`` is a string of code (``{device.type}`` is no prose), or
    its ``{placeholders}`` in a message of the package (``{optimizer}``)."""
    if "python-brace-format" in message.flags:
        return _PLACEHOLDER.sub(" ", text)
    if "a string the learner reads" not in message.comment:
        return text
    try:
        return "".join(" " if field else piece for piece, field in string_fields(text))
    except ValueError:
        return text


def glossary_problems(
    source: str, messages: list[polib.POEntry], terms: list[GlossaryTerm], *, first_use: bool
) -> list[str]:
    """The glossary's rules over the finished entries of one catalog, in document order (module docstring);
    ``first_use``: also require the English beside the first use of each ``beside`` term."""
    found, seen = [], set()
    for message in messages:
        if not message.msgstr or message.fuzzy or message.obsolete:
            continue
        english, translated = prose(_words(message, message.msgid)), prose(_words(message, message.msgstr))
        for term in terms:
            if not term.english_pattern.search(english):
                continue
            if term.term not in _ignored(message) and not term.portuguese_pattern.search(translated):
                found.append(f"{_where(source, message)}: {term.term!r} is {term.portuguese!r} here")
            avoided = term.avoid.search(translated) if term.avoid else None
            if avoided:
                found.append(f"{_where(source, message)}: {avoided.group(0)!r}: write {term.portuguese!r}")
            if "a string the learner reads" in message.comment:
                continue  # what code prints or draws carries no English beside its terms
            if first_use and term.beside and term.term not in seen and not term.english_pattern.search(translated):
                found.append(f"{_where(source, message)}: first use of {term.term!r}: write the English beside it")
            seen.add(term.term)
    return found


def unfinished(source: str, messages: list[polib.POEntry]) -> list[str]:
    """Entries without a translation or marked fuzzy (the English changed since it was translated)."""
    return [
        f"{_where(source, m)}: {'fuzzy (the English changed)' if m.fuzzy else 'not translated'}"
        for m in messages
        if not m.obsolete and (not m.msgstr or m.fuzzy)
    ]


def review(root: Path) -> dict[str, list[str]]:
    """Every check over every catalog: ``{"unfinished": ..., "kept": ..., "glossary": ...}``, each a list of problems.
    ``unfinished`` and the first-use rule cover the finished sources (``translated.txt``) only."""
    finished = set(scope(root))
    unknown = sorted(finished - {*sources(root), DOMAIN})
    problems: dict[str, list[str]] = {
        "unfinished": [f"translated.txt lists {s!r}, which is no source of the course" for s in unknown],
        "kept": [],
        "glossary": [],
    }
    terms = read_glossary(root)
    for source in [*sources(root), DOMAIN]:
        messages = [m for m in read_catalog(catalog_path(root, source)) or () if not m.obsolete]
        if source in finished:
            problems["unfinished"] += unfinished(source, messages)
        for message in messages:
            if not message.fuzzy:
                problems["kept"] += entry_problems(source, message)
        first_use = source in finished and source != DOMAIN  # a message is read on its own, not in an order
        problems["glossary"] += glossary_problems(source, messages, terms, first_use=first_use)
    return problems
