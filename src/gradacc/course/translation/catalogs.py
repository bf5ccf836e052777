"""The PO catalogs of a language: what is extracted from the English sources, and how a catalog follows them.

One catalog per source, under ``locale/<lang>/LC_MESSAGES/``, named after the source's path: ``lessons/01_theory.po``
(a lesson), ``solutions/01_theory.po`` (a solution, and so its exercise), ``docs/index.po`` (a page), ``README.po``,
and ``gradacc.po``: the package's learner-facing strings (``gradacc.i18n``), extracted by Babel's Python extractor
from every ``_("...")`` and ``N_("...")`` in ``src/gradacc``.

An entry of a notebook's catalog has the cell's id as its ``msgctxt`` and the notebook as its location; a page's
entries have no context. ``update_catalog`` follows gettext's ``msgmerge``: an entry whose English is unchanged keeps
its translation; an English unit that changed gets the translation of the unit it replaced, marked ``fuzzy`` with the
old English as ``#| msgid`` (for a notebook, the most similar old unit of the same cell; for a page or ``gradacc.po``,
the most similar old unit of the file, if at least 60 % alike, difflib's and msgmerge's rule); a new unit whose
English already has a finished translation in another catalog (a setup cell's comment, ``## Summary``) gets it; an
entry whose English is gone is kept as obsolete (``#~``) when it was translated.
"""

from __future__ import annotations

import datetime as dt
import difflib
import io
from dataclasses import dataclass
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

from ..badges import BADGES_ID, NAV_ID, read_repository
from .units import code_segments, markdown_segments

__all__ = [
    "DOMAIN",
    "LANGUAGE",
    "Unit",
    "sources",
    "catalog_path",
    "document_units",
    "code_units",
    "update_catalog",
    "read_catalog",
    "write_catalog",
    "extract",
    "SCOPE_FILE",
    "scope",
]

DOMAIN = "gradacc"
LANGUAGE = "pt_BR"
EDITION = "pt-BR"
"""The folder of the edition (``pt-BR/lessons``, ...) and the suffix of its README (``README.pt-BR.md``)."""
NOTEBOOK_GLOBS = ("lessons/*.ipynb", "solutions/*.ipynb")
PAGE_GLOBS = ("README.md", "docs/index.md", "docs/troubleshooting.md", "docs/instructors/*.md")
SCOPE_FILE = "translated.txt"
"""``locale/<lang>/translated.txt``: the sources whose catalogs are finished (tests/test_translation.py requires every
entry of those translated); the lead adds a source when its translator is done."""
_DATE = dt.datetime(2026, 12, 3, tzinfo=dt.timezone.utc)  # a new catalog's dates: fixed, so extraction is repeatable
_SIMILAR = 0.6  # difflib.get_close_matches' default cutoff, as msgmerge's fuzzy matching


@dataclass(frozen=True)
class Unit:
    """One translatable unit of a source: its English ``text``, its cell id (``context``; None in a page) and what
    it is (``kind``: ``markdown`` or ``comment``; ``single``: a comment after code, translated on one line)."""

    text: str
    context: str | None
    kind: str
    single: bool = False


def sources(root: Path) -> list[str]:
    """The English sources, as paths relative to ``root``: lessons, solutions, the learner's and instructor's pages."""
    found = []
    for pattern in (*NOTEBOOK_GLOBS, *PAGE_GLOBS):
        found += sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if not p.name.startswith("."))
    return found


def catalog_path(root: Path, source: str, lang: str = LANGUAGE) -> Path:
    """``locale/<lang>/LC_MESSAGES/<source without its extension>.po``; ``source`` ``"gradacc"``: the package's."""
    stem = source.rsplit(".", 1)[0] if source != DOMAIN else DOMAIN
    return root / "locale" / lang / "LC_MESSAGES" / f"{stem}.po"


def scope(root: Path, lang: str = LANGUAGE) -> list[str]:
    """The sources listed in ``locale/<lang>/translated.txt`` (one a line; ``#`` starts a comment)."""
    path = root / "locale" / lang / SCOPE_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def code_units(source: str, context: str | None = None) -> list[Unit]:
    return [Unit(s.text, context, s.kind, s.single) for s in code_segments(source) if s.kind != "keep"]


def document_units(root: Path, source: str) -> list[Unit]:
    """The units of one source, in document order (a notebook's badges and navigation cells are not translated:
    the edition makes them)."""
    path = root / source
    if source.endswith(".ipynb"):
        units = []
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.get("id") in (BADGES_ID, NAV_ID):
                continue
            if cell.cell_type == "markdown":
                units += [
                    Unit(s.text, cell.id, s.kind, s.single) for s in markdown_segments(cell.source) if s.kind != "keep"
                ]
            elif cell.cell_type == "code":
                units += code_units(cell.source, cell.id)
        return units
    segments = markdown_segments(path.read_text(encoding="utf-8"))
    return [Unit(s.text, None, s.kind, s.single) for s in segments if s.kind != "keep"]


_KIND_NOTE = {
    ("markdown", False): "markdown",
    ("comment", False): "a comment in code: one line of translation per line you want",
    ("comment", True): "a comment after code: translate it on one line",
}


def _template(root: Path, source: str) -> list[Message]:
    if source == DOMAIN:
        return _package_template(root)
    messages = {}
    for unit in document_units(root, source):
        key = (unit.text, unit.context)
        if key not in messages:
            note = _KIND_NOTE[unit.kind, unit.single]
            where = f"cell {unit.context}: " if unit.context else ""
            messages[key] = Message(
                unit.text, locations=[(source, None)], auto_comments=[where + note], context=unit.context
            )
    return list(messages.values())


def _package_template(root: Path) -> list[Message]:
    """``_("...")`` and ``N_("...")`` of ``src/gradacc`` (Babel's Python extractor), with ``# TRANSLATORS:`` notes."""
    package = root / "src" / "gradacc"
    messages: dict[str, Message] = {}
    found = extract_from_dir(package, keywords={"_": None, "N_": None}, comment_tags=("TRANSLATORS:",))
    for filename, lineno, text, comments, _context in sorted(found, key=lambda f: (f[0], f[1])):
        location = (f"src/gradacc/{filename}", lineno)
        if text in messages:
            messages[text].locations.append(location)
        else:
            messages[text] = Message(
                text, locations=[location], auto_comments=list(comments), flags=["python-brace-format"]
            )
    return list(messages.values())


def read_catalog(path: Path) -> Catalog | None:
    """The catalog at ``path``, or None when there is none."""
    if not path.exists():
        return None
    with path.open("rb") as f:
        return read_po(f, locale=LANGUAGE)


def write_catalog(catalog: Catalog) -> bytes:
    """The PO file's bytes: 76 columns, entries in document order, previous English of fuzzy entries, no line numbers."""
    out = io.BytesIO()
    write_po(out, catalog, width=76, include_previous=True, include_lineno=False)
    return out.getvalue()


def _new_catalog(source: str, old: Catalog | None, bugs: str | None = None) -> Catalog:
    catalog = Catalog(
        locale=LANGUAGE,
        domain=source,
        project="gradacc",
        version="course",
        creation_date=old.creation_date if old else _DATE,
        revision_date=old.revision_date if old else _DATE,
        last_translator=old.last_translator if old else "gradacc translators",
        language_team=old.language_team if old else "Português (Brasil) <pt_BR>",
        msgid_bugs_address=bugs,
        fuzzy=False,
    )
    catalog.header_comment = (
        f"# Brazilian Portuguese translation of {source} (the English source is the truth).\n"
        "# Made by `gradacc translate extract`; translate msgstr, keep the rest (locale/README.md)."
    )
    return catalog


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.lower().strip(), b.lower().strip()).ratio()


def update_catalog(
    source: str,
    template: list[Message],
    old: Catalog | None,
    compendium: dict[str, str] | None = None,
    bugs: str | None = None,
) -> Catalog:
    """The catalog of ``source`` for ``template`` (the English units), keeping what ``old`` holds (module docstring).

    Args:
        compendium: finished translations of other catalogs, English -> translation, for new units.
        bugs: where to report a problem with the English (the header's ``Report-Msgid-Bugs-To``).
    """
    catalog = _new_catalog(source, old, bugs)
    previous = {} if old is None else {(m.id, m.context): m for m in [*old, *old.obsolete.values()] if m.id}
    used: set = set()
    results: dict[tuple, Message] = {}
    for message in template:  # first every unit whose English is unchanged
        found = previous.get((message.id, message.context))
        if found is not None:
            used.add((found.id, found.context))
            results[message.id, message.context] = _carry(message, found, changed=False)
    for message in template:  # then the units that changed, or are new
        key = (message.id, message.context)
        if key in results:
            continue
        scoped = message.context is not None
        candidates = [
            m
            for k, m in previous.items()
            if k not in used and m.string and (not scoped or m.context == message.context)
        ]
        best = max(candidates, key=lambda m: _similarity(m.id, message.id), default=None)
        if best is not None and (scoped or _similarity(best.id, message.id) >= _SIMILAR):
            used.add((best.id, best.context))
            results[key] = _carry(message, best, changed=True)
        else:
            results[key] = message.clone()
            if compendium and message.id in compendium:
                results[key].string = compendium[message.id]
    for message in template:
        result = results[message.id, message.context]
        if source != DOMAIN:  # prose: a "%" or a "{1}" of LaTeX is no format string (Babel guesses from the text)
            result.flags -= {"python-format", "python-brace-format"}
        catalog[message.id] = result
    for key, message in previous.items():
        if key not in used and message.string and key not in results:
            catalog.obsolete[key] = message
    return catalog


def _carry(message: Message, old: Message, *, changed: bool) -> Message:
    new = message.clone()
    new.string = old.string
    new.user_comments = list(old.user_comments)
    new.flags |= {flag for flag in old.flags if flag != "python-format"}
    if changed:
        new.flags.add("fuzzy")
        new.previous_id = [old.id] if isinstance(old.id, str) else list(old.id)
    elif "fuzzy" in old.flags:
        new.previous_id = list(old.previous_id)
    return new


def _compendium(catalogs: dict[str, Catalog | None]) -> dict[str, str]:
    """English -> translation, from every finished (translated, not fuzzy) entry of ``catalogs``: the first wins."""
    found: dict[str, str] = {}
    for catalog in catalogs.values():
        for message in catalog or ():
            if message.id and message.string and not message.fuzzy:
                found.setdefault(message.id, message.string)
    return found


def extract(root: Path, *, write: bool = True) -> list[Path]:
    """Extract every source's units and update its catalog (``update_catalog``); returns the catalogs that changed
    (``write``) or would change (``write=False``: nothing is written)."""
    names = [*sources(root), DOMAIN]
    old = {name: read_catalog(catalog_path(root, name)) for name in names}
    compendium = _compendium({name: c for name, c in old.items() if name != DOMAIN})
    bugs = read_repository(root / "pyproject.toml").url + "/issues"
    changed = []
    for name in names:
        path = catalog_path(root, name)
        memory = None if name == DOMAIN else compendium
        updated = update_catalog(name, _template(root, name), old[name], memory, bugs)
        data = write_catalog(updated)
        if not path.exists() or path.read_bytes() != data:
            changed.append(path)
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return changed
