"""Every notebook runs on a fresh kernel under nbval: lessons (lax, values checked where tagged), generated exercises
(strict: they fail exactly at their check cells, and pass with the solution's answers put back); the solutions' answers
pass every check in that answered run, which one execution serves to both tests (``answered_run``).
Each run's wall time, CPU time, the load average and memory (the kernel's peak RSS, and the largest PSS of the kernel
with every process it starts) are reported at the end of the session (see conftest.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, record_notebook_run

from gradacc.course.nbval_run import _RUNNER_PRELUDE
from gradacc.course.notebooks import check_cells, run_nbval, stale_exercises

BINDER_LIMIT_MIB = 2048
"""A mybinder.org session has at most 2 GB (https://mybinder.readthedocs.io/en/latest/faq.html, "How much memory am I
given when using Binder?": above it the kernel is restarted), for everything in its container: the Jupyter server,
the kernel and the processes the kernel starts (lessons 05, 07, 09 and 11 start 2 ranks)."""
SERVER_PSS_MIB = 160
"""The JupyterLab server's own PSS with a lesson open, rounded up: tests/test_browser.py measures it every run (its
"measurements" line); 2026-12-03: 105 and 107 MiB."""
PEAK_LIMIT_MIB = BINDER_LIMIT_MIB - SERVER_PSS_MIB
"""What a notebook's kernel and the processes it starts may hold together (PSS, ``NbvalRun.tree_pss_mib``)."""
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))

pytestmark = pytest.mark.notebook


def _run(path: Path, env: str = "", **kwargs):
    run = run_nbval(path, tree_memory=True, **kwargs)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    record_notebook_run(f"{name} ({env})" if env else name, run)
    return run


def test_the_runner_spares_rfc3987_syntax_and_still_validates_notebooks():
    """The nbval runner's prelude keeps jsonschema from importing rfc3987_syntax (its Lark parsers); nbformat still
    validates a notebook and rejects a broken one. Prints the CPU seconds of nbval's imports with and without it."""
    code = (
        "import sys, time\n"
        "start = time.process_time()\n"
        "import nbformat, nbval.plugin\n"
        "print(round(time.process_time() - start, 2), 'lark' in sys.modules, bool(sys.modules.get('rfc3987_syntax')))\n"
        f"nb = nbformat.read({str(LESSONS[0])!r}, as_version=4)\n"
        "nbformat.validate(nb)\n"
        "del nb.cells[0]['source']\n"
        "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError:\n    print('rejected')\n"
    )
    spared = subprocess.run([sys.executable, "-c", _RUNNER_PRELUDE + code], capture_output=True, text=True, check=True)
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    print(f"nbval's imports: {plain.stdout.split()[0]} s of CPU, {spared.stdout.split()[0]} s with the prelude")
    assert spared.stdout.split()[1:] == ["False", "False", "rejected"], spared.stdout
    assert plain.stdout.split()[1:] == ["True", "True", "rejected"], plain.stdout  # the import it spares is real


def _explain(run) -> str:
    """The first failure's report (the cause) and the end of the output (the summary)."""
    out = run.output
    start = out.find("____")  # nbval's first failure section
    head = out[start : start + 6000] if start >= 0 else ""
    return f"nbval exit {run.returncode}; failed cells {run.failed_cells}\n{head}\n[...]\n{out[-3000:]}"


def test_exercises_are_generated_from_current_solutions():
    stale = stale_exercises(ROOT / "solutions", ROOT / "exercises")
    assert stale == [], f"stale exercises {stale}: run `make exercises`"


def check_lesson(path: Path, python: str | None = None, env: str = "", peak_limit_mib: float = PEAK_LIMIT_MIB) -> None:
    """The lesson runs to the end under nbval-lax (tagged values checked), within the memory limit (the kernel and the
    processes it starts, PSS)."""
    run = _run(path, env=env, lax=True, python=python)
    assert run.returncode == 0, _explain(run)
    _within(path, run, peak_limit_mib)


def _within(path: Path, run, limit_mib: float) -> None:
    assert run.tree_pss_mib, f"{path.name}: no memory sample of the kernel's processes"
    assert run.tree_pss_mib <= limit_mib, (
        f"{path.name}: the kernel and its processes held {run.tree_pss_mib:.0f} MiB (PSS) > {limit_mib} MiB"
    )


_ANSWERED: dict[tuple[str, str], object] = {}


def answered_run(path: Path, python: str | None = None, env: str = ""):
    """The generated exercise of solution ``path`` with the solution's answer cells put back (by cell id), run the
    way a learner runs it (strict nbval), ONCE per test process and environment: the solution test and the exercise
    test both read this run (their parametrizations share an xdist group, so they meet in one process). The cells are
    the solution's own (``test_exercises_are_generated_from_current_solutions``), in the exercise's folder."""
    key = (path.name, env)
    if key not in _ANSWERED:
        exercise = nbformat.read(ROOT / "exercises" / path.name, as_version=4)
        answers = {
            c.id: c.source for c in nbformat.read(path, as_version=4).cells if "solution" in c.metadata.get("tags", [])
        }
        filled = copy.deepcopy(exercise)
        for cell in filled.cells:
            if cell.get("id") in answers:
                cell.source = answers[cell.id]
        assert sum(cell.get("id") in answers for cell in filled.cells) == len(answers)
        filled_path = ROOT / "exercises" / f".filled{'-' + env if env else ''}-{path.name}"
        try:
            nbformat.write(filled, filled_path)
            _ANSWERED[key] = _run(filled_path, env=env, python=python)
        finally:
            filled_path.unlink(missing_ok=True)
    return _ANSWERED[key]


def check_solution(
    path: Path, python: str | None = None, env: str = "", peak_limit_mib: float = PEAK_LIMIT_MIB
) -> None:
    """The solution's check cells are tagged and store `correct`, and its answers pass every check when run, within
    the memory limit."""
    nb = nbformat.read(path, as_version=4)
    checks = check_cells(nb)
    assert len(checks) >= 2, f"{path.name} needs at least two graded check cells"
    for check in checks:
        tags = nb.cells[check["index"]].metadata.get("tags", [])
        assert "nbval-check-output" in tags, f"check cell {check['check']} must be tagged nbval-check-output"
        assert nb.cells[check["index"]].outputs, f"check cell {check['check']} has no stored output"
        text = "".join(o.get("text", "") for o in nb.cells[check["index"]].outputs)
        assert text.strip() == f"Exercise {check['check']}: correct", text
    run = answered_run(path, python, env)
    assert run.returncode == 0, _explain(run)
    _within(path, run, peak_limit_mib)
    assert [run.cells[c["code_index"]]["outcome"] for c in checks] == ["passed"] * len(checks)


def check_exercise(path: Path, python: str | None = None, env: str = "") -> None:
    """The exercise fails exactly at its check cells, and passes them all with the solution's answers put back."""
    exercise_path = ROOT / "exercises" / path.name
    checks = check_cells(nbformat.read(exercise_path, as_version=4))
    unanswered = _run(exercise_path, env=env, python=python)
    assert unanswered.returncode != 0
    assert unanswered.failed_cells == [c["code_index"] for c in checks], _explain(unanswered)
    answered = answered_run(path, python, env)
    assert answered.returncode == 0, _explain(answered)


def by_solution(env: str = "") -> list:
    """``SOLUTIONS`` as parameters in one xdist group per solution and environment (see ``answered_run``)."""
    return [pytest.param(p, marks=pytest.mark.xdist_group(f"answered {p.name} {env}".strip())) for p in SOLUTIONS]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_runs_under_nbval(path: Path):
    check_lesson(path)


@pytest.mark.parametrize("path", by_solution(), ids=lambda p: p.name)
def test_solution_passes_its_checks(path: Path):
    check_solution(path)


@pytest.mark.parametrize("path", by_solution(), ids=lambda p: p.name)
def test_exercise_fails_exactly_at_checks_and_passes_with_answers(path: Path):
    check_exercise(path)
