"""A learner's own progress: ``gradacc progress [FOLDER]`` in a terminal, ``progress(FOLDER)`` in a notebook cell.

Every exercise notebook in the learner's folder (``NN_topic.ipynb``, named as in ``exercises/``) is judged the way
``gradacc grade`` judges a submission, by the same code (``grade``): its answer cells are put into the pristine
reference notebook (``solutions/`` of the course, next to the folder), which runs with nbval in a process of its own;
each check earns its points when its check cell passes. What the saved file stores (outputs of a wrong run, edited
check cells) counts for nothing. The checks are the visible ones (the learner's own); the instructor's grade also runs
hidden checks on new inputs, so a grade can be lower, never higher. The learner's code runs as the learner's own
user (``--sandbox none``, with no warning): it is their code on their machine.

It prints a table (exercise, checks passed, points, what to do next), in the learner's language (``set_language`` or
``GRADACC_LANG`` when chosen, else the language of the notebooks judged: ``pt-BR/exercises/`` gives a table in
Brazilian Portuguese), and writes a record of completion, a JSON file the learner can keep or hand in: the course
version (``gradacc`` version, the course's git commit when the course is a git checkout, the SHA-256 of each reference
notebook), and for each exercise the SHA-256 of the notebook judged, the checks passed and the points.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..i18n import N_, chosen_language, translate
from .files import course_commit, write_csv
from .gradebook import STATUS_NAMES, Gradebook, GradingError, Row, Settings, _num, _short
from .score import grade
from .shards import fingerprints

__all__ = ["ExerciseProgress", "Progress", "progress", "check_order", "class_view", "class_progress", "add_cli"]

TABLE_WIDTH = 88
"""The progress table's width in characters: the last column wraps between words to stay within it (a notebook's
output area breaks a longer line wherever it reaches the edge, inside a word)."""

RECORD_NAME = "progress.json"
"""The record's file name, written into the learner's folder unless ``record`` says otherwise."""


@dataclass
class ExerciseProgress:
    """One exercise notebook of the learner, judged: ``checks`` maps each check (``"2.1"``) to the points it earned."""

    exercise: str
    file: Path
    status: str
    points: float
    max_points: float
    checks: dict[str, float]
    passed: list[str]
    next: str

    @property
    def done(self) -> bool:
        return len(self.passed) == len(self.checks) and self.status == "graded"


@dataclass
class Progress:
    """The learner's folder judged: one ``ExerciseProgress`` per exercise notebook found, the course's exercises the
    folder lacks (``absent``), and the record written (``None`` when none was asked for)."""

    folder: Path
    exercises: list[ExerciseProgress]
    absent: list[str]
    record: Path | None = None
    log: list[str] = field(default_factory=list)
    language: str = "en"
    """the language of ``table()`` and of each exercise's ``next`` (``"en"``, ``"pt_BR"``)"""

    def table(self) -> str:
        """The table a learner reads: exercise, checks passed, points, what to do next (one row each; the last
        column wraps between words onto lines of its own, indented under it, so that no row is wider than
        ``TABLE_WIDTH``)."""
        lang = self.language
        head = tuple(
            translate(w, lang) for w in (N_("exercise"), N_("checks passed"), N_("points"), N_("what to do next"))
        )
        # TRANSLATORS: "1 of 2" in the column "checks passed" of the learner's progress table
        of = translate(N_("of"), lang)
        lines = [
            (e.exercise, f"{len(e.passed)} {of} {len(e.checks)}", f"{_num(e.points)} / {_num(e.max_points)}", e.next)
            for e in self.exercises
        ]
        widths = [max(len(row[i]) for row in [head, *lines]) for i in range(3)]
        indent = sum(widths) + 2 * 3
        room = max(TABLE_WIDTH - indent, 30)
        text = []
        for row in [head, *lines]:
            start = "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  "
            wrapped = textwrap.wrap(row[3], room, break_long_words=False, break_on_hyphens=False) or [""]
            text += [start + wrapped[0], *(" " * indent + more for more in wrapped[1:])]
        total = sum(e.points for e in self.exercises), sum(e.max_points for e in self.exercises)
        count = len(self.exercises)
        if count == 1:
            summary = N_("total: {points} / {most} points in {count} exercise")
        else:
            summary = N_("total: {points} / {most} points in {count} exercises")
        text.append(translate(summary, lang).format(points=_num(total[0]), most=_num(total[1]), count=count))
        if self.absent:
            absent = translate(N_("not in {folder}: {names}"), lang)
            text.append(absent.format(folder=self.folder, names=", ".join(self.absent)))
        return "\n".join(text)


def _pattern(template: str, **groups: str) -> re.Pattern:
    """``template`` (a message) as a regular expression: its text literally, each placeholder ``groups[name]``."""
    pieces = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else groups[p] for i, p in enumerate(pieces)) + "$")


def _next_step(row: Row, lang: str) -> str:
    """What to do next, in ``lang``: the first failed check and its own message (from the row's feedback, in the
    submission's language), or why the notebook did not run to the end."""
    if row.status != "graded":
        return _short(f"{translate(STATUS_NAMES.get(row.status, row.status), lang)}: {row.message}", 110)
    failed_line = translate("Exercise {check} (0 / {points} points): failed: `{why}`", row.language)
    failed = _pattern(failed_line, check=r"(?P<check>\S+)", points="[^)]*", why="(?P<why>.*)")
    for line in row.feedback:
        match = failed.match(line)
        if match:
            check, why = match["check"], match["why"]
            own = translate("Exercise {exercise}: correct", row.language).format(exercise=check).partition(":")[0]
            step = translate(N_("check {check}: {why}"), lang).format(check=check, why=why.removeprefix(own + ": "))
            return _short(step, 110)
    return translate(N_("done: every check passed"), lang)


def progress(
    folder: Path | str = "exercises",
    *,
    reference: Path | str | None = None,
    exercises: Sequence[str] | None = None,
    record: Path | str | None | bool = True,
    settings: Settings | None = None,
) -> Progress:
    """Judge every exercise notebook in ``folder`` as ``gradacc grade`` does (visible checks) and write the record.

    Args:
        folder: the learner's folder of ``NN_topic.ipynb`` notebooks (``exercises/`` of the course, or a copy).
        reference: the course's solutions folder (default: ``solutions/`` next to ``folder``).
        exercises: only these (``["01_theory"]``); default: every course exercise found in ``folder``.
        record: where to write the record of completion (JSON): ``True`` for ``folder/progress.json``, a path, or
            ``None``/``False`` for none.
        settings: the grader's limits (default ``Settings(sandbox="none")``: the learner's own code on their machine;
            one notebook per core).

    Returns:
        A ``Progress``; ``print(result.table())`` shows it.

    Raises:
        GradingError: ``folder`` or the reference is missing (the message says what to pass), or an exercise asked
            for is no course exercise.
    """
    folder, chosen = Path(folder), chosen_language()
    if not folder.is_dir():
        error = N_("{folder} is not a folder: pass the folder of your exercise notebooks (exercises/)")
        raise GradingError(translate(error, chosen or "en").format(folder=folder))
    reference = Path(reference) if reference is not None else folder.resolve().parent / "solutions"
    if not reference.exists():
        error = N_(
            "{reference} does not exist: progress puts your answers into the course's solution notebooks, as the "
            "grader does. Run it in the course's folder (a clone, or Binder), or name the solutions folder: "
            "`gradacc progress --reference PATH` in a terminal, `progress(reference=PATH)` in a notebook"
        )
        raise GradingError(translate(error, chosen or "en").format(reference=reference))
    names = sorted(fingerprints(reference, None)["references"])
    if _looks_like_a_class(folder, names):
        error = N_(
            "{folder} looks like a class folder (one folder or <student>__NN_topic.ipynb file per student): progress "
            "judges one learner's folder and writes its record there, where the next `gradacc grade` would read it. "
            "For the whole class run `gradacc progress --class {folder} --out class-progress.csv` "
            "(docs/instructors/grade.md)"
        )
        raise GradingError(translate(error, chosen or "en").format(folder=folder))
    unknown = sorted(set(exercises or ()) - set(names))
    if unknown:
        error = N_("no course exercise is called {unknown}; the exercises: {names}")
        raise GradingError(translate(error, chosen or "en").format(unknown=unknown, names=names))
    wanted = [n for n in (exercises or names) if n in names]
    found = [n for n in wanted if (folder / f"{n}.ipynb").is_file()]
    settings = settings or Settings(sandbox="none", seed=0, workers=max(1, min(os.cpu_count() or 1, len(found))))
    log: list[str] = []
    judged: list[ExerciseProgress] = []
    rows: list[Row] = []
    if found:
        with tempfile.TemporaryDirectory(prefix="gradacc-progress-") as tmp:
            mine = Path(tmp) / "you"  # a class of one: the grader's own layout, one folder per student
            mine.mkdir()
            for name in found:
                shutil.copyfile(folder / f"{name}.ipynb", mine / f"{name}.ipynb")
            book = grade(Path(tmp), reference, hidden=None, exercises=found, settings=settings, progress=False,
                         log=log.append)  # fmt: skip
        rows = sorted((r for r in book.rows if r.exercise in found), key=lambda r: r.exercise)
    read = {r.language for r in rows if r.status != "invalid-notebook"}  # the language the notebooks are in
    lang = chosen or (read.pop() if len(read) == 1 else "en")
    for row in rows:
        judged.append(
            ExerciseProgress(
                row.exercise,
                folder / f"{row.exercise}.ipynb",
                row.status,
                row.points,
                row.max_points,
                dict(row.checks),
                [c for c, points in row.checks.items() if points > 0],
                _next_step(row, lang),
            )
        )
    result = Progress(folder, judged, [n for n in wanted if n not in found], log=log, language=lang)
    if record:
        result.record = folder / RECORD_NAME if record is True else Path(record)
        _write_record(result, reference)
    return result


def _looks_like_a_class(folder: Path, names: Sequence[str]) -> bool:
    """Whether ``folder`` holds no exercise notebook of its own but students' ones: ``<student>/NN_topic.ipynb`` or
    ``<student>__NN_topic.ipynb`` (the layouts ``gradacc grade`` reads)."""
    if any((folder / f"{n}.ipynb").is_file() for n in names):
        return False
    for name in names:
        if any(folder.glob(f"*__{name}.ipynb")):
            return True
        for student in (d for d in folder.iterdir() if d.is_dir() and not d.is_symlink()):
            if (student / f"{name}.ipynb").is_file() or any(student.glob(f"*/{name}.ipynb")):
                return True
    return False


def check_order(check: str) -> tuple:
    """Sort key of a check id by number: ``"2.2"`` before ``"11.1"`` (text order puts ``"11.1"`` first).

    Example:
        >>> sorted(["11.2", "2.2", "11.1", "2.1"], key=check_order)
        ['2.1', '2.2', '11.1', '11.2']
    """
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"[.]", check))


def class_view(book: Gradebook) -> tuple[list[str], list[list[str]]]:
    """The class at a glance, from a gradebook: ``(header, rows)`` with one row per student (``student``, then each
    exercise's ``points / max`` and status when it is not ``graded``, then ``total``, ``max_points`` and the
    checks passed, by number: ``check_order``), sorted by student. A row without a student (a stray file) is left out."""
    exercises = sorted({r.exercise for r in book.rows if r.student and r.max_points})
    header = ["student", *exercises, "total", "max_points", "checks passed"]
    rows = []
    for student in sorted({r.student for r in book.rows if r.student}):
        mine = {r.exercise: r for r in book.rows if r.student == student and r.exercise in exercises}
        cells = []
        for name in exercises:
            r = mine.get(name)
            if r is None:
                cells.append("")
                continue
            status = "" if r.status == "graded" else f" ({r.status})"
            cells.append(f"{_num(r.points)} / {_num(r.max_points)}{status}")
        passed = sorted((c for r in mine.values() for c, points in r.checks.items() if points > 0), key=check_order)
        total = sum(r.points for r in mine.values())
        most = sum(r.max_points for r in mine.values())
        rows.append([student, *cells, _num(total), _num(most), " ".join(passed)])
    return header, rows


def class_progress(
    submissions: Path | str, out: Path | str, *, reference: Path | str = "solutions", settings: Settings | None = None,
    log=None,
) -> Gradebook:  # fmt: skip
    """The class view of progress: grade every student of ``submissions`` as ``progress`` judges one learner (the
    visible checks only, no hidden checks), each notebook in the grader's sandbox (``settings``, default
    ``Settings()``: bubblewrap, since the code is the students'), and write ``class_view`` as a CSV file ``out``
    (``0600``, spreadsheet-safe) outside the class folder. Returns the gradebook.

    Raises:
        GradingError: ``out`` is inside ``submissions`` (the next ``gradacc grade`` would read it), or as ``grade``.
    """
    submissions, out = Path(submissions), Path(out)
    if out.resolve().is_relative_to(submissions.resolve()):
        raise GradingError(
            f"{out} is inside the class folder {submissions}: the next gradacc grade would read it; write it elsewhere"
        )
    book = grade(submissions, Path(reference), hidden=None, settings=settings or Settings(), progress=False, log=log)
    header, rows = class_view(book)
    write_csv(out, header, rows)
    return book


def _write_record(result: Progress, reference: Path) -> None:
    record = {
        "course": {
            "gradacc": __version__,
            "commit": course_commit(reference),
            "references": fingerprints(reference, None)["references"],
        },
        "checked": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "how": "visible checks, judged from the code as gradacc grade judges it (never from stored outputs)",
        "exercises": {
            e.exercise: {
                "sha256": hashlib.sha256(e.file.read_bytes()).hexdigest(),
                "status": e.status,
                "checks_passed": e.passed,
                "checks": e.checks,
                "points": e.points,
                "max_points": e.max_points,
            }
            for e in result.exercises
        },
    }
    result.record.parent.mkdir(parents=True, exist_ok=True)
    result.record.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------------------------ CLI
def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "progress",
        help="your own progress: judge every exercise notebook in FOLDER as the grader does; a table and a record",
        description="Run the checks of every exercise notebook in FOLDER (default exercises/) the way gradacc grade "
        "runs them (your answer cells in the course's solution notebook, never your saved outputs), print a table "
        "(exercise, checks passed, points, what to do next) and write FOLDER/progress.json, a record of the checks "
        "passed and the course version. Exit code 0 when every check passed, 1 when some did not, 2 on an error.",
    )
    p.add_argument("folder", nargs="?", default="exercises", help="your exercise notebooks (default exercises/)")
    p.add_argument("--reference", help="the course's solutions folder (default: solutions/ next to FOLDER)")
    p.add_argument("--exercise", action="append", help="only this exercise (NN_topic; repeatable)")
    p.add_argument("--record", help=f"where to write the record (default FOLDER/{RECORD_NAME})")
    p.add_argument(
        "--class",
        dest="class_folder",
        metavar="SUBMISSIONS",
        help="the instructor's class view: judge every student of SUBMISSIONS (gradacc grade's layouts) on the "
        "visible checks, in the grader's sandbox, and write one row per student to --out",
    )
    p.add_argument("--out", default="class-progress.csv", help="with --class: the CSV to write, outside SUBMISSIONS")
    p.set_defaults(func=_cmd_progress)


def _cmd_progress(args: argparse.Namespace) -> int:
    if args.class_folder:
        return _cmd_class(args)
    try:
        result = progress(args.folder, reference=args.reference, exercises=args.exercise, record=args.record or True)
    except (GradingError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    print(translate(N_("wrote the record {record}"), result.language).format(record=result.record))
    return 0 if result.exercises and all(e.done for e in result.exercises) else 1


def _cmd_class(args: argparse.Namespace) -> int:
    try:
        book = class_progress(args.class_folder, args.out, reference=args.reference or "solutions", log=lambda m: None)
    except (GradingError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header, rows = class_view(book)
    print(f"wrote {args.out}: {len(rows)} students, exercises {', '.join(header[1:-3]) or 'none'} (visible checks)")
    return 0
