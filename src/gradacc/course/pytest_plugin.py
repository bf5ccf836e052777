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

**Counted and named in checks** (issue 55), as ``gradacc progress`` counts them. nbval names a cell by its index among
the CODE cells (``Cell 3``), where JupyterLab's status bar counts ALL cells (``Cell 7/11``), and counts every code cell
as a test (``2 failed, 4 passed`` for a notebook of 2 checks). In a notebook with graded check cells a check's test is
named with its exercise and the cell as JupyterLab numbers it, and nothing else:
``exercises/10_stacks.ipynb::check 10.1 (cell 8/12 in JupyterLab)``, in the summary and the failure's header alike;
another cell is ``cell 5/12 in JupyterLab``. The summary line counts the checks only (``1 failed, 1 passed``); another
cell that fails counts as an error (``1 error``), one that passes is not counted; and a line says how many checks
passed: ``exercises/10_stacks.ipynb: checks passed: 1 of 2``. nbval's code-cell index stays in the test's report
(``user_properties``' ``nbval-cell``), where ``gradacc.course.nbval_run`` reads it.
"""

from __future__ import annotations

import os
import re

import nbformat

from ..i18n import ENV_VAR, N_, translate

# the plugin's learner-facing lines, translated into the notebook's language where they are printed
_FAILED = N_("Exercise {exercise}: its check cell failed (nbval's report below says how)")
_WHERE = N_("(the check cell `{source}`: {where})")
_POSITION = N_("cell {position}/{total} in JupyterLab")
_CHECK = N_("check {check} ({where})")
_PASSED = N_("{notebook}: checks passed: {passed} of {total}")
CELL_PROPERTY = "nbval-cell"
"""The ``user_properties`` key of a renamed item's nbval code-cell index (nbval's ``Cell N``)."""
_ROLE = "gradacc-role"  # user_properties: "check X.Y" or "cell" for the items of a notebook with graded checks
_LANGUAGE = "gradacc-language"  # user_properties: the notebook's language
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


def _name_for_the_learner(item, check: str | None, language: str = "en") -> str:
    """Rename an nbval item of a notebook with graded checks to ``check X.Y (cell K/T in JupyterLab)`` (a check cell)
    or ``cell K/T in JupyterLab`` (another), in the notebook's language; returns the cell's position in those words.
    nbval's code-cell index goes into the item's ``user_properties`` (``CELL_PROPERTY``)."""
    cells = item.parent.nb.cells
    position = next(i for i, cell in enumerate(cells) if cell is item.cell) + 1
    where = translate(_POSITION, language).format(position=position, total=len(cells))
    name = where if check is None else translate(_CHECK, language).format(check=check, where=where)
    properties = getattr(item, "user_properties", None)
    if properties is not None:
        role = "cell" if check is None else f"check {check}"
        properties += [(CELL_PROPERTY, item.cell_num), (_ROLE, role), (_LANGUAGE, language)]
    path = item.nodeid.rsplit("::", 1)[0]
    item.name = name
    item._nodeid = f"{path}::{name}"  # pytest has no public way to rename an item
    fspath, line, _ = item.reportinfo()
    item.reportinfo = lambda: (fspath, line, f"{path}::{name}")
    return where


def _judge_code_only(item, check: str | None, markup: bool, language: str = "en") -> None:
    where = _name_for_the_learner(item, check, language)
    if check is None:
        item.options["check"] = False  # a learner's saved output is no evidence; an error still fails the cell
        item.cell.outputs = []
        return
    item.options["check"] = True
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


def _role(report) -> str | None:
    return dict(getattr(report, "user_properties", ())).get(_ROLE)


def pytest_report_teststatus(report, config):
    """In a notebook with graded checks, only the checks count: another cell that passes (or is skipped) is not
    counted nor shown as a dot, one that fails is an error (``E``); a check keeps pytest's own status."""
    if _role(report) != "cell" or report.when != "call":
        return None
    if report.failed:
        return "error", "E", "ERROR"
    return "", "", ""


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line per notebook with graded checks, in its language: how many of its checks passed
    (``exercises/02_pytorch.ipynb: checks passed: 1 of 2``)."""
    notebooks: dict[str, tuple[str, dict[str, bool]]] = {}  # path -> (language, {check: passed})
    for reports in terminalreporter.stats.values():
        for report in reports:
            properties = dict(getattr(report, "user_properties", ()))
            role = properties.get(_ROLE, "")
            if not role.startswith("check ") or report.when not in ("setup", "call"):
                continue
            language, checks = notebooks.setdefault(report.nodeid.partition("::")[0], (properties[_LANGUAGE], {}))
            checks[role] = checks.get(role, True) and report.passed
    for path, (language, checks) in notebooks.items():
        passed = sum(checks.values())
        line = translate(_PASSED, language).format(notebook=path, passed=passed, total=len(checks))
        terminalreporter.write_line(line, green=passed == len(checks), red=passed < len(checks))
