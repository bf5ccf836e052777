"""A learner's self-check (`pytest --nbval exercises/NN_topic.ipynb`, docs/index.md "Checking an exercise") judges the code,
never the outputs a learner's SAVED notebook holds: a wrong check raises ``CheckFailed`` when nbval runs it (issue
13), and a right answer passes although the saved file still holds a wrong run's check output (issue 30), as the
grader judges it."""

from __future__ import annotations

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from gradacc.course.notebooks import check_cells, run_nbval
from gradacc.grading import grade

pytestmark = pytest.mark.notebook

# A plausible mistake: every micro-batch's MEAN loss divided by the number of micro-batches (a mean of means), which is
# wrong as soon as the micro-batches differ in size.
MEAN_OF_MEANS = """def accumulation_window(model, optimizer, micro_batches):
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total
"""


def _saved_after_a_wrong_run(tmp_path):
    """The exercise with a wrong 2.1 and a right 2.2, run in a kernel and saved: the file stores the wrong check's
    output. Returns (notebook, path, the solution's answers, the checks by number)."""
    exercise = nbformat.read(ROOT / "exercises" / "02_pytorch.ipynb", as_version=4)
    answers = {c.id: c.source for c in nbformat.read(ROOT / "solutions" / "02_pytorch.ipynb", as_version=4).cells}
    for cell in exercise.cells:
        if cell.get("id") == "ex-2-1-solution":
            cell.source = MEAN_OF_MEANS
        elif cell.get("id") == "ex-2-2-solution":
            cell.source = answers[cell.id]
    # The learner runs every cell in JupyterLab and saves: the file now stores the wrong check's output.
    NotebookClient(exercise, timeout=300, kernel_name="python3", allow_errors=True).execute()
    path = tmp_path / "learner" / "02_pytorch.ipynb"
    path.parent.mkdir()
    nbformat.write(exercise, path)
    return exercise, path, answers, {c["check"]: c for c in check_cells(exercise)}


def test_a_saved_wrong_notebook_fails_its_self_check_and_says_why(tmp_path):
    exercise, path, _, checks = _saved_after_a_wrong_run(tmp_path)
    saved = "".join(o.get("text", "") for o in exercise.cells[checks["2.1"]["index"]].outputs)
    assert saved.startswith("Exercise 2.1: incorrect - "), saved
    reason = saved.strip().removeprefix("Exercise 2.1: incorrect - ")
    errors = [o for o in exercise.cells[checks["2.1"]["index"]].outputs if o.output_type == "error"]
    assert [(e.ename, e.traceback) for e in errors] == [
        ("CheckFailed", [f"CheckFailed: Exercise 2.1 is not correct yet: {reason}. Fix it and run this cell again"])
    ]  # one line in JupyterLab, no traceback (IPython's _render_traceback_)

    run = run_nbval(path)  # the README's command: strict nbval on the learner's saved file
    assert run.returncode == 1
    assert run.failed_cells == [checks["2.1"]["code_index"]], run.output[-3000:]  # 2.2 is right and passes
    # the terminal names the exercise and gives the reason first, with no colour codes in a pipe
    assert f"Exercise 2.1 is not correct yet: {reason}" in run.output
    # the check named as the learner sees it: nbval's code-cell index, the check, and JupyterLab's "Cell K/T"
    where = f"check 2.1, cell {checks['2.1']['index'] + 1}/{len(exercise.cells)} in JupyterLab"
    assert f"::Cell {checks['2.1']['code_index']} ({where})" in run.output, run.output[-3000:]
    assert f"(the check cell `check_accumulation_window(accumulation_window)`: {where})" in run.output
    assert "\x1b[" not in run.output


@pytest.mark.usefixtures("bwrap")  # grade() with the default sandbox
def test_a_fixed_answer_passes_without_re_running_its_check_and_agrees_with_the_grade(tmp_path):
    """The newcomer's sequence: a wrong 2.1 run and saved, then the right code written into both answer cells and saved
    WITHOUT running the check cells again. The self-check passes (it judges the code), and the grader gives the same
    verdict: full points."""
    exercise, path, answers, _ = _saved_after_a_wrong_run(tmp_path)
    for cell in exercise.cells:
        if cell.get("id") in ("ex-2-1-solution", "ex-2-2-solution"):
            cell.source = answers[cell.id]  # edited and saved; the check cells keep the wrong run's output
    nbformat.write(exercise, path)
    run = run_nbval(path)
    assert run.returncode == 0, run.output[-3000:]
    book = grade(tmp_path, ROOT / "solutions", hidden=ROOT / "hidden", progress=False, log=lambda _: None)
    (row,) = book.rows
    print(f"self-check: passed; grade: {row.points}/{row.max_points} ({row.status})")
    assert (row.status, row.points, row.max_points) == ("graded", 6, 6) and row.sandbox.startswith("bubblewrap ")
