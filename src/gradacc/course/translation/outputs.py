"""What a pt-BR notebook shows when it runs: its stored outputs and figures in Portuguese, from the same catalogs.

A lesson's code prints and draws English sentences written in the code itself (``print(f"peak {p:.1f} MiB")``,
``ax.set_title("...")``). For the notebooks of ``locale/pt_BR/strings.txt`` those strings are units of the lesson's
catalog (``units.display_strings``): the pt-BR notebook's code holds their translation, so a run of it prints and
draws Portuguese. Its stored outputs are that run's:

* ``gradacc translate run lessons/NN_topic.ipynb`` runs the pt-BR notebook once on a fresh kernel (as the English
  lesson is run to store its outputs) and stores every code cell's outputs in ``locale/pt_BR/outputs/<source>.json``
  with the hash of the pt-BR cell's code (comments aside: ``cell_hash``) and every text each figure draws (titles,
  axis labels, legends, ticks, annotations, read from matplotlib as it draws: ``FIGURE_TEXTS_HOOK``);
* the build (``edition.Edition.outputs``) writes a cell's stored outputs while its pt-BR code is the one that made
  them; for a cell without a current stored run it writes the English outputs with what the code's strings printed
  put into Portuguese (``LiteralTemplate``, approximate: a column padded to the English words stays so) and the
  package's messages translated, and ``tests/test_pt_outputs.py`` names the cell and the command to run.

So the test suite runs no pt-BR notebook: it checks, reading files, that each stored output comes from a run of the
cell's current pt-BR code and holds no English sentence. ``english_lines`` finds one: a line with two words that the
course's English uses and its Portuguese never does (the catalogs themselves are the dictionary), unless the reviewed
allow-list ``locale/pt_BR/outputs/allowed.txt`` allows it (a library's own output).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat

from .catalogs import EDITION, LANGUAGE, catalog_path, read_catalog, sources
from .shown import grouped
from .units import field_key, string_fields

__all__ = [
    "LiteralTemplate",
    "translate_with",
    "cell_hash",
    "store_path",
    "read_store",
    "FIGURE_TEXTS_HOOK",
    "english_words",
    "english_lines",
    "allowed_patterns",
    "run_edition_notebook",
]

STORE = "outputs"
"""``locale/<lang>/outputs/``: the stored runs of the pt-BR notebooks (figures, and the cells templates cannot make)."""
ALLOWED = "allowed.txt"
FIGURE_KEY = "gradacc_texts"
"""The key of a figure output's metadata under which the pt-BR run records the texts the figure draws."""
_PORTUGUESE_ONLY = re.compile(r"`+[^`]*`+|\(\*[^*]+\*\)|\*[^*\s][^*]*\*|\]\([^)]*\)|https?://\S+|\{[^{}]*\}")
"""What a translation holds that is not Portuguese: code spans, the English beside a term (``(*micro-batch*)``),
italics, link targets, URLs, placeholders."""
_WORD = re.compile(r"(?<![\w.\-/`'])[A-Za-z]{3,}(?![\w.(`'/])")


def _runtime(piece: str, prefix: str) -> str:
    """A literal piece of a string as the program holds it (escapes read), ``prefix`` its non-f prefix and quote."""
    try:
        return ast.literal_eval(prefix + piece + prefix[-1])
    except (SyntaxError, ValueError):
        return piece


@dataclass
class LiteralTemplate:
    """One string of a cell's code, English and translated (between their quotes, as written), ``marker`` its prefix
    and opening quote (``f"``): finds what it printed in an output and writes it in the translation."""

    english: str
    translated: str
    marker: str

    def __post_init__(self):
        self.fstring = "f" in self.marker.lower()
        plain = re.sub("[fF]", "", self.marker)
        quote = plain[-1]
        plain = plain.rstrip("'\"") + quote

        def pieces(text: str) -> list[tuple[str, bool]]:
            if not self.fstring:
                return [(_runtime(text, plain), False)]
            return [
                (p if field else _runtime(p.replace("{{", "{").replace("}}", "}"), plain), field)
                for p, field in string_fields(text)
            ]

        self.english_pieces, self.translated_pieces = pieces(self.english), pieces(self.translated)
        self.literal = "".join(p for p, field in self.english_pieces if not field)
        parts, names = [], {}
        for piece, field in self.english_pieces:
            if not field:
                parts.append(re.escape(piece))
            elif field_key(piece) in names:
                parts.append(f"(?P={names[field_key(piece)]})")
            else:
                names[field_key(piece)] = f"g{len(names)}"
                parts.append(f"(?P<{names[field_key(piece)]}>.*?)")
        if self.english_pieces and self.english_pieces[-1][1]:  # ending in a field: up to the line's end
            parts[-1] = parts[-1].replace(".*?", ".*")
        first, last = self.english_pieces[0], self.english_pieces[-1]
        head = r"(?<![A-Za-z])" if not first[1] and first[0][:1].isalpha() else ""
        tail = r"(?![A-Za-z])" if not last[1] and last[0][-1:].isalpha() else ""
        if first[1]:  # starting with a field: from the line's start
            head = "^"
        self.names = names
        self.ungrouped = {  # fields printed with the thousands comma in English and without it in the translation
            field_key(p) for p, field in self.english_pieces if field and grouped(p)
        } - {field_key(p) for p, field in self.translated_pieces if field and grouped(p)}
        self.pattern = re.compile(head + "".join(parts) + tail, re.M)

    def _value(self, match: re.Match, key: str) -> str:
        value = match.group(self.names[key])
        return value.replace(",", "") if key in self.ungrouped else value

    def sub(self, text: str) -> str:
        def write(match: re.Match) -> str:
            return "".join(
                self._value(match, field_key(p)) if field and field_key(p) in self.names else p
                for p, field in self.translated_pieces
            )

        return self.pattern.sub(write, text)


def translate_with(templates: list[LiteralTemplate], text: str) -> str:
    """``text`` with what each template's English printed written in its translation, the longest templates first."""
    for template in sorted(templates, key=lambda t: -len(t.literal)):
        text = template.sub(text)
    return text


def cell_hash(source: str) -> str:
    """The hash a stored run of a pt-BR cell carries: of its code without comments (``units.strip_comments``; a
    comment's translation needs no new run), sha256, 16 hex digits."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def store_path(root: Path, source: str, lang: str = LANGUAGE) -> Path:
    """``locale/<lang>/outputs/<source without .ipynb>.json``."""
    return root / "locale" / lang / STORE / (source.rsplit(".", 1)[0] + ".json")


def read_store(root: Path, source: str) -> dict[str, dict]:
    """cell id -> ``{"hash": ..., "outputs": [...], "texts": [[...] per figure]}`` of the stored pt-BR run (``{}``
    when there is none)."""
    path = store_path(root, source)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


FIGURE_TEXTS_HOOK = f"""
def _gradacc_record_figure_texts():
    import sys

    from IPython import get_ipython

    shell = get_ipython()

    def texts(fig):
        found = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text") and a.get_visible())]
        return [t for t in dict.fromkeys(found) if isinstance(t, str) and t.strip()]

    def wrap(*args):
        if "matplotlib.figure" not in sys.modules:
            return
        from matplotlib.figure import Figure

        formatter = shell.display_formatter.formatters["image/png"]
        try:
            printer = formatter.lookup_by_type(Figure)
        except KeyError:
            return
        if getattr(printer, "_gradacc", False):
            return

        def recorded(fig, printer=printer):
            return printer(fig), {{{FIGURE_KEY!r}: texts(fig)}}

        recorded._gradacc = True
        formatter.for_type(Figure, recorded)

    shell.events.register("pre_run_cell", wrap)  # display(fig) of a Figure made without pyplot
    shell.events.register("post_execute", wrap)

    import matplotlib_inline.backend_inline as inline  # plt.show() and a figure left at a cell's end

    fetch = inline._fetch_figure_metadata

    def metadata(fig):
        return {{**(fetch(fig) or {{}}), {FIGURE_KEY!r}: texts(fig)}}

    inline._fetch_figure_metadata = metadata


_gradacc_record_figure_texts()
del _gradacc_record_figure_texts
"""
"""Run at the start of the pt-BR notebook's kernel by ``run_edition_notebook``: the PNG of every matplotlib figure the
kernel shows (``plt.show()``, a figure left at a cell's end, ``display(fig)``) then carries the texts it draws in its
output's metadata (``FIGURE_KEY``; moved to the store's ``texts``)."""


def _figure_texts(outputs: list) -> tuple[list, list[list[str]]]:
    outputs, texts = copy.deepcopy(outputs), []
    for out in outputs:
        meta = out.get("metadata", {})
        png = meta.get("image/png") if isinstance(meta.get("image/png"), dict) else {}
        found = [where.pop(FIGURE_KEY) for where in (meta, png) if FIGURE_KEY in where]
        if "image/png" in meta and not png:
            del meta["image/png"]
        if found:
            texts.append(found[0])
    return outputs, texts


# -- the English sentences left in the edition -----------------------------------------------------------------------
@cache
def _vocabulary(root: Path) -> frozenset[str]:
    from collections import Counter

    english, portuguese = Counter(), Counter()
    for source in [*sources(root), "gradacc"]:
        for entry in read_catalog(catalog_path(root, source)) or ():
            if entry.obsolete:
                continue
            english.update(w.lower() for w in _WORD.findall(entry.msgid))
            portuguese.update(w.lower() for w in re.findall(r"[A-Za-zÀ-ÿ]+", _PORTUGUESE_ONLY.sub(" ", entry.msgstr)))
    return frozenset(w for w, n in english.items() if portuguese[w] * 10 < n)


def english_words(root: Path) -> frozenset[str]:
    """Words of 3+ letters that the course's English uses and its Portuguese (almost) never does, lower case: a word
    of the catalogs' ``msgid`` used at least ten times as often there as in their ``msgstr`` (code spans, italics,
    the English beside a term and placeholders aside)."""
    return _vocabulary(root)


def allowed_patterns(root: Path) -> list[re.Pattern]:
    """The reviewed allow-list, ``locale/pt_BR/outputs/allowed.txt``: one regular expression a line (matched against
    a whole output line), ``#`` a comment line."""
    path = root / "locale" / LANGUAGE / STORE / ALLOWED
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [re.compile(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def english_lines(root: Path, text: str, *, least: int = 2) -> list[str]:
    """The lines of ``text`` that read as English: ``least`` or more ``english_words`` in them, and no allow-list
    pattern matching the whole line."""
    words, allowed = english_words(root), allowed_patterns(root)
    found = []
    for line in text.splitlines():
        hits = [w for w in _WORD.findall(line) if w.lower() in words]
        if len(hits) >= least and not any(p.fullmatch(line.strip()) for p in allowed):
            found.append(line)
    return found


# -- a run of a pt-BR notebook ----------------------------------------------------------------------------------------
def run_edition_notebook(root: Path, source: str, timeout: int = 900) -> dict:
    """Run the pt-BR notebook of English ``source`` (``lessons/01_theory.ipynb``) on a fresh kernel, its working
    directory the notebook's folder, and store its code cells' outputs (``store_path``, module docstring). Returns
    ``{"cells": stored cells, "figures": figures, "seconds": wall time}``.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised that is not tagged ``raises-exception``.
    """
    import os
    import tempfile
    import time

    from nbclient import NotebookClient

    from .units import strip_comments

    path = root / EDITION / source
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as ipython_dir:  # the hook runs at the kernel's start (no cell, no count)
        profile = Path(ipython_dir) / "profile_default"
        profile.mkdir()
        (profile / "ipython_kernel_config.py").write_text(
            f"c.IPKernelApp.exec_lines = [{FIGURE_TEXTS_HOOK!r}]\n", encoding="utf-8"
        )
        before = os.environ.get("IPYTHONDIR")
        os.environ["IPYTHONDIR"] = ipython_dir
        try:
            NotebookClient(
                nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
            ).execute()
        finally:
            if before is None:
                os.environ.pop("IPYTHONDIR", None)
            else:
                os.environ["IPYTHONDIR"] = before
    store, figures = {}, 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs, texts = _figure_texts(cell.outputs)
        figures += len(texts)
        store[cell.get("id")] = {"hash": cell_hash(strip_comments(cell.source)), "outputs": outputs, "texts": texts}
    target = store_path(root, source)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(store, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return {"cells": len(store), "figures": figures, "seconds": round(time.perf_counter() - start, 1)}
