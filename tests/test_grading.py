"""The classroom grader (gradacc.grading) on a fault corpus built here, against small reference notebooks built here.

One ``grade`` call (module fixture) grades a whole class of faulty, hostile and correct submissions in parallel; each
test asserts the rows it is about (status, points, per-check points, message) and that the correct submission in the
same run still gets full points. The references are tiny (no torch) so each nbval run takes a few seconds. The last
test grades the course's real solutions/ notebooks end to end.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest
from conftest import ROOT
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gradacc.cli import main
from gradacc.course.misconceptions import lookup
from gradacc.course.notebooks import check_cells, generate_exercise
from gradacc.grading import (
    STATUSES,
    GradingError,
    Settings,
    discover,
    grade,
    load_hidden,
    load_references,
    match_solutions,
    merge_submission,
    read_journal,
    read_submission,
    same_output,
)
from gradacc.grading.progress import class_view

# One xdist worker runs this whole module (Makefile: --dist loadgroup): the leftover-process check below looks for any
# process in a grading folder, so a second grading run at the same time would look like a leftover.
# Every grade() here runs in the default sandbox (bubblewrap, installed by the `bwrap` fixture when missing).
pytestmark = [pytest.mark.xdist_group("grading"), pytest.mark.usefixtures("bwrap")]

WEIGHTED = "def weighted_mean(values, weights):\n    ### BEGIN SOLUTION\n    return sum(v * w for v, w in zip(values, weights)) / sum(weights)\n    ### END SOLUTION\n"
ACCUMULATED = "def accumulated_mean(chunks):\n    ### BEGIN SOLUTION\n    return sum(sum(c) for c in chunks) / sum(len(c) for c in chunks)\n    ### END SOLUTION\n"
# Plausible wrong answers: ignore the weights; average the micro-batch means (wrong when their sizes differ).
WRONG_WEIGHTED = "def weighted_mean(values, weights):\n    return sum(values) / len(values)\n"
WRONG_ACCUMULATED = "def accumulated_mean(chunks):\n    return sum(sum(c) / len(c) for c in chunks) / len(chunks)\n"
HIDDEN_01 = '''"""Hidden checks of 01_small (test copy): inputs drawn from GRADACC_SEED; print the student's results."""
# ruff: noqa: F821
import random

rng = random.Random(GRADACC_SEED)

# %% hidden 1.1
values = [rng.uniform(-5, 5) for _ in range(7)]
weights = [rng.uniform(0.1, 2) for _ in range(7)]
print(f"{weighted_mean(values, weights):.6f}")

# %% hidden 1.2
chunks = [[rng.uniform(-1, 1) for _ in range(rng.randint(1, 5))] for _ in range(4)]
print(f"{accumulated_mean(chunks):.6f}")
'''
SETTINGS = Settings(timeout=45, cell_timeout=4, memory_mib=1024, max_output_kib=1024, workers=2, seed=1234)


def _check_cell(check: str, points: int, source: str, cell_id: str):
    return new_code_cell(
        source,
        id=cell_id,
        execution_count=1,
        metadata={"tags": ["check", "nbval-check-output"], "gradacc": {"check": check, "points": points}},
        outputs=[new_output("stream", name="stdout", text=f"Exercise {check}: correct\n")],
    )


def small_solution_01():
    """A two-exercise reference: 1.1 (2 points, weighted mean), 1.2 (3 points, mean over micro-batches)."""
    return new_notebook(
        cells=[
            new_markdown_cell("# 01 · Small", id="title"),
            new_code_cell("import math", id="setup", execution_count=1),
            new_code_cell(WEIGHTED, id="ex-1-1-solution", metadata={"tags": ["solution"]}),
            _check_cell(
                "1.1",
                2,
                "from gradacc.course.checks import close, run_check\n\n"
                'ok = run_check("1.1", lambda: close("weighted_mean([1, 3], [1, 3])", weighted_mean([1, 3], [1, 3]), 2.5, 1e-9))',
                "ex-1-1-check",
            ),
            new_code_cell(ACCUMULATED, id="ex-1-2-solution", metadata={"tags": ["solution"]}),
            _check_cell(
                "1.2",
                3,
                'ok = run_check("1.2", lambda: close("accumulated_mean([[1, 2], [3]])", accumulated_mean([[1, 2], [3]]), 2.0, 1e-9))',
                "ex-1-2-check",
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def small_solution_02():
    """A one-check reference without hidden checks."""
    return new_notebook(
        cells=[
            new_markdown_cell("# 02 · Other", id="title"),
            new_code_cell(
                "def scale(loss, accum_steps):\n    ### BEGIN SOLUTION\n    return loss / accum_steps\n    ### END SOLUTION\n",
                id="ex-2-1-solution",
                metadata={"tags": ["solution"]},
            ),
            _check_cell(
                "2.1",
                1,
                'from gradacc.course.checks import close, run_check\n\nok = run_check("2.1", lambda: close("scale(8.0, 4)", scale(8.0, 4), 2.0, 0))',
                "ex-2-1-check",
            ),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def _answered(exercise, answers: dict[str, str]):
    nb = copy.deepcopy(exercise)
    for cell in nb.cells:
        if cell.get("id") in answers:
            cell.source = answers[cell.id]
    return nb


def _cell(nb, cell_id: str):
    """The cell of ``nb`` with this id (exercises hold a how-to-check cell their references do not: ids, not places)."""
    return next(c for c in nb.cells if c.get("id") == cell_id)


def _write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def build_corpus(root: Path) -> tuple[Path, Path, Path]:
    """Write references (solutions/, hidden/) and a class of submissions under ``root``; return the three folders."""
    solutions, hidden, subs = root / "solutions", root / "hidden", root / "submissions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    _write(small_solution_02(), solutions / "02_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    ex1, ex2 = generate_exercise(small_solution_01()), generate_exercise(small_solution_02())
    right = {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": ACCUMULATED}
    n = "01_small.ipynb"

    _write(_answered(ex1, right), subs / "alice" / n)  # correct, folder layout
    _write(_answered(ex2, {"ex-2-1-solution": small_solution_02().cells[1].source}), subs / "alice" / "02_small.ipynb")
    _write(ex1, subs / f"bob__{n}")  # unanswered, flat layout
    (subs / "invalid_json").mkdir()
    (subs / "invalid_json" / n).write_text('{"cells": [')
    (subs / "empty").mkdir()
    (subs / "empty" / n).write_bytes(b"")
    (subs / "not_a_notebook").mkdir()
    (subs / "not_a_notebook" / n).write_text(json.dumps({"title": "my essay", "text": "..."}))

    nb = _answered(ex1, {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": WRONG_ACCUMULATED})
    nb.cells = [c for c in nb.cells if "check" not in c.metadata.get("tags", [])]  # both check cells deleted
    _write(nb, subs / "deleted_checks" / n)

    nb = _answered(ex1, {"ex-1-1-solution": WRONG_WEIGHTED, "ex-1-2-solution": ACCUMULATED})
    _cell(nb, "ex-1-1-check").outputs = [  # a stored output written to what the wrong answer prints
        nbformat.v4.new_output(
            "stream",
            name="stdout",
            text="Exercise 1.1: incorrect - weighted_mean([1, 3], [1, 3]) = 2, expected 2.5 (tolerance 1e-09)\n",
        )
    ]
    _write(nb, subs / "edited_output" / n)

    nb = _answered(ex1, {"ex-1-1-solution": WRONG_WEIGHTED, "ex-1-2-solution": WRONG_ACCUMULATED})
    check1, check2 = _cell(nb, "ex-1-1-check"), _cell(nb, "ex-1-2-check")
    check1.metadata.tags += ["nbval-skip", "raises-exception"]
    check1.source = "# NBVAL_SKIP\n" + check1.source
    check2.metadata.tags = ["check", "nbval-ignore-output"]
    check2.source = "# NBVAL_IGNORE_OUTPUT\n" + check2.source
    _write(nb, subs / "markers" / n)

    _write(_answered(ex1, {**right, "ex-1-1-solution": "# NBVAL_SKIP\n" + WEIGHTED}), subs / "marker_in_answer" / n)

    nb = _answered(ex1, right)
    for cell in nb.cells:
        cell.metadata = {}
    _write(nb, subs / "stripped_metadata" / "01_small (1).ipynb")  # also a renamed download

    raw = json.loads(nbformat.writes(_answered(ex1, {**right, "ex-1-2-solution": WRONG_ACCUMULATED})))
    raw["nbformat_minor"] = 4
    for cell in raw["cells"]:
        cell.pop("id")
        cell["metadata"] = {}
    scratch = {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "execution_count": None,
        "source": "print('scratch')",
    }
    raw["cells"].insert(3, scratch)
    (subs / "stripped_ids").mkdir()
    (subs / "stripped_ids" / n).write_text(json.dumps(raw))

    loop = "def accumulated_mean(chunks):\n    while True:\n        pass\n"
    _write(_answered(ex1, {**right, "ex-1-2-solution": loop}), subs / "infinite_loop" / n)
    hang = (
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)  # deaf to nbval's interrupt\n"
        "while True:\n    print('.', flush=True)\n    time.sleep(1)\n"
    )
    _write(_answered(ex1, {**right, "ex-1-2-solution": hang}), subs / "hang" / n)
    kill = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    _write(_answered(ex1, {**right, "ex-1-2-solution": kill}), subs / "suicide" / n)
    # np.empty maps memory without writing it: the limit is reached in milliseconds whatever the load (a bytearray bomb
    # zero-fills every chunk, and on a loaded machine that ran past the corpus's 4 s cell timeout: issue 11)
    bomb = "import numpy as np\n\nhoard = []\nwhile True:\n    hoard.append(np.empty(64 * 2**20, dtype=np.uint8))\n"
    _write(_answered(ex1, {**right, "ex-1-2-solution": bomb}), subs / "memory_bomb" / n)
    flood = ACCUMULATED + "print('x' * 10_000_000)\n"
    _write(_answered(ex1, {**right, "ex-1-2-solution": flood}), subs / "flood" / n)
    pipe_flood = ACCUMULATED + (  # 10 MB past the kernel's streams, straight into the pipe the grader reads
        "import os\n\nparent = f'/proc/{os.getppid()}'\ntry:\n    for fd in os.listdir(f'{parent}/fd'):\n"
        "        flags = int(open(f'{parent}/fdinfo/{fd}').read().split('flags:')[1].split()[0], 8)\n"
        "        if os.readlink(f'{parent}/fd/{fd}').startswith('pipe:') and flags & 3 == 1:\n"
        "            out = os.open(f'{parent}/fd/{fd}', os.O_WRONLY)\n"
        "            for _ in range(10):\n                os.write(out, b'y' * 1_000_000)\n            break\n"
        "except OSError as error:\n    print('pipe_flood:', type(error).__name__)\n"
    )
    _write(_answered(ex1, {**right, "ex-1-2-solution": pipe_flood}), subs / "pipe_flood" / n)

    _write(
        _answered(ex2, {"ex-2-1-solution": "def scale(loss, accum_steps):\n    return loss / accum_steps\n"}),
        subs / "dave" / n,
    )  # the 02 exercise, saved under 01's name
    _write(_answered(ex1, right), subs / "erin" / n)
    _write(_answered(ex1, right), subs / f"erin__{n}")  # the same student twice
    (subs / "frank").mkdir()
    (subs / "frank" / "notes.txt").write_text("I did my best")
    (subs / "README.md").write_text("class of 2026")
    (subs / ".DS_Store").write_text("")

    # Hostile answers that try to print the expected line themselves or to rewrite the check.
    patch = (
        "import gradacc.course.checks\n\ndef weighted_mean(values, weights):\n    return 0.0\n\n"
        "gradacc.course.checks.run_check = lambda exercise, body: print(f'Exercise {exercise}: correct')\n"
    )
    _write(_answered(ex1, {"ex-1-1-solution": patch}), subs / "tamper_patch" / n)
    silence = (
        "import os, sys\n\ndef weighted_mean(values, weights):\n"
        "    print('Exercise 1.1: correct', flush=True)\n    sys.stdout = open(os.devnull, 'w')  # hide the verdict\n"
        "    return 0.0\n"
    )
    _write(_answered(ex1, {"ex-1-1-solution": silence}), subs / "tamper_print" / n)
    steal = (
        "import glob, json, re\n\ndef weighted_mean(values, weights):\n"
        "    # look for expected outputs in any notebook the grader left within reach\n"
        "    for path in glob.glob('*.ipynb') + glob.glob('../*/*.ipynb'):\n"
        "        for cell in json.load(open(path))['cells']:\n"
        "            for out in cell.get('outputs', []):\n"
        "                numbers = re.findall(r'-?\\d+\\.\\d{6}', ''.join(out.get('text', '')))\n"
        "                if numbers:\n"
        "                    return float(numbers[0])\n"
        "    return 2.5\n"
    )
    _write(_answered(ex1, {"ex-1-1-solution": steal}), subs / "tamper_read" / n)

    # Files that must never be read (issue 60): a link to another student's notebook, a link to a system file, a
    # named pipe, a hard link to a file outside the class; a stray file at the top (what `gradacc progress` wrote).
    (subs / "mallory").mkdir()
    (subs / "mallory" / n).symlink_to(subs / "alice" / n)
    (subs / f"snoop__{n}").symlink_to("/etc/passwd")
    (subs / "piper").mkdir()
    os.mkfifo(subs / "piper" / n)
    outside = _write(_answered(ex1, right), root / "outside" / n)
    (subs / "linker").mkdir()
    os.link(outside, subs / "linker" / n)
    (subs / "progress.json").write_text('{"course": {}}')
    # An answer cell that does not even compile: its own error first, not the check's NameError (issue 60).
    indented = "def weighted_mean(values, weights):\nreturn 0.0\n"
    _write(_answered(ex1, {**right, "ex-1-1-solution": indented}), subs / "indent" / n)
    _add_a_copier(ex1, subs / "grace" / n, subs / "heidi" / n, subs / "ivan" / n)
    return solutions, hidden, subs


# Two honest answers, each written its own way (neither is the published solution), and a copy of the first with its
# names changed and a comment added: gradacc similarity must name grace and heidi, and neither grace nor ivan alone.
GRACE = {
    "ex-1-1-solution": "def weighted_mean(values, weights):\n    total = 0.0\n    weight_sum = 0.0\n"
    "    for value, weight in zip(values, weights):\n        total += value * weight\n        weight_sum += weight\n"
    "    return total / weight_sum\n",
    "ex-1-2-solution": "def accumulated_mean(chunks):\n    flat = []\n    for chunk in chunks:\n"
    "        flat.extend(chunk)\n    return sum(flat) / len(flat)\n",
}
HEIDI = {
    "ex-1-1-solution": "def weighted_mean(values, weights):\n    # my own work\n    acc = 0.0\n    norm = 0.0\n"
    "    for x, w in zip(values, weights):\n        acc += x * w\n        norm += w\n    return acc / norm\n",
    "ex-1-2-solution": "def accumulated_mean(chunks):\n    items = []\n    for c in chunks:\n        items.extend(c)\n"
    "    return sum(items) / len(items)\n",
}
IVAN = {
    "ex-1-1-solution": "import math\n\n\ndef weighted_mean(values, weights):\n"
    "    numerator = math.fsum(map(lambda pair: pair[0] * pair[1], zip(values, weights)))\n"
    "    return numerator / math.fsum(weights)\n",
    "ex-1-2-solution": "def accumulated_mean(chunks):\n    count, total = 0, 0.0\n    for chunk in chunks:\n"
    "        count = count + len(chunk)\n        total = total + math.fsum(chunk)\n    return total / count\n",
}


def _add_a_copier(exercise, grace: Path, heidi: Path, ivan: Path) -> None:
    for answers, path in ((GRACE, grace), (HEIDI, heidi), (IVAN, ivan)):
        _write(_answered(exercise, answers), path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("grading"))


@pytest.fixture(scope="module")
def book(corpus):
    solutions, hidden, subs = corpus
    return grade(subs, solutions, hidden=hidden, settings=SETTINGS, progress=False, log=lambda msg: None)


def _row(book, student, exercise="01_small"):
    return book.row(student, exercise)


@pytest.mark.notebook
def test_correct_submission_gets_full_points_in_the_same_run(book):
    for student in ("alice", "marker_in_answer"):
        row = _row(book, student)
        assert (row.status, row.points, row.max_points, row.checks) == ("graded", 5, 5, {"1.1": 2, "1.2": 3}), row
        assert row.flags == ""
    assert (_row(book, "alice", "02_small").status, _row(book, "alice", "02_small").points) == ("graded", 1)
    assert book.seed == 1234 and book.check_columns == ["1.1", "1.2", "2.1"]


@pytest.mark.notebook
def test_unanswered_and_wrong_answers_score_zero(book):
    row = _row(book, "bob")
    assert (row.status, row.points, row.checks) == ("graded", 0, {"1.1": 0, "1.2": 0})
    assert "not answered yet" in row.message
    # the hidden checks' results are kept for the instructor even though the visible checks already failed
    assert row.hidden == dict.fromkeys(["1.1", "1.2"], "your code raised NotImplementedError"), row.hidden
    assert _row(book, "alice").hidden == {"1.1": "passed", "1.2": "passed"}
    row = _row(book, "bob", "02_small")
    assert (row.status, row.points, row.max_points) == ("missing", 0, 1)


@pytest.mark.parametrize(
    "student, reason",
    [
        ("invalid_json", "not valid JSON"),
        ("empty", "empty (0 bytes)"),
        ("not_a_notebook", "not a Jupyter notebook"),
    ],
)
@pytest.mark.notebook
def test_unreadable_files_are_invalid_notebooks(book, student, reason):
    row = _row(book, student)
    assert (row.status, row.points, row.max_points) == ("invalid-notebook", 0, 5)
    assert reason in row.message and row.seconds is None  # never executed


@pytest.mark.notebook
def test_the_submission_cannot_change_checks_outputs_or_markers(book):
    # Deleted check cells: the reference's checks run anyway; 1.1 right (2), 1.2 wrong (0).
    row = _row(book, "deleted_checks")
    assert (row.status, row.points, row.checks) == ("graded", 2, {"1.1": 2, "1.2": 0})
    # The stored output edited to what a wrong answer prints: still wrong.
    row = _row(book, "edited_output")
    assert (row.status, row.points, row.checks) == ("graded", 3, {"1.1": 0, "1.2": 3})
    assert row.hidden == {"1.1": "your results differ from the reference solution's", "1.2": "passed"}
    assert "weighted_mean([1, 3], [1, 3]) = 2, expected 2.5" in row.message
    # NBVAL_SKIP / NBVAL_IGNORE_OUTPUT / raises-exception added to check cells (tags and comments): ignored.
    row = _row(book, "markers")
    assert (row.status, row.points) == ("graded", 0)
    # A marker inside the answer is neutralized: the answer still runs (full points, asserted above).


@pytest.mark.notebook
def test_stripped_metadata_and_ids_fall_back_to_order(book):
    row = _row(book, "stripped_metadata")  # no tags, no gradacc metadata; ids kept
    assert (row.status, row.points) == ("graded", 5)
    assert row.file.endswith("01_small (1).ipynb")
    row = _row(book, "stripped_ids")  # nbformat 4.4 without ids, no tags, an extra scratch cell
    assert (row.status, row.points, row.checks) == ("graded", 2, {"1.1": 2, "1.2": 0})
    assert "by their position" in row.message


@pytest.mark.notebook
def test_infinite_loop_costs_only_its_checks(book):
    row = _row(book, "infinite_loop")
    assert (row.status, row.points, row.checks) == ("timeout", 2, {"1.1": 2, "1.2": 0}), row
    assert "ran past 4 s" in row.message


@pytest.mark.notebook
def test_hang_that_ignores_interrupts_hits_the_notebook_timeout(book):
    row = _row(book, "hang")
    assert (row.status, row.points, row.checks) == ("timeout", 0, {"1.1": 0, "1.2": 0}), row
    assert "did not finish within 45 s" in row.message and "solution:ex-1-2-solution" in row.message


@pytest.mark.notebook
def test_kernel_that_kills_itself_is_a_crash(book):
    row = _row(book, "suicide")
    assert (row.status, row.points, row.checks) == ("crashed", 2, {"1.1": 2, "1.2": 0}), row
    assert "kernel died while running solution:ex-1-2-solution" in row.message
    # noticed at once (the kernel-died event names the cell), not by a time-out of this or any later cell


@pytest.mark.notebook
def test_memory_bomb_hits_the_memory_limit(book):
    row = _row(book, "memory_bomb")
    assert (row.status, row.points, row.checks) == ("memory-limit", 2, {"1.1": 2, "1.2": 0}), row
    assert row.peak_mib < 1024 + 128, row  # RLIMIT_DATA of 1024 MiB held (resident size adds code pages)


@pytest.mark.notebook
def test_ten_megabytes_of_output_hit_the_output_cap(book):
    row = _row(book, "flood")  # through the kernel's stdout (IOPub): the plugin stops the kernel
    assert (row.status, row.points, row.checks) == ("output-limit", 2, {"1.1": 2, "1.2": 0}), row
    assert "more than 1024 KiB of output (at solution:ex-1-2-solution)" in row.message
    # straight into the grading process's pipe: the runner is not dumpable, so the kernel cannot open its descriptors
    # through /proc (PermissionError; before issue 44 it wrote 9.5 MiB there, and the cap on that pipe caught it)
    row = _row(book, "pipe_flood")
    assert (row.status, row.points, row.message) == ("graded", 5, ""), row


@pytest.mark.notebook
def test_wrong_exercise_duplicates_and_stray_files(book):
    row = _row(book, "dave")
    assert (row.status, row.points, row.max_points) == ("wrong-exercise", 0, 5)
    assert "cell ids are those of 02_small" in row.message
    assert _row(book, "dave", "02_small").status == "missing"
    row = _row(book, "erin")
    assert (row.status, row.points) == ("duplicate", 0)
    assert "erin__01_small.ipynb" in row.message and "erin/01_small.ipynb" in row.message
    assert _row(book, "frank", "notes").status == "unrecognized"
    # a stray file at the top is listed, as no student's: it invents neither a student nor an exercise (issue 60)
    for name in ("README.md", "progress.json"):
        row = _row(book, "", name)
        assert (row.status, row.points, row.max_points) == ("unrecognized", 0, 0), row
        assert "must be named <student>__NN_topic.ipynb" in row.message
    assert not [r for r in book.rows if r.student in ("README", "progress")]


@pytest.mark.notebook
def test_links_and_special_files_are_refused_never_read(book):
    """Issue 60: a symbolic link to another student's notebook got 6/6; a link to /etc/passwd was read."""
    expected = {
        "mallory": "a symbolic link (to ",
        "snoop": "a symbolic link (to /etc/passwd): never followed",
        "piper": "a named pipe, not a regular file: never read",
        "linker": "a hard link to a file outside the class (2 names, 1 of them in the submissions folder)",
    }
    for student, reason in expected.items():
        row = _row(book, student)
        assert (row.status, row.points, row.max_points, row.checks) == ("refused-file", 0, 5, {"1.1": 0, "1.2": 0})
        assert row.message.startswith(reason), row.message
        assert row.sandbox == "" and row.seconds is None  # nothing of it ran
        told = "a symbolic link: never followed" if reason.startswith("a symbolic link") else reason
        assert row.feedback and told in row.feedback[0] and "(to " not in row.feedback[0]  # no other student's path
        assert _row(book, student, "02_small").status == "missing"  # a student all the same
    # read_submission refuses them too, if one is swapped in after discovery
    assert read_submission(_row(book, "snoop").file)[2].startswith("the file cannot be opened")
    assert read_submission(_row(book, "piper").file)[2].startswith("not a regular file")


@pytest.mark.notebook
def test_the_answer_cells_own_error_is_reported_before_the_checks(book):
    """Issue 60: an IndentationError in the answer was reported as the check cell's NameError."""
    row = _row(book, "indent")
    assert (row.status, row.checks) == ("graded", {"1.1": 0, "1.2": 3}), row
    assert row.message.startswith(
        "1.1: your answer cell ex-1-1-solution raised IndentationError: expected an indented block"
    ), row.message
    assert "; then the check: Exercise 1.1: incorrect - your code raised NameError: name 'weighted_mean'" in row.message
    assert "raised IndentationError" in row.feedback[0] and "Exercise 1.1 (0 / 2 points): failed" in row.feedback[0]


@pytest.mark.notebook
def test_tampering_with_the_kernel_earns_nothing(book):
    for student, flag in (
        ("tamper_patch", "gradacc.course.checks"),
        ("tamper_print", "stdout/stderr"),
        ("tamper_read", "notebook files"),
    ):
        row = _row(book, student)
        assert (row.status, row.points, row.checks) == ("graded", 0, {"1.1": 0, "1.2": 0}), row
        assert flag in row.flags
    # A patched gradacc.course.checks fools the visible check: only the hidden check (values, not verdicts) catches it.
    row = _row(book, "tamper_patch")
    assert row.message.startswith("1.1: hidden check failed: your results differ from the reference solution's")
    assert "passed the check in the notebook but not the grader's additional check" in row.feedback[0]
    # A forged printed line no longer fools it: the wrong check raises CheckFailed whatever was printed.
    row = _row(book, "tamper_print")
    assert row.message.startswith("1.1: the check cell raised CheckFailed although a line says correct"), row.message


def _started_here(process) -> bool:
    """Whether ``process`` was started by this test process: its working folder is a grading folder of this process
    (``gradacc-grade-<pid>-``; a sandboxed run keeps none of our environment), or it inherited this session's report
    file and xdist worker id (an unsandboxed run of a ``gradacc grade`` child process). (Issue 11: the scan once
    counted a kernel that the OTHER xdist worker's grading test was still running.)"""
    mine = {key: os.environ.get(key) for key in ("GRADACC_TEST_REPORT", "PYTEST_XDIST_WORKER")}
    try:
        if f"gradacc-grade-{os.getpid()}-" in process.cwd():
            return True
        environ = process.environ()
    except psutil.Error:
        return False
    return all(environ.get(key) == value for key, value in mine.items())


@pytest.mark.notebook
def test_every_submission_got_exactly_one_row(book, corpus):
    keys = [(r.student, r.exercise) for r in book.rows]
    assert len(keys) == len(set(keys))
    students = {p.name for p in corpus[2].iterdir() if p.is_dir()} | {"bob", "snoop", ""}
    assert {r.student for r in book.rows} == students
    assert all(r.status in STATUSES for r in book.rows)
    assert not [r for r in book.rows if r.status == "grader-error"]
    for r in book.rows:
        assert r.points == sum(r.checks.values()) <= r.max_points
    # no kernel or grading process outlives its run (the hang, the loop and the flood included)
    # (a process killed at the end of another test may need a moment to exit: wait up to 20 s for it)
    leftovers = [
        p for p in psutil.process_iter(["cwd"]) if "gradacc-grade-" in (p.info["cwd"] or "") and _started_here(p)
    ]
    _, alive = psutil.wait_procs(leftovers, timeout=20)
    described = []
    for p in alive:
        with contextlib.suppress(psutil.Error):
            described.append((p.pid, p.status(), p.ppid(), " ".join(p.cmdline())[:200]))
    assert described == []


@pytest.mark.notebook
def test_gradebook_csv_and_feedback(book, tmp_path):
    book.write_csv(tmp_path / "gradebook.csv")
    with (tmp_path / "gradebook.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:6] == ["student", "exercise", "points", "max_points", "status", "message"]
    alice = next(r for r in rows if r["student"] == "alice" and r["exercise"] == "01_small")
    assert (alice["points"], alice["max_points"], alice["check 1.1"], alice["check 1.2"], alice["check 2.1"]) == (
        "5",
        "5",
        "2",
        "3",
        "",
    )
    assert alice["hidden"] == "1.1: passed; 1.2: passed"
    bob = next(r for r in rows if r["student"] == "bob" and r["exercise"] == "01_small")
    assert bob["hidden"] == "1.1: your code raised NotImplementedError; 1.2: your code raised NotImplementedError"
    written = book.write_feedback(tmp_path / "feedback")
    assert len(written) == len({r.student for r in book.rows if r.student})  # a stray file is no student's
    # private (issue 60): the gradebook, the feedback folder and every feedback file are the instructor's only
    assert stat.S_IMODE((tmp_path / "gradebook.csv").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "feedback").stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o600}
    # each file says what it is about (issue 60): course, exercises, day of grading, course version
    about = (tmp_path / "feedback" / "alice.md").read_text().splitlines()[2]
    assert about == (
        "Course: Gradient accumulation, from first principles to four frameworks. Exercises: 01\\_small, 02\\_small. "
        f"Graded on {book.graded_on}; course version {book.course_version}."
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", book.graded_on) and book.course_version.startswith("gradacc 0.")
    # the invalid-notebook feedback says what to do
    assert "download it again from JupyterLab or Colab" in (tmp_path / "feedback" / "empty.md").read_text()
    text = (tmp_path / "feedback" / "edited_output.md").read_text()
    assert "Exercise 1.1 (0 / 2 points): failed" in text and "Exercise 1.2 (3 points): passed" in text
    for path in written:  # never the hidden checks' code
        body = path.read_text()
        assert "rng.uniform" not in body and "GRADACC_SEED" not in body and "exec(compile" not in body, path


@pytest.mark.notebook
def test_the_class_view_of_progress_has_a_row_per_student(book, tmp_path):
    """`gradacc progress --class` (issue 60): one row per student, from the same gradebook rows (no new run here)."""
    header, rows = class_view(book)
    assert header == ["student", "01_small", "02_small", "total", "max_points", "checks passed"]
    by_student = {r[0]: r[1:] for r in rows}
    assert "" not in by_student and "README" not in by_student and len(rows) == len({r.student for r in book.rows}) - 1
    assert by_student["alice"] == ["5 / 5", "1 / 1", "6", "6", "1.1 1.2 2.1"]
    assert by_student["mallory"] == ["0 / 5 (refused-file)", "0 / 1 (missing)", "0", "6", ""]
    assert by_student["edited_output"][0] == "3 / 5"


@pytest.mark.notebook
def test_cli_exit_codes(corpus, tmp_path, monkeypatch, capsys):
    solutions, hidden, subs = corpus
    one = tmp_path / "subs"
    one.mkdir()
    (one / "zoe__02_small.ipynb").write_text("not json")
    _write(generate_exercise(small_solution_02()), one / "yan" / "02_small.ipynb")
    out = tmp_path / "book.csv"
    args = ["grade", str(one), "--reference", str(solutions), "--out", str(out), "--exercise", "02_small", "--quiet"]
    # A real process: every submission got a row -> 0, even though nobody scored.
    done = subprocess.run(
        [sys.executable, "-m", "gradacc.cli", *args[:-1], "--feedback", str(tmp_path / "fb")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "2 rows (1 graded, 1 invalid-notebook)" in done.stdout
    assert f"hidden checks: {hidden.resolve()}" in done.stderr  # found next to the reference folder
    assert (tmp_path / "fb" / "zoe.md").exists() and (tmp_path / "fb" / "yan.md").exists()
    journal = Path(str(out) + ".journal.jsonl")  # the instructor's only (issue 60)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (out, journal, tmp_path / "fb")] == [0o600, 0o600, 0o700]
    with out.open() as f:
        assert [(r["student"], r["status"], r["points"]) for r in csv.DictReader(f)] == [
            ("yan", "graded", "0"),
            ("zoe", "invalid-notebook", "0"),
        ]
    # The class view of progress (issue 60): visible checks, sandboxed, a row per student, written outside the class.
    view = tmp_path / "class-progress.csv"
    assert main(["progress", "--class", str(one), "--reference", str(solutions), "--out", str(view)]) == 0
    assert "wrote " + str(view) + ": 2 students, exercises 02_small (visible checks)" in capsys.readouterr().out
    assert view.read_text().splitlines() == [
        "student,02_small,total,max_points,checks passed",
        "yan,0 / 1,0,1,",
        "zoe,0 / 1 (invalid-notebook),0,1,",
    ]
    assert stat.S_IMODE(view.stat().st_mode) == 0o600 and not (one / "progress.json").exists()
    # The grader cannot run -> 2.
    assert main([*args[:3], str(tmp_path / "nowhere"), *args[4:]]) == 2
    assert "no reference notebooks" in capsys.readouterr().err

    # The grader fails on one file (a bug): that file still gets a row, and the exit code says so -> 1.
    def broken(*a, **k):
        raise RuntimeError("simulated grader bug")

    monkeypatch.setattr("gradacc.grading.score._run_merged", broken)
    capsys.readouterr()
    assert main(args) == 1
    said = capsys.readouterr()  # --quiet (issue 60): no summary, no progress, only warnings and errors
    assert said.out == "" and "error: the grader failed on 1 file (grader-error; a bug" in said.err, said
    assert all(line.startswith(("warning", "error")) for line in said.err.splitlines()), said.err
    with out.open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows["yan"]["status"] == "grader-error" and "simulated grader bug" in rows["yan"]["message"]
    assert rows["zoe"]["status"] == "invalid-notebook"


@pytest.mark.notebook
def test_the_copying_report_names_the_copier_and_changes_no_score(book, corpus, tmp_path, capsys):
    solutions, _, subs = corpus
    gradebook = tmp_path / "gradebook.csv"
    book.write_csv(gradebook)
    os.chmod(gradebook, 0o600)
    before = gradebook.read_text()
    report = tmp_path / "similarity.csv"
    args = [str(subs), "--reference", str(solutions), "--gradebook", str(gradebook), "--out", str(report)]
    assert main(["similarity", *args]) == 0
    out = capsys.readouterr().out
    assert "pairs at or above 0.8" in out and " of them between students, " in out
    with report.open() as f:
        pairs = {(r["exercise"], r["first"], r["second"]): float(r["similarity"]) for r in csv.DictReader(f)}
    assert pairs[("01_small", "grace", "heidi")] == 1.0  # names and a comment changed: the same code
    assert pairs[("01_small", "alice", "published solution")] == 1.0  # the published solution handed in
    # the honest answers, each written its own way, are in no other pair
    assert [p for p in pairs if {"grace", "heidi", "ivan"} & set(p[1:]) and p[1:] != ("grace", "heidi")] == []
    assert "| 01_small | `grace` | `heidi` | 1.00 |" in report.with_suffix(".md").read_text()
    assert {oct(p.stat().st_mode & 0o777) for p in (report, report.with_suffix(".md"), gradebook)} == {"0o600"}
    # the gradebook gains one column and nothing else changes: points, statuses, checks, every other cell
    with gradebook.open() as f:
        after = list(csv.DictReader(f))
    with io.StringIO(before) as f:
        original = list(csv.DictReader(f))
    assert [{k: v for k, v in r.items() if k != "similar_to"} for r in after] == original
    flags = {(r["student"], r["exercise"]): r["similar_to"] for r in after}
    assert flags[("grace", "01_small")] == "heidi (1.00)" and flags[("heidi", "01_small")] == "grace (1.00)"
    assert flags[("ivan", "01_small")] == "" and flags[("bob", "01_small")] == ""  # an unanswered exercise is no copy
    assert "published solution (1.00)" in flags[("alice", "01_small")]
    assert [(_row(book, s).status, _row(book, s).points) for s in ("grace", "heidi", "ivan")] == [("graded", 5)] * 3
    # run again: the column is replaced, not added twice
    assert main(["similarity", *args]) == 0
    with gradebook.open() as f:
        assert next(csv.reader(f)).count("similar_to") == 1


# ------------------------------------------------------------------------------------------ units (no notebook runs)
def test_read_submission_reports_what_is_wrong(tmp_path):
    cases = {
        "empty": (b"", "empty"),
        "bad": (b"{", "not valid JSON"),
        "bin": (b"\x89PNG\r\n\x1a\n\xff", "not UTF-8"),
        "list": (b"[1, 2]", "not a Jupyter notebook"),
        "cell": (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"source": "x"}]}', "cell 0"),
    }
    for name, (data, reason) in cases.items():
        (tmp_path / name).write_bytes(data)
        nb, ids, problem = read_submission(tmp_path / name)
        assert nb is None and reason in problem, (name, problem)
    _write(small_solution_01(), tmp_path / "ok.ipynb")
    nb, ids, problem = read_submission(tmp_path / "ok.ipynb")
    assert problem == "" and ids[2] == "ex-1-1-solution"


def test_matching_by_id_by_tag_and_by_alignment(tmp_path):
    solutions = tmp_path / "solutions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    ref = load_references(solutions)["01_small"]
    ex = generate_exercise(small_solution_01())
    answered = _answered(ex, {"ex-1-1-solution": "A = 1", "ex-1-2-solution": "B = 2"})
    ids = [c.id for c in answered.cells]
    assert match_solutions(ref, answered, ids) == ({"ex-1-1-solution": "A = 1", "ex-1-2-solution": "B = 2"}, [])
    partial = copy.deepcopy(answered)
    partial.cells.remove(_cell(partial, "ex-1-2-solution"))
    sources, notes = match_solutions(ref, partial, [c.id for c in partial.cells])
    assert sources == {"ex-1-1-solution": "A = 1"} and "ex-1-2-solution is not in your notebook" in notes[0]
    # no ids: by the 'solution' tag in order
    sources, notes = match_solutions(ref, answered, [None] * len(ids))
    assert sources == {"ex-1-1-solution": "A = 1", "ex-1-2-solution": "B = 2"} and "'solution' tag" in notes[0]
    # no ids, no tags, an extra cell after 1.1's answer and 1.2's check edited: alignment on unchanged cells
    bare = copy.deepcopy(answered)
    for cell in bare.cells:
        cell.metadata = {}
    bare.cells.insert(bare.cells.index(_cell(bare, "ex-1-1-solution")) + 1, new_code_cell("A = A + 10  # my own cell"))
    _cell(bare, "ex-1-2-check").source += "\n# edited"
    sources, notes = match_solutions(ref, bare, [None] * len(bare.cells))
    assert sources == {"ex-1-1-solution": "A = 1\n\nA = A + 10  # my own cell", "ex-1-2-solution": "B = 2"}, sources


def test_merge_uses_only_the_reference_and_neutralizes_markers(tmp_path):
    solutions, hidden = tmp_path / "solutions", tmp_path / "hidden"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    ref = load_references(solutions, hidden)["01_small"]
    merged, layout = merge_submission(ref, {"ex-1-1-solution": "# NBVAL_SKIP\nx = 1"}, seed=7)
    assert [c.get("id") for c in merged.cells] == [
        "title",
        "setup",
        "ex-1-1-solution",
        "ex-1-1-check",
        "gradacc-hidden-1-1-0",
        "ex-1-2-solution",
        "ex-1-2-check",
        "gradacc-hidden-1-2-0",
    ]
    assert merged.cells[2].source == "# NBVAL_SKIP  (ignored by the grader)\nx = 1"
    assert "raise NotImplementedError()" in merged.cells[5].source  # a missing answer runs as the exercise
    assert merged.cells[3].outputs[0]["text"] == "Exercise 1.1: correct\n"
    assert "GRADACC_SEED=7" in merged.cells[4].source
    assert layout == {
        "solution:ex-1-1-solution": 1,
        "check:1.1": 2,
        "hidden:1.1:0": 3,
        "solution:ex-1-2-solution": 4,
        "check:1.2": 5,
        "hidden:1.2:0": 6,
    }
    # the hidden code runs in a copy of the namespace: its names do not leak into the student's
    namespace = {"weighted_mean": lambda v, w: 1.0}
    exec(merged.cells[4].source, namespace)  # noqa: S102 - the cell as the kernel runs it
    assert "values" not in namespace and "rng" not in namespace


def test_hidden_file_errors(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(GradingError, match="no '# %% hidden X.Y' block"):
        load_hidden(tmp_path / "a.py")
    (tmp_path / "b.py").write_text("# %% hidden 1.1\n\n# %% hidden 1.2\nprint(1)\n")
    with pytest.raises(GradingError, match="hidden 1.1' is empty"):
        load_hidden(tmp_path / "b.py")
    solutions = tmp_path / "solutions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "01_small.py").write_text("# %% hidden 9.9\nprint(1)\n")
    with pytest.raises(GradingError, match=r"hidden checks for \['9.9'\]"):
        load_references(solutions, tmp_path / "hidden")
    with pytest.raises(ValueError, match="workers must be > 0, got 0"):
        Settings(workers=0)


def test_discover_refuses_links_without_following_them(tmp_path):
    """Issue 60, without a notebook run: a linked student folder is that student's refused row and is never entered;
    a link inside a folder, to a folder, is refused too; a hard link whose other name is in the class is read."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "01_small.ipynb").write_text("{}")
    subs = tmp_path / "subs"
    (subs / "ann" / "work").mkdir(parents=True)
    (subs / "ann" / "work" / "01_small.ipynb").write_text("{}")
    (subs / "bo").symlink_to(tmp_path / "elsewhere")
    (subs / "cy").mkdir()
    (subs / "cy" / "linked").symlink_to(tmp_path / "elsewhere")
    (subs / "di").mkdir()
    os.link(subs / "ann" / "work" / "01_small.ipynb", subs / "di" / "01_small.ipynb")  # two names, both in the class
    found = {(f.student, f.exercise, f.recognized, f.refused[:20]) for f in discover(subs, ["01_small"])}
    assert found == {
        ("ann", "01_small", True, ""),
        ("bo", "bo", False, "a symbolic link (to "),
        ("cy", "linked", False, "a symbolic link (to "),
        ("di", "01_small", True, ""),
    }


def test_discover_both_layouts(tmp_path):
    (tmp_path / "ann" / "sub" / ".ipynb_checkpoints").mkdir(parents=True)
    (tmp_path / "ann" / "sub" / "01_small.ipynb").write_text("{}")
    (tmp_path / "ann" / "sub" / ".ipynb_checkpoints" / "01_small-checkpoint.ipynb").write_text("{}")
    (tmp_path / "ann" / "02_small-Copy1.ipynb").write_text("{}")
    (tmp_path / "ben__01_small.ipynb").write_text("{}")
    (tmp_path / "cat_1003_5003").mkdir()  # Canvas: a resubmitted file gets "-1" (the second instructor's walk)
    (tmp_path / "cat_1003_5003" / "02_small-1.ipynb").write_text("{}")
    (tmp_path / "loose.ipynb").write_text("{}")
    found = {
        (f.student, f.exercise, f.recognized, f.real_student) for f in discover(tmp_path, ["01_small", "02_small"])
    }
    assert found == {
        ("ann", "01_small", True, True),
        ("ann", "02_small", True, True),
        ("ben", "01_small", True, True),
        ("cat_1003_5003", "02_small", True, True),
        ("", "loose.ipynb", False, False),  # no student's (issue 60)
    }


# The course's real exercises are graded end to end (answered, unanswered, forged wrong answers; every exercise)
# by tests/test_autograders.py, beside nbgrader and Otter.


def test_hidden_outputs_compare_within_the_last_printed_digit():
    assert same_output("loss 0.12344 grads 3/-1.5e-03\n", "loss 0.12345 grads 3/-1.4e-03\n")
    assert not same_output("loss 0.12347\n", "loss 0.12345\n")  # two units off: a different answer
    assert not same_output("count 35\n", "count 36\n")  # integers exactly
    assert not same_output("", "loss 0.12345\n") and not same_output("loss nan\n", "loss 0.12345\n")


def test_the_instructors_guide_documents_every_status_and_the_hidden_format():
    """The instructor's guide (docs/instructors/, the website's pages; in the README until issue 35)."""
    section = "\n".join(p.read_text() for p in sorted((ROOT / "docs" / "instructors").glob("*.md")))
    for status in STATUSES:
        assert f"| `{status}` |" in section, status
    assert "# %% hidden 2.1" in section and "gradacc grade submissions/" in section
    for path in sorted((ROOT / "hidden").glob("*.py")):  # every shipped hidden-checks file fits its reference
        reference = nbformat.read(ROOT / "solutions" / f"{path.stem}.ipynb", as_version=4)
        assert set(load_hidden(path)[1]) <= {str(c["check"]) for c in check_cells(reference)}, path


def test_a_reference_without_stored_check_outputs_is_refused(tmp_path):
    nb = small_solution_01()
    nb.cells[3].outputs = []
    _write(nb, tmp_path / "solutions" / "01_small.ipynb")
    _write(small_solution_02(), tmp_path / "solutions" / "02_small.ipynb")
    with pytest.raises(GradingError, match=r"check cells \['ex-1-1-check'\] have no stored output"):
        load_references(tmp_path / "solutions")
    assert list(load_references(tmp_path / "solutions", exercises=["02_small"])) == ["01_small", "02_small"]


@pytest.mark.notebook
def test_one_assignment_gives_one_row_per_student_by_default(corpus, tmp_path):
    """The README's command for an assignment of 02 only: 3 students, 3 rows (no `missing` 01 rows); --all: 6."""
    solutions, hidden, _ = corpus
    subs = tmp_path / "subs"
    answer = {"ex-2-1-solution": small_solution_02().cells[1].source}
    for student in ("ann", "ben", "cy"):
        _write(_answered(generate_exercise(small_solution_02()), answer), subs / student / "02_small.ipynb")
    said = []
    book = grade(subs, solutions, hidden=hidden, settings=SETTINGS, progress=False, log=said.append)
    assert sorted((r.student, r.exercise, r.status, r.points) for r in book.rows) == [
        (s, "02_small", "graded", 1) for s in ("ann", "ben", "cy")
    ]
    assert "grading the exercises handed in: 02_small (--all grades every exercise)" in said
    every = grade(
        subs, solutions, hidden=hidden, all_exercises=True, settings=SETTINGS, progress=False, log=said.append
    )
    assert sorted((r.student, r.exercise, r.status) for r in every.rows) == sorted(
        [(s, "02_small", "graded") for s in ("ann", "ben", "cy")]
        + [(s, "01_small", "missing") for s in ("ann", "ben", "cy")]
    )


@pytest.mark.notebook
def test_a_bonus_check_counts_on_top_of_the_maximum():
    """Exercise 3.3 is a bonus (metadata gradacc.bonus): 03's maximum is 3.1 + 3.2 + 3.4 + 3.5 = 9 points."""
    ref = load_references(ROOT / "solutions", None, ["03_memory"])["03_memory"]
    assert [(c["check"], c["points"], c["bonus"]) for c in ref.checks] == [
        ("3.1", 1, False), ("3.2", 3, False), ("3.3", 1, True), ("3.4", 3, False), ("3.5", 2, False)
    ]  # fmt: skip
    assert ref.max_points == 9


def test_grade_bench_writes_a_class_to_grade(corpus, tmp_path, capsys):
    """`grade-bench --write-class DIR` writes one folder per student (right, unanswered, wrong in turn) that `grade`
    discovers; it never writes over a class and refuses an empty one."""
    solutions, _hidden, _subs = corpus
    args = ["grade-bench", "--exercise", "02_small", "--reference", str(solutions), "--n", "5", "--write-class"]
    assert main([*args, str(tmp_path / "class")]) == 0
    found = discover(tmp_path / "class", ["02_small"])
    assert [(f.student, f.exercise) for f in found] == [(f"student{i:03d}", "02_small") for i in range(5)]
    answers = [_cell(nbformat.read(f.path, as_version=4), "ex-2-1-solution").source for f in found]
    assert ["return loss / accum_steps" in a for a in answers] == [True, False, False, True, False]
    assert ["raise NotImplementedError()" in a for a in answers] == [False, True, False, False, True]
    assert main([*args, str(tmp_path / "class")]) == 2
    assert "already holds notebooks" in capsys.readouterr().err
    assert main([*args[:-3], "--n", "0", "--write-class", str(tmp_path / "empty")]) == 2
    assert "n=0" in capsys.readouterr().err


def test_a_killed_run_resumes_and_grades_only_what_has_no_row(corpus, tmp_path, capsys):
    """A real `gradacc grade` process, killed (SIGKILL, its whole group) after its journal holds a row; `--resume`
    keeps those rows (same seconds: not graded again) and grades the rest; every student ends with one row. All of
    it in the default sandbox: s1's code sees the file it waits on only because its folder is on the grader's
    PYTHONPATH (shown read-only), and the killed grader's bwrap, runner and kernel all die with it."""
    import signal
    import time

    solutions, _hidden, _subs = corpus
    subs = tmp_path / "subs"
    solution = small_solution_02()
    answer = {c.id: c.source for c in solution.cells if "solution" in c.metadata.get("tags", [])}
    students = [f"s{i}" for i in range(6)]
    hold = tmp_path / "visible" / "hold"  # s1's notebook waits while this file exists: killed in the middle of it
    hold.parent.mkdir()
    hold.touch()
    waiting = {
        k: f"import os, time\nwhile os.path.exists({str(hold)!r}):\n    time.sleep(0.2)\n{v}" for k, v in answer.items()
    }
    for i, student in enumerate(students):
        exercise = generate_exercise(solution)
        _write(
            _answered(exercise, waiting if i == 1 else answer) if i % 2 else exercise, subs / student / "02_small.ipynb"
        )
    out = tmp_path / "book.csv"
    journal = Path(str(out) + ".journal.jsonl")
    args = ["grade", str(subs), "--reference", str(solutions), "--out", str(out), "--exercise", "02_small",
            "--quiet", "--workers", "1", "--seed", "99"]  # fmt: skip
    run = subprocess.Popen(
        [sys.executable, "-m", "gradacc.cli", *args],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(hold.parent)},
    )
    try:
        for _poll in range(1200):  # up to about 4 minutes: the seed and one row, and s1's kernel waiting on `hold`
            if journal.exists() and len(journal.read_text().splitlines()) >= 2:
                family = psutil.Process(run.pid).children(recursive=True)  # bwrap, its nbval runner and kernel
                with contextlib.suppress(psutil.Error):  # one may be between fork and exec, or gone
                    commands = [p.cmdline() for p in family]
                    if any(c[:1] == [shutil.which("bwrap")] for c in commands) and any(
                        "ipykernel_launcher" in c for c in commands
                    ):
                        break
            if run.poll() is not None:
                pytest.fail(f"the run ended before its first row: {run.stderr.read()[-2000:]}")
            time.sleep(0.2)
        else:
            pytest.fail("no row in the journal and s1's sandboxed kernel after 1200 polls")
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the grader's own group: its runners have sessions of their own
        run.wait()
    _, alive = psutil.wait_procs(family, timeout=30)  # s1's bwrap, runner and kernel, waiting on `hold`
    assert alive == [], f"a killed grader left {alive} running"  # bwrap --die-with-parent, then the pid namespace
    hold.unlink()
    assert not out.exists()  # killed before it could write the gradebook
    seed, before = read_journal(journal)
    assert seed == 99 and [r.student for r in before] == ["s0"]
    assert main([*args[:-2], "--seed", "7", "--resume"]) == 2  # another seed would mix two sets of hidden inputs
    assert "was graded with seed 99, not --seed 7" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0  # --quiet still says what the journal kept
    printed = capsys.readouterr()
    assert f"resuming: {len(before)} notebooks already graded in {journal}, {len(students) - len(before)} to grade" in (
        printed.err
    )
    with out.open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == students and all(r["status"] == "graded" for r in rows.values())
    assert all(r["sandbox"].startswith("bubblewrap ") for r in rows.values()), rows
    assert [rows[s]["points"] for s in students] == ["0", "1"] * 3
    _, after = read_journal(journal)
    assert sorted(r.student for r in after) == students  # every row once: s0, kept from the killed run, not regraded
    assert after[0] == before[0]


# ---------------------------------------------------------------- nothing lost under load (issue 29)

_DIE_ONCE = """import os
marker = os.environ.get("GRADACC_TEST_KERNEL_DIES_ONCE")
if marker and "JPY_PARENT_PID" in os.environ:  # a Jupyter kernel, started by jupyter_client (nbval)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass
    else:
        os._exit(1)  # the first kernel dies on start-up, before kernel_info: what a loaded machine did
"""


@pytest.mark.parametrize("exercise", ["01_small", "02_small"])
def test_a_kernel_that_dies_on_start_up_is_started_again(tmp_path, monkeypatch, exercise):
    """01_small has hidden checks: the first kernel is a calibration run of the reference (retried with twice the
    limits). 02_small has none: the first kernel is the student's (started again once, noted in the row).

    Unsandboxed (``--sandbox none``): the injected fault needs a file shared by two runs, which the sandbox forbids."""
    solutions, hidden, subs = tmp_path / "solutions", tmp_path / "hidden", tmp_path / "subs"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    _write(small_solution_02(), solutions / "02_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    reference = small_solution_01() if exercise == "01_small" else small_solution_02()
    answers = {c.id: c.source for c in reference.cells if "solution" in c.metadata.get("tags", [])}
    _write(_answered(generate_exercise(reference), answers), subs / "alice" / f"{exercise}.ipynb")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_DIE_ONCE)
    marker = tmp_path / "a-kernel-died"
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("GRADACC_TEST_KERNEL_DIES_ONCE", str(marker))
    logged = []
    unsandboxed = dataclasses.replace(SETTINGS, sandbox="none")
    book = grade(subs, solutions, hidden=hidden, settings=unsandboxed, progress=False, log=logged.append)
    assert marker.exists(), "no kernel died: the fault was not injected"
    (row,) = book.rows
    print(f"{exercise}: {row.status} {row.points}/{row.max_points}; {row.message}; log {logged}")
    assert (row.status, row.points, row.sandbox.split("; ")[0]) == ("graded", row.max_points, "none")
    assert any(line.startswith("warning: --sandbox none: each student's code runs as your user") for line in logged)
    if exercise == "01_small":
        assert any("trying once more with twice the time limits" in line for line in logged)
    else:
        assert "the kernel died before the first cell" in row.message


def test_a_reference_that_cannot_run_leaves_ungraded_rows_that_resume_grades(tmp_path, capsys):
    """The reference of 01_small is made slow (its answer to 1.1 sleeps past twice the cell timeout): calibration fails,
    then fails again with twice the limits; every submission of 01_small gets an ``ungraded`` row with the reason, the
    other exercise is graded, the exit code is 3. With the reference repaired, ``--resume`` grades only the ungraded
    ones, with the same seed: a full gradebook."""
    solutions, hidden, subs = tmp_path / "solutions", tmp_path / "hidden", tmp_path / "subs"
    slow = small_solution_01()
    slow.cells[2].source = "import time\n\ntime.sleep(6)  # past 2 x --cell-timeout 2\n" + WEIGHTED
    _write(slow, solutions / "01_small.ipynb")
    _write(small_solution_02(), solutions / "02_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    ex1 = generate_exercise(small_solution_01())
    right = {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": ACCUMULATED}
    for student in ("ann", "ben", "cy"):
        _write(_answered(ex1, right) if student != "cy" else ex1, subs / student / "01_small.ipynb")
    _write(_answered(generate_exercise(small_solution_02()), {"ex-2-1-solution": small_solution_02().cells[1].source}),
           subs / "ann" / "02_small.ipynb")  # fmt: skip
    out = tmp_path / "book.csv"
    args = ["grade", str(subs), "--reference", str(solutions), "--hidden", str(hidden), "--out", str(out), "--quiet",
            "--workers", "2", "--seed", "5", "--timeout", "60", "--cell-timeout", "2"]  # fmt: skip
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "trying once more with twice the time limits" in err and "run the same command again with --resume" in err
    with out.open() as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert [(k, rows[k]["status"]) for k in sorted(rows)] == [
        (("ann", "01_small"), "ungraded"),
        (("ann", "02_small"), "graded"),
        (("ben", "01_small"), "ungraded"),
        (("ben", "02_small"), "missing"),
        (("cy", "01_small"), "ungraded"),
        (("cy", "02_small"), "missing"),
    ]
    assert all("could not run under the grader" in rows[(s, "01_small")]["message"] for s in ("ann", "ben", "cy"))
    assert rows[("ann", "02_small")]["points"] == "1"
    _, journaled = read_journal(Path(str(out) + ".journal.jsonl"))
    assert [(r.student, r.exercise) for r in journaled] == [("ann", "02_small")]  # ungraded rows wait for --resume

    _write(small_solution_01(), solutions / "01_small.ipynb")  # the machine is quiet again
    assert main([*args, "--resume"]) == 0
    with out.open() as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert [(k, rows[k]["status"], rows[k]["points"]) for k in sorted(rows)] == [
        (("ann", "01_small"), "graded", "5"),
        (("ann", "02_small"), "graded", "1"),
        (("ben", "01_small"), "graded", "5"),
        (("ben", "02_small"), "missing", "0"),
        (("cy", "01_small"), "graded", "0"),
        (("cy", "02_small"), "missing", "0"),
    ]


@pytest.mark.notebook
def test_a_pt_br_submission_gets_the_english_points_and_portuguese_feedback(tmp_path, capsys):
    """Issue 46: a class of the same answers handed in as English and as pt-BR notebooks (``exercises/01_theory`` and
    ``pt-BR/exercises/01_theory``: right, wrong at 1.1, unanswered) in ONE grade() with the hidden checks: each pt-BR
    row gets its English twin's points, check by check and hidden check by hidden check; its feedback, the student's
    file, the learner's progress lines and GitHub Classroom's step lines are in Portuguese; the instructor's message
    and hidden columns stay English. 8 notebook runs (2 calibrate the hidden checks)."""
    from gradacc.grading.classroom import check_points
    from gradacc.grading.progress import ExerciseProgress, Progress, _next_step

    def cells(path: Path) -> dict[str, str]:
        return {c.id: c.source for c in nbformat.read(path, as_version=4).cells if c.get("id")}

    wrong_11 = "def combine_means(means, counts):\n    return sum(means) / len(means)\n"  # the mean of the means
    for edition, stem in (("en", ""), ("pt", "pt-BR/")):
        right = {k: v for k, v in cells(ROOT / f"{stem}solutions/01_theory.ipynb").items() if k.endswith("-solution")}
        exercise = nbformat.read(ROOT / f"{stem}exercises/01_theory.ipynb", as_version=4)
        answers = {"right": right, "wrong": {**right, "ex-1-1-solution": wrong_11}, "unanswered": {}}
        for kind, answer in answers.items():
            _write(_answered(exercise, answer), tmp_path / "class" / f"{kind}_{edition}" / "01_theory.ipynb")
    settings = dataclasses.replace(SETTINGS, timeout=300, cell_timeout=120)
    book = grade(tmp_path / "class", ROOT / "solutions", hidden=ROOT / "hidden", settings=settings, progress=False,
                 log=lambda _: None)  # fmt: skip
    rows = {r.student: r for r in book.rows}
    for kind, points in (("right", 5), ("wrong", 3), ("unanswered", 0)):
        en, pt = rows[f"{kind}_en"], rows[f"{kind}_pt"]
        print(f"{kind}: English {en.points} {en.checks} {en.hidden}; pt-BR {pt.points} {pt.checks} {pt.hidden}")
        assert (en.status, en.points, en.language, pt.language) == ("graded", points, "en", "pt_BR"), (en, pt)
        assert (pt.status, pt.points, pt.checks, pt.hidden) == (en.status, en.points, en.checks, en.hidden)
        assert en.feedback[0].startswith("Exercise 1.1 (") and pt.feedback[0].startswith("Exercício 1.1 (")
    wrong, unanswered = rows["wrong_pt"], rows["unanswered_pt"]
    hint = " ".join(lookup("mean-of-means").hint("pt_BR").split())  # issue 53: the visible check named it
    assert hint.startswith("Isto parece um equívoco conhecido: uma média das médias dos microlotes.")
    assert wrong.feedback == [
        "Exercício 1.1 (0 / 2 pontos): falhou: `Exercício 1.1: incorreto - combine_means([2.0, 4.0], [10, 30]) = 3, "
        "esperado 3.5 (tolerância 1e-09) (pondere cada média pela sua contagem: 10 itens de 2.0 e 30 de 4.0)`",
        hint.replace("_", "\\_"),
        "Exercício 1.2 (3 pontos): passou",
    ]
    assert rows["wrong_en"].feedback[1] == " ".join(lookup("mean-of-means").hint("en").split()).replace("_", "\\_")
    assert {k: r.misconceptions for k, r in rows.items()} == {
        **{k: {} for k in rows},
        "wrong_en": {"1.1": "mean-of-means"},
        "wrong_pt": {"1.1": "mean-of-means"},
    }
    assert rows["wrong_en"].message.startswith("1.1: Exercise 1.1: incorrect - combine_means([2.0, 4.0], [10, 30])")
    assert wrong.message.startswith("1.1: Exercício 1.1: incorreto - ")  # the student's own line, as printed
    assert unanswered.hidden == dict.fromkeys(["1.1", "1.2"], "your code raised NotImplementedError")
    assert "ainda sem resposta" in unanswered.feedback[0]

    book.write_feedback(tmp_path / "feedback")
    text = (tmp_path / "feedback" / "wrong_pt.md").read_text(encoding="utf-8")
    course = "Curso: Acúmulo de gradientes, dos primeiros princípios a quatro frameworks. Exercícios: 01\\_theory."
    assert text.startswith(f"# Feedback: wrong\\_pt\n\n{course} Corrigido em {book.graded_on}; versão do curso ")
    assert "\n\n| exercício | pontos | situação |\n|---|---|---|\n" in text
    assert "| 01\\_theory | 3 / 5 | corrigido |" in text and "## 01\\_theory: 3 / 5 pontos (corrigido)" in text
    assert "| exercise | points | status |" in (tmp_path / "feedback" / "wrong_en.md").read_text(encoding="utf-8")

    judged = [ExerciseProgress("01_theory", Path(r.file), r.status, r.points, r.max_points, r.checks, [], "")
              for r in (wrong, unanswered)]  # fmt: skip
    assert _next_step(wrong, "pt_BR").startswith("exercício 1.1: incorreto - combine_means(")
    assert _next_step(rows["right_pt"], "pt_BR") == "pronto: todas as verificações passaram"
    table = Progress(tmp_path, judged, ["02_pytorch"], language="pt_BR").table().splitlines()
    assert table[0].split("  ")[:2] == ["exercício", "verificações aprovadas"]
    assert table[-2:] == ["total: 3 / 10 pontos em 2 exercícios", f"ausentes de {tmp_path}: 02_pytorch"]

    book.write_csv(tmp_path / "gradebook.csv")  # the class view: 2 of the 6 students hold mean-of-means at 1.1
    capsys.readouterr()
    assert main(["misconceptions", str(tmp_path / "gradebook.csv"), "--out", str(tmp_path / "view")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [
        "| check | misconception | students | of graded |",
        "|---|---|---|---|",
        "| 1.1 | a mean of micro-batch means (`mean-of-means`) | 2 | 6 |",
    ], printed
    with (tmp_path / "view" / "misconceptions.csv").open(encoding="utf-8") as f:
        assert list(csv.reader(f)) == [
            ["check", "misconception", "name", "students", "graded"],
            ["1.1", "mean-of-means", "a mean of micro-batch means", "2", "6"],
        ]
    assert (tmp_path / "view" / "misconceptions.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    one = dataclasses.replace(book, rows=[wrong])
    one.write_csv(tmp_path / "wrong_pt.csv")  # GitHub Classroom's gradebook of one student: its columns unchanged
    with (tmp_path / "wrong_pt.csv").open(encoding="utf-8") as f:
        assert next(csv.reader(f))[:6] == ["student", "exercise", "points", "max_points", "status", "message"]
    assert check_points(tmp_path / "wrong_pt.csv", "1.2") == (3.0, wrong.message)
    capsys.readouterr()
    assert main(["classroom", "points", str(tmp_path / "wrong_pt.csv"), "1.1", "2"]) == 1
    assert capsys.readouterr().out.startswith("Exercício 1.1: 0 de 2 pontos - 1.1: Exercício 1.1: incorreto - ")


def test_a_hard_linked_copy_of_the_class_is_refused_loudly_never_silently(corpus, tmp_path, capsys):
    """Issue 60 follow-up: the instructor's own backup `cp -al submissions ../submissions.bak` made every file a hard
    link to a file outside the class; the whole class became refused-file 0/N, `--quiet` printed nothing and the exit
    code was 0. Now a warning (with --quiet) names the count and the fix, the exit code is 4 (0 with --allow-refused),
    and export leaves those cells blank with a warning of their own. No notebook runs (a refused file is never read)."""
    solutions, _, _ = corpus
    subs = tmp_path / "submissions"
    for student in ("yan", "zoe"):
        _write(generate_exercise(small_solution_02()), subs / student / "02_small.ipynb")
    shutil.copytree(subs, tmp_path / "submissions.bak", copy_function=os.link)  # what `cp -al` makes
    out = tmp_path / "gradebook.csv"
    args = ["grade", str(subs), "--reference", str(solutions), "--out", str(out), "--quiet", "--seed", "1"]
    capsys.readouterr()
    assert main(args) == 4
    said = capsys.readouterr()
    assert said.out == ""
    assert "warning: 2 submissions of 2 students were refused (refused-file" in said.err, said.err
    assert "2 of them are hard links to a file outside the class" in said.err and "cp -al" in said.err
    assert "cp -a (no -l)" in said.err and "pass --allow-refused to exit 0" in said.err
    assert main([*args, "--allow-refused"]) == 0
    said = capsys.readouterr().err
    assert "2 submissions of 2 students were refused" in said and "--allow-refused" not in said
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nYan\nZoe\n", encoding="utf-8")
    lms = tmp_path / "lms.csv"
    assert main(["export", str(out), "--roster", str(roster), "--format", "csv", "--out", str(lms)]) == 1
    err = capsys.readouterr().err
    assert "2 gradebook students handed in a file the grader refused" in err and "yan (02_small)" in err
    assert "could not be graded" not in err  # one warning, the refused one
    assert lms.read_text().splitlines()[1:] == ["Yan,,,,", "Zoe,,,,"]  # blank, never 0
    shutil.rmtree(tmp_path / "submissions.bak")  # the fix: no hard-linked copy left, the same class grades
    assert main(args) == 0
    with out.open() as f:
        assert [(r["student"], r["status"]) for r in csv.DictReader(f)] == [("yan", "graded"), ("zoe", "graded")]
