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


def test_the_workflow_installs_the_pins_with_the_cpu_torch_once_per_change_of_pins(tmp_path):
    """Not PyPI's CUDA torch (several GB) on every push: the course's pins with the CPU wheel, into an environment
    cached under a key made of the pins; a fork's URL is accepted."""
    fork = "https://github.com/someone/gradient-accumulation-fork"
    args = ["classroom", "init", EXERCISE, "--reference", str(ROOT / "solutions"), "--repo-dir", str(tmp_path)]
    assert main([*args, "--course-repository", fork, "--course-ref", "term-2027"]) == 0
    steps = yaml.safe_load((tmp_path / ".github" / "workflows" / "classroom.yml").read_text())["jobs"]["autograding"][
        "steps"
    ]
    names = [s.get("name", s.get("uses")) for s in steps]
    clone, cache, install = (steps[names.index(n)] for n in (
        "Get the course", "Reuse the course's environment from the last push",
        "Install the course (its pins; the CPU build of torch, not PyPI's CUDA one)"))  # fmt: skip
    assert clone["run"] == f'git clone --depth 1 --branch term-2027 {fork} "$COURSE"'
    assert names.index("Get the course") < names.index(cache["name"]) < names.index(install["name"])
    assert cache["uses"] == "actions/cache@v4" and cache["with"]["path"] == ".venv-course"
    assert "hashFiles('.course/requirements.txt', '.course/pyproject.toml')" in cache["with"]["key"]
    script = install["run"]
    assert "--index-url https://download.pytorch.org/whl/cpu" in script and "grep '^torch=='" in script
    assert '-r "$COURSE/requirements.txt"' in script and '--no-deps "$COURSE"' in script
    assert "[libs]" not in script  # the extras' ranges would let pip take PyPI's CUDA torch
    grep = subprocess.run(["bash", "-c", 'grep \'^torch==\' "$COURSE/requirements.txt"'], capture_output=True,
                          text=True, env={**os.environ, "COURSE": str(ROOT)})  # fmt: skip
    assert grep.stdout.strip() == "torch==2.13.0"


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
    assert "--sandbox none" in grading["run"]  # knowingly: the student's own throwaway runner (no bwrap needed there)
    done = _run_step(grading["run"], tmp_path)
    assert done.returncode == 0 and (tmp_path / ".autograding" / "gradebook.csv").exists(), done.stderr[-2000:]
    assert "warning: --sandbox none: each student's code runs as your user" in done.stderr
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
