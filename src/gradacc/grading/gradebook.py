"""What grading produces: the statuses, the settings and limits of a run, the rows and the gradebook (CSV with one
column per check, per-student Markdown feedback), and the escaping that keeps a student's text inert in both.

The gradebook is the instructor's, in English; a student's feedback is in the language of the student's submissions
(``Row.language``: a notebook of the pt-BR edition gets its feedback in Brazilian Portuguese, ``gradacc.i18n``).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..i18n import N_, Message, translate
from .files import private_folder, write_csv, write_private_text

__all__ = [
    "STATUSES",
    "NOT_GRADED",
    "COURSE_NAME",
    "answer_error",
    "GradingError",
    "Settings",
    "Reference",
    "Row",
    "Gradebook",
    "refused_warning",
]


STATUSES: dict[str, str] = {
    "graded": N_("the notebook ran to the end within the limits; points are the checks it passed"),
    "timeout": N_(
        "a cell ran past --cell-timeout (points: checks passed anyway) or the notebook past --timeout (0 points)"
    ),
    "crashed": N_(
        "the kernel died (killed itself, segfault) or the grading process failed; points: checks passed before"
    ),
    "memory-limit": N_(
        "the notebook's processes together, or one of them, passed the --memory-mib limit (a process killed, or "
        "MemoryError); points: checks passed anyway"
    ),
    "process-limit": N_(
        "the notebook's processes and threads reached the --max-processes limit (no more could start); points: "
        "checks passed anyway"
    ),
    "output-limit": N_(
        "the notebook printed more than --max-output-kib; the kernel was stopped; points: checks passed before"
    ),
    "invalid-notebook": N_(
        "the file is empty, not JSON, or not a Jupyter notebook; 0 points (open it in Jupyter: if it does not open, "
        "download it again from JupyterLab or Colab with File > Download and hand that file in)"
    ),
    "refused-file": N_(
        "a symbolic link, a hard link to a file outside the class, or a special file (a pipe, a device): never read; "
        "0 points (hand in the notebook itself)"
    ),
    "wrong-exercise": N_("the notebook is another exercise (its cell ids or cells match another one); 0 points"),
    "duplicate": N_("more than one file for the same student and exercise; none graded (keep one and grade again)"),
    "missing": N_("no file for this exercise from a student who submitted something else; 0 points"),
    "unrecognized": N_("a file whose name is no exercise (listed so that nothing goes unseen); 0 points"),
    "grader-error": N_("the grader itself failed on this file (a bug: please report it); the exit code is 1"),
    "ungraded": N_(
        "not graded: the reference could not run under the grader twice (e.g. a machine too busy); the exit code is "
        "3 and --resume grades these rows"
    ),
}
STATUS_NAMES: dict[str, str] = {
    "graded": N_("graded"),
    "timeout": N_("timeout"),
    "crashed": N_("crashed"),
    "memory-limit": N_("memory-limit"),
    "process-limit": N_("process-limit"),
    "output-limit": N_("output-limit"),
    "invalid-notebook": N_("invalid-notebook"),
    "refused-file": N_("refused-file"),
    "wrong-exercise": N_("wrong-exercise"),
    "duplicate": N_("duplicate"),
    "missing": N_("missing"),
    "unrecognized": N_("unrecognized"),
    "grader-error": N_("grader-error"),
    "ungraded": N_("ungraded"),
}
"""Each status as a student's feedback names it (``translate(STATUS_NAMES[s], language)``); the gradebook's
``status`` column keeps the English name."""
NOT_GRADED = ("ungraded", "grader-error")
"""The statuses of a row the grader could not grade through no fault of the student's: its points are no grade, and
``gradacc export`` leaves them blank (never 0). ``gradacc export`` leaves a ``refused-file`` row blank too (never read:
it may be the instructor's own hard-linked copy), with a warning of its own."""
COURSE_NAME = N_("Gradient accumulation, from first principles to four frameworks")
"""The course's name, as the README's title gives it; each feedback file names it."""


class GradingError(RuntimeError):
    """The grader cannot run (bad reference or hidden checks, missing folder); the CLI exits with code 2."""


@dataclass
class Settings:
    """Limits of one grading run.

    Attributes:
        timeout: wall-clock seconds per notebook (the nbval process and its kernel are killed after it).
        cell_timeout: seconds per cell (nbval interrupts the kernel; the next cells still run).
        memory_mib: the memory of one notebook's whole process tree (its grading process, kernel and every process
            they start), in MiB (2**20 bytes), and the ``RLIMIT_DATA`` of each of its processes
            (``gradacc.grading.limits``).
        max_processes: the processes and threads of one notebook's tree at once (``gradacc.grading.limits``).
        notebook_limits: enforce ``memory_mib`` and ``max_processes`` on the whole tree (default); ``False`` leaves
            the per-process limits only (to measure what the tree limits cost).
        max_output_kib: all outputs of one notebook together, in KiB; the kernel is stopped past it.
        workers: notebooks run at the same time (default: the number of cores).
        seed: seed of the hidden checks' inputs (default: a fresh random one per grading run).
        file_mib: the largest file the kernel may write, in MiB (``RLIMIT_FSIZE``).
        sandbox: how each grading run is isolated, ``"bwrap"`` (default) or ``"none"`` (``gradacc.grading.sandbox``).
        scratch_mib: the size of each sandboxed run's only writable folder (a ``tmpfs``), in MiB.
    """

    timeout: float = 300.0
    cell_timeout: float = 120.0
    memory_mib: int = 2048
    max_output_kib: int = 2048
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    seed: int | None = None
    file_mib: int = 256
    sandbox: str = "bwrap"
    scratch_mib: int = 256
    max_processes: int = 1024
    notebook_limits: bool = True

    def __post_init__(self) -> None:
        for name in ("timeout", "cell_timeout", "memory_mib", "max_output_kib", "workers", "file_mib", "scratch_mib",
                     "max_processes"):  # fmt: skip
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass
class Reference:
    """One exercise as the grader knows it: the pristine reference notebook and what it derives from it."""

    name: str
    path: Path
    notebook: nbformat.NotebookNode
    exercise: nbformat.NotebookNode
    checks: list[dict]
    solution_ids: list[str]
    hidden: dict[str, list[str]] = field(default_factory=dict)
    hidden_preamble: str = ""
    expected: dict[str, str] = field(default_factory=dict)

    @property
    def max_points(self) -> float:
        """The exercise's maximum: the points of its checks, bonus checks excluded (they add on top)."""
        return sum(c["points"] for c in self.checks if not c.get("bonus"))

    @property
    def known_ids(self) -> set[str]:
        return set(self.solution_ids) | {c["id"] for c in self.checks}

    @property
    def stubs(self) -> dict[str, str]:
        return {c.id: c.source for c in self.exercise.cells if c.get("id") in self.solution_ids}


@dataclass
class Row:
    """One gradebook row: a (student, exercise) pair, or one unrecognized file."""

    student: str
    exercise: str
    status: str
    points: float = 0
    max_points: float = 0
    message: str = ""
    file: str = ""
    seconds: float | None = None
    peak_mib: float | None = None
    flags: str = ""
    checks: dict[str, float] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)
    """check -> ``"passed"`` or what went wrong in its hidden checks, recorded even when the visible check failed (for
    the instructor's record in the CSV; the student's feedback names only the first reason a check lost its points)"""
    sandbox: str = ""
    """how the notebook's code was isolated (``Sandbox.label``: ``bubblewrap 0.8.0, 256 MiB scratch`` or ``none``);
    empty when none of it ran (an invalid notebook, a missing file ...)"""
    misconceptions: dict[str, str] = field(default_factory=dict)
    """check -> the id of the misconception its visible check recognised in the answer's numbers (the check printed
    its hint; ``gradacc.course.misconceptions``); the ``misconceptions`` column and ``gradacc misconceptions``"""
    language: str = "en"
    """the submission's language (``gradacc.i18n.notebook_language``: ``"pt_BR"`` for a notebook of the pt-BR
    edition): its check cells printed in it and its ``feedback`` lines are in it; ``message`` and ``hidden`` (the
    instructor's) are English"""


@dataclass
class Gradebook:
    """All rows of a grading run, with the check columns, the hidden checks' seed, the wall time (s) and how the
    notebooks were isolated (``Sandbox.label``)."""

    rows: list[Row]
    check_columns: list[str]
    seed: int
    wall_s: float
    sandbox: str = ""
    course_version: str = ""
    """the course's version the grades come from (``gradacc.grading.shards.course_version``: the package version and
    the reference's git commit); each feedback file names it"""
    graded_on: str = ""
    """the day of grading (UTC, ``2026-12-07``); each feedback file names it"""

    def row(self, student: str, exercise: str) -> Row:
        matches = [r for r in self.rows if r.student == student and r.exercise == exercise]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} rows for ({student!r}, {exercise!r})")
        return matches[0]

    def write_csv(self, path: Path) -> None:
        """One row per (student, exercise): the fixed columns (``sandbox``: how the notebook was isolated), ``flags``,
        ``hidden`` (each check's hidden result, as ``X.Y: passed; X.Z: your results differ ...``), ``misconceptions``
        (``X.Y: mean-of-means; ...``: the misconception each failed visible check recognised), then ``check X.Y``
        (points earned) per check. The file is the instructor's only (``0600``) and every cell is spreadsheet-safe
        (``gradacc.grading.files.write_csv``)."""
        fixed = ["student", "exercise", "points", "max_points", "status", "message", "file", "seconds", "peak_mib",
                 "sandbox"]  # fmt: skip
        header = fixed + ["flags", "hidden", "misconceptions"] + [f"check {c}" for c in self.check_columns]
        write_csv(path, header, (self._csv_values(r) for r in self.rows))

    def _csv_values(self, r: Row) -> list[str]:
        return [
            r.student,
            r.exercise,
            _num(r.points),
            _num(r.max_points),
            r.status,
            r.message,
            r.file,
            "" if r.seconds is None else f"{r.seconds:.1f}",
            "" if r.peak_mib is None else f"{r.peak_mib:.0f}",
            r.sandbox,
            r.flags,
            "; ".join(f"{c}: {result}" for c, result in r.hidden.items()),
            "; ".join(f"{c}: {key}" for c, key in r.misconceptions.items()),
        ] + [_num(r.checks[c]) if c in r.checks else "" for c in self.check_columns]

    def write_feedback(self, folder: Path) -> list[Path]:
        """Write ``folder/<student>.md`` for every student: per exercise the status, points and each check's result,
        in the student's language (that of the student's first submission not in English, else English; each row's
        own lines are in its submission's language). Each file opens with the course, the exercises, the day of
        grading and the course version, so that a file returned through the LMS says what it is about. The folder is
        ``0700`` and the files ``0600`` (the instructor's only). A row with no student (a stray file at the top of the
        class folder) gets no file."""
        folder = private_folder(folder)
        written = []
        for student in sorted({r.student for r in self.rows if r.student}):
            rows = [r for r in self.rows if r.student == student]
            lines = _feedback(student, rows, self.course_version, self.graded_on)
            path = folder / f"{_safe_name(student)}.md"
            number = 1
            while path in written:  # two names that differ only in characters a file name cannot hold
                number += 1
                path = folder / f"{_safe_name(student)}-{number}.md"
            write_private_text(path, "\n".join(lines) + "\n")
            written.append(path)
        return written


def _feedback(student: str, rows: list[Row], version: str = "", day: str = "") -> list[str]:
    """The lines of one student's feedback file, in the student's language (``Gradebook.write_feedback``)."""
    lang = next((r.language for r in rows if r.language != "en"), "en")

    def status(r: Row) -> str:
        return translate(STATUS_NAMES.get(r.status, r.status), lang)

    header = translate(N_("| exercise | points | status |"), lang)
    exercises = ", ".join(_md(e) for e in sorted({r.exercise for r in rows if r.exercise}))
    about = translate(N_("Course: {course}. Exercises: {exercises}. Graded on {day}; course version {version}."), lang)
    unknown = translate(N_("not recorded"), lang)
    course = translate(COURSE_NAME, lang)
    about = about.format(course=course, exercises=exercises, day=day or unknown, version=_md(version) or unknown)
    lines = [translate(N_("# Feedback: {student}"), lang).format(student=_md(student)), "", about, "", header,
             "|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {_md(r.exercise)} | {_num(r.points)} / {_num(r.max_points)} | {status(r)} |")
    heading = translate(N_("## {exercise}: {points} / {max_points} points ({status})"), lang)
    for r in rows:
        points, most = _num(r.points), _num(r.max_points)
        lines += ["", heading.format(exercise=_md(r.exercise), points=points, max_points=most, status=status(r)), ""]
        if r.status != "graded":
            lines.append(f"- {_md(translate(STATUSES[r.status], lang) if r.status in STATUSES else r.status)}")
        if r.message and r.status != "graded" and not r.feedback:  # else its feedback lines say it in full
            lines.append(f"- `{_code(r.message)}`")
        lines += [f"- {line}" for line in r.feedback]
    return lines


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _md(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", str(text))


def _code(text: str) -> str:
    return " ".join(str(text).replace("`", "'").split())


def _safe_name(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name).strip(".") or "student"


def _short(text: str, limit: int = 240) -> str:
    """``text`` on one line, at most ``limit`` characters: cut at the last space before the limit (never inside a
    word, unless one word alone is longer), ending in ``...``."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "..."


def answer_error(layout: dict[str, int], cells: dict, check: str) -> Message | None:
    """The error an answer cell of ``check`` raised in the run, or ``None``: the first ``solution:<id>`` cell between
    the previous check cell and this one (``layout``: capture key -> code-cell index, ``merge_submission``) whose
    captured output holds an error. A check that fails after its answer cell failed (an ``IndentationError``, say)
    reports only a ``NameError`` of its own: this error is the one the student must read first."""
    mine = layout.get(f"check:{check}")
    if mine is None:
        return None
    before = [i for k, i in layout.items() if k.startswith("check:") and i < mine]
    start = max(before, default=-1)
    answers = sorted((i, k) for k, i in layout.items() if k.startswith("solution:") and start < i < mine)
    for _, key in answers:
        err = (cells.get(key) or {}).get("error")
        if err:
            return Message(
                N_("your answer cell {cell} raised {error}: {message}"),
                cell=key.removeprefix("solution:"),
                error=err["ename"],
                message=_short(err["evalue"], 300),
            )
    return None


def _check_message(check: str, captured: dict | None, stopped: bool, cell_timeout: float, printed: str) -> str:
    """What the student sees for a failed visible check: its own ``Exercise X.Y: ...`` line (as the run printed it, in
    the language ``printed``: ``Exercício X.Y: ...`` in Brazilian Portuguese), or why there is none (a ``Message``)."""
    if not captured or stopped and not captured.get("stdout") and not captured.get("error"):
        return Message(N_("the check could not run: the kernel had stopped (see the status)"))
    correct = translate("Exercise {exercise}: correct", printed).format(exercise=check)
    lines = captured.get("stdout", "").splitlines()
    own = [line for line in lines if line.startswith(correct.partition(":")[0] + ":")]
    err = captured.get("error")
    says_correct = bool(own) and own[0].strip() == correct
    if says_correct and err and err["ename"] == "CheckFailed":
        return Message(
            N_("the check cell raised CheckFailed although a line says correct: {error}"), error=err["evalue"]
        )
    if says_correct and len(lines) > 1:
        return Message(N_("the check printed 'correct' but also other lines (your code printed while being checked)"))
    if own:  # the line, and its continuation lines (a notebook wraps a long line, indented by two spaces)
        start = lines.index(own[0])
        rest = itertools.takewhile(lambda line: line.startswith("  "), lines[start + 1 :])
        return " ".join([own[0], *(line.strip() for line in rest)])
    if err:
        if err["ename"] == "KeyboardInterrupt":
            return Message(
                N_("the check was interrupted after {seconds} s (an endless loop in your code?)"),
                seconds=f"{cell_timeout:g}",
            )
        if err["evalue"]:
            return Message(N_("the check cell raised {error}: {message}"), error=err["ename"], message=err["evalue"])
        return Message(N_("the check cell raised {error}"), error=err["ename"])
    if captured.get("stderr"):
        return Message(N_("the check printed to stderr (a warning from your code?) instead of its one line"))
    return Message(N_("the check printed nothing (did your code redirect sys.stdout?)"))


def misconception_of(captured: dict | None, printed: str, lang: str) -> tuple[str, str] | None:
    """The misconception a failed visible check recognised, from what its cell printed (in ``printed``), and its
    hint for the feedback file, in ``lang`` and on one line; ``None`` when it named none. Only the visible check's own
    output is read: the grader computes nothing more. (The student's code runs in that kernel and could print a
    hint itself; it would change this column only, never the points.)"""
    from ..course.misconceptions import lookup, named_in

    found = named_in((captured or {}).get("stdout", ""), printed)
    if len(found) != 1:
        return None
    return found[0], " ".join(lookup(found[0]).hint(lang).split())


def _said(text: str, lang: str) -> str:
    """``text`` in ``lang`` when it is a ``Message``; other text (a line the notebook printed) as it is."""
    return text.into(lang) if isinstance(text, Message) else text


def _say(lang: str, template: str, **values) -> str:
    """``template`` (an English message marked with ``N_``) in ``lang``, with ``values`` put in."""
    return translate(template, lang).format(**values)


def refused_warning(rows: list[Row], allowed: bool) -> str:
    """The warning ``gradacc grade`` and ``grade-merge`` print (``--quiet`` too) when submissions were refused
    (``refused-file``: a link or a special file, never read, 0 points): how many, of how many students, and the fix
    when they are hard links (most often the instructor's own hard-linked copy or backup: ``cp -al``, ``rsync
    --link-dest``; ``discover.refusal``)."""
    students = len({r.student for r in rows})
    hard = sum("hard link" in r.message for r in rows)
    text = (
        f"warning: {len(rows)} submission{'s' if len(rows) != 1 else ''} of {students} "
        f"student{'s' if students != 1 else ''} {'were' if len(rows) != 1 else 'was'} refused (refused-file: a link "
        "or a special file, never read; 0 points in the gradebook, a blank cell in gradacc export)"
    )
    if hard:
        text += (
            f". {hard} of them {'are hard links' if hard != 1 else 'is a hard link'} to a file outside the class: a "
            "hard-linked copy or backup of the class (cp -al, rsync --link-dest) makes every file one. Copy it with "
            "cp -a (no -l), remove the hard-linked copy or grade the plain copy, and grade again"
        )
    if not allowed:
        text += ". Exit code 4; pass --allow-refused to exit 0 once you have looked at them"
    return text
