"""The course's pytest plugin, loaded by every ``pytest`` of an environment where ``gradacc`` is installed (entry point
``pytest11``), so a learner's ``pytest --nbval exercises/02_pytorch.ipynb`` gets it as well as the test suite. (The
classroom grader disables plugin autoloading and has its own rules.)

**Patience on a busy machine.** nbval 0.11 waits for the cell's reply up to ``--nbval-cell-timeout`` seconds, then
reads the cell's outputs with a FIXED 5 s limit per message (``IPyNbCell.output_timeout = 5`` in ``nbval/plugin.py``);
on a loaded 2-core machine the kernel's output thread can be descheduled for longer, and nbval then fails a correct
cell with "Timeout of 5 seconds exceeded waiting for output". Here each nbval cell waits up to ``OUTPUT_TIMEOUT_S``
seconds (or the cell timeout, whichever is smaller) for each output message. A kernel that really stopped answering
still fails the cell, after that limit.

**A self-check judges the code, never the saved outputs.** In a notebook with graded check cells (metadata
``{"gradacc": {"check": "X.Y"}}``: an exercise or a solution), each check cell is compared with the pristine
``Exercise X.Y: correct`` line (in the notebook's language: ``Exercício X.Y: correto`` in a pt-BR notebook, whose
metadata says ``{"gradacc": {"language": "pt_BR"}}``), whatever output the learner's saved file holds, and no other cell's stored output is
compared (its errors still fail it): the grader judges a submission the same way. A learner who ran a wrong answer,
saved, then fixed the code without re-running the check cell passes; a wrong answer fails at its check, whose report
starts with what the check cell printed: the exercise's number, the check's reason and any misconception it
recognised (``CheckFailed`` itself says only ``see above``), without colour codes when the
output is not a terminal.

**Names a learner can find.** nbval names a cell by its index among the CODE cells (``Cell 3``); JupyterLab's status
bar counts ALL cells (``Cell 7/11``). A check cell's test is named with both and its exercise:
``exercises/10_stacks.ipynb::Cell 3 (check 10.1, cell 8/12 in JupyterLab)``, in the summary line and the failure's
header alike.
"""

from __future__ import annotations

import os
import re

import nbformat

from ..i18n import ENV_VAR, N_, translate

# the plugin's learner-facing lines, translated into the notebook's language where they are printed
_FAILED = N_("Exercise {exercise}: its check cell failed (nbval's report below says how)")
_WHERE = N_("(the check cell `{source}`: {where})")
_POSITION = N_("check {check}, cell {position}/{total} in JupyterLab")
OUTPUT_TIMEOUT_S = 60.0
"""Seconds nbval waits for each output message after a cell's reply (nbval's own value is 5)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def check_of(cell) -> str | None:
    """The graded check (``"2.1"``) a notebook cell belongs to, from its ``gradacc`` metadata, or ``None``."""
    meta = cell.get("metadata", {}).get("gradacc", {})
    return str(meta["check"]) if isinstance(meta, dict) and "check" in meta else None


def _language(notebook) -> str:
    """The language an nbval notebook item's kernel prints in: its file's ``metadata.gradacc.language`` (the pt-BR
    edition's ``"pt_BR"``, whose setup cell calls ``set_language``), else ``GRADACC_LANG``, which the kernel
    inherits, else English."""
    meta = getattr(notebook, "nb", None)
    meta = meta.metadata.get("gradacc", {}) if meta is not None else {}
    chosen = meta.get("language") if isinstance(meta, dict) else None
    return chosen or os.environ.get(ENV_VAR) or "en"


def _name_for_the_learner(item, check: str, language: str = "en") -> str:
    """Rename a check cell's nbval item to ``Cell N (check X.Y, cell K/T in JupyterLab)`` (in the notebook's
    language); returns the part in parentheses."""
    cells = item.parent.nb.cells
    position = next(i for i, cell in enumerate(cells) if cell is item.cell) + 1
    where = translate(_POSITION, language).format(check=check, position=position, total=len(cells))
    item.name = f"Cell {item.cell_num} ({where})"
    item._nodeid = f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}"  # pytest has no public way to rename an item
    path, line, description = item.reportinfo()
    item.reportinfo = lambda: (path, line, f"{description} ({where})")
    return where


def _judge_code_only(item, check: str | None, markup: bool, language: str = "en") -> None:
    if check is None:
        item.options["check"] = False  # a learner's saved output is no evidence; an error still fails the cell
        item.cell.outputs = []
        return
    item.options["check"] = True
    where = _name_for_the_learner(item, check, language)
    line = translate("Exercise {exercise}: correct", language).format(exercise=check)  # as the notebook prints it
    item.cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    item.cell.execution_count = item.cell.execution_count or 1
    plain = item.repr_failure
    printed = _record_printed(item)

    def repr_failure(excinfo, **kwargs):
        report = str(plain(excinfo, **kwargs))
        said = " ".join("".join(printed).split())  # the check's line, wrapped for JupyterLab: one line here
        marker = line.split(":")[0] + ":"  # "Exercise 2.1:" in the notebook's language
        first = said[said.index(marker) :] if marker in said else None
        head = first or translate(_FAILED, language).format(exercise=check)
        cell = translate(_WHERE, language).format(source=item.cell.source.strip(), where=where)
        report = f"{head}\n{cell}\n\n{report}"
        return report if markup else _ANSI.sub("", report)

    item.repr_failure = repr_failure


def _record_printed(item) -> list[str]:
    """The text the check cell prints while nbval runs it (``stream`` messages from the kernel), collected into the
    returned list: the check's ``incorrect`` line and any misconception's hint, which the failure report puts first
    (``CheckFailed`` itself says only ``Exercise X.Y: incorrect, see above``)."""
    printed: list[str] = []
    run = item.runtest

    def runtest() -> None:
        notebook = item.parent
        receive = notebook.get_kernel_message

        def recording(*args, **kwargs):
            message = receive(*args, **kwargs)
            if message.get("msg_type") == "stream" and message.get("content", {}).get("name") == "stdout":
                printed.append(message["content"].get("text", ""))
            return message

        notebook.get_kernel_message = recording
        try:
            run()
        finally:
            del notebook.get_kernel_message  # the class's method again

    item.runtest = runtest
    return printed


def pytest_collection_modifyitems(session, config, items) -> None:
    cell_timeout = float(getattr(config.option, "nbval_cell_timeout", OUTPUT_TIMEOUT_S) or OUTPUT_TIMEOUT_S)
    cells = [item for item in items if hasattr(item, "output_timeout") and hasattr(item, "cell")]  # IPyNbCell
    for item in cells:
        item.output_timeout = max(item.output_timeout, min(OUTPUT_TIMEOUT_S, cell_timeout))
    graded = {id(item.parent) for item in cells if check_of(item.cell)}
    markup = config.get_terminal_writer().hasmarkup
    for item in cells:
        if id(item.parent) in graded:
            _judge_code_only(item, check_of(item.cell), markup, _language(item.parent))
        if not markup:
            from nbval.plugin import nocolors

            item.colors = nocolors
