"""`gradacc export`: a gradebook written by the grader's own Gradebook, a 30-student LMS roster, the LMS file read back."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from gradacc.cli import main
from gradacc.grading.export import export_grades, normalise, read_roster
from gradacc.grading.gradebook import Gradebook, Row

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
