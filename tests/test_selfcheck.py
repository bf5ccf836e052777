"""A learner's self-check (`pytest --nbval exercises/NN_topic.ipynb`, docs/index.md "Checking an exercise") judges the code,
never the outputs a learner's SAVED notebook holds: a wrong check raises ``CheckFailed`` when nbval runs it (issue
13), and a right answer passes although the saved file still holds a wrong run's check output (issue 30), as the
grader judges it. The learner's progress (``gradacc progress``, issue 47) agrees with the grade point for point on the
same sequence."""

from __future__ import annotations

import copy
import hashlib
import json

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

import gradacc
from gradacc.cli import main
from gradacc.course.notebooks import check_cells, run_nbval
from gradacc.grading import grade
from gradacc.grading.progress import progress

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


@pytest.fixture(scope="module")
def saved_wrong():
    """The exercise with a wrong 2.1 and a right 2.2, run in a kernel and saved: the file stores the wrong check's
    output. Returns (notebook, the solution's answers, the checks by number); each test writes its own copy."""
    exercise = nbformat.read(ROOT / "exercises" / "02_pytorch.ipynb", as_version=4)
    answers = {c.id: c.source for c in nbformat.read(ROOT / "solutions" / "02_pytorch.ipynb", as_version=4).cells}
    for cell in exercise.cells:
        if cell.get("id") == "ex-2-1-solution":
            cell.source = MEAN_OF_MEANS
        elif cell.get("id") == "ex-2-2-solution":
            cell.source = answers[cell.id]
    # The learner runs every cell in JupyterLab and saves: the file now stores the wrong check's output.
    NotebookClient(exercise, timeout=300, kernel_name="python3", allow_errors=True).execute()
    return exercise, answers, {c["check"]: c for c in check_cells(exercise)}


def _saved_after_a_wrong_run(saved_wrong, folder):
    """``folder/02_pytorch.ipynb``, the learner's saved file. Returns (a copy of the notebook, path, answers, checks)."""
    exercise, answers, checks = saved_wrong
    path = folder / "02_pytorch.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(exercise, path)
    return copy.deepcopy(exercise), path, answers, checks


def test_a_saved_wrong_notebook_fails_its_self_check_and_says_why(saved_wrong, tmp_path):
    exercise, path, _, checks = _saved_after_a_wrong_run(saved_wrong, tmp_path / "learner")
    saved = "".join(o.get("text", "") for o in exercise.cells[checks["2.1"]["index"]].outputs)
    assert saved.startswith("Exercise 2.1: incorrect - "), saved
    detail, _, hint = saved.partition("\nThis looks like a known misconception: ")
    reason = " ".join(detail.split()).removeprefix("Exercise 2.1: incorrect - ")
    assert hint.startswith("a mean of micro-batch means."), saved  # MEAN_OF_MEANS is that misconception
    errors = [o for o in exercise.cells[checks["2.1"]["index"]].outputs if o.output_type == "error"]
    assert [(e.ename, e.traceback) for e in errors] == [
        ("CheckFailed", ["CheckFailed: Exercise 2.1: incorrect, see above"])
    ]
    # one short line in JupyterLab, no traceback (IPython's _render_traceback_): the detail is printed once, above

    run = run_nbval(path)  # the README's command: strict nbval on the learner's saved file
    assert run.returncode == 1
    assert run.failed_cells == [checks["2.1"]["code_index"]], run.output[-3000:]  # 2.2 is right and passes
    # the terminal names the exercise and gives the reason first, with no colour codes in a pipe
    assert f"Exercise 2.1: incorrect - {reason} This looks like a known misconception: a mean" in run.output
    # the check named as the learner sees it, once: the check and JupyterLab's "Cell K/T" (issue 55)
    where = f"cell {checks['2.1']['index'] + 1}/{len(exercise.cells)} in JupyterLab"
    assert f"::check 2.1 ({where})" in run.output and "::Cell " not in run.output, run.output[-3000:]
    assert "02_pytorch.ipynb: checks passed: 1 of 2" in run.output, run.output[-3000:]  # counted in checks
    assert f"(the check cell `check_accumulation_window(accumulation_window)`: {where})" in run.output
    assert "\x1b[" not in run.output


@pytest.mark.usefixtures("bwrap")  # grade() with the default sandbox
def test_a_fixed_answer_passes_without_re_running_its_check_and_agrees_with_the_grade(saved_wrong, tmp_path, capsys):
    """The newcomer's sequence: a wrong 2.1 run and saved, then the right code written into both answer cells and saved
    WITHOUT running the check cells again. The self-check passes (it judges the code), and the grader gives the same
    verdict: full points. The learner's progress (`gradacc progress` on the saved wrong file, `progress()` on the
    fixed one) gives every check the points the instructor's grade gives it, in both states."""
    class_folder = tmp_path / "class"
    _saved_after_a_wrong_run(saved_wrong, class_folder / "saved_wrong")  # the instructor grades both states at once
    exercise, path, answers, _ = _saved_after_a_wrong_run(saved_wrong, class_folder / "fixed")
    for cell in exercise.cells:
        if cell.get("id") in ("ex-2-1-solution", "ex-2-2-solution"):
            cell.source = answers[cell.id]  # edited and saved; the check cells keep the wrong run's output
    nbformat.write(exercise, path)
    run = run_nbval(path)
    assert run.returncode == 0, run.output[-3000:]
    book = grade(class_folder, ROOT / "solutions", hidden=ROOT / "hidden", progress=False, log=lambda _: None)
    wrong, fixed = book.row("saved_wrong", "02_pytorch"), book.row("fixed", "02_pytorch")
    print(f"self-check: passed; grade: {fixed.points}/{fixed.max_points} ({fixed.status})")
    assert (fixed.status, fixed.points, fixed.max_points) == ("graded", 6, 6)
    assert fixed.sandbox.startswith("bubblewrap ") and wrong.checks["2.1"] == 0 < wrong.checks["2.2"]

    record = tmp_path / "record.json"  # the learner's own progress, from a terminal, on the saved wrong file
    args = ["progress", str(class_folder / "saved_wrong"), "--reference", str(ROOT / "solutions"), "--record"]
    capsys.readouterr()
    assert main([*args, str(record)]) == 1  # not every check passed yet
    table = capsys.readouterr().out
    print(table)
    line = table.splitlines()[1]  # under the header
    assert line.split()[:6] == ["02_pytorch", "1", "of", "2", f"{wrong.points:g}", "/"]
    assert "check 2.1: incorrect - " in line  # what to do next: the check's own message
    kept = json.loads(record.read_text())
    assert kept["course"]["gradacc"] == gradacc.__version__ and kept["course"]["references"]["02_pytorch"] == (
        hashlib.sha256((ROOT / "solutions" / "02_pytorch.ipynb").read_bytes()).hexdigest()
    )
    mine = kept["exercises"]["02_pytorch"]
    assert (mine["checks"], mine["points"], mine["checks_passed"]) == (wrong.checks, wrong.points, ["2.2"])

    fixed_progress = progress(class_folder / "fixed", reference=ROOT / "solutions", record=None)  # from a cell
    (judged,) = fixed_progress.exercises
    assert (judged.checks, judged.points, judged.max_points) == (fixed.checks, 6, 6) and judged.done
    assert judged.next == "done: every check passed" and fixed_progress.record is None


def test_progress_says_what_to_pass_when_its_folders_are_missing(tmp_path):
    """No notebook runs: the folder, the course's solutions and the exercise names are checked first."""
    from gradacc.grading import GradingError

    for call, message in [
        (lambda: progress(tmp_path / "nowhere"), "is not a folder: pass the folder of your exercise notebooks"),
        (lambda: progress(tmp_path), "progress puts your answers into the course's solution notebooks"),
        (lambda: progress(tmp_path, reference=ROOT / "solutions", exercises=["02_pytroch"]),
         "no course exercise is called ['02_pytroch']"),
    ]:  # fmt: skip
        with pytest.raises(GradingError) as error:
            call()
        assert message in str(error.value)
    empty = progress(tmp_path, reference=ROOT / "solutions", exercises=["01_theory", "02_pytorch"])
    assert (empty.exercises, empty.absent) == ([], ["01_theory", "02_pytorch"])
    assert empty.table().splitlines()[-1] == f"not in {tmp_path}: 01_theory, 02_pytorch"
    assert json.loads(empty.record.read_text())["exercises"] == {} and empty.record == tmp_path / "progress.json"


def test_progress_on_a_class_folder_refuses_to_write_there(tmp_path, capsys):
    """Issue 60: `gradacc progress` on a class folder wrote progress.json there, and the next `gradacc grade` read it
    as a student called "progress". No notebook runs: the layout is checked first."""
    from gradacc.grading import GradingError

    for layout in ("ann/02_pytorch.ipynb", "ben__02_pytorch.ipynb"):
        class_folder = tmp_path / layout.partition("/")[0].partition("_")[0]
        (class_folder / layout).parent.mkdir(parents=True, exist_ok=True)
        (class_folder / layout).write_text("{}")
        with pytest.raises(GradingError, match="looks like a class folder") as error:
            progress(class_folder, reference=ROOT / "solutions")
        assert f"gradacc progress --class {class_folder} --out class-progress.csv" in str(error.value)
        assert not (class_folder / "progress.json").exists()
    # the class view refuses to write into the class folder, before grading anything
    inside = tmp_path / "ann" / "view.csv"
    assert main(["progress", "--class", str(tmp_path / "ann"), "--out", str(inside)]) == 2
    assert "is inside the class folder" in capsys.readouterr().err and not inside.exists()
    # the wording says what to pass where (issue 60: "pass reference=/--reference")
    with pytest.raises(GradingError) as error:
        progress(tmp_path / "ann")
    assert "`gradacc progress --reference PATH` in a terminal, `progress(reference=PATH)` in a notebook" in str(
        error.value
    )


def test_the_progress_table_wraps_its_last_column_between_words(tmp_path):
    """Issue 55: the table's rows ran to 150 characters and a notebook's output area broke them inside words. Now no
    line is wider than ``TABLE_WIDTH``, the last column wraps between words under its own heading, and its words are
    all there, in order. No notebook runs: the rows are made here, as ``progress`` makes them."""
    from gradacc.grading.progress import TABLE_WIDTH, ExerciseProgress, Progress

    why = "check 1.1: incorrect - not answered yet (the answer cell still raises NotImplementedError)"
    rows = [
        ExerciseProgress("01_theory", tmp_path / "01_theory.ipynb", "graded", 0, 5, {"1.1": 0, "1.2": 0}, [], why),
        ExerciseProgress("02_pytorch", tmp_path / "02_pytorch.ipynb", "graded", 6, 6, {"2.1": 3, "2.2": 3},
                         ["2.1", "2.2"], "done: every check passed"),
    ]  # fmt: skip
    lines = Progress(tmp_path, rows, ["11_parallel"]).table().splitlines()
    assert max(len(line) for line in lines[:-2]) <= TABLE_WIDTH, lines
    column = lines[0].index("what to do next")
    assert lines[1].split()[:6] == ["01_theory", "0", "of", "2", "0", "/"] and lines[1][column:].startswith("check 1.1")
    (done,) = [i for i, line in enumerate(lines) if line.startswith("02_pytorch")]
    continued = lines[2:done]
    assert continued and all(line[:column].strip() == "" and line[column] != " " for line in continued), lines
    assert " ".join(line[column:] for line in lines[1:done]) == why  # every word, none cut
    assert lines[done][column:] == "done: every check passed"
    assert lines[-2:] == ["total: 6 / 11 points in 2 exercises", f"not in {tmp_path}: 11_parallel"]
