"""``gradacc export-assignments`` without nbgrader or Otter installed (cheap; tests/test_autograders.py runs both):
the Otter image's requirements, the ``next:`` line and the check of ``--course-ref``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from conftest import ROOT

from gradacc.cli import main
from gradacc.grading.autograders import NOT_FOR_GRADING, _pinned_name, check_course_ref, otter_requirements
from gradacc.grading.gradebook import GradingError


def _names(text: str) -> set[str]:
    lines = [line.strip() for line in text.splitlines()]
    return {_pinned_name(line) for line in lines if line and not line.startswith(("#", "--", "gradacc"))}


def test_the_otter_image_carries_only_what_grading_needs():
    pins = _names((ROOT / "requirements.txt").read_text())
    image = _names(otter_requirements(ROOT / "requirements.txt", "https://github.com/o/c", "v1.0"))
    assert not image & {"playwright", "ruff", "jupyter-book", "jupyterlab", "kubernetes-validate", "copydetect"}
    assert image | set(NOT_FOR_GRADING) == pins  # every pin is either in the image or named as not needed there
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = meta["dependencies"] + meta["optional-dependencies"]["libs"] + meta["optional-dependencies"]["stacks"]
    assert {_pinned_name(d) for d in needed} <= image  # what the package, the libraries' lessons and checks import


def test_next_names_a_clean_path_and_the_environments_tool(tmp_path, capsys):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    args = ["export-assignments", "--format", "otter", "--exercise", "01_theory", "--course-ref", head]
    args += ["--reference", str(ROOT / "solutions"), "--out", f"{tmp_path}/otter/"]
    assert main(args) == 0
    out = capsys.readouterr().out
    activate = Path(sys.executable).parent / "activate"  # nbgrader runs alembic by name: the .venv's bin/ on PATH
    assert f"next: source {activate} && cd {tmp_path}/otter/01_theory && otter assign 01_theory.ipynb dist\n" in out
    assert "//" not in out


def test_a_course_ref_the_clone_lacks_is_refused(tmp_path, capsys):
    with pytest.raises(GradingError, match=r"has no tag, branch or commit 'v99\.0'.*git tag v99\.0") as error:
        check_course_ref(ROOT / "solutions", "v99.0", "https://github.com/o/c")
    said = str(error.value)  # issue 60 follow-up: the solutions folder is no "course's clone"; origin may be no remote
    assert "the git clone that holds the solutions folder" in said and "course's clone" not in said
    assert "push the tag to that repository (git push REMOTE v99.0, where git remote -v shows which REMOTE is " in said
    assert "git push origin" not in said
    args = ["export-assignments", "--format", "otter", "--course-ref", "v99.0", "--out", str(tmp_path / "o")]
    assert main([*args, "--reference", str(ROOT / "solutions")]) == 2
    assert "no tag, branch or commit 'v99.0'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing written
    assert "not in a git clone" in check_course_ref(tmp_path, "v1.0")  # a copy without git: said, not refused


def test_without_a_course_ref_the_moving_main_is_said(tmp_path, capsys):
    """Issue 60 follow-up: without --course-ref the export quietly pinned archive/main.zip, which moves."""
    args = ["export-assignments", "--format", "otter", "--exercise", "01_theory", "--out", str(tmp_path / "o")]
    assert main([*args, "--reference", str(ROOT / "solutions"), "--course-repository", "https://github.com/o/c"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: no --course-ref: the grading image installs the course from https://github.com/o/c's archive " in err
    )
    assert "of main, which moves with every commit pushed there" in err
    assert (
        "gradacc[libs] @ https://github.com/o/c/archive/main.zip"
        in (tmp_path / "o/01_theory/requirements.txt").read_text()
    )
