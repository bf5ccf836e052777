"""Notebooks as course material: generating exercises from solutions, cleaning, executing (``nbval_run`` runs one
under nbval).

Conventions (COURSE.md):
* A solution notebook marks answer code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in cells tagged
  ``solution``. Generation replaces each marked block with ``# YOUR CODE HERE`` and ``raise NotImplementedError()``
  (same indentation), clears the cell's outputs and tags it ``raises-exception`` (nbval then accepts the exception).
* Check cells are tagged ``check`` and store NO output in the exercise (the solution's ``Exercise X.Y: correct`` line
  would say "correct" under a check nobody has answered yet, issue 55): ``pytest --nbval`` compares a check cell with
  that line itself (``gradacc.course.pytest_plugin``), so on a finished exercise it passes and on an unfinished one it
  fails exactly at the unanswered checks. Every other code cell is tagged ``nbval-ignore-output`` in the exercise
  (learners' runs may differ in timing lines and the like).
* Only check cells may use what a solution cell defines.
* Every exercise says how to check it: a markdown cell (id ``HOW_TO_CHECK_ID``) under the badges, made here.
"""

from __future__ import annotations

import copy
import re
import textwrap
import time
from pathlib import Path

import nbformat

from ..i18n import N_
from .nbval_run import NbvalRun, run_nbval  # here too: the grader and lesson 00 import them from this module

__all__ = [
    "BEGIN",
    "END",
    "HOW_TO_CHECK_ID",
    "how_to_check",
    "generate_exercise",
    "write_exercises",
    "stale_exercises",
    "KERNELSPEC",
    "LANGUAGE_INFO",
    "clean_notebook",
    "execute_notebook",
    "run_nbval",
    "NbvalRun",
    "check_cells",
    "PROSE_WORDS_PER_MIN",
    "SECONDS_PER_CODE_LINE",
    "SECONDS_PER_OUTPUT_LINE",
    "SECONDS_PER_FIGURE",
    "reading_minutes",
    "core_path_cells",
    "OPTIONAL_MARK",
    "FIGURE_ALT",
    "figure_alt",
    "set_figure_alt",
]

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*$", re.M | re.S)
PROSE_WORDS_PER_MIN = 100
"""Reading pace of a learner new to the topic who reads English as a second language (issue 19's estimate)."""
SECONDS_PER_CODE_LINE = 10
"""Seconds to read, run and understand one non-blank, non-comment line of code."""
SECONDS_PER_OUTPUT_LINE = 3
"""Seconds to read one line a cell printed (stored stream or text output)."""
SECONDS_PER_FIGURE = 30
"""Seconds to read one figure (a stored PNG output)."""
_EXECUTION_NOISE = ("execution", "collapsed", "scrolled", "ExecuteTime", "jupyter", "editable", "deletable")


FIGURE_ALT = ("mystnb", "image", "alt")
"""Where a code cell that draws a figure keeps the figure's text alternative (what it shows, for a reader who cannot
see it): its metadata's ``mystnb.image.alt``, which Jupyter Book (myst-nb 1.4's ``render_image``) writes as the
``<img>``'s ``alt`` on the website. In the cell's metadata, not the output's: a re-run keeps it. JupyterLab 4.6
renders no text alternative for an image output (its ``renderImage`` sets no ``alt``). The pt-BR edition translates
it (``gradacc translate``)."""


def figure_alt(cell) -> str | None:
    """The text alternative of the figure a code cell draws (``FIGURE_ALT``), or None."""
    value = cell.get("metadata", {})
    for key in FIGURE_ALT:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


def set_figure_alt(cell, text: str) -> None:
    """Set the text alternative of the figure a code cell draws (``FIGURE_ALT``)."""
    cell.setdefault("metadata", {}).setdefault(FIGURE_ALT[0], {}).setdefault(FIGURE_ALT[1], {})[FIGURE_ALT[2]] = text


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _add_tag(cell, tag: str) -> None:
    tags = _tags(cell)
    if tag not in tags:
        cell.setdefault("metadata", {})["tags"] = tags + [tag]


def check_cells(nb) -> list[dict]:
    """The check cells of a notebook, in order: ``[{"index", "code_index", "id", "check", "points", "bonus"}]``.

    ``index`` counts all cells; ``code_index`` counts code cells only, as nbval numbers its items (``Cell N``).
    ``bonus`` (``metadata.gradacc.bonus``, default false): the check's points count when earned but are not part of
    the exercise's maximum.

    Raises:
        ValueError: a check cell without ``metadata.gradacc.check`` or with non-positive points.
    """
    found = []
    code_index = -1
    for index, cell in enumerate(nb.cells):
        code_index += cell.cell_type == "code"
        if "check" not in _tags(cell):
            continue
        meta = cell.metadata.get("gradacc", {})
        if "check" not in meta or not meta.get("points", 0) > 0:
            raise ValueError(f"check cell {index} (id {cell.get('id')!r}) needs metadata gradacc.check and points > 0")
        found.append(
            {
                "index": index,
                "code_index": code_index,
                "id": cell.get("id"),
                "check": meta["check"],
                "points": meta["points"],
                "bonus": bool(meta.get("bonus", False)),
            }
        )
    return found


HOW_TO_CHECK_ID = "gradacc-how-to-check"


HOW_TO_CHECK = N_(
    "**How to check your answers.** Write your code in place of `raise NotImplementedError()`, under "
    "`# YOUR CODE HERE`, and run the cell. Then run the **check cell** under it. It prints one line: "
    "`Exercise X.Y: correct`, or `Exercise X.Y: incorrect - ...` with what is wrong, and a red `CheckFailed` line. "
    "Fix your answer and run both cells again. In JupyterLab, *Run All* stops at the first check that is not correct "
    "yet: an answer cell not written yet is tagged `raises-exception`, so its error lets the run go on. Colab and "
    "VS Code do not read that tag: there *Run All* stops at the first answer cell not written yet (Colab's "
    "Runtime > Run after runs the cells below it).\n\n"
    "To check the whole notebook from a terminal, run `.venv/bin/pytest --nbval {path}` in the course's folder "
    "(on Binder, `pytest --nbval {path}`). It runs the notebook on a fresh kernel and fails exactly at the checks "
    "that are not correct yet. It names each one with its exercise and with its cell's number as the status bar of "
    "JupyterLab 4.6 or later shows it: cell 7/11 is cell 7 of 11."
)
"""The text of every exercise's how-to-check cell (a message of the package: the pt-BR edition translates it)."""


def how_to_check(name: str | None = None, template: str = HOW_TO_CHECK) -> str:
    """The markdown every exercise carries under its badges: how to answer, what a check cell prints, what *Run All*
    does, the terminal command for the whole notebook (``exercises/<name>``) and how it names a check
    (``gradacc.course.pytest_plugin``), wrapped at 116 columns. ``template``: ``HOW_TO_CHECK`` or its translation."""
    path = f"exercises/{name}" if name else "exercises/NN_topic.ipynb"
    text = template.format(path=path)
    return "\n\n".join("\n".join(textwrap.wrap(part, 116)) for part in text.split("\n\n"))


def generate_exercise(solution, name: str | None = None) -> nbformat.NotebookNode:
    """Return the exercise notebook generated from a solution notebook (the input is not modified), with the
    ``how_to_check`` cell (for ``exercises/<name>``) after the badges cell, or after the title without one.

    Raises:
        ValueError: a ``solution`` cell without a complete ``### BEGIN/END SOLUTION`` block, or markers outside
            ``solution`` cells (answers would leak into the exercise).
    """
    from .badges import BADGES_ID, retarget_badges

    nb = retarget_badges(copy.deepcopy(solution), "exercises")  # the solution's Colab/Binder badges open the exercise
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if "solution" in tags:
            source, n = _BLOCK.subn(
                lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()", cell.source
            )
            if n == 0 or BEGIN in source or END in source:
                raise ValueError(
                    f"solution cell {index} (id {cell.get('id')!r}) needs matching '{BEGIN}' and '{END}' lines"
                )
            cell.source = source
            cell.outputs = []
            cell.execution_count = None
            _add_tag(cell, "raises-exception")
            _add_tag(cell, "nbval-ignore-output")
        elif BEGIN in cell.source or END in cell.source:
            raise ValueError(f"cell {index} (id {cell.get('id')!r}) has solution markers but no 'solution' tag")
        elif "check" in tags:  # nothing a learner reads says "correct" before they have answered
            cell.outputs = []
            cell.execution_count = None
        else:
            _add_tag(cell, "nbval-ignore-output")
    if not any(c.get("id") == HOW_TO_CHECK_ID for c in nb.cells):
        after = next((i for i, c in enumerate(nb.cells) if c.get("id") == BADGES_ID), 0) + 1
        nb.cells.insert(after, nbformat.v4.new_markdown_cell(how_to_check(name), id=HOW_TO_CHECK_ID))
    return clean_notebook(nb)


KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
"""The notebook's ``kernelspec`` as JupyterLab 4.6 writes it for ipykernel's ``python3`` kernel (``_updateSpec``)."""

LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.11.7",
}
"""``ipykernel.ipkernel.IPythonKernel.language_info`` (ipykernel 7) on the pinned Python, 3.11.7: JupyterLab copies the
kernel's ``kernel_info`` reply into the notebook's metadata when the kernel connects (``NotebookPanel._updateLanguage``)
and marks it modified only when the value differs (``YNotebook.setMetadata`` compares with ``JSONExt.deepEqual``).
A kernel on another Python changes ``version`` only."""


def clean_notebook(nb) -> nbformat.NotebookNode:
    """Strip execution noise in place and return ``nb``: widget state, per-cell execution metadata, kernel versions.

    Keeps outputs (lessons show them on GitHub); ``kernelspec`` and ``language_info`` become ``KERNELSPEC`` and
    ``LANGUAGE_INFO``, what JupyterLab writes when the pinned environment's kernel connects (so opening a lesson
    there leaves it unmodified).
    """
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = copy.deepcopy(LANGUAGE_INFO)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:
        for key in _EXECUTION_NOISE:
            cell.metadata.pop(key, None)
    return nb


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _dump(nb) -> str:
    return nbformat.writes(nb) + "\n"


def write_exercises(solutions_dir: Path, exercises_dir: Path) -> list[Path]:
    """Generate ``exercises_dir/NN_topic.ipynb`` from every ``solutions_dir/NN_topic.ipynb``; returns written paths."""
    exercises_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sorted(solutions_dir.glob("*.ipynb")):
        target = exercises_dir / source.name
        target.write_text(_dump(generate_exercise(_read(source), source.name)), encoding="utf-8")
        written.append(target)
    return written


def stale_exercises(solutions_dir: Path, exercises_dir: Path) -> list[str]:
    """Names of exercises that are missing, differ from what their solution generates, or have no solution."""
    stale = []
    for source in sorted(solutions_dir.glob("*.ipynb")):
        target = exercises_dir / source.name
        generated = _dump(generate_exercise(_read(source), source.name))
        if not target.exists() or target.read_text(encoding="utf-8") != generated:
            stale.append(source.name)
    # hidden files (the `.filled-*` notebooks tests/test_notebooks.py writes while it runs) are not exercises
    stale += sorted(
        p.name
        for p in exercises_dir.glob("*.ipynb")
        if not p.name.startswith(".") and not (solutions_dir / p.name).exists()
    )
    return stale


def execute_notebook(path: Path, timeout: int = 600) -> float:
    """Execute a notebook in place on a fresh kernel (``nbclient``), clean it and save it; returns wall seconds.

    The kernel's working directory is the notebook's folder. Raises ``nbclient.exceptions.CellExecutionError`` on
    an unexpected error (cells tagged ``raises-exception`` may raise).
    """
    from nbclient import NotebookClient

    nb = _read(path)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - start
    path.write_text(_dump(clean_notebook(nb)), encoding="utf-8")
    return seconds


OPTIONAL_MARK = "*(optional on a first reading)*"


def core_path_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The cells of a lesson's core path: every cell except those of a section whose heading ends with
    ``OPTIONAL_MARK``. Such a section runs until the next heading of its level or higher (a ``###`` marked inside a
    ``##`` section ends at the next ``###`` or ``##``). A cell belongs where its first line puts it.
    """
    core, optional_level = [], None

    def enter(heading: re.Match) -> None:
        nonlocal optional_level
        level = len(heading.group(1))
        if optional_level is not None and level <= optional_level:
            optional_level = None
        if optional_level is None and heading.group(2).rstrip().endswith(OPTIONAL_MARK):
            optional_level = level

    for cell in nb.cells:
        headings = list(re.finditer(r"^(#{1,6}) (.*)$", cell.source, re.M)) if cell.cell_type == "markdown" else []
        if headings and headings[0].start() == 0:  # a cell that opens with a heading belongs to that heading
            enter(headings.pop(0))
        if optional_level is None:
            core.append(cell)
        for heading in headings:
            enter(heading)
    return core


def reading_minutes(path: Path | str, *, core_only: bool = False) -> float:
    """A learner's minutes for one notebook: its prose words / ``PROSE_WORDS_PER_MIN`` + its code lines x
    ``SECONDS_PER_CODE_LINE`` + its stored output lines x ``SECONDS_PER_OUTPUT_LINE`` + its figures x
    ``SECONDS_PER_FIGURE`` (seconds / 60). Prose: markdown cells except the badges and navigation; code: lines that are
    neither blank nor comments; outputs: printed lines and text results, PNG figures. ``core_only``: only the core
    path's cells (``core_path_cells``). The README's lesson table shows both, rounded to 5 minutes (a test keeps them
    equal).
    """
    nb = nbformat.read(Path(path), as_version=4)
    cells = core_path_cells(nb) if core_only else nb.cells
    words = sum(
        len(re.findall(r"\w+", c.source))
        for c in cells
        if c.cell_type == "markdown" and c.get("id") not in ("gradacc-badges", "gradacc-nav")
    )
    code = [c for c in cells if c.cell_type == "code"]
    lines = sum(1 for c in code for line in c.source.splitlines() if line.strip() and not line.strip().startswith("#"))
    outputs = [o for c in code for o in c.get("outputs", [])]
    printed = sum(len(o.get("text", o.get("data", {}).get("text/plain", "")).splitlines()) for o in outputs
                  if "image/png" not in o.get("data", {}))  # fmt: skip
    figures = sum(1 for o in outputs if "image/png" in o.get("data", {}))
    seconds = lines * SECONDS_PER_CODE_LINE + printed * SECONDS_PER_OUTPUT_LINE + figures * SECONDS_PER_FIGURE
    return words / PROSE_WORDS_PER_MIN + seconds / 60
