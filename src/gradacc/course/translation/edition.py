"""The Brazilian Portuguese edition, written from the English sources and the catalogs (``gradacc translate build``).

What it writes, all of it generated (never edit these files; change the English source or the catalog):

* ``pt-BR/lessons/NN_topic.ipynb`` and ``pt-BR/solutions/NN_topic.ipynb``: the English notebook's cells, ids, tags,
  code and outputs, each unit replaced by its translation (the English where the catalog has none yet; the last
  translation where the entry is fuzzy), and:

  - ``metadata.gradacc.language = "pt_BR"``, and ``SETUP_CODE`` at the top of the first code cell that imports
    ``gradacc``: ``set_language("pt_BR")``, so the package's messages are Portuguese (``gradacc.i18n``);
  - in the code, the strings the learner reads (printed, drawn, docstrings: ``units.display_strings``) translated;
  - in the outputs, what those strings printed (``outputs.LiteralTemplate``) and the lines the package's messages
    printed (a check cell's ``Exercise 1.1: correct``) as they print in Portuguese (``MessageCatalog.translate_outputs``),
    so nbval compares a Portuguese run with them; a cell with a figure (or whose text the templates cannot make) has
    the outputs of a run of the pt-BR notebook (``gradacc translate run``, ``outputs.read_store``) while its code is
    the one that made them;
  - the badges open the pt-BR notebook; the navigation cell links the pt-BR neighbours under their pt-BR titles;
  - links point into the edition (``Edition.target``): a lesson, solution, exercise or translated page to its pt-BR
    file (anchors to its translated headings), ``README.md`` to ``README.pt-BR.md``, anything else (maintainer notes,
    code) to the English file; a link of the English text to the pt-BR edition (its language switch) to the English
    file it mirrors;
* ``pt-BR/exercises/NN_topic.ipynb``: ``generate_exercise`` of the pt-BR solution, as ``exercises/`` is made;
* ``pt-BR/docs/...md`` (the learner's and instructor's pages) and ``README.pt-BR.md``;
* ``src/gradacc/locale/pt_BR/LC_MESSAGES/gradacc.mo``: ``gradacc.po`` compiled (finished entries only, as msgfmt).
"""

from __future__ import annotations

import ast
import copy
import os
import re
from pathlib import Path
from urllib.parse import quote, unquote

import nbformat

from ...i18n import N_
from .. import quiz
from ..badges import BADGES_ID, BADGES_TEXT, NAV_ID, Repository, badges_markdown, read_repository
from ..notebooks import (
    HOW_TO_CHECK,
    HOW_TO_CHECK_ID,
    _dump,
    figure_alt,
    generate_exercise,
    how_to_check,
    set_figure_alt,
)
from .catalogs import DOMAIN, EDITION, LANGUAGE, catalog_path, read_catalog, sources, string_sources
from .outputs import LiteralTemplate, cell_hash, read_store, translate_with
from .units import Segment, code_segments, join, markdown_segments, strip_comments

__all__ = [
    "SETUP_CODE",
    "NAV_LABELS",
    "edition_path",
    "english_path",
    "slug",
    "finished_messages",
    "printed_messages",
    "MessageCatalog",
    "Edition",
    "build",
]

SETUP_CODE = (
    "from gradacc.i18n import set_language\n\n"
    'set_language("pt_BR")  # as mensagens do gradacc (Exercício X.Y: correto, ...) em português\n\n'
)
"""What the pt-BR edition adds at the top of a notebook's first code cell that imports ``gradacc``."""
NAV_LABELS = (N_("all lessons"), N_("exercise"), N_("lesson"))
"""The navigation cell's words (``gradacc.course.badges.nav_markdown``), translated in ``gradacc.po``."""
NOTEBOOK_FOLDERS = ("lessons", "solutions", "exercises")
MO_FILE = f"src/gradacc/locale/{LANGUAGE}/LC_MESSAGES/{DOMAIN}.mo"
"""The compiled ``gradacc.po``, package data (``gradacc.i18n.LOCALE_DIR``)."""
# a link or an image, whose text may hold an image (a badge: [![alt](image)](target))
_LINK = re.compile(r"(!?\[(?:[^\[\]]|!\[[^\[\]]*\]\([^)\s]*\))*\]\()([^)\s]+)(\))")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$")
_GRADACC_IMPORT = re.compile(r"^(from|import) gradacc\b", re.M)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_FENCE_OR_SPAN = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[^\n]*$|(`+)(.+?)\2", re.M | re.S)
_NOTEBOOK_PATH = re.compile(r"(?<![\w/.-])((?:lessons|solutions|exercises)/[\w.-]*\.ipynb|exercises/(?![\w.-]))")
"""A course notebook's path, or the exercises' folder itself (``gradacc progress exercises/``): the learner's own
notebooks of the edition are under ``pt-BR/``."""
_COLAB = re.compile(r"(https://colab\.research\.google\.com/github/[^/\s]+/[^/\s]+/blob/[^/\s]+/)([^\s)#?]+)")
_BINDER = re.compile(r"(https://mybinder\.org/v2/gh/[^?\s)]+\?labpath=)([^\s)&#]+)")
_SITE_HOME = re.compile(r"(https://[\w-]+\.github\.io/[\w.-]+/)(?![\w/.#-])")
"""The home page of the course's website (a GitHub Pages project site): the edition's pages link its own home,
``.../pt-BR/``, which ``gradacc site`` builds and the site workflow publishes (issue 54)."""


def edition_path(source: str) -> str:
    """The pt-BR file of an English one: ``README.md`` -> ``README.pt-BR.md``, ``lessons/x`` -> ``pt-BR/lessons/x``."""
    return f"README.{EDITION}.md" if source == "README.md" else f"{EDITION}/{source}"


def english_path(path: str) -> str | None:
    """The English file a pt-BR one mirrors (``edition_path``'s inverse), or None for a path outside the edition."""
    if path == f"README.{EDITION}.md":
        return "README.md"
    return path[len(EDITION) + 1 :] if path.startswith(EDITION + "/") else None


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MyST (``myst_heading_anchors``) make it: lower case, punctuation dropped,
    spaces as hyphens (``Words used in this course`` -> ``words-used-in-this-course``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def is_python(code: str) -> bool:
    """``code`` parses as Python (a statement or an expression): a code span of it is code, not a printed message."""
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


class MessageCatalog:
    """The finished entries of ``gradacc.po``, to put printed messages into Portuguese after the fact.

    A message template (``Exercise {exercise}: incorrect - {problem}``) becomes a pattern: its text literally, each
    placeholder any text. A line (or a code span) that matches a template with placeholders whole is written with its
    translation, each placeholder's text translated the same way first, by any message (``{problem}`` is often itself
    a message, like ``close``'s). A message without placeholders (a navigation label, ``exercise``) translates only
    such a value, never a line on its own. The longest templates are tried first; text that matches none is kept.
    """

    def __init__(self, messages: dict[str, str]):
        self.messages = messages
        patterns = []
        for english, translated in messages.items():
            parts, names = [], []
            for piece in _PLACEHOLDER.split(english):
                if len(parts) % 2:
                    parts.append(f"(?P={piece})" if piece in names else f"(?P<{piece}>.+?)")
                    names.append(piece)
                else:
                    parts.append(re.escape(piece))
            literal = len(_PLACEHOLDER.sub("", english))
            patterns.append((literal, bool(names), re.compile("".join(parts), re.S), translated))
        self.patterns = [(templated, p, t) for _, templated, p, t in sorted(patterns, key=lambda x: -x[0])]

    def translate(self, text: str, *, whole: bool = True) -> str:
        """``text`` (one message) translated, or unchanged when no template matches it; ``whole``: ``text`` is a
        whole line or span (only templates with placeholders apply), else a placeholder's value (any message)."""
        for templated, pattern, translated in self.patterns:
            match = (templated or not whole) and pattern.fullmatch(text)
            if match:
                values = {name: self.translate(value, whole=False) for name, value in match.groupdict().items()}
                return _PLACEHOLDER.sub(lambda m, values=values: values[m.group(1)], translated)
        return text

    def translate_lines(self, text: str) -> str:
        return "".join(self.translate(line[:-1]) + "\n" if line.endswith("\n") else self.translate(line)
                       for line in text.splitlines(keepends=True))  # fmt: skip

    def translate_outputs(self, outputs: list) -> list:
        """A code cell's outputs with the package's messages translated: stream text, ``text/plain``, and an error's
        value and traceback (``CheckFailed: <value>``)."""
        outputs = copy.deepcopy(outputs)
        for out in outputs:
            if "text" in out:
                out["text"] = self.translate_lines(out["text"])
            if "text/plain" in out.get("data", {}):
                out["data"]["text/plain"] = self.translate_lines(out["data"]["text/plain"])
            if out.get("output_type") == "error":
                english, out["evalue"] = out["evalue"], self.translate(out["evalue"])
                head = f"{out['ename']}: "
                out["traceback"] = [
                    head + out["evalue"] if line == head + english else self.translate_lines(line)
                    for line in out["traceback"]
                ]
        return outputs


def finished_messages(catalog) -> dict[str, str]:
    """English -> translation for the finished entries of a catalog (translated, not fuzzy, not obsolete)."""
    return {e.msgid: e.msgstr for e in catalog or () if e.msgstr and not e.fuzzy and not e.obsolete}


GRADER = "src/gradacc/grading/"
"""Where the grader's messages are written: its feedback files and the learner's progress table, made in the learner's
language when they are made, never put into Portuguese after the fact."""


def printed_messages(catalog) -> dict[str, str]:
    """``finished_messages`` of ``gradacc.po`` that the edition translates in stored outputs and code spans: all but the
    grader's own (``GRADER``): a progress table stored by lesson 00 stays the English run's whole, not half translated
    (its columns are padded to the English words)."""
    grader = {e.msgid for e in catalog or () if all(f.startswith(GRADER) for f, _ in e.occurrences)}
    return {k: v for k, v in finished_messages(catalog).items() if k not in grader}


class Edition:
    """The edition's files, made in memory from the English sources of ``root`` and its catalogs (``build`` writes
    them)."""

    def __init__(self, root: Path, repo: Repository | None = None):
        self.root = root
        self.repo = repo or read_repository(root / "pyproject.toml")
        self.sources = sources(root)
        self.package = read_catalog(catalog_path(root, DOMAIN))
        self.messages = MessageCatalog(printed_messages(self.package))
        finished = finished_messages(self.package)
        self.say = lambda text: finished.get(text, text)  # a package message in the edition's language (the quiz's)
        self.translations, self.known = {}, {}
        for source in self.sources:
            catalog = [e for e in read_catalog(catalog_path(root, source)) or () if not e.obsolete]
            self.translations[source] = {(e.msgid, e.msgctxt): e.msgstr for e in catalog if e.msgstr}
            self.known[source] = {(e.msgid, e.msgctxt) for e in catalog}
        self.with_strings = set(string_sources(root))
        self.stores = {s: read_store(root, s) for s in self.sources if s.endswith(".ipynb")}
        self.slugs: dict[str, dict[str, str]] = {s: {} for s in self.sources}  # English anchor -> pt-BR anchor
        self.titles: dict[str, str] = {}  # a notebook's English title -> its pt-BR title
        self.missing: list[tuple[str, str | None, str]] = []  # units the catalogs do not hold (run extract)

    # -- units -------------------------------------------------------------------------------------------------
    def _unit(self, source: str, context: str | None, segment: Segment) -> str:
        found = self.translations[source].get((segment.text, context))
        if found is None:
            if (segment.text, context) not in self.known[source]:
                self.missing.append((source, context, segment.text))
            found = segment.text
        heading = _HEADING.match(segment.text) if segment.kind == "markdown" else None
        if heading:
            translated = _HEADING.match(found)
            self.slugs[source][slug(heading.group(2))] = slug(translated.group(2) if translated else heading.group(2))
        return found

    def markdown(self, source: str, text: str, context: str | None = None) -> str:
        text = self.code_spans(join(markdown_segments(text), lambda seg: self._unit(source, context, seg)))
        return _SITE_HOME.sub(r"\1" + EDITION + "/", text)

    def code_spans(self, text: str) -> str:
        """In code spans and fences: a message of the package as it prints in Portuguese (`Exercise X.Y: correct`),
        but never a span that is Python code (`running = running + loss` matches the template ``running {what}``
        and stays code), and a course notebook's path or the exercises' folder as the pt-BR one (``exercises/01_theory.ipynb`` ->
        ``pt-BR/exercises/...``, ``exercises/`` -> ``pt-BR/exercises/``)."""

        def span(m: re.Match) -> str:
            if m.group(0).startswith(("```", "~~~")):
                return _NOTEBOOK_PATH.sub(EDITION + r"/\1", m.group(0))
            ticks, code = m.group(2), m.group(3)
            translated = code if is_python(code) else self.messages.translate(code)
            inner = translated if translated != code else _NOTEBOOK_PATH.sub(EDITION + r"/\1", code)
            return ticks + inner + ticks

        return _FENCE_OR_SPAN.sub(span, text)

    def code(self, source: str, text: str, context: str | None = None) -> str:
        return self.code_and_templates(source, text, context)[0]

    def code_and_templates(
        self, source: str, text: str, context: str | None = None
    ) -> tuple[str, list[LiteralTemplate]]:
        """A code cell's pt-BR code, and the templates of its translated strings (for its outputs).

        Raises:
            ValueError: a translated string that breaks the code (a quote, a field), naming the cell.
        """
        segments = code_segments(text, strings=source in self.with_strings)
        translated = {id(seg): self._unit(source, context, seg) for seg in segments if seg.kind != "keep"}
        code = join(segments, lambda seg: translated[id(seg)])
        templates = [
            LiteralTemplate(seg.text, translated[id(seg)], seg.marker)
            for seg in segments
            if seg.kind == "string" and translated[id(seg)] != seg.text
        ]
        if templates:
            from .shown import _neutral

            try:
                ast.parse(_neutral(code))
            except SyntaxError as exc:
                raise ValueError(f"{source}, cell {context}: a translated string breaks the code: {exc}") from None
        return code, templates

    def outputs(self, source: str, cell, english_outputs: list, templates: list[LiteralTemplate]) -> list:
        """A pt-BR code cell's outputs (module docstring): the stored run's while its code made them, else the English
        outputs with the cell's strings and the package's messages in Portuguese."""
        stored = self.stores.get(source, {}).get(cell.get("id"))
        if stored is not None and stored["hash"] == cell_hash(strip_comments(cell.source)):
            return [nbformat.from_dict(o) for o in copy.deepcopy(stored["outputs"])]
        outputs = copy.deepcopy(english_outputs)
        if templates:
            for out in outputs:
                if "text" in out:
                    out["text"] = translate_with(templates, out["text"])
                if "text/plain" in out.get("data", {}):
                    out["data"]["text/plain"] = translate_with(templates, out["data"]["text/plain"])
                if out.get("output_type") == "error":
                    out["evalue"] = translate_with(templates, out["evalue"])
                    out["traceback"] = [translate_with(templates, line) for line in out["traceback"]]
        return self.messages.translate_outputs(outputs)

    # -- links -------------------------------------------------------------------------------------------------
    def _mirrored(self, path: str) -> bool:
        folder = path.split("/", 1)[0]
        if path.rstrip("/") in NOTEBOOK_FOLDERS:
            return True
        if folder == "exercises":
            return f"solutions/{path.split('/', 1)[1]}" in self.sources
        return path in self.sources

    def _anchor(self, path: str, anchor: str) -> str:
        key = "solutions/" + path.split("/", 1)[1] if path.startswith("exercises/") else path
        return self.slugs.get(key, {}).get(anchor, anchor)

    def target(self, target: str, english: str) -> str:
        """Where a link of the English file ``english`` points in its pt-BR file (module docstring)."""
        if re.match(r"^[a-z]+:", target):
            return self._url(target)
        path, _, anchor = target.partition("#")
        if not path:
            return "#" + self._anchor(english, anchor) if anchor else target
        full = os.path.normpath(os.path.join(os.path.dirname(english), path))
        if full.startswith(".."):
            return target
        if english_path(full) is not None:  # a link to the other edition: the language switch
            destination = english_path(full)
        elif self._mirrored(full):
            destination, anchor = edition_path(full), self._anchor(full, anchor) if anchor else anchor
        else:
            destination = full
        relative = os.path.relpath(destination, os.path.dirname(edition_path(english)) or ".")
        relative += "/" if path.endswith("/") and not relative.endswith("/") else ""
        return relative + ("#" + anchor if anchor else "")

    def _url(self, url: str) -> str:
        """A Colab or Binder link to a notebook that the edition mirrors opens the pt-BR notebook."""
        url = _COLAB.sub(
            lambda m: m.group(1) + (edition_path(m.group(2)) if self._mirrored(m.group(2)) else m.group(2)), url
        )

        def binder(m: re.Match) -> str:
            path = unquote(m.group(2))
            return m.group(1) + (quote(edition_path(path), safe="") if self._mirrored(path) else m.group(2))

        return _BINDER.sub(binder, url)

    def links(self, text: str, english: str) -> str:
        return _LINK.sub(lambda m: m.group(1) + self.target(m.group(2), english) + m.group(3), text)

    # -- notebooks ---------------------------------------------------------------------------------------------
    def _notebook_pass_one(self, source: str) -> nbformat.NotebookNode:
        nb = nbformat.read(self.root / source, as_version=4)
        setup_done = False
        for cell in nb.cells:
            if cell.get("id") in (BADGES_ID, NAV_ID):
                continue
            if cell.cell_type == "markdown":
                cell.source = self.markdown(source, cell.source, cell.id)
            elif cell.cell_type == "code":
                cell.source, templates = self.code_and_templates(source, cell.source, cell.id)
                if not setup_done and _GRADACC_IMPORT.search(cell.source):
                    cell.source, setup_done = SETUP_CODE + cell.source, True
                cell.outputs = quiz.translate_outputs(
                    self.outputs(source, cell, cell.outputs, templates), self.say, LANGUAGE
                )
                if figure_alt(cell):
                    set_figure_alt(cell, self._unit(source, cell.id, Segment("alt", figure_alt(cell))))
        if not setup_done:
            raise ValueError(f"{source}: no code cell imports gradacc, so none can set the language (SETUP_CODE)")
        nb.metadata.setdefault("gradacc", {})["language"] = LANGUAGE
        english, translated = _title(nbformat.read(self.root / source, as_version=4)), _title(nb)
        if english:
            self.titles[english] = translated or english
        return nb

    def _notebook_pass_two(self, source: str, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
        for cell in nb.cells:
            if cell.get("id") == BADGES_ID:
                cell.source = badges_markdown(self.repo, edition_path(source), self._badges_text())
            elif cell.get("id") == NAV_ID:
                cell.source = self.nav(cell.source, source)
            elif cell.cell_type == "markdown":
                cell.source = self.links(cell.source, source)
        return nb

    def nav(self, text: str, english: str) -> str:
        """The navigation cell of the pt-BR notebook: the English one's links, its labels in Portuguese.

        Raises:
            ValueError: a label that is neither a notebook's title nor one of ``NAV_LABELS``.
        """

        def label(m: re.Match) -> str:
            inner = m.group(1)[1:-2]  # "[← 00 · Setup](" -> "← 00 · Setup"
            core = inner.strip("←→ ")
            if core in self.titles:
                word = self.titles[core]
            elif core in NAV_LABELS:
                word = finished_messages(self.package).get(core, core)
            else:
                raise ValueError(f"{english}: navigation label {core!r} is no title and not in NAV_LABELS")
            return "[" + inner.replace(core, word) + "](" + self.target(m.group(2), english) + ")"

        return _LINK.sub(label, text)

    def _badges_text(self) -> str:
        return finished_messages(self.package).get(BADGES_TEXT, BADGES_TEXT)

    def exercise(self, solution: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
        nb = generate_exercise(solution)
        for cell in nb.cells:
            if cell.get("id") == BADGES_ID:
                cell.source = badges_markdown(self.repo, f"{EDITION}/exercises/{name}", self._badges_text())
            elif cell.get("id") == HOW_TO_CHECK_ID:  # the package's message, its code spans as the edition prints them
                template = finished_messages(self.package).get(HOW_TO_CHECK, HOW_TO_CHECK)
                cell.source = self.code_spans(how_to_check(name, template))
        return nb

    # -- everything --------------------------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        """Every file of the edition: path relative to ``root`` -> bytes."""
        notebooks = {s: self._notebook_pass_one(s) for s in self.sources if s.endswith(".ipynb")}
        pages = {
            s: self.markdown(s, (self.root / s).read_text(encoding="utf-8")) for s in self.sources if s.endswith(".md")
        }
        out: dict[str, bytes] = {}
        for source, nb in notebooks.items():
            nb = self._notebook_pass_two(source, nb)
            out[edition_path(source)] = _dump(nb).encode()
            folder, name = source.split("/", 1)
            if folder == "solutions":
                out[f"{EDITION}/exercises/{name}"] = _dump(self.exercise(nb, name)).encode()
        for source, text in pages.items():
            out[edition_path(source)] = self.links(text, source).encode()
        out[MO_FILE] = self.package.to_binary()  # polib, as msgfmt: the finished entries only
        return out


def _title(nb: nbformat.NotebookNode) -> str | None:
    """``NN · Topic`` from the first cell's ``# heading`` (as ``gradacc.course.badges`` titles the navigation)."""
    if nb.cells and nb.cells[0].cell_type == "markdown":
        match = re.search(r"^#\s+(.+?)\s*$", nb.cells[0].source, re.M)
        if match:
            return match.group(1).replace("[", "(").replace("]", ")")
    return None


def build(root: Path, *, write: bool = True) -> tuple[list[Path], list[tuple[str, str | None, str]]]:
    """Write the edition (module docstring). Returns the files that changed or would change (``write=False``), and
    the units no catalog holds yet (``(source, cell id, English)``: run ``gradacc translate extract``); a file of the
    edition that no source makes any more is removed (or listed)."""
    edition = Edition(root)
    files = edition.files()
    changed = []
    for relative, data in files.items():
        path = root / relative
        if not path.exists() or path.read_bytes() != data:
            changed.append(path)
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    for path in sorted((root / EDITION).rglob("*")):
        relative = path.relative_to(root)
        hidden = any(part.startswith(".") for part in relative.parts)  # .ipynb_checkpoints/ of a JupyterLab session
        if path.is_file() and not hidden and relative.as_posix() not in files and path.suffix in (".ipynb", ".md"):
            changed.append(path)
            if write:
                path.unlink()
    return changed, edition.missing
