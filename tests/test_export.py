"""`gradacc export`: a gradebook written by the grader's own Gradebook, a 30-student LMS roster, the LMS file read back."""

from __future__ import annotations

import csv
import random
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

from gradacc.cli import main
from gradacc.grading.export import export_grades, normalise, read_roster
from gradacc.grading.files import FORMULA_STARTS, PRIVATE_FILE_MODE, csv_safe, write_csv
from gradacc.grading.gradebook import Gradebook, Row
from gradacc.grading.progress import class_view

FIRST = [
    "Ada",
    "Bo",
    "Chen",
    "Dara",
    "Eli",
    "Fatima",
    "Gus",
    "Hana",
    "Ivo",
    "Jun",
    "Kemal",
    "Lea",
    "Mona",
    "Nils",
    "Oona",
]
LAST = ["Okafor", "Lindqvist"]
EXERCISES = {"02_pytorch": 6.0, "03_memory": 8.0}


def _people() -> list[tuple[str, str, str]]:
    """30 students: (first, last, login)."""
    pairs = [(first, last) for last in LAST for first in FIRST]
    return [(first, last, f"{first[0]}{last}{i}".lower()) for i, (first, last) in enumerate(pairs)]


def _gradebook(tmp: Path, students: list[str]) -> tuple[Path, dict[str, dict[str, float]]]:
    """A gradebook CSV written by gradacc's Gradebook: each student gets both exercises (random points, seeded)."""
    rng = random.Random(7)
    rows, points = [], {}
    for student in students:
        for exercise, top in EXERCISES.items():
            got = float(rng.randint(0, int(top)))
            points.setdefault(student, {})[exercise] = got
            rows.append(Row(student=student, exercise=exercise, status="graded", points=got, max_points=top))
    rows.append(Row(student=students[0], exercise="", status="unrecognized", file="notes.txt"))  # kept, 0 points
    path = tmp / "gradebook.csv"
    Gradebook(rows=rows, check_columns=[], seed=1, wall_s=1.0).write_csv(path)
    return path, points


def _read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture
def classroom(tmp_path: Path):
    """Roster of 30; the gradebook has 27 of them (by login, by "first last" or by e-mail name) and 2 strangers."""
    people = _people()
    without = {people[3][2], people[17][2], people[29][2]}  # three roster students who sent nothing
    names = []
    for i, (first, last, login) in enumerate(people):
        if login in without:
            continue
        names.append(login if i % 3 == 0 else f"{first}_{last}" if i % 3 == 1 else f"{first} {last}")
    names += ["zoe_stranger", "mallory"]
    gradebook, points = _gradebook(tmp_path, names)
    canvas = tmp_path / "canvas_roster.csv"
    with open(canvas, "w", newline="", encoding="utf-8-sig") as f:  # Canvas exports carry a BOM
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Quiz 1 (1234)", "Current Score"])
        w.writerow(["    Points Possible", "", "", "", "", "10", "(read only)"])
        for i, (first, last, login) in enumerate(people):
            w.writerow([f"{last}, {first}", str(5000 + i), f"S{i:04d}", login, "Section A", "7", "70"])
    moodle = tmp_path / "moodle_roster.csv"
    with open(moodle, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["First name", "Last name", "ID number", "Institution", "Email address"])
        for i, (first, last, login) in enumerate(people):
            w.writerow([first, last, f"N{i:03d}", "Uni", f"{login}@uni.example"])
    return {"people": people, "without": without, "gradebook": gradebook, "points": points, "names": names,
            "canvas": canvas, "moodle": moodle}  # fmt: skip


def _expected(classroom, first, last, login):
    names = classroom["names"]
    student = next((n for n in names if normalise(n) in {login, normalise(f"{first} {last}")}), None)
    return classroom["points"].get(student, {}) if student else {}


def test_canvas_export_round_trips_every_student(classroom, tmp_path, capsys):
    out = tmp_path / "canvas_import.csv"
    code = main(["export", str(classroom["gradebook"]), "--roster", str(classroom["canvas"]), "--format", "canvas",
                 "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 1  # two gradebook students are not in the roster
    assert "2 gradebook students are NOT in the file" in printed.err
    assert "zoe_stranger (not in the roster)" in printed.err and "mallory (not in the roster)" in printed.err
    assert "3 roster students without a submission got 0" in printed.out
    rows = _read(out)
    assert rows[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "gradacc 02_pytorch",
        "gradacc 03_memory",
    ]
    assert rows[1] == ["    Points Possible", "", "", "", "", "6", "8"]  # Canvas's own spelling (leading spaces)
    body = rows[2:]
    assert len(body) == 30
    for (first, last, login), row in zip(classroom["people"], body, strict=True):
        assert row[:4] == [f"{last}, {first}", row[1], row[2], login]
        want = _expected(classroom, first, last, login)
        if login in classroom["without"]:
            assert want == {} and row[5:] == ["0", "0"], row
            assert f"{last}, {first}" in printed.out
        else:
            assert [float(v) for v in row[5:]] == [want["02_pytorch"], want["03_memory"]], (login, row)
    unmatched = _read(out.with_name(out.name + ".unmatched.csv"))
    assert [r[0] for r in unmatched[1:]] == ["zoe_stranger", "mallory"]
    for r in unmatched[1:]:  # nothing lost: their points are there
        assert float(r[-1]) == sum(classroom["points"][r[0]].values())
    code = main(["export", str(classroom["gradebook"]), "--roster", str(classroom["canvas"]), "--format", "canvas",
                 "--out", str(out), "--allow-unmatched"])  # fmt: skip
    assert code == 0


def test_moodle_export_with_one_total_column(classroom, tmp_path):
    out = tmp_path / "moodle_import.csv"
    report = export_grades(classroom["gradebook"], classroom["moodle"], "moodle", out, per="total")
    assert report.written == 30 and len(report.matched) == 27
    assert sorted(report.unmatched) == ["mallory", "zoe_stranger"] and report.ambiguous == []
    assert len(report.without_submission) == 3
    rows = _read(out)
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "gradacc total"]
    assert len(rows) == 31
    for (first, last, login), row in zip(classroom["people"], rows[1:], strict=True):
        assert row[:2] == [first, last] and row[3] == f"{login}@uni.example"
        assert float(row[4]) == sum(_expected(classroom, first, last, login).values())


def test_plain_csv_roster_and_ambiguous_names(tmp_path):
    gradebook, points = _gradebook(tmp_path, ["kim", "lee", "park"])
    roster = tmp_path / "roster.csv"
    roster.write_text("student,id,email\nKim,1,kim.a@x.org\nKim,2,kim.b@x.org\nLee,3,lee@x.org\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    report = export_grades(gradebook, roster, "csv", out)
    assert report.ambiguous == ["kim"] and report.unmatched == ["park"] and report.matched == {"lee": "Lee"}
    rows = _read(out)
    assert rows[0] == ["student", "id", "email", "gradacc 02_pytorch", "gradacc 03_memory", "total"]
    lee = [float(v) for v in rows[3][3:]]
    assert lee == [points["lee"]["02_pytorch"], points["lee"]["03_memory"], sum(points["lee"].values())]
    assert rows[1][3:] == rows[2][3:] == ["0", "0", "0"]  # the two Kims: nobody's grade is guessed
    assert [r[0] for r in _read(out.with_name("out.csv.unmatched.csv"))[1:]] == ["park", "kim"]


def test_counts_of_one_read_as_one_student(tmp_path, capsys):
    gradebook, _ = _gradebook(tmp_path, ["kim", "park"])
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nKim\nLee\n", encoding="utf-8")
    assert (
        main(["export", str(gradebook), "--roster", str(roster), "--format", "csv", "--out", str(tmp_path / "o.csv")])
        == 1
    )
    printed = capsys.readouterr()
    assert ": 2 roster students, 1 with a submission" in printed.out
    assert "1 roster student without a submission got 0: Lee" in printed.out
    assert "1 gradebook student is NOT in the file" in printed.err and "students" not in printed.err.split(":")[0]


def test_bad_rosters_and_formats_say_what_is_wrong(tmp_path, capsys):
    roster = tmp_path / "r.csv"
    roster.write_text("name,mail\nA,a@x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a canvas roster needs the columns Student, ID; missing Student, ID"):
        read_roster(roster, "canvas")
    with pytest.raises(ValueError, match="format must be one of canvas, moodle, csv, got 'blackboard'"):
        read_roster(roster, "blackboard")
    gradebook, _ = _gradebook(tmp_path, ["a"])
    code = main(["export", str(gradebook), "--roster", str(roster), "--format", "moodle", "--out", str(tmp_path / "o")])
    assert code == 2 and "a moodle roster needs the columns" in capsys.readouterr().err
    plain = tmp_path / "plain.csv"
    plain.write_text("student\nA\n", encoding="utf-8")
    code = main(["export", str(roster), "--roster", str(plain), "--format", "csv", "--out", str(tmp_path / "o")])
    assert code == 2 and "is not a gradacc gradebook" in capsys.readouterr().err


def test_rows_the_grader_could_not_grade_are_blank_never_0(tmp_path, capsys):
    """Issue 60: `ungraded` and `grader-error` rows were exported as 0, exit code 0, no warning."""
    rows = [
        Row("kim", "02_pytorch", "graded", 6, 6),
        Row("kim", "03_memory", "ungraded", 0, 8, "not graded: the reference could not run under the grader"),
        Row("lee", "02_pytorch", "grader-error", 0, 6, "RuntimeError: a grader bug"),
        Row("lee", "03_memory", "graded", 3, 8),
        Row("park", "02_pytorch", "invalid-notebook", 0, 6),  # the student's file: a real 0
        Row("park", "03_memory", "graded", 8, 8),
    ]
    gradebook = tmp_path / "gradebook.csv"
    Gradebook(rows=rows, check_columns=[], seed=1, wall_s=1.0).write_csv(gradebook)
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nKim\nLee\nPark\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    args = ["export", str(gradebook), "--roster", str(roster), "--format", "csv", "--out", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "2 gradebook students could not be graded" in err and "kim (03_memory), lee (02_pytorch)" in err
    assert _read(out)[1:] == [
        ["Kim", "", "", "6", "", ""],
        ["Lee", "", "", "", "3", ""],
        ["Park", "", "", "0", "8", "8"],
    ]
    assert main([*args, "--allow-ungraded"]) == 0
    report = export_grades(gradebook, roster, "csv", tmp_path / "t.csv", per="total")
    assert _read(tmp_path / "t.csv")[1:] == [["Kim", "", "", ""], ["Lee", "", "", ""], ["Park", "", "", "8"]]
    assert report.not_graded == {"kim": ["03_memory"], "lee": ["02_pytorch"]}


def test_a_stray_file_adds_no_column_and_no_student(tmp_path):
    """Issue 60: a `progress.json` in the class folder added a `gradacc progress` column for every student."""
    rows = [
        Row("kim", "02_pytorch", "graded", 6, 6),
        Row("kim", "notes", "unrecognized", message="not a .ipynb file"),
        Row("", "progress.json", "unrecognized", message="files at the top level must be named ..."),
        Row("lee", "link", "refused-file", message="a symbolic link (to /etc/passwd): never followed"),
        Row("lee", "02_pytorch", "refused-file", 0, 6, "a symbolic link (to ../kim/02_pytorch.ipynb)"),
    ]
    gradebook = tmp_path / "gradebook.csv"
    Gradebook(rows=rows, check_columns=[], seed=1, wall_s=1.0).write_csv(gradebook)
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nKim\nLee\n", encoding="utf-8")
    report = export_grades(gradebook, roster, "csv", tmp_path / "out.csv")
    assert report.columns == ["gradacc 02_pytorch"]
    assert report.unmatched == [] and sorted(report.matched) == ["kim", "lee"]
    assert _read(tmp_path / "out.csv") == [
        ["student", "id", "email", "gradacc 02_pytorch", "total"],
        ["Kim", "", "", "6", "6"],
        ["Lee", "", "", "", ""],  # refused (never read): blank, never 0, and named (issue 60 follow-up)
    ]
    assert report.refused == {"lee": ["02_pytorch"]} and report.not_graded == {}


HOSTILE = ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tlead", "\rlead", '=HYPERLINK("http://x")']


def _formula_cells(path: Path) -> list[str]:
    """The cells of a CSV file a spreadsheet would read as a formula (OWASP's first characters, not a number)."""
    bad = []
    for row in _read(path):
        for cell in row:
            if cell[:1] in FORMULA_STARTS and csv_safe(cell) != cell:
                bad.append(cell)
    return bad


def test_every_csv_the_course_writes_is_formula_safe_and_private(tmp_path):
    """Issue 60: student text (folder names, exception messages) reached the LMS exports as formulas. Every writer:
    the gradebook, the three LMS exports and their unmatched lists."""
    rows = [Row(name, "02_pytorch", "graded", 1, 6, message=f"ValueError: {name}", file=f"{name}/02.ipynb",
                flags=name, hidden={"2.1": name}) for name in HOSTILE]  # fmt: skip
    gradebook = tmp_path / "gradebook.csv"
    Gradebook(rows=rows, check_columns=["2.1"], seed=1, wall_s=1.0).write_csv(gradebook)
    assert _formula_cells(gradebook) == []
    assert [r[0] for r in _read(gradebook)[1:3]] == ["'=1+2", "'+SUM(A1)"]
    written = [gradebook]
    rosters = {
        "canvas": "Student,ID\n" + "".join(f'"{n}",{i}\n' for i, n in enumerate(HOSTILE[:3])),
        "moodle": "First name,Last name,Email address\n"
        + "".join(f'"{n}",x,{i}@x\n' for i, n in enumerate(HOSTILE[:3])),
        "csv": "student\n" + "".join(f'"{n}"\n' for n in HOSTILE[:3]),
    }
    for fmt, text in rosters.items():
        roster = tmp_path / f"{fmt}.csv"
        roster.write_text(text, encoding="utf-8")
        report = export_grades(gradebook, roster, fmt, tmp_path / f"{fmt}_out.csv")
        assert report.unmatched_file is not None  # the other hostile names: the unmatched list is written too
        written += [tmp_path / f"{fmt}_out.csv", report.unmatched_file]
    book = Gradebook(rows=rows, check_columns=["2.1"], seed=1, wall_s=1.0)  # the class view of progress
    header, lines = class_view(book)
    write_csv(tmp_path / "class-progress.csv", header, lines)  # as class_progress writes it
    written.append(tmp_path / "class-progress.csv")
    assert {"'=1+2", "'+SUM(A1)", "'\tlead"} <= {r[0] for r in _read(written[-1])[1:]}
    for path in written:
        assert _formula_cells(path) == [], path
        assert stat.S_IMODE(path.stat().st_mode) == PRIVATE_FILE_MODE, path
    # the full value is kept behind the quote (a reader strips one leading ' to get the student's text)
    assert ["'=1+2", "", "", "1", "1"] in _read(tmp_path / "csv_out.csv")
    # one shared writer: no module of the package writes a CSV file on its own
    own = [
        p
        for p in (ROOT / "src" / "gradacc").rglob("*.py")
        if p.name != "files.py" and ("csv.writer(" in p.read_text() or "DictWriter(" in p.read_text())
    ]
    assert own == []


def test_csv_safe_follows_owasp():
    assert [csv_safe(v) for v in ("=1", "+1a", "-x", "@x", "\tx", "\rx", "a=1", "", None)] == [
        "'=1", "'+1a", "'-x", "'@x", "'\tx", "'\rx", "a=1", "", ""]  # fmt: skip
    assert [csv_safe(v) for v in ("-3", "+1.5", "-2e-05", 7, 0.5)] == ["-3", "+1.5", "-2e-05", "7", "0.5"]


def test_gitignore_keeps_grades_and_submissions_out_of_git(tmp_path):
    """Issue 60: `.gitignore` covered gradebook.csv and feedback/ but not the journal nor submissions/."""
    ignored = [
        "gradebook.csv",
        "gradebook.csv.journal.jsonl",
        "grades/week2.csv.journal.jsonl",
        "gradebook.csv.shards/0-of-2/gradebook.csv",
        "canvas_import.csv.unmatched.csv",
        "class-progress.csv",
        "feedback/alice.md",
        "submissions/alice/02_pytorch.ipynb",
        "canvas_import.csv",  # issue 60 follow-up: every file the guides name, as they name it
        "moodle_import.csv",
        "similarity.csv",
        "similarity.md",
        "feedback.zip",
        "returned/alice_feedback.md",
        "roster.csv",  # the second instructor's walk: the roster names students, the VM recipe's archives hold the class
        "results/gradebook.csv",
        "class.tgz",
        "results.tgz",
    ]
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", *ignored], capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == ignored, done.stderr


def test_student_folders_named_as_the_lms_download_match_the_roster(tmp_path, capsys):
    """Issue 60: lms.md says to name student folders as Canvas names its download (`<name>_<user id>_<submission
    id>`), but export sent `liddellalice_1001_7001` to the unmatched list (a 0 with --allow-unmatched). Canvas's by
    the user id (the roster's ID), Moodle's by the full name; a name like a formula is shown raw in the terminal."""
    rows = [
        Row("liddellalice_1001_7001", "02_pytorch", "graded", 6, 6),
        Row("builderbob_LATE_1002_7002", "02_pytorch", "graded", 3, 6),
        Row("=1+2", "02_pytorch", "graded", 1, 6),
    ]
    gradebook = tmp_path / "gradebook.csv"
    Gradebook(rows=rows, check_columns=[], seed=1, wall_s=1.0).write_csv(gradebook)
    canvas = tmp_path / "canvas.csv"
    canvas.write_text('Student,ID,SIS User ID\n"Liddell, Alice",1001,S1\n"Builder, Bob",1002,S2\n', encoding="utf-8")
    out = tmp_path / "canvas_import.csv"
    code = main(["export", str(gradebook), "--roster", str(canvas), "--format", "canvas", "--out", str(out)])
    assert code == 1  # "=1+2" is in no roster
    assert [r[:2] + r[5:] for r in _read(out)[2:]] == [["Liddell, Alice", "1001", "6"], ["Builder, Bob", "1002", "3"]]
    err = capsys.readouterr().err
    assert "=1+2 (not in the roster)" in err and "'=1+2" not in err  # the student's own name; the CSV quotes it
    assert _read(out.with_name(out.name + ".unmatched.csv"))[1][0] == "'=1+2"
    moodle_rows = [Row("Alice Liddell_88_assignsubmission_file_", "02_pytorch", "graded", 5, 6)]
    Gradebook(rows=moodle_rows, check_columns=[], seed=1, wall_s=1.0).write_csv(gradebook)
    moodle = tmp_path / "moodle.csv"
    moodle.write_text("First name,Last name,Email address\nAlice,Liddell,a@x.org\nBob,Builder,b@x.org\n", "utf-8")
    report = export_grades(gradebook, moodle, "moodle", tmp_path / "moodle_import.csv")
    assert report.matched == {"Alice Liddell_88_assignsubmission_file_": "Alice"} and report.unmatched == []
    assert [r[4] for r in _read(tmp_path / "moodle_import.csv")[1:]] == ["5", "0"]


def test_the_class_view_sorts_the_checks_passed_by_number():
    """Issue 60 follow-up: `checks passed` read `11.1 11.2 2.1 2.2` (text order)."""
    rows = [Row("kim", "02_pytorch", "graded", 6, 6, checks={"2.1": 3, "2.2": 3}),
            Row("kim", "11_parallel", "graded", 4, 4, checks={"11.1": 2, "11.2": 2})]  # fmt: skip
    header, lines = class_view(Gradebook(rows=rows, check_columns=[], seed=1, wall_s=1.0))
    assert header[-1] == "checks passed" and lines == [["kim", "6 / 6", "4 / 4", "10", "10", "2.1 2.2 11.1 11.2"]]
