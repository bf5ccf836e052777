"""What a learner reads when running the Brazilian Portuguese edition is Portuguese (issue 54; locale/README.md).

For every notebook listed in ``locale/pt_BR/strings.txt`` (its code's printed and drawn strings are catalog units):

* no stored output of its pt-BR notebook (and, for a solution, of its pt-BR exercise) holds an English sentence: a
  line with two words the course's English uses and its Portuguese never does (``outputs.english_lines``), unless the
  reviewed allow-list ``locale/pt_BR/outputs/allowed.txt`` allows it (library output);
* every code cell's outputs in its pt-BR notebook are those of a run of its current pt-BR code (``gradacc translate
  run``, stored in ``locale/pt_BR/outputs/``), and no text a figure draws (title, axis labels, legend, ticks,
  annotations, as matplotlib drew them) is English;
* the fallback for a cell without a current run: what a string of the code printed, put into Portuguese by its
  template, is what the translated code prints (run here in-process on small code, no notebook); the detector flags
  an English line and not its Portuguese.

Everything here reads files and runs no notebook: about 3 s of CPU (tests/README.md).
"""

from __future__ import annotations

import ast
import contextlib
import io
import textwrap

import nbformat
import pytest
from conftest import ROOT

from gradacc.course.translation.catalogs import string_sources
from gradacc.course.translation.edition import edition_path
from gradacc.course.translation.outputs import (
    LiteralTemplate,
    cell_hash,
    english_lines,
    read_store,
    translate_with,
)
from gradacc.course.translation.units import code_segments, join, strip_comments

NOTEBOOKS = [s for s in string_sources(ROOT) if s.endswith(".ipynb")]
EDITION_FILES = [*NOTEBOOKS, *(f"exercises/{s.split('/', 1)[1]}" for s in NOTEBOOKS if s.startswith("solutions/"))]


def _is_source(text: str) -> bool:
    """A printed function's or class's source (lessons 07 and 09 print a function of the package with
    ``inspect.getsource``): the code itself, which the edition keeps as it is, like any code."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return False
    return any(isinstance(node, ast.FunctionDef | ast.ClassDef) for node in tree.body)


def _shown(output) -> str:
    """The text a learner reads in one output: a stream (stdout; stderr is the libraries' logging) but a printed
    function's source at its end, a result's or display's ``text/plain`` (a figure's ``<Figure size ...>`` aside), an
    error's message."""
    if output.get("output_type") == "stream":
        text = output.get("text", "") if output.get("name") == "stdout" else ""
        lines = text.splitlines(keepends=True)
        for start, line in enumerate(lines):  # the printed source ends the output (a heading line may come before)
            if line.startswith(("def ", "class ", "@")) and _is_source("".join(lines[start:])):
                return "".join(lines[:start])
        return text
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    data = output.get("data", {})
    return "" if "image/png" in data else data.get("text/plain", "")


def _least(text: str) -> int:
    """English words that make a figure's text English: one in a short label (``peak``, ``measured peak``), two in a
    line of a longer text (a box of sentences naming ``forward`` or a ``labels`` key)."""
    return 1 if len(text.split()) <= 3 else 2


def _drawn(output) -> bool:
    """A figure matplotlib drew in the cell (a widget's picture, such as the memory explorer's, is the widget's own:
    tests/test_widgets.py checks its texts through the catalog)."""
    data = output.get("data", {})
    return "image/png" in data and "application/vnd.jupyter.widget-view+json" not in data


def test_the_scope_lists_notebooks_of_the_course():
    missing = [s for s in string_sources(ROOT) if not (ROOT / s).exists()]
    assert NOTEBOOKS and missing == [], missing


@pytest.mark.parametrize("source", EDITION_FILES)
def test_no_english_sentence_in_the_stored_outputs(source):
    nb = nbformat.read(ROOT / edition_path(source), as_version=4)
    found = [
        f"{cell.get('id')}: {line}"
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        for line in english_lines(ROOT, _shown(output))
    ]
    assert found == [], "English in pt-BR outputs (translate the code's string, or allow the line):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize("source", NOTEBOOKS)
def test_every_output_is_a_run_of_the_current_pt_code_and_no_figure_draws_english(source):
    """Each code cell's stored outputs are those of ``gradacc translate run`` for its current pt-BR code (comments
    aside), and no text its figures draw is English (``_least``)."""
    nb = nbformat.read(ROOT / edition_path(source), as_version=4)
    store = read_store(ROOT, source)
    stale, english, figures = [], [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        stored = store.get(cell.get("id"))
        if (
            stored is None
            or stored["hash"] != cell_hash(strip_comments(cell.source))
            or stored["outputs"] != cell.outputs
        ):
            stale.append(cell.get("id"))
            continue
        assert len(stored["texts"]) == sum(map(_drawn, cell.outputs)), cell.get("id")
        for texts in stored["texts"]:
            figures += 1
            english += [f"{cell.get('id')}: {t!r}" for t in texts if english_lines(ROOT, t, least=_least(t))]
    assert stale == [], f"outputs not from a run of the current pt-BR code: `gradacc translate run {source}`: {stale}"
    assert english == [], "English drawn on a pt-BR figure:\n" + "\n".join(english)
    assert figures == sum(_drawn(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def _printed(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<cell>", "exec"), {})
    return out.getvalue()


def test_a_translated_string_prints_what_its_template_makes():
    """The fallback for a cell without a current run (``LiteralTemplate``): the English code's output put into
    Portuguese by its strings' templates equals the translated code's output, fields reordered and repeated, a format
    spec, escapes, a field at either end, a label walked by a loop; a column padded to the English label is not (the
    stored run is the truth)."""
    english = (
        "for name, v in [('plain mean', 0.5), ('weighted by counts', 0.25)]:\n"
        "    print(f'{name}: max abs error {v:.1e} (ratio {v / 2:.2f})')\n"
        "print(f'{3} of {4} windows clipped\\tdone', 'and the end')\n"
        "print(f'peak at micro-batch {256}: {17.14} MiB, at {256}')\n"
        'print("no N up to 64 fits")\n'
    )
    portuguese = {
        "plain mean": "média simples",
        "weighted by counts": "ponderada pelas contagens",
        "{name}: max abs error {v:.1e} (ratio {v / 2:.2f})": "{name}: erro absoluto máximo {v:.1e} (razão {v / 2:.2f})",
        "{3} of {4} windows clipped\\tdone": "{3} de {4} janelas cortadas\\tpronto",
        "and the end": "e o fim",
        "peak at micro-batch {256}: {17.14} MiB, at {256}": "em {256}, microlote {256}: pico {17.14} MiB",
        "no N up to 64 fits": "nenhum N até 64 cabe",
    }
    segments = code_segments(english, strings=True)
    strings = [s for s in segments if s.kind == "string"]
    assert [s.text for s in strings] == list(portuguese)
    translated = join(segments, lambda s: portuguese.get(s.text, s.text) if s.kind == "string" else s.text)
    templates = [LiteralTemplate(s.text, portuguese[s.text], s.marker) for s in strings]
    assert translate_with(templates, _printed(english)) == _printed(translated)
    assert "erro absoluto máximo" in _printed(translated) and "média simples" in _printed(translated)


def test_a_printed_function_source_is_code_and_a_printed_sentence_is_not():
    source = 'def f(x):\n    raise ValueError("a window needs at least one micro-batch, got none")\n'
    assert _shown({"output_type": "stream", "name": "stdout", "text": source}) == ""
    sentence = "the weights moved by up to 0.040 after one update\n"
    assert _shown({"output_type": "stream", "name": "stdout", "text": sentence}) == sentence
    assert _shown({"output_type": "stream", "name": "stdout", "text": sentence + source}) == sentence


def test_the_detector_flags_english_and_not_its_portuguese():
    assert english_lines(ROOT, "the weights moved by up to 0.040 after one update")
    assert english_lines(ROOT, "os pesos mudaram até 0.040 depois de uma atualização") == []
    assert english_lines(ROOT, "tensor([1., 2.]) torch.float32 grad_norm 0.77 N = 4") == []


def test_the_strings_a_learner_reads_are_units_and_code_is_not():
    """``units.display_strings``' rules on one cell: what is printed, drawn, raised, appended to a shown list, walked
    by a shown loop or passed to the call that makes a shown name is a unit; a key, a value compared, an alignment
    keyword, a name the code uses and a string that reads as code are not (translating them would change the code)."""
    code = (
        'def f(x):\n    """Return the thing."""\n    return x\n'
        'print("peak memory per N", d["peak memory"])\n'
        'ax.text(0.5, 0.5, "a drawn sentence", ha="right", va="top")\n'
        'for name, v in [("plain mean", 1), ("window sum", 2)]:\n'
        '    if name == "window sum":\n        print(f"{name}: {v}")\n'
        'where = "every micro-batch" if v else "at the boundary"\n'
        'print(f"clip {where}")\n'
        'device_name = "cuda" if v else "cpu"\n'
        'print(f"{device_name}: run"); model.to(device_name)\n'
        'outcomes = []\noutcomes.append(f"window {v}: refused twice")\nprint("\\n".join(outcomes))\n'
        'summary = fits(1, "a 32 MiB budget", "raise NotImplementedError()")\nprint(summary["text"])\n'
        'boxes = {"q0": (0.5, "Did you pass it?", "lightyellow")}\n'
        "for x, text, colour in boxes.values():\n    ax.annotate(text, (x, x))\n"
        'raise ValueError(f"accum_steps must be >= 1, got {v}")\n'
    )
    units = [s.text for s in code_segments(code, strings=True) if s.kind == "string"]
    assert units == [
        "Return the thing.",
        "peak memory per N",
        "a drawn sentence",
        "plain mean",  # not "window sum", compared; not "{name}: {v}", no word of its own
        "every micro-batch",
        "at the boundary",
        "clip {where}",
        "{device_name}: run",
        "window {v}: refused twice",
        "a 32 MiB budget",
        "Did you pass it?",
        "accum_steps must be >= 1, got {v}",
    ]
