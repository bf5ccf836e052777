"""Exercise generation from solutions (gradacc.course.notebooks), on small notebooks built here."""

from __future__ import annotations

import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gradacc.cli import main
from gradacc.course.notebooks import check_cells, generate_exercise, stale_exercises, write_exercises


def _solution():
    answer = new_code_cell(
        "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n",
        id="ex-1-1-answer",
        metadata={"tags": ["solution"]},
        outputs=[new_output("stream", name="stdout", text="noise\n")],
    )
    check = new_code_cell(
        "from gradacc.course.checks import report\nreport('1.1', f(2) == 4)",
        id="ex-1-1-check",
        metadata={"tags": ["check", "nbval-check-output"], "gradacc": {"check": "1.1", "points": 2}},
        outputs=[new_output("stream", name="stdout", text="Exercise 1.1: correct\n")],
    )
    return new_notebook(
        cells=[new_markdown_cell("# 01 · Test"), new_code_cell("x = 1", id="setup"), answer, check],
        metadata={"widgets": {"state": {}}},
    )


def test_generation_hides_the_answer_and_keeps_the_check():
    solution = _solution()
    exercise = generate_exercise(solution)
    answer, check = exercise.cells[3], exercise.cells[4]
    assert answer.source == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    assert answer.outputs == [] and "raises-exception" in answer.metadata.tags
    assert "return 2 * x" not in nbformat.writes(exercise)
    assert check.outputs == [] and check.execution_count is None  # issue 55: no "correct" under an empty answer
    assert "nbval-ignore-output" in exercise.cells[2].metadata.tags
    assert "widgets" not in exercise.metadata
    assert "### BEGIN SOLUTION" in solution.cells[2].source  # input untouched
    assert check_cells(exercise) == [
        {"index": 4, "code_index": 2, "id": "ex-1-1-check", "check": "1.1", "points": 2, "bonus": False}
    ]


def test_every_exercise_says_how_to_check_it_and_pytest_names_its_checks(tmp_path):
    """Issue 45: under the title (or the badges), how to answer, what a check cell prints, that Run All stops at the
    first check not correct yet (answer cells are tagged raises-exception, check cells are not: JupyterLab sends
    ``stop_on_error`` false only for the tagged cells), and the terminal command; pytest then names a check with its
    exercise and its cell as JupyterLab's status bar counts them, the name the cell quotes."""
    import subprocess
    import sys

    exercise = generate_exercise(_solution(), "01_test.ipynb")
    text = exercise.cells[1].source.replace("\n", " ")
    assert exercise.cells[1].id == "gradacc-how-to-check" and exercise.cells[0].source == "# 01 · Test"
    for words in ("**check cell**", "In JupyterLab, *Run All* stops at the first check", "Colab and VS Code do not",
                  "`.venv/bin/pytest --nbval exercises/01_test.ipynb`", "on Binder, `pytest --nbval",
                  "cell 7/11 is cell 7 of 11"):  # fmt: skip
        assert words in text, (words, text)
    tags = {c.id: c.metadata.get("tags", []) for c in exercise.cells if c.cell_type == "code"}
    assert "raises-exception" in tags["ex-1-1-answer"] and "raises-exception" not in tags["ex-1-1-check"]
    (tmp_path / "exercises").mkdir()
    nbformat.write(exercise, tmp_path / "exercises" / "01_test.ipynb")
    command = [sys.executable, "-m", "pytest", "--nbval", "--collect-only", "-q", "-p", "no:cacheprovider"]
    collected = subprocess.run([*command, "exercises/01_test.ipynb"], cwd=tmp_path, capture_output=True, text=True)
    assert "exercises/01_test.ipynb::check 1.1 (cell 5/5 in JupyterLab)" in collected.stdout, collected.stdout


def test_no_exercise_says_correct_before_it_is_answered():
    """Issue 55: every exercise showed ``Exercise X.Y: correct`` under each check cell before the learner wrote
    anything (the solution's stored output). No committed exercise, in either edition, stores a check cell's output,
    nor any output that says correct (the unanswered notebook's checks fail: ``tests/test_notebooks.py``)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    said = {}
    exercises = sorted((root / "exercises").glob("*.ipynb")) + sorted((root / "pt-BR" / "exercises").glob("*.ipynb"))
    for path in exercises:
        nb = nbformat.read(path, as_version=4)
        checks = {c["index"] for c in check_cells(nb)}
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
            if (index in checks and cell.outputs) or re.search(r"\b(correct|correto)\b", text, re.I):
                said[f"{path.relative_to(root)} cell {index}"] = text[:80]
    assert len(exercises) == 2 * len(list((root / "solutions").glob("*.ipynb"))) and said == {}, said


def test_pytest_counts_and_names_a_graded_notebook_in_checks(tmp_path):
    """Issue 55: ``pytest --nbval`` said ``2 failed, 4 passed`` for a notebook with 2 checks and named a check two
    ways (``Cell 3 (check 11.1, cell 8/12 in JupyterLab)``). In a notebook with graded checks it counts the checks
    (another cell that fails is an error; one that passes is not counted), names each cell once, as JupyterLab numbers
    it, and says how many checks passed. One run of a 6-cell notebook: 1.1 unanswered (fails), 1.2 right, a cell that
    raises."""
    import subprocess
    import sys

    exercise = generate_exercise(_solution(), "01_test.ipynb")
    exercise.cells += [
        new_code_cell("1 / 0", id="broken"),
        new_code_cell(
            "from gradacc.course.checks import report\nok = report('1.2', x == 1)",
            id="ex-1-2-check",
            metadata={"tags": ["check", "nbval-check-output"], "gradacc": {"check": "1.2", "points": 1}},
        ),
    ]
    (tmp_path / "exercises").mkdir()
    nbformat.write(exercise, tmp_path / "exercises" / "01_test.ipynb")
    command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-rA", "-p", "no:cacheprovider"]
    run = subprocess.run([*command, "exercises/01_test.ipynb"], cwd=tmp_path, capture_output=True, text=True)
    out = run.stdout
    assert run.returncode == 1, out
    assert re.search(r"=+ 1 failed, 1 passed, 1 error in [\d.]+s", out), out[-1500:]  # the checks, and the broken cell
    assert "exercises/01_test.ipynb: checks passed: 1 of 2" in out, out[-1500:]
    assert "FAILED exercises/01_test.ipynb::check 1.1 (cell 5/7 in JupyterLab)" in out, out[-1500:]
    assert "PASSED exercises/01_test.ipynb::check 1.2 (cell 7/7 in JupyterLab)" in out, out[-1500:]
    assert "ERROR exercises/01_test.ipynb::cell 6/7 in JupyterLab" in out, out[-1500:]
    assert "::Cell " not in out, out[-1500:]  # nbval's own numbering (code cells only) is gone


def test_generation_refuses_leaky_or_unmarked_cells():
    nb = _solution()
    nb.cells[2].source = "def f(x):\n    return 2 * x\n"
    with pytest.raises(ValueError, match="solution cell 2"):
        generate_exercise(nb)
    nb = _solution()
    nb.cells[1].source = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n"
    with pytest.raises(ValueError, match="no 'solution' tag"):
        generate_exercise(nb)


def test_stale_detection_and_cli(tmp_path, capsys):
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    nbformat.write(_solution(), solutions / "01_test.ipynb")
    assert stale_exercises(solutions, exercises) == ["01_test.ipynb"]
    write_exercises(solutions, exercises)
    assert stale_exercises(solutions, exercises) == []
    assert main(["exercises", "--check", "--solutions", str(solutions), "--exercises", str(exercises)]) == 0
    nb = nbformat.read(solutions / "01_test.ipynb", as_version=4)
    nb.cells[1].source = "x = 2"
    nbformat.write(nb, solutions / "01_test.ipynb")
    assert main(["exercises", "--check", "--solutions", str(solutions), "--exercises", str(exercises)]) == 1
    assert "stale:" in capsys.readouterr().out


def test_hidden_notebooks_in_exercises_are_not_stale(tmp_path):
    # tests/test_notebooks.py writes exercises/.filled-NN_topic.ipynb while it runs; a concurrent staleness check
    # must not report it
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    nbformat.write(_solution(), solutions / "01_test.ipynb")
    write_exercises(solutions, exercises)
    nbformat.write(_solution(), exercises / ".filled-01_test.ipynb")
    assert stale_exercises(solutions, exercises) == []
    nbformat.write(_solution(), exercises / "09_orphan.ipynb")
    assert stale_exercises(solutions, exercises) == ["09_orphan.ipynb"]
