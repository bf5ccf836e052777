"""`gradacc classroom init`: the GitHub Classroom workflow parses, and its grading commands, run here as the runner
would run them, give full points to the solution and none to the unanswered exercise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import ROOT

from gradacc.cli import main
from gradacc.course.notebooks import check_cells

EXERCISE = "02_pytorch"


def _workflow(tmp: Path) -> dict:
    assert main(["classroom", "init", EXERCISE, "--reference", str(ROOT / "solutions"), "--repo-dir", str(tmp)]) == 0
    return yaml.safe_load((tmp / ".github" / "workflows" / "classroom.yml").read_text())


def test_the_workflow_has_one_graded_step_per_check_and_a_reporter(tmp_path):
    flow = _workflow(tmp_path)
    assert flow[True] == ["push", "workflow_dispatch"]  # YAML 1.1 reads the key `on` as True
    steps = flow["jobs"]["autograding"]["steps"]
    checks = check_cells(nbformat.read(ROOT / "solutions" / f"{EXERCISE}.ipynb", as_version=4))
    graders = [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader")]
    assert [(s["with"]["test-name"], s["with"]["max-score"]) for s in graders] == [
        (f"Exercise {c['check']}", c["points"]) for c in checks
    ]
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter")
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in graders]
    assert set(reporter["env"]) == {f"{s['id'].upper()}_RESULTS" for s in graders}
    text = (tmp_path / ".github" / "workflows" / "classroom.yml").read_text()
    assert "hidden" not in text.replace("--no-hidden", "").replace("hidden checks", "")  # no hidden checks in it


def _run_step(script: str, repo: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COURSE": str(ROOT), "EXERCISE": EXERCISE,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    return subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", ["solutions", "exercises"])
def test_the_grading_commands_score_a_solution_and_an_unanswered_exercise(tmp_path, notebook):
    flow = _workflow(tmp_path)
    steps = flow["jobs"]["autograding"]["steps"]
    shutil.copy(ROOT / notebook / f"{EXERCISE}.ipynb", tmp_path / f"{EXERCISE}.ipynb")  # the student's repository
    grading = next(s for s in steps if s.get("name") == "Grade the notebook (visible checks)")
    done = _run_step(grading["run"], tmp_path)
    assert done.returncode == 0 and (tmp_path / ".autograding" / "gradebook.csv").exists(), done.stderr[-2000:]
    earned = 0
    for step in (s for s in steps if s.get("id", "").startswith("check-")):
        result = _run_step(step["with"]["command"], tmp_path)
        line = result.stdout.strip()
        if notebook == "solutions":
            assert result.returncode == 0 and line.endswith("correct" + f" ({step['with']['max-score']} points)"), line
            earned += step["with"]["max-score"]
        else:
            assert result.returncode == 1 and f"0 of {step['with']['max-score']} points" in line, line
    total = sum(s["with"]["max-score"] for s in steps if s.get("id", "").startswith("check-"))
    assert earned == (total if notebook == "solutions" else 0)


def test_points_of_a_check_the_gradebook_lacks(tmp_path, capsys):
    book = tmp_path / "book.csv"
    book.write_text("student,exercise,points,max_points,message,check 2.1\nyou,02_pytorch,3,6,,3\n")
    assert main(["classroom", "points", str(book), "2.1", "3"]) == 0
    assert main(["classroom", "points", str(book), "9.9", "3"]) == 1
    assert "Exercise 9.9: not graded - " in capsys.readouterr().out
    assert (
        main(["classroom", "init", "99_nothing", "--reference", str(ROOT / "solutions"), "--repo-dir", str(tmp_path)])
        == 2
    )
