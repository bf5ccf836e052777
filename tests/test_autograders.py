"""Issue 33: every exercise as an nbgrader assignment and as an Otter-Grader (Gradescope) assignment
(``gradacc export-assignments``), graded by the real nbgrader 0.9.6 and otter-grader 7.0.0.

The tools live in a cached environment of their own (``throwaway.tools_venv``) that sees the course's .venv: they
resolve together with every pin of requirements.txt (``pip install --dry-run``: 24 new packages, none of the pins
moved), but in the .venv nbgrader would add its server and JupyterLab extensions to every learner's ``make lab``.

One module fixture builds everything once (one xdist group): both exports, nbgrader's release, Otter's assign
output, and two to four submissions of every exercise (``kinds_of``), written once and graded by all three graders at
the same time (three threads): ``nbgrader autograde`` (one call for all), Otter's ``otter run`` (its function, once per
submission, in one process) and ``gradacc grade`` (one call for all, on the nbgrader files themselves: it grades them
by cell id). The submissions:

* ``reference``: the reference solution's answer cells: full points. Graded only where the two wrong answers below
  leave a check that keeps its points in neither (``needs_reference``: 08, whose 8.3 needs 8.2 right); elsewhere
  every check is right in one of them and keeps its points there, the path the reference would show (and
  ``gradacc grade`` runs each reference twice to calibrate its hidden checks; a fully correct row without flags is
  ``tests/test_grading.py::test_correct_submission_gets_full_points_in_the_same_run``). Asserted for every exercise:
  ``test_every_check_is_shown_losing_and_keeping_its_points_in_every_grader``. Suite cost: the other ten took 30
  notebook runs (about 250 s of CPU);
* ``unanswered``: the release as handed out: 0, for ``UNANSWERED`` only (01 and 08, the two cheapest runs). An
  unanswered answer cell raises ``NotImplementedError``, every check of it then fails the way a wrong answer's does in
  each tool; every exercise's unanswered release is run by ``tests/test_notebooks.py`` (it fails exactly at its
  checks). Suite cost: the other nine cost 27 notebook runs (about 300 s of CPU) for no new path;
* ``wrong1``, ``wrong2``: the first mistake of ``tests/wrong_answers/`` for every other check (1st, 3rd, ... and 2nd,
  4th, ...), each with the check function rebound to print ``Exercise X.Y: correct`` (the forged verdict of the
  README) where the check has hidden checks: the visible check passes, so only the hidden test can take the check's
  points, on every check that has one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, record_measurement
from throwaway import tools_venv

from gradacc.cli import main
from gradacc.grading import Settings, grade, load_references
from gradacc.grading.autograders import NOT_FOR_GRADING, _pinned_name, export_assignments, otter_question
from gradacc.grading.external import nbgrader_autograde, nbgrader_release
from gradacc.grading.hiddentest import HiddenCheckFailed, hidden_check

TOOLS = ["nbgrader==0.9.6", "otter-grader==7.0.0"]
REFS = load_references(ROOT / "solutions", ROOT / "hidden")
STEMS = sorted(REFS)
KINDS = ("reference", "unanswered", "wrong1", "wrong2")
UNANSWERED = ("01_theory", "08_pitfalls")
"""The exercises whose unanswered release the three graders grade (see the module docstring)."""


def kinds_of(stem: str) -> tuple[str, ...]:
    """The submissions of ``stem`` the graders grade: ``reference`` only where ``wrong1`` and ``wrong2`` leave a check
    that keeps its points in neither (``needs_reference``), ``unanswered`` only for ``UNANSWERED``."""
    return tuple(
        kind
        for kind in KINDS
        if (kind != "reference" or needs_reference(stem)) and (kind != "unanswered" or stem in UNANSWERED)
    )


_MISTAKE = re.compile(r"^# %% (\d+\.\d+) (.+)$", re.MULTILINE)


# ------------------------------------------------------------------------------------------------------ submissions
def _answer_cells(stem: str) -> dict[str, str]:
    """check -> the id of the answer cell it checks (the last answer cell before it: 7.3 checks 7.2's)."""
    ref, owner, last = REFS[stem], {}, None
    for cell in ref.notebook.cells:
        if cell.get("id") in ref.solution_ids:
            last = cell.id
        if "check" in cell.metadata.get("tags", []):
            owner[str(cell.metadata.gradacc.check)] = last
    return owner


def _first_mistakes(stem: str) -> dict[str, str]:
    """check -> the first mistake for it in tests/wrong_answers/NN_topic.py (the solution cell a learner would write)."""
    text = (ROOT / "tests" / "wrong_answers" / f"{stem}.py").read_text(encoding="utf-8")
    found, matches = {}, list(_MISTAKE.finditer(text))
    for match, end in zip(matches, [m.start() for m in matches[1:]] + [len(text)], strict=True):
        found.setdefault(match[1], text[match.end() : end].strip("\n") + "\n")
    return found


def submission_answers(stem: str) -> dict[str, tuple[dict[str, str], list[str]]]:
    """kind -> (answer cell id -> source, the checks it targets) for the four submissions of ``stem``."""
    ref = REFS[stem]
    reference = {c.id: c.source for c in ref.notebook.cells if c.get("id") in ref.solution_ids}
    owner, mistakes = _answer_cells(stem), _first_mistakes(stem)
    calls = {str(c["check"]): ref.notebook.cells[c["index"]].source for c in ref.checks}
    kinds = {"reference": (reference, []), "unanswered": (dict(ref.stubs), [])}
    checks = list(owner)
    for k, kind in enumerate(("wrong1", "wrong2")):
        answers, targets = dict(reference), []
        for check in checks[k::2]:
            if any(owner[t] == owner[check] for t in targets):
                continue  # one mistake per answer cell
            name = re.match(r"\s*(\w+)\(", calls[check]).group(1)
            forged = f"\n\n{name} = lambda *args: print('Exercise {check}: correct')  # the forged verdict\n"
            answers[owner[check]] = mistakes[check] + (forged if check in ref.hidden else "")
            targets.append(check)
        kinds[kind] = (answers, targets)
    return kinds


REQUIRES = {"8.3": ["8.2"]}
"""Checks whose visible check needs another check of the same answer right (check_grad_cache_memory's docstring:
"Passing needs a correct gradient (as in 8.2)"): a mistake aimed at 8.2 loses 8.3 too."""


def expected_points(stem: str, kind: str) -> dict[str, float]:
    """check -> the points the submission must get in every grader: none for a check it targets (or one the targeted
    check is required by), the check's points otherwise."""
    ref, (_, targets) = REFS[stem], submission_answers(stem)[kind]
    lost = {str(c["check"]) for c in ref.checks if kind == "unanswered" or str(c["check"]) in targets}
    lost |= {str(c["check"]) for c in ref.checks if set(REQUIRES.get(str(c["check"]), [])) & lost}
    return {str(c["check"]): 0 if str(c["check"]) in lost else c["points"] for c in ref.checks}


def needs_reference(stem: str) -> bool:
    """Whether grading the reference shows what ``wrong1`` and ``wrong2`` do not: a check that keeps its full points in
    neither. Each check is targeted by at most one of them and is right in the other, so both together show every
    check give a correct answer its points and take them from a mistake, in every grader; the exception is a check
    that needs another one right (``REQUIRES``: 8.3 after 8.2), which loses with it."""
    full = {str(c["check"]): c["points"] for c in REFS[stem].checks}
    kept = {
        check for kind in ("wrong1", "wrong2") for check, p in expected_points(stem, kind).items() if p == full[check]
    }
    return kept != set(full)


def _filled(notebook: Path, answers: dict[str, str], out: Path) -> Path:
    nb = nbformat.read(notebook, as_version=4)
    assert {c.get("id") for c in nb.cells} >= set(answers), f"{notebook} lost answer cell ids"
    for cell in nb.cells:
        if cell.get("id") in answers:
            cell.source = answers[cell.id]
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


# ---------------------------------------------------------------------------------------------------------- the run
def _python(venv: Path) -> str:
    return str(venv / "bin" / "python")


_OTTER_ASSIGN = """
import json, sys
from otter.assign import main  # what `otter assign --no-run-tests MASTER RESULT` calls

for master, result in json.loads(sys.argv[1]):
    main(master, result, no_run_tests=True)
"""


def _otter_assign(venv: Path, masters: list[Path]) -> None:
    """``otter assign --no-run-tests NN_topic.ipynb dist`` for each master notebook (into ``dist/`` beside it), in one
    Python process (Otter's imports take about 5 s of CPU per process). ``--no-run-tests``: the graded submissions
    show each check right and wrong (``kinds_of``)."""
    jobs = [[str(master), str(master.parent / "dist")] for master in masters]
    proc = subprocess.run(
        [_python(venv), "-c", _OTTER_ASSIGN, json.dumps(jobs)], capture_output=True, text=True, timeout=900, check=False
    )
    assert proc.returncode == 0, f"otter assign failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


_OTTER_RUN = """
import json, sys
from otter.run import main  # what `otter run -a AUTOGRADER -o OUT SUBMISSION` calls: the autograder run locally

for autograder, submission, out in json.loads(sys.argv[1]):
    main(submission, autograder=autograder, output_dir=out, no_logo=True)
"""


def _otter_run(venv: Path, jobs: list[tuple[Path, Path, Path]]) -> dict[Path, dict[str, float]]:
    """Otter's autograder run locally (no Docker) on each ``(autograder zip, submission, output folder)``, in one
    Python process (``otter run`` starts one per submission: 2-3 s of imports each); output folder -> question ->
    points from its ``results.json``."""
    for _, _, out in jobs:
        out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [_python(venv), "-c", _OTTER_RUN, json.dumps([[str(p) for p in job] for job in jobs])],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, f"otter run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    scores = {}
    for _, _, out in jobs:
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        scores[out] = {t["name"]: t["score"] for t in results["tests"] if "score" in t}
    return scores


GRADING_ENV = {
    # one torch/BLAS thread per kernel, as `gradacc grade --workers 2` gives its kernels on 2 cores: three graders share
    # the cores, and idle threads spin-waiting on a busy machine only burn CPU time
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""Exercise 06 compiles the same XLA programs in every kernel: nbgrader's and Otter's kernels share them through the
session's JAX compilation cache (tests/conftest.py); ``gradacc grade``'s run sandboxed, without it."""


@contextlib.contextmanager
def _environment(**values: str):
    """``os.environ`` with ``values`` while the block runs (the graders' processes and kernels inherit it)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.update({name: value})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Everything built and graded once; returns a dict of paths and the three graders' points."""
    tmp = tmp_path_factory.mktemp("autograders")
    times: dict[str, float] = {}
    start = time.perf_counter()
    venv = tools_venv("autograders", TOOLS)
    times["tools environment"] = time.perf_counter() - start

    start = time.perf_counter()
    course, otter = tmp / "nbgrader", tmp / "otter"
    export_assignments(ROOT / "solutions", course, "nbgrader", hidden=ROOT / "hidden")
    export_assignments(ROOT / "solutions", otter, "otter", hidden=ROOT / "hidden")
    release = nbgrader_release(course, python=_python(venv))
    _otter_assign(venv, [otter / stem / f"{stem}.ipynb" for stem in STEMS])
    times["export, nbgrader generate_assignment, otter assign"] = time.perf_counter() - start

    nbgrader_files: dict[str, dict[str, Path]] = {kind: {} for kind in KINDS}
    otter_files: dict[tuple[str, str], Path] = {}
    for stem in STEMS:
        for kind, (answers, _) in submission_answers(stem).items():
            if kind not in kinds_of(stem):
                continue
            name = f"{stem}.ipynb"
            nbgrader_files[kind][stem] = _filled(release / stem / name, answers, tmp / "submissions" / kind / name)
            student = otter / stem / "dist" / "student" / name
            otter_files[stem, kind] = _filled(student, answers, tmp / "otter-submissions" / kind / stem / name)

    def run_nbgrader():
        t = time.perf_counter()
        scores = nbgrader_autograde(course, nbgrader_files, python=_python(venv))
        return scores, time.perf_counter() - t

    def run_otter():
        t, jobs = time.perf_counter(), {}
        for (stem, kind), path in otter_files.items():
            (autograder,) = (otter / stem / "dist" / "autograder").glob("*.zip")
            jobs[stem, kind] = (autograder, path, tmp / "otter-results" / stem / kind)
        scores = _otter_run(venv, list(jobs.values()))
        return {key: scores[job[2]] for key, job in jobs.items()}, time.perf_counter() - t

    def run_gradacc():
        t = time.perf_counter()
        book = grade(
            tmp / "submissions",
            ROOT / "solutions",
            hidden=ROOT / "hidden",
            all_exercises=True,
            settings=Settings(workers=2, timeout=900, cell_timeout=600),
            progress=False,
            log=lambda _: None,
        )
        return book, time.perf_counter() - t

    with _environment(**GRADING_ENV), ThreadPoolExecutor(3) as pool:
        jobs = {name: pool.submit(fn) for name, fn in [("nbgrader autograde", run_nbgrader),
                ("otter run", run_otter), ("gradacc grade", run_gradacc)]}  # fmt: skip
        results = {name: job.result() for name, job in jobs.items()}
    for name, (_, seconds) in results.items():
        times[f"{name} ({sum(map(len, map(kinds_of, STEMS)))} notebooks, in parallel with the others)"] = seconds
    for name, seconds in times.items():
        line = f"autograders: {name}: {seconds:.0f} s"
        print(line)
        record_measurement(line)
    return {
        "course": course,
        "otter": otter,
        "nbgrader": results["nbgrader autograde"][0],
        "otter_scores": results["otter run"][0],
        "gradacc": results["gradacc grade"][0],
    }


def nbgrader_points(graded, stem: str, kind: str) -> dict[str, float]:
    cells = graded["nbgrader"][stem][kind]["cells"]
    return {str(c["check"]): cells[c["id"]] for c in REFS[stem].checks}


def otter_points(graded, stem: str, kind: str) -> dict[str, float]:
    scores = graded["otter_scores"][stem, kind]
    return {str(c["check"]): scores[otter_question(str(c["check"]))] for c in REFS[stem].checks}


def gradacc_points(graded, stem: str, kind: str) -> dict[str, float]:
    row = graded["gradacc"].row(kind, stem)
    assert row.status == "graded", row
    return dict(row.checks)


GRADERS = (gradacc_points, nbgrader_points, otter_points)


# ------------------------------------------------------------------------------------------------------------ tests
# one worker builds and grades everything once (the module fixture; what it costs: tests/README.md)
pytestmark = [pytest.mark.xdist_group("autograders"), pytest.mark.timeout(3000)]


@pytest.mark.slow
def test_the_nbgrader_release_holds_no_solution_and_no_hidden_test(graded):
    """The release is the exercise as handed out: its code cells are exercises/'s (whose answers are stubs,
    tests/test_generate.py), with nbgrader's metadata, and nothing of a hidden test is in it."""
    for stem in STEMS:
        ref = REFS[stem]
        text = (graded["course"] / "release" / stem / f"{stem}.ipynb").read_text(encoding="utf-8")
        release = nbformat.reads(text, as_version=4)
        exercise = nbformat.read(ROOT / "exercises" / f"{stem}.ipynb", as_version=4)
        assert [c.source for c in release.cells if c.cell_type == "code"] == [
            c.source for c in exercise.cells if c.cell_type == "code"
        ], stem
        assert all("nbgrader" in c.metadata for c in release.cells)
        answers = {c.id: c for c in release.cells if c.get("id") in ref.solution_ids}
        assert sorted(answers) == sorted(ref.solution_ids) and all(
            c.metadata.nbgrader.solution for c in answers.values()
        )
        assert all(answers[c.id].source != c.source for c in ref.notebook.cells if c.get("id") in answers)
        for marker in ("hidden_check", "HIDDEN TESTS", "GRADACC_SEED", "BEGIN SOLUTION"):
            assert marker not in text, f"{stem}: the release holds {marker!r}"
        for blocks in ref.hidden.values():
            for block in blocks:
                assert block.strip().splitlines()[0] not in text, f"{stem}: a hidden block's first line is released"


@pytest.mark.slow
def test_otter_student_notebook_holds_no_hidden_test_and_the_zip_installs_the_course(graded):
    """The student's notebook: answers replaced by Otter's ``...``, the public tests only; the autograder zip: one test
    file per check (its points, all or nothing) with one hidden test per hidden block, and an environment with torch's
    CPU build and the course."""
    for stem in STEMS:
        ref = REFS[stem]
        student = graded["otter"] / stem / "dist" / "student" / f"{stem}.ipynb"
        text = student.read_text(encoding="utf-8")
        assert "hidden_check" not in text and "GRADACC_SEED" not in text, stem
        notebook = nbformat.reads(text, as_version=4)
        answers = {c.id: c.source for c in notebook.cells if c.get("id") in ref.solution_ids}
        assert sorted(answers) == sorted(ref.solution_ids), stem  # Otter's "..." in place of each answer
        assert all(
            answers[c.id] != c.source and "..." in answers[c.id] for c in ref.notebook.cells if c.get("id") in answers
        )
        tests = notebook.metadata.otter.tests
        assert sorted(tests) == sorted(otter_question(str(c["check"])) for c in ref.checks), stem
        for test in tests.values():  # the student's copy: the public test only, the visible check's line
            (case,) = test["suites"][0]["cases"]
            assert not case["hidden"] and re.search(r"Exercise \d+\.\d+: correct", case["code"]), case
        (autograder,) = (graded["otter"] / stem / "dist" / "autograder").glob("*.zip")
        with zipfile.ZipFile(autograder) as zf:
            environment = zf.read("environment.yml").decode()
            for check in ref.checks:
                scope: dict = {}
                exec(zf.read(f"tests/{otter_question(str(check['check']))}.py").decode(), scope)
                cases = scope["test"]["suites"][0]["cases"]
                assert scope["test"]["points"] == check["points"] and scope["test"]["all_or_nothing"] is True
                hidden = [c for c in cases if c["hidden"]]
                assert len(hidden) == len(ref.hidden.get(str(check["check"]), [])), (stem, check["check"])
                assert all("hidden_check(globals()" in c["code"] for c in hidden)
                assert sum(c["points"] for c in cases) == pytest.approx(check["points"])
        assert "--extra-index-url https://download.pytorch.org/whl/cpu" in environment
        assert re.search(r"- torch==[\d.]+\+cpu\n", environment)
        assert "- gradacc[libs] @ https://github.com/" in environment


def _check_scores(points_of, graded) -> None:
    wrong = []
    for stem in STEMS:
        for kind in kinds_of(stem):
            got, want = points_of(graded, stem, kind), expected_points(stem, kind)
            if got != want:
                wrong.append(f"{stem} {kind}: {got}, expected {want}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_nbgrader_autograde_scores_from_its_gradebook(graded):
    """Read from nbgrader's gradebook.db: the unanswered release gets 0, each forged wrong answer exactly the points of
    the checks it does not target (its hidden test took the targeted ones), the reference (where graded) full points;
    every submission's total is the sum of its checks' points, out of the exercise's."""
    _check_scores(nbgrader_points, graded)
    for stem in STEMS:
        for kind in kinds_of(stem):
            got = graded["nbgrader"][stem][kind]
            assert got["max_score"] == sum(c["points"] for c in REFS[stem].checks), (stem, kind)
            assert got["score"] == sum(expected_points(stem, kind).values()), (stem, kind)


@pytest.mark.slow
def test_otter_run_scores(graded):
    _check_scores(otter_points, graded)


@pytest.mark.slow
def test_the_three_graders_give_the_same_points(graded):
    """One table: points per exercise and submission in gradacc grade, nbgrader and Otter; asserted per check."""
    header = f"{'exercise':<16}{'submission':<12}{'targets':<18}{'gradacc':>9}{'nbgrader':>10}{'otter':>7}"
    lines, differ = [header, "-" * len(header)], []
    for stem in STEMS:
        kinds = submission_answers(stem)
        for kind in kinds_of(stem):
            row = [sum(f(graded, stem, kind).values()) for f in GRADERS]
            targets = ",".join(kinds[kind][1]) or "-"
            lines.append(f"{stem:<16}{kind:<12}{targets:<18}{row[0]:>9g}{row[1]:>10g}{row[2]:>7g}")
            per_check = [{c: float(p) for c, p in f(graded, stem, kind).items()} for f in GRADERS]
            if any(points != per_check[0] for points in per_check):
                differ.append((stem, kind, per_check))
    print("\n".join(lines))
    record_measurement("autograders: points per exercise\n" + "\n".join(lines))
    assert not differ, differ


@pytest.mark.slow
def test_gradacc_grade_says_why_the_points_were_lost(graded):
    """In the same run: the unanswered release is "not answered yet"; a forged wrong answer is flagged ("check
    names") and loses each targeted check in its hidden check, whose visible check passed."""
    for stem in UNANSWERED:
        assert "not answered yet" in graded["gradacc"].row("unanswered", stem).message, stem
    for stem in STEMS:
        for kind in ("wrong1", "wrong2"):
            row, targets = graded["gradacc"].row(kind, stem), submission_answers(stem)[kind][1]
            forged = [check for check in targets if check in REFS[stem].hidden]
            assert not forged or "check names" in row.flags, row
            for check in forged:
                assert row.hidden[check] != "passed", (stem, kind, row)
                assert f"{check}: hidden check failed" in row.message, row.message


def test_every_check_is_shown_losing_and_keeping_its_points_in_every_grader():
    """What ``kinds_of`` leaves graded still shows, for every exercise and in each of the three graders, every check
    taking a mistake's points (targeted by ``wrong1`` or ``wrong2``) and giving a correct answer its points (in the
    other wrong answer, or in the reference where ``needs_reference``). A new check sharing an answer cell with two
    others, or a new ``REQUIRES``, that left a check unshown would fail here."""
    for stem in STEMS:
        full = {str(c["check"]): c["points"] for c in REFS[stem].checks}
        points = {kind: expected_points(stem, kind) for kind in kinds_of(stem) if kind != "unanswered"}
        lost = {check for got in points.values() for check, p in got.items() if p == 0}
        kept = {check for got in points.values() for check, p in got.items() if p == full[check]}
        assert lost == set(full) == kept, (stem, kinds_of(stem), sorted(set(full) - lost), sorted(set(full) - kept))


# ------------------------------------------------------------------------------------------- the hidden test itself
def _namespace(stem: str, answers: dict[str, str]) -> dict:
    """The notebook's globals after its code cells ran, ``answers`` in place of the answer cells (check cells
    skipped)."""
    ref, namespace = REFS[stem], {"__name__": "__main__"}
    for cell in ref.notebook.cells:
        if cell.cell_type == "code" and "check" not in cell.metadata.get("tags", []):
            exec(compile(answers.get(cell.get("id"), cell.source), f"<cell {cell.get('id')}>", "exec"), namespace)
    return namespace


def test_the_hidden_test_passes_the_reference_and_rejects_a_mistake_on_a_fresh_seed():
    """In this process, on exercise 01: the reference passes check 1.1's hidden test; a corpus mistake whose visible
    check is forged fails it, with a message that gives away no input or expected value; an answer that raises fails
    with its error's name."""
    ref = REFS["01_theory"]
    args = {"blocks": ref.hidden["1.1"], "preamble": ref.hidden_preamble}
    answers = submission_answers("01_theory")
    reference = [c.source for c in ref.notebook.cells if c.get("id") == "ex-1-1-solution"]
    hidden_check(_namespace("01_theory", answers["reference"][0]), "1.1", reference=reference, **args)
    wrong = next(kind for kind in ("wrong1", "wrong2") if "1.1" in answers[kind][1])
    with pytest.raises(HiddenCheckFailed) as failed:
        hidden_check(_namespace("01_theory", answers[wrong][0]), "1.1", reference=reference, **args)
    assert str(failed.value) == (
        "Exercise 1.1: hidden check failed: your results differ from the reference solution's on inputs drawn at "
        "grading time"
    )
    raising = {"ex-1-1-solution": "def combine_means(means, counts):\n    raise ValueError('no')\n"}
    with pytest.raises(HiddenCheckFailed, match=r"your code raised ValueError: no$"):
        hidden_check(_namespace("01_theory", raising), "1.1", reference=reference, **args)


def test_the_export_command_and_its_errors(tmp_path, capsys):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    otter = ["export-assignments", "--format", "otter", "--out", str(tmp_path / "o"), "--course-ref", head]
    assert main([*otter, "--exercise", "01_theory"]) == 0
    assert "wrote 1 otter notebooks" in capsys.readouterr().out
    requirements = (tmp_path / "o" / "01_theory" / "requirements.txt").read_text()
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line]
    torch = next(p for p in pins if p.startswith("torch=="))
    kept = [p for p in pins if p != torch and _pinned_name(p) not in NOT_FOR_GRADING]
    assert f"{torch}+cpu\n" in requirements and all(p in requirements for p in kept)
    assert requirements.rstrip().endswith(f"archive/{head}.zip")
    assert main(["export-assignments", "--format", "nbgrader", "--out", str(tmp_path / "n"), "--exercise", "99_x"]) == 2
    assert "no reference for ['99_x']" in capsys.readouterr().err
    missing = ["--requirements", str(tmp_path / "none.txt")]
    assert main([*otter, *missing]) == 2
    assert "none.txt does not exist" in capsys.readouterr().err
