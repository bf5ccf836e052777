"""Repository hygiene: ruff over code and notebooks, committed notebooks clean and small.

A committed notebook is clean when it is exactly what ``gradacc execute`` / ``gradacc exercises`` write: no widget state,
no per-cell execution metadata, kernel metadata normalized (``gradacc.course.notebooks.clean_notebook``), valid nbformat, and
serialized the way nbformat writes it. Lessons keep their outputs (learners read them on GitHub), so outputs are checked
too: no figure over 200 KiB, no error output outside cells tagged ``raises-exception``, and no path of the machine that
ran them (a warning or traceback printed by the maintainer's environment).
"""

from __future__ import annotations

import ast
import base64
import copy
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from gradacc.course.notebooks import KERNELSPEC, LANGUAGE_INFO, clean_notebook

NOTEBOOKS = sorted(
    p
    for folder in ("lessons", "solutions", "exercises")
    for p in (ROOT / folder).glob("*.ipynb")
    if not p.name.startswith(".")
)
FIGURE_LIMIT = 200 * 1024  # bytes of one decoded image
NOTEBOOK_LIMIT = 2 * 2**20  # bytes of one .ipynb file
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_lints_code_and_notebooks():
    proc = _ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, (
        f"`ruff check .` found problems (fix them; `ruff check --fix` does some):\n{proc.stdout}"
    )
    # the configuration really covers notebooks: ruff lists .ipynb files among those it checks
    listed = _ruff("check", "--show-files", ".").stdout
    assert all(str(p) in listed for p in NOTEBOOKS), "ruff does not lint every committed notebook"


def test_python_code_is_ruff_formatted():
    proc = _ruff("format", "--check", "--no-cache", "--extend-exclude", "*.ipynb", ".")
    assert proc.returncode == 0, f"run `ruff format` on these files:\n{proc.stdout}"


def test_test_outputs_are_ignored_by_git():
    proc = subprocess.run(
        ["git", "check-ignore", "test-artifacts/browser.png", "build/test-cache/x", ".venv/x"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.stdout.split() == ["test-artifacts/browser.png", "build/test-cache/x", ".venv/x"], proc.stderr


def test_stored_kernel_metadata_is_what_the_pinned_kernel_reports():
    """Issue 30: the metadata JupyterLab copies from the kernel when it connects is stored already, so opening a
    lesson does not mark it modified. Every key but ``version`` is the installed ipykernel's; ``version`` is the
    pinned Python's (3.11, the interpreter the Makefile takes first)."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    reported = dict(IPythonKernel.language_info)
    assert {**reported, "version": LANGUAGE_INFO["version"]} == LANGUAGE_INFO, reported
    assert LANGUAGE_INFO["version"].startswith("3.11."), LANGUAGE_INFO["version"]
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert {"name": "python3", "display_name": spec.display_name, "language": spec.language} == KERNELSPEC


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_is_clean(path: Path):
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert "widgets" not in nb.metadata, "widget state saved in the notebook: re-save it with `gradacc execute`"
    cleaned = clean_notebook(copy.deepcopy(nb))
    for cell, clean in zip(nb.cells, cleaned.cells, strict=True):
        assert cell.metadata == clean.metadata, (
            f"cell {cell.get('id')}: execution metadata {set(cell.metadata) - set(clean.metadata)}"
        )
    assert nb.metadata == cleaned.metadata, "kernel/language metadata not normalized: re-save it with `gradacc execute`"
    assert text == nbformat.writes(nb) + "\n", "not serialized as nbformat writes it: re-save it with `gradacc execute`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_outputs_are_small_and_free_of_noise(path: Path):
    size = path.stat().st_size
    assert size <= NOTEBOOK_LIMIT, f"{path.name} is {size / 2**20:.1f} MiB (limit {NOTEBOOK_LIMIT / 2**20:.0f} MiB)"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        where = f"cell {cell.get('id')}"
        tags = cell.get("metadata", {}).get("tags", [])
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                assert "raises-exception" in tags, f"{where}: error output {output.ename}: {output.evalue}"
            for mime in IMAGE_TYPES:
                data = output.get("data", {}).get(mime)
                if data is None:
                    continue
                raw = data.encode() if mime == "image/svg+xml" else base64.b64decode("".join(data))
                assert len(raw) <= FIGURE_LIMIT, f"{where}: {mime} of {len(raw) / 1024:.0f} KiB (limit 200 KiB)"
            assert "application/vnd.jupyter.widget-state+json" not in output.get("data", {}), f"{where}: widget state"
            shown = str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            shown += "".join(output.get("traceback", []))
            assert str(ROOT) not in shown, f"{where}: output shows a path of this machine ({ROOT}): {shown[:300]}"


# Names that hold a measured time: `seconds`, `wall_s`, `redraw_ms`, `elapsed`, `time.monotonic()`, ... (issue 11).
# UPPER_CASE names are settings (`OUTPUT_TIMEOUT_S`), not measurements.
_TIME_WORD = re.compile(
    r"(^|_)(seconds|secs|elapsed|wall|duration|latency|perf_counter|monotonic|process_time)($|_)|^ms$|^[a-z0-9]+_(s|ms)$"
)
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _time_names(node: ast.AST) -> list[str]:
    """The names, attributes and string keys inside ``node`` that look like a measured time."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            word = sub.id
        elif isinstance(sub, ast.Attribute):
            word = sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            word = sub.value
        else:
            continue
        if not word.isupper() and _TIME_WORD.search(word):
            found.append(word)
    return found


def _parse(source: str) -> ast.AST:
    """A notebook cell or a file as Python: IPython's %magic and !shell lines become `pass`, at their indentation."""
    return ast.parse(
        "\n".join(
            line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip()[:1] in ("%", "!") else line
            for line in source.splitlines()
        )
    )


def _wall_clock_asserts(source: str, where: str) -> list[str]:
    """Each ``assert`` whose test compares (<, <=, >, >=, ==, !=) something that looks like a measured time."""
    problems = []
    for node in ast.walk(_parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (c for c in ast.walk(node.test) if isinstance(c, ast.Compare)):
            if any(isinstance(op, _ORDERING) for op in compare.ops) and (names := _time_names(compare)):
                problems.append(f"{where}:{node.lineno}: compares {names}: {ast.unparse(node.test)[:100]}")
                break
    return problems


def _course_sources(*, hidden_and_tests: bool):
    """``(source, where)`` of every notebook code cell, then (optionally) hidden checks and tests, then the package."""
    for path in NOTEBOOKS:
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code":
                yield cell.source, f"{path.relative_to(ROOT)} cell {i}"
    files = sorted((ROOT / "hidden").glob("*.py")) + sorted((ROOT / "tests").glob("*.py")) if hidden_and_tests else []
    for path in files + sorted((ROOT / "src" / "gradacc").rglob("*.py")):
        yield path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))


def test_no_assert_involves_a_measured_time():
    """Times are printed (and compared as ratios in `gradacc bench`), never asserted: on a busy machine any time
    limit fails a correct run. Notebooks, hidden checks, tests and the package are scanned."""
    problems = [
        p for source, where in _course_sources(hidden_and_tests=True) for p in _wall_clock_asserts(source, where)
    ]
    assert problems == [], "\n".join(problems)


def test_the_time_scan_finds_what_it_looks_for():
    found = _wall_clock_asserts(
        "assert seconds[256] > 2 * seconds[1]\nassert run.wall_s < 30\nassert r['elapsed_s'] > 0\n"
        "assert time.monotonic() - start < 30\nassert all(ms <= LIMIT for ms in redraw_ms)\n"
        "assert info['runtime'] == 'local'\nassert counter.calls == 4\nassert second_try.startswith('x')\n"
        "assert row.seconds is None\nassert isinstance(r['wall_s'], float)\nassert TIMEOUT_S == 60\n",
        "example",
    )
    assert [p.split(":")[1] for p in found] == ["1", "2", "3", "4", "5"], found


def test_busy_cores_keep_the_machine_loaded(request):
    """`make test-load` (``--busy-cores 2``): the busy processes run beside this test, as children of pytest's
    controlling process (this process, or the parent of an xdist worker); without the option there are none."""
    import os

    import psutil
    from conftest import _BUSY_LOOP

    controller = psutil.Process(os.getppid() if hasattr(request.config, "workerinput") else os.getpid())
    busy = [p for p in controller.children() if p.cmdline()[-1:] == [_BUSY_LOOP]]
    assert len(busy) == request.config.getoption("busy_cores")
    assert all(p.status() in (psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING) for p in busy)


# Figures a learner can read (issue 14): drawn at dpi >= 100 with fonts >= 9 pt (12.5 PNG px), and no wider than
# JupyterLab's output area at a 1280-px window (about 1,100 CSS px), so they are shown at full size. The browser test
# measures the shown size of the lesson 03 figures.
MIN_FONT_PT, MIN_DPI, MAX_FIGURE_PX = 9, 100, 1100
_FIGURE_MAKERS = {"subplots", "figure", "Figure", "subplot_mosaic"}
_FONT_KEYWORDS = {"fontsize", "labelsize", "title_fontsize"}
_SMALL_FONTS = {"xx-small", "x-small", "small", "smaller"}


def _figure_problems(source: str, where: str) -> list[str]:
    problems = []
    for node in ast.walk(_parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        keywords = {k.arg: k.value for k in node.keywords}
        owner = getattr(node.func.value, "id", "") if isinstance(node.func, ast.Attribute) else ""
        if name in _FIGURE_MAKERS and (owner == "plt" or (name == "Figure" and not owner)):  # new figures only
            dpi = keywords.get("dpi")
            if dpi is None:
                problems.append(f"{where}:{node.lineno}: {name}(...) without dpi= (the inline default draws 72-80 dpi)")
            elif isinstance(dpi, ast.Constant) and dpi.value < MIN_DPI:
                problems.append(f"{where}:{node.lineno}: dpi={dpi.value} < {MIN_DPI}")
        for key in _FONT_KEYWORDS & set(keywords):
            value = keywords[key]
            if isinstance(value, ast.Constant) and (
                (isinstance(value.value, (int, float)) and value.value < MIN_FONT_PT) or value.value in _SMALL_FONTS
            ):
                problems.append(f"{where}:{node.lineno}: {key}={value.value!r} is below {MIN_FONT_PT} pt")
    return problems


def test_figures_are_drawn_legibly():
    problems = [p for source, where in _course_sources(hidden_and_tests=False) for p in _figure_problems(source, where)]
    assert not problems, "figures a learner cannot read:\n" + "\n".join(problems)
    widths = []
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    png = base64.b64decode("".join(output["data"]["image/png"]))
                    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk: width, then height
                    widths.append(width)
                    assert width <= MAX_FIGURE_PX, f"{path.name} cell {cell.get('id')}: a {width}-px wide figure"
    assert len(widths) >= 10  # the lessons' figures were found


def test_the_figure_scan_finds_what_it_looks_for():
    found = _figure_problems(
        "fig, ax = plt.subplots(figsize=(6, 3))\nfig2 = plt.figure(dpi=72)\nax.legend(fontsize=7)\n"
        "ax.tick_params(labelsize='x-small')\nfig3, ax3 = plt.subplots(dpi=100)\nax3.legend(fontsize=9)",
        "x",
    )
    assert [p.split(": ", 1)[1][:12] for p in found] == ["subplots(...", "dpi=72 < 100", "fontsize=7 i", "labelsize='x"]


# A learner on the core path skips the sections marked optional (issue 19): no core cell may need a name that only an
# optional cell defines (a fresh reader found three such NameErrors).
def _defined_and_used(source: str) -> tuple[set[str], set[str]]:
    defined, used = set(), set()
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return defined, used


def _names_the_core_path_lacks(nb) -> list[str]:
    import builtins

    from gradacc.course.notebooks import core_path_cells

    core = {id(c) for c in core_path_cells(nb)}
    known, optional_only, problems = set(dir(builtins)) | {"display", "get_ipython"}, set(), []
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        defined, used = _defined_and_used(cell.source)
        if id(cell) in core:
            problems += [f"{cell.get('id')}: {name}" for name in sorted((used - defined - known) & optional_only)]
            known |= defined
        else:
            optional_only |= defined - known
    return problems


@pytest.mark.parametrize("path", sorted((ROOT / "lessons").glob("*.ipynb")), ids=lambda p: p.name)
def test_the_core_path_runs_without_the_optional_sections(path: Path):
    assert _names_the_core_path_lacks(nbformat.read(path, as_version=4)) == []


def test_the_core_path_scan_finds_what_it_looks_for():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\nx = 1"),
        nbformat.v4.new_markdown_cell("## 1. Deep *(optional on a first reading)*"),
        nbformat.v4.new_code_cell("model = torch.nn.Linear(2, 2)\nscale = 3"),
        nbformat.v4.new_markdown_cell("## 2. Core"),
        nbformat.v4.new_code_cell("def f(scale):\n    return scale * x\n\nmodel(torch.ones(2))"),
    ]
    assert [p.split(": ")[1] for p in _names_the_core_path_lacks(nb)] == ["model"]


# Lesson 11's core path (issue 55, item 11): each way of splitting the work is defined, in plain words, where the
# lesson first names it, and the overview (section 1) cites no library line (the Trainer's lines moved to section 6).
L11_FIRST_USES = {
    r"context[- ]parallel": "context parallelism (ranks that split each sequence)",
    r"tensor[- ]parallel": "tensor parallelism** (tp): each layer's weight matrices are cut into pieces",
    r"pipeline parallel": "pipeline parallelism**: the model is cut into stages",
    r"\bm\b": "m** micro-batches (its argument `n_microbatches`)",
}


def test_lesson_11_defines_each_axis_where_it_first_names_it_and_its_overview_cites_no_line():
    from cited_lines import ANCHOR, PRIMARY

    from gradacc.course.notebooks import core_path_cells

    nb = nbformat.read(ROOT / "lessons" / "11_parallel.ipynb", as_version=4)
    core = [c for c in core_path_cells(nb) if c.cell_type == "markdown" and c.get("id") != "gradacc-badges"]
    text = " ".join(" ".join(c.source.split()) for c in core).lower()
    for term, definition in L11_FIRST_USES.items():
        first = re.search(term, text)
        assert first and text[first.start() : first.start() + len(definition)] == definition, (
            f"lesson 11 first names {term!r} without defining it: ...{text[max(0, first.start() - 80) : first.start() + 80]}..."
        )
    overview = next(c for c in nb.cells if c.get("id") == "l11-s1").source
    assert not PRIMARY.search(overview) and not ANCHOR.search(overview), "section 1 of lesson 11 cites a source line"
    assert "`trainer.py:828-829`" in next(c for c in nb.cells if c.get("id") == "l11-static-after").source


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """``make test`` runs ``--dist loadgroup``: the grading module, each solution's answered run
    (tests/test_notebooks.py) and each hidden check's seeds rely on an ``xdist_group`` meeting in ONE worker.
    pytest 9.2.0 with pytest-xdist 3.8.0 drops the groups without a word (pytest-dev/pytest-xdist#1386, the
    reason requirements.txt pins pytest 9.1.1): this test fails there."""
    (tmp_path / "test_grouped.py").write_text(
        "import pytest\n\n\n"
        "@pytest.mark.parametrize('i', [pytest.param(i, marks=pytest.mark.xdist_group('g')) for i in range(6)])\n"
        "def test_grouped(i):\n    pass\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    workers = re.findall(r"\[(gw\d)\] .* PASSED test_grouped\.py::test_grouped\[\d\]@g", run.stdout)
    print(f"6 grouped tests ran on {sorted(set(workers))}")
    assert run.returncode == 0 and len(workers) == 6 and len(set(workers)) == 1, run.stdout[-2000:]


RAW_VALUE = re.compile(r"(?:^|[\s:=(])(\[\]|None|\{\}|set\(\))(?=[\s,;.)]|$)", re.M)
"""A Python value printed as such (``[]``, ``None``, ``{}``) where a learner reads a sentence (issue 55: lesson 00's
``Binder markers present: []``, lesson 03's ``smallest N that fits: None``)."""


@pytest.mark.parametrize("edition", ["", "pt-BR/"])
def test_lessons_00_and_03_print_sentences_not_raw_python_values(edition):
    """The stored outputs of lessons 00 and 03 (both editions) say "no N up to 64 fits", never ``None``. (Lesson 10's
    ``warnings about accumulation: []`` is left for a later session; lesson 11's ``.grad ...: None`` is the value its
    text discusses.)"""
    found = []
    for name in ("00_setup", "03_memory"):
        for cell in nbformat.read(ROOT / edition / "lessons" / f"{name}.ipynb", as_version=4).cells:
            for output in cell.get("outputs", []):
                text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
                found += [f"{name} {cell.id}: {line}" for line in text.splitlines() if RAW_VALUE.search(line)]
    assert found == [], found
