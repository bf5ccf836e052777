"""Grades into the LMS: ``gradacc export`` maps the students of a gradebook (``gradacc grade``'s CSV) to the identities
of a roster the instructor downloads from the LMS, and writes the LMS's own grade-import file.

Formats (the roster is read in the same format as the file written):

* ``canvas``: the roster is Canvas's gradebook export (Grades > Export: ``Student, ID, SIS User ID, SIS Login ID,
  Section, ...``; its ``Points Possible`` row and any other columns are ignored). The file written has the same five
  identity columns, then one column per exercise (or ``gradacc total``), and the ``Points Possible`` row second, as
  Canvas's import (Grades > Import) expects; a column name Canvas does not know creates an assignment.
* ``moodle``: the roster is Moodle's participants or grades export with ``First name, Last name, ID number, Email
  address`` (``Username`` too if present). The file written has those four columns and one per grade item; in
  Moodle's "Import grades > CSV file" map ``Email address`` to ``useremail`` and each column to its grade item.
* ``csv``: a plain roster with a ``student`` column (and optionally ``id``, ``email``); the file written has
  ``student, id, email``, the grade columns and ``total``.

A gradebook student is matched to the roster entry whose name, login, LMS or SIS id, e-mail or e-mail's local part
equals the student's name after normalising (lower case; runs of anything but letters and digits as one ``_``; a
``Last, First`` name also as ``first_last``); a student folder named as the LMS names its download is matched by the
id or name it carries (Canvas's ``<name>_<user id>_<submission id>`` by the user id, the roster's ``ID``; Moodle's
``<full name>_<participant id>_assignsubmission_file_`` by the full name). Students of the roster without a submission get 0 and are listed;
gradebook students the roster lacks are never dropped: they are listed, written to ``<out>.unmatched.csv`` with their
points, and make the command exit 1 unless ``--allow-unmatched``. A name that fits two roster entries, or two names that fit one
entry, are left out the same way (ambiguous).

A grade the grader could not give (a row ``ungraded`` or ``grader-error``: the machine's fault or the grader's, never the
student's) is a blank cell, never a 0: the LMS imports no grade there (in Canvas, type ``EX`` to excuse it). So is a
``refused-file`` row (a link or a special file, never read): it may be the instructor's own hard-linked copy of the
class, and a student must not get a 0 for it unseen. The command names each such student and exits 1 unless
``--allow-ungraded``. Files whose name is no exercise (a stray
``progress.json``) add no column, and a file at the top of the class folder adds no student.
"""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .files import csv_text, write_csv
from .gradebook import NOT_GRADED, _num

__all__ = ["FORMATS", "RosterEntry", "ExportReport", "normalise", "lms_folder_keys", "read_roster", "read_gradebook",
           "export_grades"]  # fmt: skip

FORMATS = ("canvas", "moodle", "csv")
_CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
_MOODLE_IDENTITY = ("First name", "Last name", "ID number", "Email address")


CANVAS_POINTS_POSSIBLE = "    Points Possible"
"""The second row's first cell as Canvas's own gradebook export spells it (four leading spaces); the import reads it."""


def _students(n: int, kind: str = "") -> str:
    """``"1 roster student"``, ``"3 roster students"``."""
    return f"{n} {kind}student{'' if n == 1 else 's'}"


def normalise(name: str) -> str:
    """``"  Doe, Jane "`` -> ``"doe_jane"``: lower case, runs of non-alphanumerics as one ``_``, no ``_`` at the ends."""
    return re.sub(r"[^0-9a-z]+", "_", str(name).lower()).strip("_")


@dataclass
class RosterEntry:
    """One student of the roster: ``identity`` (the format's identity columns, as read) and the match ``keys``."""

    identity: dict[str, str]
    keys: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return next((v for v in self.identity.values() if v), "?")


@dataclass
class ExportReport:
    """What an export did: ``written`` (roster rows in the file), ``matched`` (gradebook student -> roster label),
    ``without_submission`` (roster labels given 0), ``unmatched`` and ``ambiguous`` (gradebook students not in the
    file), ``columns`` (the grade columns), ``unmatched_file`` (where the unmatched rows went, or ``None``),
    ``not_graded`` (the students and exercises left blank)."""

    written: int
    matched: dict[str, str]
    without_submission: list[str]
    unmatched: list[str]
    ambiguous: list[str]
    columns: list[str]
    unmatched_file: Path | None = None
    not_graded: dict[str, list[str]] = field(default_factory=dict)
    """gradebook student -> the exercises the grader could not grade (``ungraded``, ``grader-error``): blank cells"""
    refused: dict[str, list[str]] = field(default_factory=dict)
    """gradebook student -> the exercises whose file was refused (``refused-file``, never read): blank cells"""


def _keys(*values: str) -> set[str]:
    keys = set()
    for value in values:
        value = (value or "").strip()
        if not value:
            continue
        keys.add(normalise(value))
        if "@" in value:
            keys.add(normalise(value.split("@", 1)[0]))
        if "," in value:  # "Last, First" -> "first_last" too
            last, first = value.split(",", 1)
            keys.add(normalise(f"{first} {last}"))
    keys.discard("")
    return keys


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8-sig") as f:  # LMS exports often start with a BOM
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), [{k: (v or "") for k, v in row.items() if k} for row in reader]


def read_roster(path: str | Path, fmt: str) -> list[RosterEntry]:
    """Read an LMS roster (see the module docstring for each format's columns).

    Raises:
        ValueError: an unknown ``fmt``, or a roster without the format's identity columns (the message names the
            missing ones and the columns found).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    columns, rows = _read_csv(Path(path))
    needed = {"canvas": ("Student", "ID"), "moodle": ("First name", "Last name", "Email address"), "csv": ("student",)}
    missing = [c for c in needed[fmt] if c not in columns]
    if missing:
        raise ValueError(
            f"{path}: a {fmt} roster needs the columns {', '.join(needed[fmt])}; missing {', '.join(missing)} "
            f"(found: {', '.join(columns) or 'none'})"
        )
    entries = []
    for row in rows:
        if fmt == "canvas":
            if not row.get("Student", "").strip() or row["Student"].strip() == "Points Possible":
                continue  # the points row of Canvas's export (and blank lines)
            identity = {c: row.get(c, "") for c in _CANVAS_IDENTITY}
            keys = _keys(row["Student"], row.get("ID", ""), row.get("SIS User ID", ""), row.get("SIS Login ID", ""))
        elif fmt == "moodle":
            if not (row.get("First name", "") + row.get("Last name", "")).strip():
                continue
            identity = {c: row.get(c, "") for c in _MOODLE_IDENTITY}
            full = f"{row['First name']} {row['Last name']}"
            keys = _keys(full, row.get("ID number", ""), row.get("Email address", ""), row.get("Username", ""))
        else:
            if not row.get("student", "").strip():
                continue
            identity = {c: row.get(c, "") for c in ("student", "id", "email")}
            keys = _keys(row["student"], row.get("id", ""), row.get("email", ""))
        entries.append(RosterEntry(identity, keys))
    return entries


def read_gradebook(path: str | Path) -> tuple[dict[str, dict[str, float | None]], dict[str, float]]:
    """``gradacc grade``'s CSV as ``({student: {exercise: points}}, {exercise: max_points})``.

    An exercise's points are ``None`` (no grade, never 0) when a row of it has a status the grader could not grade
    (``NOT_GRADED``: ``ungraded``, ``grader-error``) or is ``refused-file`` (a link or a special file, never read: it may
    be the instructor's own hard-linked copy of the class, so no 0 is given on the grader's word). A file whose name is no exercise (an ``unrecognized`` row, a
    refused file without an exercise) adds no exercise; a row without a student (a stray file at the top of the class
    folder) adds no student. A student's name is read as the student wrote it (``csv_text``: ``'=1+2`` is ``=1+2``;
    the files written neutralise it again). Every other student of the file is present, also one whose only row is an unrecognized
    file (no exercise). A gradebook without a ``status`` column (an older one) reads as graded.

    Raises:
        ValueError: the file lacks the gradebook columns ``student, exercise, points, max_points``.
    """
    columns, rows = _read_csv(Path(path))
    missing = [c for c in ("student", "exercise", "points", "max_points") if c not in columns]
    if missing:
        raise ValueError(f"{path} is not a gradacc gradebook: missing the columns {', '.join(missing)}")
    points: dict[str, dict[str, float | None]] = {}
    max_points: dict[str, float] = {}
    for row in rows:
        student, exercise, status = csv_text(row["student"]), row["exercise"].strip(), row.get("status", "")
        most = float(row["max_points"] or 0)
        if not student.strip():
            continue  # no student's: a stray file at the top of the class folder
        points.setdefault(student, {})
        if not exercise or status == "unrecognized" or (status == "refused-file" and not most):
            continue  # a file that is no exercise adds no column
        mine = points[student]
        if status in NOT_GRADED or status == "refused-file" or (exercise in mine and mine[exercise] is None):
            mine[exercise] = None
        else:
            mine[exercise] = (mine.get(exercise) or 0.0) + float(row["points"] or 0)
        max_points[exercise] = max(max_points.get(exercise, 0.0), most)
    return points, max_points


def export_grades(
    gradebook: str | Path,
    roster: str | Path,
    fmt: str,
    out: str | Path,
    *,
    per: str = "exercise",
    prefix: str = "gradacc ",
) -> ExportReport:
    """Write ``out`` in the LMS format ``fmt``: one row per roster student, one grade column per exercise of the
    gradebook (``per="exercise"``, named ``prefix + NN_topic``) or one ``prefix + "total"`` column (``per="total"``).
    Unmatched gradebook students go to ``<out>.unmatched.csv`` (student, each exercise, total). An exercise the grader
    could not grade (``read_gradebook``'s ``None``) is a blank cell, and so is a total that includes one: the LMS
    imports no grade there, never a 0 (``ExportReport.not_graded`` names them). Both files are the instructor's only
    (``0600``) and every cell is spreadsheet-safe (``gradacc.grading.files.write_csv``).

    Raises:
        ValueError: bad ``fmt`` or ``per``, or a roster / gradebook without its columns.
    """
    if per not in ("exercise", "total"):
        raise ValueError(f"per must be 'exercise' or 'total', got {per!r}")
    entries = read_roster(roster, fmt)
    points, max_points = read_gradebook(gradebook)
    exercises = sorted(max_points)
    matched, unmatched, ambiguous = _match(entries, points)
    by_entry = {i: s for s, i in matched.items()}

    def grades(student: str | None) -> list[float | None]:
        mine = points.get(student, {}) if student is not None else {}
        values = [mine.get(e, 0.0) for e in exercises]
        return values if per == "exercise" else [_total(values)]

    columns = [prefix + e for e in exercises] if per == "exercise" else [prefix + "total"]
    possible = [max_points[e] for e in exercises] if per == "exercise" else [sum(max_points.values())]
    if fmt == "canvas":
        header = [*_CANVAS_IDENTITY, *columns]
        lines = [[CANVAS_POINTS_POSSIBLE, "", "", "", "", *map(_num, possible)]]
    elif fmt == "moodle":
        header, lines = [*_MOODLE_IDENTITY, *columns], []
    else:
        header, lines = ["student", "id", "email", *columns, *([] if per == "total" else ["total"])], []
    for i, entry in enumerate(entries):
        values = grades(by_entry.get(i))
        extra = [] if fmt != "csv" or per == "total" else [_total(values)]
        lines.append([*entry.identity.values(), *map(_grade, values + extra)])
    blank = {s: [e for e in exercises if ex.get(e, 0.0) is None] for s, ex in points.items() if None in ex.values()}
    refused = _refused(Path(gradebook), blank)
    out = Path(out)
    write_csv(out, header, lines)
    unmatched_file = None
    if unmatched or ambiguous:
        unmatched_file = out.with_name(out.name + ".unmatched.csv")
        lost = []
        for student in unmatched + ambiguous:
            values = [points[student].get(e, 0.0) for e in exercises]
            reason = "not in the roster" if student in unmatched else "matches more than one roster student"
            lost.append([student, reason, *map(_grade, values), _grade(_total(values))])
        write_csv(unmatched_file, ["student", "reason", *exercises, "total"], lost)
    return ExportReport(
        written=len(entries),
        matched={s: entries[i].label for s, i in matched.items()},
        without_submission=[e.label for i, e in enumerate(entries) if i not in by_entry],
        unmatched=unmatched,
        ambiguous=ambiguous,
        columns=columns,
        unmatched_file=unmatched_file,
        not_graded={
            s: sorted(set(e) - set(refused.get(s, []))) for s, e in blank.items() if set(e) - set(refused.get(s, []))
        },
        refused=refused,
    )


_CANVAS_FOLDER = re.compile(r"(?P<name>[0-9a-z_]+?)_(?:late_)?(?P<user>\d+)_(?P<submission>\d+)")
"""Canvas's Download Submissions name, normalised: ``<name>_<user id>_<submission id>`` (``_LATE`` after the name
when late); the user id is the ``ID`` column of Canvas's gradebook export."""
_MOODLE_FOLDER = re.compile(r"(?P<name>[0-9a-z_]+?)_(?P<participant>\d+)_assignsubmission_[a-z]+")
"""Moodle's Download all submissions folder, normalised: ``<full name>_<participant id>_assignsubmission_file_``;
the participant id is the assignment's own (no roster has it), so the full name is matched."""


def lms_folder_keys(student: str) -> list[str]:
    """The keys a gradebook student is matched by, in order: the whole name normalised, then, for a folder named as
    an LMS names its download, the roster key it carries (Canvas: the user id; Moodle: the full name).

    Example:
        >>> lms_folder_keys("liddellalice_LATE_1001_7001"), lms_folder_keys("Alice Liddell_88_assignsubmission_file_")
        (['liddellalice_late_1001_7001', '1001'], ['alice_liddell_88_assignsubmission_file', 'alice_liddell'])
    """
    key = normalise(student)
    keys = [key]
    for pattern, part in ((_CANVAS_FOLDER, "user"), (_MOODLE_FOLDER, "name")):
        found = pattern.fullmatch(key)
        if found:
            keys.append(found[part])
    return keys


def _match(entries: list[RosterEntry], points: dict) -> tuple[dict[str, int], list[str], list[str]]:
    """``(matched: gradebook student -> roster index, unmatched, ambiguous)`` (see the module docstring)."""
    owners: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        for key in entry.keys:
            owners.setdefault(key, []).append(i)
    hits = {}
    for student in points:
        keys = [k for k in lms_folder_keys(student) if k in owners]
        hits[student] = sorted(set(owners[keys[0]])) if keys else []
    claims: dict[int, int] = {}
    for found in hits.values():
        for i in found:
            claims[i] = claims.get(i, 0) + 1
    matched: dict[str, int] = {}
    unmatched, ambiguous = [], []
    for student, found in hits.items():
        if not found:
            unmatched.append(student)
        elif len(found) == 1 and claims[found[0]] == 1:
            matched[student] = found[0]
        else:  # several roster students fit the name, or several gradebook names fit one roster student
            ambiguous.append(student)
    return matched, unmatched, ambiguous


def _refused(gradebook: Path, blank: dict[str, list[str]]) -> dict[str, list[str]]:
    """Of the ``blank`` cells (student -> exercises), those blank because a file was refused (``refused-file``)."""
    found: dict[str, list[str]] = {}
    for row in _read_csv(gradebook)[1]:
        student, exercise = csv_text(row["student"]), row["exercise"].strip()
        if row.get("status") == "refused-file" and exercise in blank.get(student, []):
            found.setdefault(student, []).append(exercise)
    return {s: sorted(set(e)) for s, e in found.items()}


def _total(values: list[float | None]) -> float | None:
    """The sum, or ``None`` (no grade) when one of them is not graded."""
    return None if None in values else sum(values)


def _grade(value: float | None) -> str:
    """A grade cell: the points, or blank for no grade (the LMS then imports nothing there, never a 0)."""
    return "" if value is None else _num(value)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="write a gradebook's grades in an LMS's import format (Canvas, Moodle, plain CSV)",
        description="Map the students of GRADEBOOK (gradacc grade's CSV) to the LMS roster ROSTER and write the "
        "LMS's grade-import file. Exit code 1 when a gradebook student is not in the roster (unless "
        "--allow-unmatched; they are listed and written to OUT.unmatched.csv), or when a row could not be graded "
        "(ungraded, grader-error) or its file was refused (refused-file): a blank cell, never 0; unless "
        "--allow-ungraded.",
    )
    p.add_argument("gradebook", help="gradebook CSV written by gradacc grade")
    p.add_argument("--roster", required=True, help="roster CSV downloaded from the LMS (same format as --format)")
    p.add_argument("--format", required=True, choices=FORMATS, dest="fmt", help="LMS format of roster and output")
    p.add_argument("--out", required=True, help="file to write")
    p.add_argument(
        "--per", choices=("exercise", "total"), default="exercise", help="a column per exercise or one total"
    )
    p.add_argument("--allow-unmatched", action="store_true", help="exit 0 even when gradebook students are unmatched")
    p.add_argument(
        "--allow-ungraded",
        action="store_true",
        help="exit 0 even when some rows could not be graded (ungraded, grader-error) or were refused (refused-file); "
        "their cells stay blank",
    )
    p.set_defaults(func=_cmd_export)


def _cmd_export(args) -> int:
    try:
        report = export_grades(args.gradebook, args.roster, args.fmt, args.out, per=args.per)
    except (OSError, ValueError) as error:
        print(f"gradacc export: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.out}: {_students(report.written, 'roster ')}, {len(report.matched)} with a submission, "
        f"columns {', '.join(report.columns)}"
    )
    if report.without_submission:
        print(f"{_students(len(report.without_submission), 'roster ')} without a submission got 0: "
              + ", ".join(report.without_submission))  # fmt: skip
    code = 0
    if report.refused:
        named = ", ".join(f"{s} ({', '.join(e)})" for s, e in report.refused.items())
        print(
            f"warning: {_students(len(report.refused), 'gradebook ')} handed in a file the grader refused "
            f"(refused-file: a link or a special file, never read): their cells are blank, never 0: {named}. Read "
            "each row's message: a hard link to a file outside the class is most often your own hard-linked copy of "
            "the class (cp -al, rsync --link-dest): grade a copy made with cp -a and export again; otherwise type "
            "the grade by hand, or pass --allow-ungraded to import the other grades now",
            file=sys.stderr,
        )
        code = 0 if args.allow_ungraded else 1
    if report.not_graded:
        named = ", ".join(f"{s} ({', '.join(e)})" for s, e in report.not_graded.items())
        print(
            f"warning: {_students(len(report.not_graded), 'gradebook ')} could not be graded (ungraded or "
            f"grader-error rows): their cells are blank, never 0: {named}. Grade them again (gradacc grade ... "
            "--resume) and export again, or pass --allow-ungraded to import the other grades now",
            file=sys.stderr,
        )
        code = 0 if args.allow_ungraded else 1
    lost = report.unmatched + report.ambiguous
    if lost:
        reasons = [f"{s} (not in the roster)" for s in report.unmatched]
        reasons += [f"{s} (ambiguous: fits several roster students, or shares one)" for s in report.ambiguous]
        print(
            f"{_students(len(lost), 'gradebook ')} {'is' if len(lost) == 1 else 'are'} NOT in the file (written to "
            f"{report.unmatched_file}): " + ", ".join(reasons),
            file=sys.stderr,
        )
        code = code or (0 if args.allow_unmatched else 1)
    return code
