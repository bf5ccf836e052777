"""GitHub Classroom autograding: ``gradacc classroom init`` writes the workflow of an assignment's template repository,
and ``gradacc classroom points`` is the command each of its grading steps runs.

What runs where (the choice, and its trade-off):

* **On every student push (GitHub Actions, in the student's repository)**: the workflow clones the public course
  repository (or a fork) at a pinned ref, installs its pinned requirements with the CPU build of torch into an
  environment cached between pushes (keyed by the pins), grades the student's notebook with ``gradacc grade
  --no-hidden`` against the course's ``solutions/`` (one notebook run for all checks, ``--sandbox none``: the runner
  is a throwaway machine holding only the student's own repository and the public course, and the student can edit
  the workflow anyway), and then one ``autograding-command-grader`` step per check asks ``gradacc classroom points``
  whether that check earned its points: the step's ``max-score`` is the
  check's points (a bonus check's step is named "(bonus)"; GitHub counts its points in the total it shows, the
  gradebook on top of the maximum). Students get feedback within minutes, per check, in GitHub Classroom.
* **For the grades that count (the instructor's machine)**: ``gradacc grade`` with the hidden checks, on the
  collected repositories. The hidden checks never enter a student's repository, a workflow or a secret: a student
  who edits the workflow (they can: it is their repository) can change the feedback score and nothing else.

The alternative, hidden checks fetched from a private repository with a token secret, gives tamper-resistant
scores on every push, but any student can edit the workflow to print the secret's repository, hidden checks
included. Visible-check feedback is what the course's checks already show in the notebook, so it gives nothing
away.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from ..i18n import N_, chosen_language, notebook_language, translate
from .discover import load_references
from .gradebook import GradingError

__all__ = ["COURSE_REPOSITORY", "classroom_workflow", "check_points", "add_cli"]

COURSE_REPOSITORY = "https://github.com/gradacc-course/gradient-accumulation"
"""The public course repository the workflow clones (``solutions/`` is the reference; it holds no hidden checks)."""

_GRADEBOOK = ".autograding/gradebook.csv"


def _step_id(check: str) -> str:
    return "check-" + re.sub(r"[^0-9a-z]+", "-", check.lower()).strip("-")


def classroom_workflow(
    exercise: str, reference: Path, *, repository: str = COURSE_REPOSITORY, ref: str = "main", timeout_min: int = 10
) -> str:
    """The text of ``.github/workflows/classroom.yml`` for one exercise (YAML).

    Args:
        exercise: ``NN_topic``; the student's repository holds ``NN_topic.ipynb`` at its root.
        reference: the solutions folder (or one solution notebook) whose checks and points the steps get.
        repository, ref: the public course repository the workflow clones (a fork's URL for a course of one's own),
            and the branch or tag (pin a tag for a term: the solutions and the package then stay what the class
            started with).
        timeout_min: minutes each step may take (the grading step gets twice that).

    Raises:
        GradingError: ``exercise`` is not among the reference's exercises, or the reference is unreadable.
    """
    refs = load_references(reference, None, [exercise])
    checks = [(str(c["check"]), c["points"], c["bonus"]) for c in refs[exercise].checks]
    lines = [
        f"# GitHub Classroom autograding of {exercise}.ipynb, written by `gradacc classroom init`.",
        "# Feedback on every push from the course's visible checks; the grades that count come from the",
        "# instructor's `gradacc grade` with the hidden checks, which never enter this repository.",
        "name: Autograding",
        "on:",
        "  - push",
        "  - workflow_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "env:",
        "  COURSE: .course",
        f"  EXERCISE: {exercise}",
        "jobs:",
        "  autograding:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - uses: actions/checkout@v4",
        "      - uses: actions/setup-python@v5",
        "        with:",
        "          python-version: '3.11'",
        "      - name: Get the course",
        f'        run: git clone --depth 1 --branch {ref} {repository} "$COURSE"',
        "      - name: Reuse the course's environment from the last push",
        "        uses: actions/cache@v4",
        "        with:",
        "          path: .venv-course",
        "          key: course-venv-${{ runner.os }}-py3.11-${{ hashFiles('.course/requirements.txt', "
        "'.course/pyproject.toml') }}",
        "      - name: Install the course (its pins; the CPU build of torch, not PyPI's CUDA one)",
        "        run: |",
        "          if ! test -x .venv-course/bin/python; then",
        "            python -m venv .venv-course",
        "            .venv-course/bin/python -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu \\",
        '              "$(grep \'^torch==\' "$COURSE/requirements.txt")"',
        '            .venv-course/bin/python -m pip install --quiet -r "$COURSE/requirements.txt"',
        "          fi",
        '          .venv-course/bin/python -m pip install --quiet --no-deps "$COURSE"',
        '          echo "$PWD/.venv-course/bin" >> "$GITHUB_PATH"',
        "      - name: Grade the notebook (visible checks)",
        f"        timeout-minutes: {2 * timeout_min}",
        "        run: |",
        "          mkdir -p .autograding/submission/you",
        '          cp "$EXERCISE.ipynb" .autograding/submission/you/',
        "          # --sandbox none, knowingly: this runner is a throwaway VM of the student's own repository, holding",
        "          # only this repository and the public course (nothing the student cannot read already), and the",
        "          # student can edit this workflow anyway. The grades that count come from the instructor's sandbox.",
        '          gradacc grade .autograding/submission --reference "$COURSE/solutions" --no-hidden \\',
        f'            --exercise "$EXERCISE" --out {_GRADEBOOK} --quiet --workers 1 --sandbox none || true',
    ]
    for check, points, bonus in checks:
        name = f"Exercise {check}" + (" (bonus)" if bonus else "")
        lines += [
            f"      - name: {name}",
            f"        id: {_step_id(check)}",
            "        uses: classroom-resources/autograding-command-grader@v1",
            "        with:",
            f"          test-name: {name}",
            f"          command: gradacc classroom points {_GRADEBOOK} {check} {points}",
            f"          timeout: {timeout_min}",
            f"          max-score: {points}",
        ]
    ids = [_step_id(c) for c, _, _ in checks]
    lines += [
        "      - name: Autograding Reporter",
        "        uses: classroom-resources/autograding-grading-reporter@v1",
        "        env:",
        *[f'          {i.upper()}_RESULTS: "${{{{steps.{i}.outputs.result}}}}"' for i in ids],
        "        with:",
        f"          runners: {','.join(ids)}",
    ]
    return "\n".join(lines) + "\n"


def check_points(gradebook: Path | str, check: str) -> tuple[float, str]:
    """``(points earned, message)`` of ``check`` in a one-student gradebook (``gradacc grade``'s CSV).

    Raises:
        ValueError: no gradebook row carries that check (a wrong check name, or the grading step failed).
    """
    with open(gradebook, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    column = f"check {check}"
    for row in rows:
        if row.get(column, "") != "":
            return float(row[column]), row.get("message", "")
    raise ValueError(f"{gradebook} has no result for check {check} (columns: {', '.join(rows[0]) if rows else 'none'})")


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("classroom", help="GitHub Classroom autograding: write the workflow, score one check")
    sub = p.add_subparsers(dest="classroom_command", required=True)
    init = sub.add_parser("init", help="write .github/workflows/classroom.yml for one exercise's template repository")
    init.add_argument("exercise", help="NN_topic (the template repository holds NN_topic.ipynb at its root)")
    init.add_argument("--reference", default="solutions", help="solutions folder (default solutions)")
    init.add_argument("--repo-dir", default=".", help="the template repository (default: here)")
    init.add_argument("--course-ref", default="main", help="branch or tag of the course repository to grade with")
    init.add_argument(
        "--course-repository",
        default=COURSE_REPOSITORY,
        help=f"the course repository the workflow clones, e.g. your fork (default {COURSE_REPOSITORY})",
    )
    init.set_defaults(func=_cmd_init)
    points = sub.add_parser("points", help="exit 0 when CHECK earned its POINTS in GRADEBOOK (a grading step)")
    points.add_argument("gradebook")
    points.add_argument("check", help="X.Y")
    points.add_argument("points", type=float, help="the check's points (the step's max-score)")
    points.set_defaults(func=_cmd_points)


def _cmd_init(args) -> int:
    try:
        text = classroom_workflow(
            args.exercise, Path(args.reference), repository=args.course_repository, ref=args.course_ref
        )
    except (OSError, ValueError, GradingError) as error:
        print(f"gradacc classroom init: {error}", file=sys.stderr)
        return 2
    path = Path(args.repo_dir) / ".github" / "workflows" / "classroom.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}: {text.count('autograding-command-grader')} graded checks of {args.exercise}")
    return 0


def _language(gradebook: Path | str, check: str) -> str:
    """The language of the student's lines: the one chosen (``GRADACC_LANG``), else that of the notebook the
    gradebook's row of ``check`` graded (a notebook of the pt-BR edition: Brazilian Portuguese), else English."""
    try:
        with open(gradebook, newline="", encoding="utf-8") as f:
            row = next((r for r in csv.DictReader(f) if r.get(f"check {check}", "") != ""), {})
        return chosen_language() or notebook_language(json.loads(Path(row["file"]).read_text(encoding="utf-8")))
    except (OSError, KeyError, ValueError):
        return "en"


def _cmd_points(args) -> int:
    lang = _language(args.gradebook, args.check)
    try:
        got, message = check_points(args.gradebook, args.check)
    except (OSError, ValueError) as error:
        print(translate(N_("Exercise {check}: not graded - {error}"), lang).format(check=args.check, error=error))
        return 1
    if got >= args.points:
        print(
            translate(N_("Exercise {check}: correct ({points} points)"), lang).format(
                check=args.check, points=f"{got:g}"
            )
        )
        return 0
    short = translate(N_("Exercise {check}: {got} of {most} points - {message}"), lang)
    message = message or translate(N_("see its check cell"), lang)
    print(short.format(check=args.check, got=f"{got:g}", most=f"{args.points:g}", message=message))
    return 1
