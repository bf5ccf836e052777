"""Running nbgrader itself on a class: ``nbgrader_autograde`` (``nbgrader generate_assignment`` and ``nbgrader
autograde`` on a course directory written by ``gradacc export-assignments``, the scores read from nbgrader's own
gradebook database) and ``bench_nbgrader`` (``gradacc grade-bench --nbgrader``: the same generated class graded by
``gradacc grade`` and by nbgrader, seconds per notebook side by side).

nbgrader is not a dependency of the course: it runs from the Python given as ``python`` (``-m nbgrader``; its ``bin/``
goes first on ``PATH``, since nbgrader calls ``alembic`` by name). Installing it into the course's environment would
add nbgrader's JupyterLab extension to every learner's ``make lab``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat

from .gradebook import GradingError, Settings

__all__ = ["nbgrader_release", "nbgrader_autograde", "bench_nbgrader"]

_SCORES = """
import json, sys
from nbgrader.api import Gradebook

out = {}
with Gradebook(sys.argv[1]) as gb:
    for assignment in gb.assignments:
        for sub in assignment.submissions:
            out.setdefault(assignment.name, {})[sub.student.id] = {
                "score": sub.score,
                "max_score": sub.max_score,
                "cells": {g.name: g.score for nb in sub.notebooks for g in nb.grades},
            }
print(json.dumps(out))
"""


def _nbgrader(python: str, args: Sequence[str], course: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        [python, *args], cwd=course, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise GradingError(
            f"{' '.join(args)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc


def nbgrader_release(course: Path, *, python: str, exercises: Sequence[str] = ("*",), timeout: float = 600) -> Path:
    """``nbgrader generate_assignment`` for each of ``exercises`` (an nbgrader pattern: ``*`` is every one) in the
    course directory ``course``; returns its ``release/`` folder (``release/NN_topic/NN_topic.ipynb``).

    Raises:
        GradingError: nbgrader failed (its output in the message).
    """
    for exercise in exercises:
        _nbgrader(python, ["-m", "nbgrader", "generate_assignment", exercise], Path(course), timeout)
    return Path(course) / "release"


def nbgrader_autograde(
    course: Path,
    submissions: dict[str, dict[str, Path]],
    *,
    python: str,
    timeout: float = 3600,
) -> dict[str, dict[str, dict]]:
    """Autograde with nbgrader in ``course`` (written by ``export_assignments(..., "nbgrader")``): one ``nbgrader
    autograde "*"`` call for every submission.

    Args:
        course: the nbgrader course directory; its release is generated first if missing (``nbgrader_release``).
        submissions: ``{student: {exercise: notebook}}``, copied to ``submitted/<student>/<exercise>/``.
        python: an interpreter with nbgrader installed (and the course, for the kernel).
        timeout: seconds for each nbgrader command.

    Returns:
        ``{exercise: {student: {"score", "max_score", "cells": {grade_id: points}}}}`` from nbgrader's gradebook
        (``gradebook.db``), read with nbgrader's own ``nbgrader.api.Gradebook``.

    Raises:
        GradingError: an nbgrader command failed (its output in the message).
    """
    course = Path(course)
    if not (course / "release").is_dir():
        nbgrader_release(course, python=python)
    for student, notebooks in submissions.items():
        for exercise, path in notebooks.items():
            target = course / "submitted" / student / exercise / f"{exercise}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    _nbgrader(python, ["-m", "nbgrader", "autograde", "*"], course, timeout)
    proc = _nbgrader(python, ["-c", _SCORES, f"sqlite:///{course / 'gradebook.db'}"], course, 120)
    return json.loads(proc.stdout)


def _in_release(submission: Path, release: Path, folder: Path) -> Path:
    """The student's answer cells (nbgrader's solution cells, by cell id) written into nbgrader's release notebook, as
    a student who worked in the release hands it in; returns ``folder/<student>/<release name>``."""
    answers = {c.get("id"): c.source for c in nbformat.read(submission, as_version=4).cells}
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.get("id") in answers:
            cell.source = answers[cell.id]
    path = folder / submission.parent.name / release.name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def bench_nbgrader(
    reference: Path,
    exercise: str,
    n: int = 30,
    *,
    hidden: Path | None = None,
    settings: Settings | None = None,
    python: str,
) -> dict:
    """One generated class of ``n`` submissions (``write_class``: a third right, a third unanswered, a third wrong),
    graded by ``gradacc grade`` (``bench_grading``) and by ``nbgrader autograde`` (one process, one notebook at a
    time, as nbgrader runs; each student's answer cells in nbgrader's release, as handed in from it).

    Returns:
        ``{"gradacc": bench_grading's dict, "nbgrader": {"wall_s", "per_notebook_s", "cpu_s", "points"}, "same_points"}``:
        nbgrader's wall seconds for ``nbgrader autograde`` (per notebook: wall / n, its notebooks run one after
        another), the CPU seconds of its processes and kernels, the submissions' points (sorted), and whether both
        graders' sorted points are equal (the two classes are generated alike: student i answers the same way).

    Raises:
        GradingError: nbgrader is not installed for ``python`` or one of its commands failed.
    """
    from .autograders import export_assignments
    from .bench import bench_grading, write_class

    probe = subprocess.run([python, "-c", "import nbgrader"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise GradingError(
            f"{python} cannot import nbgrader: install it there (pip install nbgrader==0.9.6) or name another "
            "interpreter with --nbgrader-python"
        )
    settings = settings or Settings()
    gradacc = bench_grading(reference, exercise, n, hidden=hidden, settings=settings)
    with tempfile.TemporaryDirectory(prefix="gradacc-bench-nbgrader-") as tmp:
        paths = write_class(reference, exercise, n, Path(tmp) / "class", hidden=hidden)
        course = Path(tmp) / "course"
        export_assignments(reference, course, "nbgrader", hidden=hidden, exercises=[exercise])
        release = nbgrader_release(course, python=python, exercises=[exercise]) / exercise / f"{exercise}.ipynb"
        submitted = {p.parent.name: {exercise: _in_release(p, release, Path(tmp) / "nbgrader-class")} for p in paths}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        scores = nbgrader_autograde(course, submitted, python=python)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    points = sorted(row["score"] for row in scores[exercise].values())
    return {
        "gradacc": gradacc,
        "nbgrader": {
            "submissions": n,
            "wall_s": round(wall, 1),
            "per_notebook_s": round(wall / n, 1),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1),
            "points": points,
        },
        "same_points": points == gradacc["points"],
    }
