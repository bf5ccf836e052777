"""`gradacc badges`: Colab + Binder badges and prev/next navigation from one configured repository URL, idempotent,
and consistent with exercise generation. Developed on small course trees built here; the last test checks the real one."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gradacc.cli import main
from gradacc.course.badges import (
    BADGES_ID,
    NAV_ID,
    Repository,
    read_repository,
    refresh_notebook,
    refresh_readme,
    retarget_badges,
)
from gradacc.course.notebooks import generate_exercise, stale_exercises, write_exercises

REPO = "https://github.com/gradacc-course/gradient-accumulation"
COLAB = "https://colab.research.google.com/github/gradacc-course/gradient-accumulation/blob/main/"
BINDER = "https://mybinder.org/v2/gh/gradacc-course/gradient-accumulation/main?labpath="
SETUP = (
    "import sys\n"
    'if "google.colab" in sys.modules:  # on Colab, install the course package; nothing else changes there\n'
    '    %pip install -q "gradacc[libs] @ git+https://github.com/someone-else/old-name.git"\n'
    "import torch"
)
README = """# Course

## Lessons

| # | lesson | you will be able to | minutes (CPU) | Colab | Binder |
|---|---|---|---|---|---|
| 00 | [setup](lessons/00_setup.ipynb) | check your setup | 2 | - | - |
| 01 | [theory](lessons/01_theory.ipynb) | add gradients | 15 |
| 02 | [pytorch](lessons/02_pytorch.ipynb) | loop | 25 | - | - |

Text after the table | with a pipe.
"""


def _lesson(title: str, extra=()):
    return new_notebook(
        cells=[new_markdown_cell(f"# {title}\nWhat you will be able to do."), new_code_cell(SETUP, id="setup"), *extra]
    )


def _solution(title: str):
    answer = new_code_cell(
        "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n",
        id="ex-1-1-solution",
        metadata={"tags": ["solution"]},
    )
    check = new_code_cell(
        "from gradacc.course.checks import report\nreport('1.1', f(2) == 4)",
        id="ex-1-1-check",
        metadata={"tags": ["check", "nbval-check-output"], "gradacc": {"check": "1.1", "points": 1}},
        outputs=[new_output("stream", name="stdout", text="Exercise 1.1: correct\n")],
    )
    return _lesson(title, [answer, check])


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A small course tree: pyproject with [tool.gradacc], three lessons, two solutions, generated exercises, README."""
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.gradacc]\nrepository = "{REPO}"\n')
    (tmp_path / "README.md").write_text(README)
    for folder in ("lessons", "solutions"):
        (tmp_path / folder).mkdir()
    for name, title in [("00_setup", "00 · Setup"), ("01_theory", "01 · Theory"), ("02_pytorch", "02 · PyTorch")]:
        nbformat.write(_lesson(title), tmp_path / "lessons" / f"{name}.ipynb")
    for name, title in [("01_theory", "01 · Theory: exercises"), ("02_pytorch", "02 · PyTorch: exercises")]:
        nbformat.write(_solution(title), tmp_path / "solutions" / f"{name}.ipynb")
    write_exercises(tmp_path / "solutions", tmp_path / "exercises")
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _cell(path: Path, cell_id: str) -> str:
    return next(c.source for c in nbformat.read(path, as_version=4).cells if c.get("id") == cell_id)


def test_badges_navigation_and_install_line_are_inserted(course: Path, capsys):
    assert main(["badges", "--root", str(course)]) == 0
    out = capsys.readouterr().out
    assert out.count("updated:") == 3 + 2 + 2 + 1  # 3 lessons, 2 solutions, 2 exercises, README

    nb = nbformat.read(course / "lessons" / "01_theory.ipynb", as_version=4)
    assert [c.get("id") for c in nb.cells][1] == BADGES_ID and nb.cells[-1].id == NAV_ID
    assert nb.cells[0].source.startswith("# 01 · Theory")  # the title stays first
    assert nb.cells[1].source == (  # text links: an offline JupyterLab has no badge image to show (issue 45)
        f"Run this notebook online, with nothing to install: [Colab]({COLAB}lessons/01_theory.ipynb) · "
        f"[Binder]({BINDER}lessons%2F01_theory.ipynb)"
    )
    assert nb.cells[-1].source == (
        "---\n[← 00 · Setup](00_setup.ipynb) · [all lessons](../README.md#lessons) · "
        "[exercise](../exercises/01_theory.ipynb) · [02 · PyTorch →](02_pytorch.ipynb)"
    )
    # The Colab install line now names the configured repository (and nothing else in the cell changed).
    assert nb.cells[2].source == SETUP.replace("https://github.com/someone-else/old-name.git", REPO)
    # First lesson: no previous link, and no exercise link (no solutions/00_setup.ipynb).
    assert _cell(course / "lessons" / "00_setup.ipynb", NAV_ID) == (
        "---\n[all lessons](../README.md#lessons) · [01 · Theory →](01_theory.ipynb)"
    )
    # A solution's navigation links to its lesson; the last one has no next link.
    assert _cell(course / "solutions" / "02_pytorch.ipynb", NAV_ID) == (
        "---\n[← 01 · Theory: exercises](01_theory.ipynb) · [all lessons](../README.md#lessons) · "
        "[lesson](../lessons/02_pytorch.ipynb)"
    )
    # Each folder's badges open that folder's file: an exercise never opens its solution.
    assert f"{COLAB}solutions/02_pytorch.ipynb" in _cell(course / "solutions" / "02_pytorch.ipynb", BADGES_ID)
    exercise_badges = _cell(course / "exercises" / "02_pytorch.ipynb", BADGES_ID)
    assert f"{COLAB}exercises/02_pytorch.ipynb" in exercise_badges and "solutions" not in exercise_badges
    assert f"{BINDER}exercises%2F02_pytorch.ipynb" in exercise_badges


def test_rerunning_changes_nothing(course: Path, capsys):
    assert main(["badges", "--root", str(course)]) == 0
    before = _snapshot(course)
    assert main(["badges", "--root", str(course)]) == 0
    assert _snapshot(course) == before
    assert "up to date" in capsys.readouterr().out.splitlines()[-1]
    assert main(["badges", "--root", str(course), "--check"]) == 0


def test_check_mode_lists_stale_files_and_writes_nothing(course: Path, capsys):
    before = _snapshot(course)
    assert main(["badges", "--root", str(course), "--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: lessons/00_setup.ipynb" in out and "stale: README.md" in out
    assert _snapshot(course) == before


def test_exercises_stay_current_in_either_order(course: Path):
    other = course.parent / "other"
    shutil.copytree(course, other)  # before any badges
    # badges over all three folders: the exercises get exactly what generating them from the badged solutions gives
    assert main(["badges", "--root", str(course)]) == 0
    assert stale_exercises(course / "solutions", course / "exercises") == []
    exercises_check = ["exercises", "--check", "--solutions", str(course / "solutions")]
    assert main([*exercises_check, "--exercises", str(course / "exercises")]) == 0
    # badges over lessons and solutions only, then regeneration: same files, and badges --check still green
    assert main(["badges", "--root", str(other), "--folders", "lessons", "solutions"]) == 0
    assert stale_exercises(other / "solutions", other / "exercises") == ["01_theory.ipynb", "02_pytorch.ipynb"]
    write_exercises(other / "solutions", other / "exercises")
    assert main(["badges", "--root", str(other), "--check"]) == 0
    assert _snapshot(other) == _snapshot(course)


def test_an_exercise_not_generated_yet_does_not_make_the_others_stale(course: Path):
    """Navigation in exercises/ follows solutions/ (their source), so a new solution whose exercise is not generated
    yet leaves the other exercises exactly as generation makes them."""
    (course / "exercises" / "01_theory.ipynb").unlink()
    assert main(["badges", "--root", str(course)]) == 0
    assert stale_exercises(course / "solutions", course / "exercises") == ["01_theory.ipynb"]
    assert "[← 01 · Theory: exercises](01_theory.ipynb)" in _cell(course / "exercises" / "02_pytorch.ipynb", NAV_ID)


def test_a_moved_or_edited_badge_cell_is_put_back():
    repo = Repository.parse(REPO)
    nb = _lesson("03 · Memory", [new_markdown_cell("## 1. Section")])
    refresh_notebook(nb, repo, "lessons/03_memory.ipynb", "---\nnav")
    reference = nbformat.writes(nb)
    badges = nb.cells.pop(1)
    badges.source = "edited by hand"
    nb.cells.insert(3, badges)  # moved below the setup cell
    nb.cells.insert(0, nb.cells.pop())  # the navigation cell moved to the top
    nb.cells.insert(1, nb.cells.pop(0))
    refresh_notebook(nb, repo, "lessons/03_memory.ipynb", "---\nnav")
    assert nbformat.writes(nb) == reference


def test_repository_override_and_branch(course: Path):
    assert (
        main(["badges", "--root", str(course), "--repository", "https://github.com/me/fork.git/", "--branch", "dev"])
        == 0
    )
    badges = _cell(course / "lessons" / "02_pytorch.ipynb", BADGES_ID)
    assert "https://colab.research.google.com/github/me/fork/blob/dev/lessons/02_pytorch.ipynb" in badges
    assert "https://mybinder.org/v2/gh/me/fork/dev?labpath=lessons%2F02_pytorch.ipynb" in badges
    assert "gradacc[libs] @ git+https://github.com/me/fork" in _cell(course / "lessons" / "02_pytorch.ipynb", "setup")
    # the exercise generated from the fork's solution keeps the fork and the branch
    exercise = generate_exercise(nbformat.read(course / "solutions" / "01_theory.ipynb", as_version=4))
    assert "github/me/fork/blob/dev/exercises/01_theory.ipynb" in exercise.cells[1].source
    # back to the configured repository: everything returns to it
    assert main(["badges", "--root", str(course)]) == 0
    assert "me/fork" not in "".join(p.read_text() for p in course.rglob("*.ipynb"))


@pytest.mark.parametrize(
    "url", ["https://gitlab.com/a/b", "github.com/a/b", "https://github.com/a", "https://github.com/a/b/tree/x", ""]
)
def test_bad_repository_urls_are_refused(url: str):
    with pytest.raises(ValueError, match="repository must be a GitHub URL like https://github.com/OWNER/REPO"):
        Repository.parse(url)


def test_bad_configuration_is_reported(tmp_path: Path, capsys):
    with pytest.raises(ValueError, match=r"no repository configured: add \[tool.gradacc\] repository"):
        read_repository(tmp_path / "pyproject.toml")
    assert main(["badges", "--root", str(tmp_path)]) == 2
    assert "error: no lessons/, solutions/, exercises/ under" in capsys.readouterr().err
    (tmp_path / "lessons").mkdir()
    assert main(["badges", "--root", str(tmp_path), "--repository", "https://example.com/a/b"]) == 2
    assert "error: repository must be a GitHub URL" in capsys.readouterr().err
    with pytest.raises(ValueError, match="branch must be a git branch name"):
        Repository.parse(REPO, branch="has space")


def test_notebook_without_a_title_cell_is_refused():
    nb = new_notebook(cells=[new_code_cell("x = 1")])
    with pytest.raises(ValueError, match="first cell must be the markdown title"):
        refresh_notebook(nb, Repository.parse(REPO), "lessons/09_x.ipynb", "nav")


def test_retarget_keeps_repository_and_refuses_a_cell_without_colab_link():
    nb = _lesson("01 · Theory")
    refresh_notebook(nb, Repository.parse("https://github.com/me/fork", "v2"), "solutions/01_theory.ipynb", "nav")
    retarget_badges(nb, "exercises")
    assert nb.cells[1].source.count("me/fork") == 2 and "exercises%2F01_theory.ipynb" in nb.cells[1].source
    assert "solutions" not in nb.cells[1].source
    nb.cells[1].source = "no link"
    with pytest.raises(ValueError, match="no Colab link"):
        retarget_badges(nb, "exercises")
    with pytest.raises(ValueError, match="folder must be one of"):
        retarget_badges(nb, "drafts")


def test_readme_table_columns(course: Path):
    repo = Repository.parse(REPO)
    (course / "lessons" / "02_pytorch.ipynb").unlink()
    text = refresh_readme(README, repo, course)
    rows = {line[2:4]: line for line in text.splitlines() if line.startswith("| 0")}
    assert rows["00"] == (
        "| 00 | [setup](lessons/00_setup.ipynb) | check your setup | 2 | "
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({COLAB}lessons/00_setup.ipynb) | "
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({BINDER}lessons%2F00_setup.ipynb) |"
    )
    assert rows["01"].startswith("| 01 | [theory](lessons/01_theory.ipynb) | add gradients | 15 | [![Open In Colab]")
    assert rows["02"] == "| 02 | [pytorch](lessons/02_pytorch.ipynb) | loop | 25 | - | - |"  # no such lesson (yet)
    assert text.replace(rows["00"], "").replace(rows["01"], "") == README.replace(README.splitlines()[6], "").replace(
        README.splitlines()[7], ""
    )  # nothing else changed
    assert refresh_readme(text, repo, course) == text


def test_the_course_notebooks_and_readme_are_current():
    """The real course: run `gradacc badges` (then `gradacc exercises`) when this fails."""
    assert main(["badges", "--root", str(ROOT), "--check"]) == 0
    repo = read_repository(ROOT / "pyproject.toml")
    assert repo.url == REPO and repo.branch == "main"
