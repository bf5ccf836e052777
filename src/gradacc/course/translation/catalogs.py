"""The PO catalogs of a language: what is extracted from the English sources, and how a catalog follows them.

One catalog per source, under ``locale/<lang>/LC_MESSAGES/``, named after the source's path: ``lessons/01_theory.po``
(a lesson), ``solutions/01_theory.po`` (a solution, and so its exercise), ``docs/index.po`` (a page), ``README.po``,
and ``gradacc.po``: the package's learner-facing strings (``gradacc.i18n``), extracted by Babel's Python extractor
from every ``_("...")`` and ``N_("...")`` in ``src/gradacc``.

The files are read and written with polib, which keeps every part of gettext's PO format, a fuzzy entry's previous
English (``#| msgid``) included: Babel 2.19 reads that line as a translator comment (python-babel/babel#206, open)
and writes a multi-line one as one wrapped comment, which msgmerge and Poedit cannot read (tried here). Babel's Python
extractor (what ``pybabel extract`` runs) finds the package's strings.

An entry of a notebook's catalog has the cell's id as its ``msgctxt`` and the notebook as its location; a page's
entries have no context. ``update_catalog`` follows gettext's ``msgmerge``: an entry whose English is unchanged keeps
its translation; an English unit that changed gets the translation of the unit it replaced, marked ``fuzzy`` with the
old English as ``#| msgid`` (for a notebook, the most similar old unit of the same cell; for a page or ``gradacc.po``,
the most similar old unit of the file, if at least 60 % alike, difflib's and msgmerge's rule); a new unit whose
English already has a finished translation in another catalog (a setup cell's comment, ``## Summary``) gets it; an
entry whose English is gone is kept as obsolete (``#~``) when it was translated.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib
from babel.messages.extract import extract_from_dir

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
    "STRINGS_FILE",
    "string_sources",
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
STRINGS_FILE = "strings.txt"
"""``locale/<lang>/strings.txt``: the notebooks whose code's strings (what cells print and draw, docstrings) are units
of their catalogs (``units.display_strings``), the others' code keeps its English strings: the edition's output work
goes one notebook at a time; a notebook added here gets its strings on the next ``extract``."""
_DATE = "2026-12-03 00:00+0000"  # a new catalog's dates: fixed, so that extraction is repeatable
WIDTH = 78  # msgmerge's line width
_SIMILAR = 0.6  # difflib.get_close_matches' default cutoff, as msgmerge's fuzzy matching


@dataclass(frozen=True)
class Unit:
    """One translatable unit of a source: its English ``text``, its cell id (``context``; None in a page) and what
    it is (``kind``: ``markdown``, ``comment`` or ``string``; ``single``: a comment after code, translated on one line)."""

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


def string_sources(root: Path, lang: str = LANGUAGE) -> list[str]:
    """The sources listed in ``locale/<lang>/strings.txt`` (``STRINGS_FILE``; one a line, ``#`` a comment)."""
    path = root / "locale" / lang / STRINGS_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def code_units(source: str, context: str | None = None, *, strings: bool = False) -> list[Unit]:
    """The units of a code cell: its comments, and with ``strings`` the strings the learner reads
    (``units.display_strings``)."""
    return [Unit(s.text, context, s.kind, s.single) for s in code_segments(source, strings=strings) if s.kind != "keep"]


def document_units(root: Path, source: str) -> list[Unit]:
    """The units of one source, in document order (a notebook's badges and navigation cells are not translated:
    the edition makes them)."""
    path = root / source
    if source.endswith(".ipynb"):
        strings = source in string_sources(root)
        units = []
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.get("id") in (BADGES_ID, NAV_ID):
                continue
            if cell.cell_type == "markdown":
                units += [
                    Unit(s.text, cell.id, s.kind, s.single) for s in markdown_segments(cell.source) if s.kind != "keep"
                ]
            elif cell.cell_type == "code":
                units += code_units(cell.source, cell.id, strings=strings)
        return units
    segments = markdown_segments(path.read_text(encoding="utf-8"))
    return [Unit(s.text, None, s.kind, s.single) for s in segments if s.kind != "keep"]


_KIND_NOTE = {
    ("markdown", False): "markdown",
    ("comment", False): "a comment in code: one line of translation per line you want",
    ("comment", True): "a comment after code: translate it on one line",
    ("string", False): "a string the learner reads (printed, drawn on a figure, a docstring): keep its {fields}, "
    "escapes (\\n) and quotes as they are",
}


def _template(root: Path, source: str) -> list[polib.POEntry]:
    if source == DOMAIN:
        return _package_template(root)
    entries: dict[tuple, polib.POEntry] = {}
    for unit in document_units(root, source):
        key = (unit.text, unit.context)
        if key not in entries:
            where = f"cell {unit.context}: " if unit.context else ""
            entries[key] = polib.POEntry(
                msgid=unit.text,
                msgctxt=unit.context,
                occurrences=[(source, "")],
                comment=where + _KIND_NOTE[unit.kind, unit.single],
            )
    return list(entries.values())


def _package_template(root: Path) -> list[polib.POEntry]:
    """``_("...")`` and ``N_("...")`` of ``src/gradacc`` (Babel's Python extractor, what ``pybabel extract`` runs),
    with the ``# TRANSLATORS:`` comments above them; locations without line numbers, so that an edit elsewhere in a
    module leaves the catalog as it is."""
    entries: dict[str, polib.POEntry] = {}
    found = extract_from_dir(root / "src" / "gradacc", keywords={"_": None, "N_": None}, comment_tags=("TRANSLATORS:",))
    for filename, _lineno, text, comments, _context in sorted(found, key=lambda f: (f[0], f[1])):
        location = (f"src/gradacc/{filename}", "")
        if text not in entries:
            entries[text] = polib.POEntry(msgid=text, occurrences=[], flags=["python-brace-format"])
        entry = entries[text]
        if location not in entry.occurrences:
            entry.occurrences.append(location)
        entry.comment = "\n".join(dict.fromkeys([*filter(None, entry.comment.split("\n")), *comments]))
    return list(entries.values())


def read_catalog(path: Path) -> polib.POFile | None:
    """The catalog at ``path`` (polib), or None when there is none."""
    return polib.pofile(str(path), wrapwidth=WIDTH) if path.exists() else None


def write_catalog(catalog: polib.POFile) -> bytes:
    """The PO file's bytes as polib writes them (entries in document order, a fuzzy entry's previous English as
    ``#| msgid``, obsolete entries as ``#~``)."""
    return catalog.__unicode__().encode("utf-8")


def _new_catalog(source: str, old: polib.POFile | None, bugs: str | None) -> polib.POFile:
    catalog = polib.POFile(wrapwidth=WIDTH)
    catalog.header = (
        f"Brazilian Portuguese translation of {source} (the English source is the truth).\n"
        "Made by `gradacc translate extract`: translate the msgstr lines, keep the rest (locale/README.md)."
    )
    catalog.metadata = (
        dict(old.metadata)
        if old is not None
        else {
            "Project-Id-Version": "gradacc course",
            "Report-Msgid-Bugs-To": bugs or "",
            "POT-Creation-Date": _DATE,
            "PO-Revision-Date": _DATE,
            "Last-Translator": "gradacc translators",
            "Language-Team": "Português (Brasil)",
            "Language": LANGUAGE,
            "MIME-Version": "1.0",
            "Content-Type": "text/plain; charset=UTF-8",
            "Content-Transfer-Encoding": "8bit",
            "Plural-Forms": "nplurals=2; plural=(n > 1);",
        }
    )
    return catalog


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.lower().strip(), b.lower().strip(), autojunk=False).ratio()


def _carry(entry: polib.POEntry, old: polib.POEntry, *, changed: bool) -> polib.POEntry:
    """``entry`` (the template's) with ``old``'s translation, translator comment and flags; ``fuzzy`` and the old
    English as ``previous_msgid`` when the English ``changed``."""
    new = copy.deepcopy(entry)
    new.msgstr, new.tcomment = old.msgstr, old.tcomment
    new.flags = list(dict.fromkeys([*(["fuzzy"] if changed or old.fuzzy else []), *new.flags]))
    if changed:
        new.previous_msgid = old.msgid
    elif old.fuzzy:
        new.previous_msgid = old.previous_msgid
    return new


def update_catalog(
    source: str,
    template: list[polib.POEntry],
    old: polib.POFile | None,
    compendium: dict[str, str] | None = None,
    bugs: str | None = None,
) -> polib.POFile:
    """The catalog of ``source`` for ``template`` (the English units), keeping what ``old`` holds (module docstring).

    Args:
        compendium: finished translations of other catalogs, English -> translation, for new units.
        bugs: where to report a problem with the English (a new catalog's ``Report-Msgid-Bugs-To``).
    """
    catalog = _new_catalog(source, old, bugs)
    previous = {(e.msgid, e.msgctxt): e for e in old or () if e.msgid}
    used: set = set()
    results: dict[tuple, polib.POEntry] = {}
    for entry in template:  # first every unit whose English is unchanged
        found = previous.get((entry.msgid, entry.msgctxt))
        if found is not None and (found.msgstr or not found.obsolete):
            used.add((found.msgid, found.msgctxt))
            results[entry.msgid, entry.msgctxt] = _carry(entry, found, changed=False)
    for entry in template:  # then the units that changed, or are new
        key = (entry.msgid, entry.msgctxt)
        if key in results:
            continue
        scoped = entry.msgctxt is not None
        candidates = [
            e for k, e in previous.items() if k not in used and e.msgstr and (not scoped or e.msgctxt == entry.msgctxt)
        ]
        best = max(candidates, key=lambda e: _similarity(e.msgid, entry.msgid), default=None)
        if best is not None and (scoped or _similarity(best.msgid, entry.msgid) >= _SIMILAR):
            used.add((best.msgid, best.msgctxt))
            results[key] = _carry(entry, best, changed=True)
        else:
            results[key] = copy.deepcopy(entry)
            results[key].msgstr = (compendium or {}).get(entry.msgid, "")
    for entry in template:
        catalog.append(results[entry.msgid, entry.msgctxt])
    for key, entry in previous.items():
        if key not in used and key not in results and entry.msgstr:
            gone = copy.deepcopy(entry)
            gone.obsolete, gone.occurrences, gone.comment = True, [], ""
            catalog.append(gone)
    return catalog


def _compendium(catalogs: dict[str, polib.POFile | None]) -> dict[str, str]:
    """English -> translation, from every finished (translated, not fuzzy) entry of ``catalogs``: the first wins."""
    found: dict[str, str] = {}
    for catalog in catalogs.values():
        for entry in catalog or ():
            if entry.msgstr and not entry.fuzzy and not entry.obsolete:
                found.setdefault(entry.msgid, entry.msgstr)
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
        data = write_catalog(update_catalog(name, _template(root, name), old[name], memory, bugs))
        if not path.exists() or path.read_bytes() != data:
            changed.append(path)
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return changed
