"""A class graded as shards on a cluster and merged (issue 47): ``gradacc grade --shard``, ``gradacc grade-merge``, and
the instructor's guide's Slurm scripts and Kubernetes manifests (docs/instructors/cluster.md).

The real-engine test starts a one-node Slurm cluster (``tests/slurm_cluster.py``: Debian's slurm-wlm and munge,
installed when missing), submits the guide's own ``grade-class.sh`` for a class of 12 in 4 shards (right, wrong,
missing and broken submissions of test_grading's small references, so each notebook run costs about 1.5 s of CPU),
cancels one task while its shard is in the middle of a notebook, submits that task again as the guide says, waits for
the merge job, and compares the merged gradebook, journal and feedback with one machine's run of the same class and
seed. Every shard runs in the bubblewrap sandbox. The other tests need no notebook run.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml
from conftest import ROOT, record_measurement
from slurm_cluster import Cluster
from test_grading import (
    ACCUMULATED,
    HIDDEN_01,
    WEIGHTED,
    WRONG_ACCUMULATED,
    WRONG_WEIGHTED,
    _answered,
    _write,
    small_solution_01,
    small_solution_02,
)

from gradacc.cli import SUBCOMMANDS, build_parser, main
from gradacc.course.notebooks import generate_exercise
from gradacc.grading import Gradebook, GradingError, Row, Settings, read_journal
from gradacc.grading.export import export_grades
from gradacc.grading.shards import (
    Shard,
    begin_shard,
    finish_shard,
    merge_shards,
    parse_shard,
    shard_of,
    shard_paths,
    shard_sizes,
)

# One worker runs this module (make test: --dist loadgroup): the class is graded once, on one cluster.
pytestmark = pytest.mark.xdist_group("cluster")
GUIDE = ROOT / "docs" / "instructors" / "cluster.md"
SHARDS = 4
SEED = 4747
# Who is in which shard of 4 (shard_of; asserted below): 3 students each. Shard 2 holds the student whose notebook
# waits while a file exists (the task is cancelled there) after two others that finish.
CLASS = {
    "cai": 0, "kim": 0, "max": 0,
    "gus": 1, "ivo": 1, "jan": 1,
    "ana": 2, "ben": 2, "eli": 2,
    "dee": 3, "fay": 3, "hana": 3,
}  # fmt: skip


def guide_files() -> dict[str, str]:
    """The files the cluster guide shows, by name: each code block whose first comment line is ``# NAME: ...``."""
    files = {}
    for block in re.findall(r"^```(?:bash|yaml)\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.M | re.S):
        named = re.search(r"^# ([\w.-]+\.(?:sh|sbatch|yaml)): ", block, re.M)
        if named:
            files[named.group(1)] = block
    return files


def write_course_and_class(root: Path) -> SimpleNamespace:
    """A course folder (solutions/, hidden/ and .venv, the repository's) and a class of 12 under ``root``."""
    course, subs, hold = root / "course", root / "submissions", root / "visible" / "hold"
    _write(small_solution_01(), course / "solutions" / "01_small.ipynb")
    _write(small_solution_02(), course / "solutions" / "02_small.ipynb")
    (course / "hidden").mkdir()
    (course / "hidden" / "01_small.py").write_text(HIDDEN_01)
    (course / ".venv").symlink_to(ROOT / ".venv")
    ex1, ex2 = generate_exercise(small_solution_01()), generate_exercise(small_solution_02())
    right = {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": ACCUMULATED}
    right2 = {"ex-2-1-solution": small_solution_02().cells[1].source}
    wait = f"import os, time\n\nwhile os.path.exists({str(hold)!r}):\n    time.sleep(0.2)\n\n"
    n1, n2 = "01_small.ipynb", "02_small.ipynb"
    _write(_answered(ex1, right), subs / "cai" / n1)  # right, and the only ones who hand in 02_small (shard 0)
    _write(_answered(ex2, right2), subs / "cai" / n2)
    _write(_answered(ex2, right2), subs / "max" / n2)  # 01_small missing
    _write(_answered(ex1, right), subs / "gus" / n1)
    _write(_answered(ex1, right), subs / "ana" / n1)
    _write(_answered(ex1, {**right, "ex-1-1-solution": wait + WEIGHTED}), subs / "eli" / n1)  # right, slow in shard 2
    _write(_answered(ex1, {"ex-1-1-solution": WRONG_WEIGHTED, "ex-1-2-solution": WRONG_ACCUMULATED}), subs / "kim" / n1)
    _write(_answered(ex1, {"ex-1-1-solution": WRONG_WEIGHTED, "ex-1-2-solution": ACCUMULATED}), subs / "ivo" / n1)
    _write(_answered(ex1, {**right, "ex-1-2-solution": WRONG_ACCUMULATED}), subs / "dee" / n1)
    syntax_error = "def weighted_mean(values, weights)\n    return 0\n"
    _write(_answered(ex1, {**right, "ex-1-1-solution": syntax_error}), subs / "ben" / n1)
    (subs / "jan").mkdir()
    (subs / "jan" / n1).write_text('{"cells": [')  # broken: not JSON
    (subs / "hana").mkdir()
    (subs / "hana" / n1).write_bytes(b"")  # broken: empty
    _write(_answered(ex1, right), subs / "fay" / "01_smal.ipynb")  # misnamed: unrecognized, both exercises missing
    hold.parent.mkdir(parents=True)
    return SimpleNamespace(course=course, submissions=subs, hold=hold)


def _csv_rows(path: Path) -> tuple[list[str], list[dict]]:
    """The gradebook's header and rows without the columns that measure time and memory."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), [
            {k: v for k, v in row.items() if k not in ("seconds", "peak_mib")} for row in reader
        ]


def _journal(path: Path) -> tuple[int | None, list[dict]]:
    seed, rows = read_journal(path)
    return seed, sorted(
        json.dumps({**dataclasses.asdict(r), "seconds": None, "peak_mib": None}, sort_keys=True) for r in rows
    )


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------- the real Slurm cluster
@pytest.fixture(scope="module")
def slurm_class(tmp_path_factory, bwrap):
    """One machine's run, then the guide's Slurm scripts on a one-node cluster: task 2 cancelled mid-notebook,
    submitted again with TASKS=2, merged by the dependent job. Returns what the tests compare."""
    root = tmp_path_factory.mktemp("cluster")
    made = write_course_and_class(root)
    one, results, scripts = root / "one", root / "results", root / "scripts"
    grade_args = ["grade", str(made.submissions), "--reference", str(made.course / "solutions"), "--quiet",
                  "--workers", "2", "--seed", str(SEED)]  # fmt: skip
    cpu = psutil.Process().cpu_times()
    start = time.perf_counter()
    assert main([*grade_args, "--out", str(one / "gradebook.csv"), "--feedback", str(one / "feedback")]) == 0
    after = psutil.Process().cpu_times()
    one_cpu = sum(after[:4]) - sum(cpu[:4])  # user, system, children's user and system
    one_wall = time.perf_counter() - start

    scripts.mkdir()
    for name, text in guide_files().items():
        (scripts / name).write_text(text)
    env = {"COURSE": str(made.course), "SUBMISSIONS": str(made.submissions), "RESULTS": str(results),
           "SHARDS": str(SHARDS), "PYTHONPATH": str(made.hold.parent)}  # fmt: skip
    results.mkdir()
    (results / "seed").write_text(f"{SEED}\n")  # grade-class.sh keeps a class's seed: one machine's, here
    made.hold.touch()  # eli's notebook waits while it exists: only the cluster's shards see it (PYTHONPATH)
    out = SimpleNamespace(one=one, results=results, made=made, one_cpu=one_cpu, one_wall=one_wall)
    start = time.perf_counter()
    with Cluster(cpus=2) as cluster:
        submitted = cluster.run(["bash", str(scripts / "grade-class.sh")], **env)
        array, merge = re.search(r"^array (\d+) merge (\d+) seed (\d+)$", submitted, re.M).group(1, 2)
        out.seed = int(re.search(r"seed (\d+)", submitted).group(1))
        shard2 = shard_paths(results / "gradebook.csv", Shard(2, SHARDS))
        family = []
        for poll in range(900):  # up to 15 minutes: ana's and ben's rows journaled, eli's kernel waiting on `hold`
            _, rows = read_journal(shard2.journal)
            if {r.student for r in rows} == {"ana", "ben"}:
                family = _task_processes(results, "2")
                if any("ipykernel_launcher" in " ".join(_cmdline(p)) for p in family):
                    break
            if poll % 10 == 9:  # a task that failed fails the test now, not after 15 minutes
                assert cluster.states(array).get(f"{array}_2") in ("PENDING", "RUNNING"), cluster.states(array)
            time.sleep(1)
        else:
            pytest.fail(f"shard 2 never reached eli's notebook: {cluster.states(array)}")
        out.killed_cpu = sum(_cpu(p) for p in family)  # the cancelled run's CPU so far (it writes no record)
        cluster.run(["scancel", f"{array}_2"])
        _, out.alive = psutil.wait_procs(family, timeout=60)  # the grader, bwrap, runner and kernel of task 2
        out.first = {**cluster.wait(array), **cluster.wait(merge)}
        out.first_ids = (array, merge)
        _, out.killed_rows = read_journal(shard2.journal)
        with pytest.raises(GradingError) as refused:
            merge_shards(sorted(p for p in Path(str(results / "gradebook.csv") + ".shards").iterdir()))
        out.refused = str(refused.value)
        made.hold.unlink()
        again = cluster.run(["bash", str(scripts / "grade-class.sh")], **env, TASKS="2")
        array2, merge2 = re.search(r"^array (\d+) merge (\d+)", again, re.M).group(1, 2)
        out.second = {**cluster.wait(array2), **cluster.wait(merge2)}
        out.second_ids = (array2, merge2)
        out.logs = {p.name: p.read_text() for p in results.glob("slurm-*.out")}
        out.daemons_cpu, daemons = cluster.daemons_cpu_s(), cluster.pids()
    out.daemons_left = [pid for pid in daemons if psutil.pid_exists(pid)]
    out.cluster_wall = time.perf_counter() - start
    records = [json.loads(p.read_text()) for p in results.glob("gradebook.csv.shards/*/shard.json")]
    out.shards_cpu = sum(r["cpu_s"] for r in records)
    record_measurement(
        f"Slurm test: one machine {out.one_cpu:.1f} s CPU ({out.one_wall:.1f} s wall); 4 shards {out.shards_cpu:.1f} "
        f"s CPU in their records, and task 2's cancelled run {out.killed_cpu:.1f} s; Slurm and munge daemons "
        f"{out.daemons_cpu:.1f} s CPU; the cluster part {out.cluster_wall:.1f} s of wall time"
    )
    return out


def _cmdline(process: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return process.cmdline()
    return []


def _cpu(process: psutil.Process) -> float:
    """User + system CPU seconds of a process and of the children it has waited for."""
    with contextlib.suppress(psutil.Error):
        return sum(process.cpu_times()[:4])
    return 0.0


def _task_processes(results: Path, task: str) -> list[psutil.Process]:
    """The grader of array task ``task`` (its ``--out`` under ``results``) and every process under it."""
    for process in psutil.process_iter():
        line = _cmdline(process)
        if "grade" in line and str(results / "gradebook.csv") in line:
            with contextlib.suppress(psutil.Error):
                if process.environ().get("SLURM_ARRAY_TASK_ID") == task:
                    return [process, *process.children(recursive=True)]
    return []


def test_the_class_is_cut_by_a_hash_of_the_student_ids():
    assert {student: shard_of(student, SHARDS) for student in CLASS} == CLASS


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(1500)  # the class is graded twice in the first test's set-up
def test_the_merged_gradebook_journal_and_feedback_equal_one_machines(slurm_class):
    one, merged = slurm_class.one, slurm_class.results
    assert slurm_class.second == {f"{slurm_class.second_ids[0]}_2": "COMPLETED", slurm_class.second_ids[1]: "COMPLETED"}
    header, rows = _csv_rows(merged / "gradebook.csv")
    assert (header, rows) == _csv_rows(one / "gradebook.csv")
    by = {(r["student"], r["exercise"]): r for r in rows}
    assert len(rows) == 12 * 2 + 1  # 12 students x 2 exercises, and fay's misnamed file
    assert [(by[(s, "01_small")]["status"], by[(s, "01_small")]["points"]) for s in sorted(CLASS)] == [
        ("graded", "5"), ("graded", "3"), ("graded", "5"), ("graded", "2"), ("graded", "5"),  # ana ben cai dee eli
        ("missing", "0"), ("graded", "5"), ("invalid-notebook", "0"), ("graded", "3"),  # fay gus hana ivo
        ("invalid-notebook", "0"), ("graded", "0"), ("missing", "0"),  # jan kim max
    ]  # fmt: skip
    # 02_small was handed in only in shard 0: every other shard still gave its students a `missing` row for it
    assert sorted(s for (s, e), r in by.items() if e == "02_small" and r["status"] == "graded") == ["cai", "max"]
    assert by[("fay", "01_smal")]["status"] == "unrecognized"
    assert by[("kim", "01_small")]["hidden"] == "1.1: your results differ from the reference solution's; 1.2: your " \
        "results differ from the reference solution's"  # fmt: skip
    assert all(r["sandbox"].startswith("bubblewrap ") for r in rows if r["status"] == "graded")
    assert _journal(merged / "gradebook.csv.journal.jsonl") == _journal(one / "gradebook.csv.journal.jsonl")
    assert _journal(merged / "gradebook.csv.journal.jsonl")[0] == SEED == slurm_class.seed
    assert _tree(merged / "feedback") == _tree(one / "feedback") and len(_tree(one / "feedback")) == 12


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(1500)  # the class is graded twice in the first test's set-up
def test_a_task_cancelled_mid_notebook_resumes_when_submitted_again(slurm_class):
    array, merge = slurm_class.first_ids
    states = dict.fromkeys([f"{array}_0", f"{array}_1", f"{array}_3"], "COMPLETED")
    # the merge job is cancelled with the task (--kill-on-invalid-dep)
    assert slurm_class.first == {**states, f"{array}_2": "CANCELLED", merge: "CANCELLED"}
    assert slurm_class.alive == []  # nothing of the cancelled task runs on: grader, bwrap, runner, kernel
    assert slurm_class.daemons_left == []  # munged, slurmctld and slurmd stopped with the cluster
    assert sorted(r.student for r in slurm_class.killed_rows) == ["ana", "ben"]
    log = slurm_class.logs[f"slurm-{slurm_class.second_ids[0]}_2.out"]
    assert "resuming: 2 notebooks already graded in" in log and ", 1 to grade (seed " in log, log
    _, rows = read_journal(shard_paths(slurm_class.results / "gradebook.csv", Shard(2, SHARDS)).journal)
    assert sorted(r.student for r in rows) == ["ana", "ben", "eli"]  # each once: ana and ben kept, not graded again
    assert rows[:2] == slurm_class.killed_rows
    assert "shard 2-of-4 did not finish (2 notebooks in its journal)" in slurm_class.refused


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(1500)  # the class is graded twice in the first test's set-up
def test_the_lms_export_reads_the_merged_gradebook_as_one_machines(slurm_class, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student,id,email\n" + "".join(f"{s},{i},{s}@example.org\n" for i, s in enumerate(CLASS)))
    for name, folder in (("merged", slurm_class.results), ("one", slurm_class.one)):
        report = export_grades(folder / "gradebook.csv", roster, "csv", tmp_path / f"{name}.csv")
        assert (report.written, report.unmatched, report.without_submission) == (12, [], [])
    assert (tmp_path / "merged.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()


# ---------------------------------------------------------------------------------------------- no notebook runs
def test_a_students_shard_is_a_stable_hash_of_the_id_never_the_listing_order():
    ids = [f"student{i:05d}" for i in range(10_000)]
    counts = [sum(shard_of(s, 8) == k for s in ids) for k in range(8)]
    print(f"10,000 ids in 8 shards: {counts}")
    assert sum(counts) == 10_000 and max(abs(c - 1250) for c in counts) <= 80  # a binomial's deviation: 33
    assert [shard_of(s, 4) for s in ("alice", "bob", "Ünal", "")] == [3, 2, 2, 0]  # the same on every machine
    late = sorted([*ids[:50], "a-late-submission"])  # a student added to the listing moves nobody else
    assert [shard_of(s, 4) for s in late if s != "a-late-submission"] == [shard_of(s, 4) for s in ids[:50]]
    with pytest.raises(ValueError, match="the shard count must be >= 1, got 0"):
        shard_of("alice", 0)


def test_grade_shards_counts_each_shard_and_the_guides_margin_covers_the_largest(tmp_path, capsys):
    """Shards are unequal (a hash): `gradacc grade-shards` counts them before submitting (both layouts, each student
    once), and the guide's size for the largest shard, m + 4 * sqrt(m), covers 20 rosters of each size it quotes."""
    for student, name in [("ann", "01_theory.ipynb"), ("ann", "02_pytorch.ipynb"), ("bob", "01_theory.ipynb")]:
        (tmp_path / "class" / student).mkdir(parents=True, exist_ok=True)
        (tmp_path / "class" / student / name).write_text("{}")
    (tmp_path / "class" / "cy__01_theory.ipynb").write_text("{}")
    assert main(["grade-shards", str(tmp_path / "class"), "--count", "4"]) == 0
    said = capsys.readouterr().out
    sizes = shard_sizes(["ann", "bob", "cy"], 4)
    assert [f"shard {k}/4: {n} students" for k, n in enumerate(sizes)] == said.splitlines()[:4]
    assert f"3 students; the largest shard holds {max(sizes)} (mean 0.8)" in said
    assert main(["grade-shards", str(tmp_path / "none"), "--count", "4"]) == 2
    assert "does not exist" in capsys.readouterr().err
    guide = (ROOT / "docs" / "instructors" / "cluster.md").read_text()
    assert "gradacc grade-shards submissions/ --count 12" in guide
    for size, count in [(300, 4), (10_000, 10), (10_000, 100)]:
        mean = size / count
        largest = [max(shard_sizes([f"roster{r}-student{i:05d}" for i in range(size)], count)) for r in range(20)]
        print(
            f"{size} in {count} shards: largest {min(largest)}-{max(largest)}, guide's bound {mean + 4 * mean**0.5:.0f}"
        )
        assert max(largest) <= mean + 4 * mean**0.5 and f"{min(largest):,} to {max(largest):,}" in guide


def test_shard_comes_from_k_of_n_or_the_engines_variables():
    slurm = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
             "SLURM_ARRAY_TASK_MAX": "3"}  # fmt: skip
    assert parse_shard("1/4", {}) == Shard(1, 4)
    assert parse_shard("auto", slurm) == Shard(2, 4) == parse_shard("auto/4", slurm)
    # sbatch --array=2: task 2 submitted again on its own
    again = {**slurm, "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "2", "SLURM_ARRAY_TASK_MAX": "2"}
    assert parse_shard("auto/4", again) == Shard(2, 4)
    assert parse_shard("auto/4", {"JOB_COMPLETION_INDEX": "3"}) == Shard(3, 4)  # a Kubernetes Indexed Job
    for spec, env, message in [
        ("4/4", {}, "shard 4 of 4: K must be in 0..3"),
        ("2", {}, "--shard must be K/N (shard K of N, from 0), auto or auto/N, got '2'"),
        ("a/4", {}, "--shard's K must be a whole number, got 'a'"),
        ("auto", again, "this job array runs tasks 2-2 (1 of them), not 0-0: pass --shard auto/N"),
        ("auto", {"JOB_COMPLETION_INDEX": "3"}, "Kubernetes gives the index (JOB_COMPLETION_INDEX) but not the count"),
        ("auto/4", {}, "neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX"),
        ("auto/2", {"JOB_COMPLETION_INDEX": "3"}, "shard 3 of 2: K must be in 0..1"),
    ]:
        with pytest.raises(GradingError) as error:
            parse_shard(spec, env)
        assert message in str(error.value), (spec, str(error.value))


def test_a_shard_needs_a_seed_and_resumes_only_what_it_started(tmp_path, capsys):
    solutions, hidden = tmp_path / "solutions", tmp_path / "hidden"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    args = ["grade", str(tmp_path / "subs"), "--reference", str(solutions), "--out", str(tmp_path / "book.csv"),
            "--shard", "0/2"]  # fmt: skip
    assert main(args) == 2
    assert "--shard needs --seed: every shard must draw the same hidden-check inputs" in capsys.readouterr().err
    paths = shard_paths(tmp_path / "book.csv", Shard(0, 2))
    begin_shard(paths, Shard(0, 2), Settings(seed=5), solutions, hidden, resume=False)
    begin_shard(paths, Shard(0, 2), Settings(seed=5, workers=7), solutions, hidden, resume=True)  # workers: no change
    (hidden / "01_small.py").write_text(HIDDEN_01 + "\n# edited\n")
    with pytest.raises(GradingError, match="shard 0-of-2 was started with other hidden, limits: grade it again"):
        begin_shard(paths, Shard(0, 2), Settings(seed=5, timeout=9), solutions, hidden, resume=True)


def _fake_shards(root: Path, count: int = 2, seed: int = 7) -> list[Path]:
    """Finished shard folders of a class of 6 (no notebook runs: rows made here), each with its record and journal."""
    solutions = root / "solutions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    folders = []
    for index in range(count):
        shard = Shard(index, count)
        paths = shard_paths(root / "book.csv", shard)
        record = begin_shard(paths, shard, Settings(seed=seed), solutions, None, resume=False)
        rows = [Row(s, "01_small", "graded", 5, 5, file=f"/c/{s}/01_small.ipynb", checks={"1.1": 2, "1.2": 3},
                    seconds=1.0 + index) for s in ("ann", "bo", "cy", "di", "ed", "flo") if shard.holds(s)]  # fmt: skip
        with open(paths.journal, "w") as f:
            f.write(json.dumps({"seed": seed}) + "\n")
            f.writelines(json.dumps(dataclasses.asdict(r)) + "\n" for r in rows)
        finish_shard(paths, record, Gradebook(rows, ["1.1", "1.2"], seed, 1.0, "none"), cpu_s=2.0)
        folders.append(paths.folder)
    return folders


def test_grade_class_sh_keeps_the_seed_and_the_logs_private(tmp_path):
    """Issue 60 follow-up: under umask 022, grade-class.sh wrote RESULTS/seed 0644 and Slurm's logs (which name the
    seed) 0644. The guide's script runs as it stands, with a stand-in `sbatch` that records the umask it was given
    (Slurm gives it to the job, and creates the job's log with it); no cluster is needed."""
    scripts, fake, course = tmp_path / "scripts", tmp_path / "bin", tmp_path / "course"
    scripts.mkdir()
    for name, text in guide_files().items():
        (scripts / name).write_text(text)
    fake.mkdir()
    (fake / "sbatch").write_text('#!/bin/bash\numask >> "$RESULTS/umask-seen"\necho "4$RANDOM;one"\n')
    (fake / "sbatch").chmod(0o755)
    (course / ".venv" / "bin").mkdir(parents=True)
    (course / ".venv" / "bin" / "python").symlink_to(sys.executable)
    results = tmp_path / "results"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "COURSE": str(course), "RESULTS": str(results),
           "SUBMISSIONS": str(tmp_path / "submissions"), "SHARDS": "2"}  # fmt: skip
    done = subprocess.run(["bash", "-c", f"umask 022 && bash {scripts / 'grade-class.sh'}"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"array 4\d* merge 4\d* seed \d+\n", done.stdout), done.stdout
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (results, results / "seed")}
    assert modes == {"results": 0o700, "seed": 0o600}
    assert (results / "umask-seen").read_text().split() == ["0077", "0077"]  # the array's and the merge's


def test_the_merge_warns_of_refused_files_and_exits_4(tmp_path, capsys):
    """Issue 60 follow-up: a refused file (a hard-linked copy of the class) must never pass unseen, shards or not."""
    folders = _fake_shards(tmp_path)
    message = "a hard link to a file outside the class (2 names, 1 of them in the submissions folder): never read"
    _edit(folders[0], lambda r: r["rows"][0].update(status="refused-file", points=0, message=message))
    args = ["grade-merge", "--out", str(tmp_path / "book.csv")]
    assert main(args) == 4
    err = capsys.readouterr().err
    assert "warning: 1 submission of 1 student was refused" in err and "cp -al" in err, err
    assert main([*args, "--allow-refused"]) == 0


def _edit(folder: Path, change) -> None:
    path = folder / "shard.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _refusal(folders: list[Path]) -> str:
    with pytest.raises(GradingError) as error:
        merge_shards(folders)
    return str(error.value)


def test_the_merge_refuses_shards_that_are_not_one_class_graded_one_way(tmp_path):
    folders = _fake_shards(tmp_path / "ok")
    book, journal = merge_shards(folders)
    assert [r.student for r in book.rows] == ["ann", "bo", "cy", "di", "ed", "flo"] == [r.student for r in journal]
    assert (book.seed, book.check_columns) == (7, ["1.1", "1.2"])

    missing = "shard 1-of-2 missing: grade it (the guide's Slurm script: TASKS=1 bash grade-class.sh), then merge"
    assert missing in _refusal(folders[:1])
    twice = tmp_path / "elsewhere"
    twice.mkdir()
    (twice / "shard.json").write_bytes((folders[0] / "shard.json").read_bytes())
    assert f"shard 0-of-2 was graded twice: {folders[0]}, {twice}; keep one folder" in _refusal([*folders, twice])
    _edit(folders[1], lambda r: r.update(status="running", rows=[]))
    assert "shard 1-of-2 did not finish (3 notebooks in its journal): run it again with --resume" in _refusal(folders)

    folders = _fake_shards(tmp_path / "seeds")
    _edit(folders[1], lambda r: r.update(seed=8))
    assert "shards graded with different seeds: 0-of-2: 7; 1-of-2: 8" in _refusal(folders)
    folders = _fake_shards(tmp_path / "references")
    _edit(folders[1], lambda r: r["references"].update({"01_small": "0" * 64}))
    assert "shards graded with different references (01_small differ): 0-of-2; 1-of-2" in _refusal(folders)
    folders = _fake_shards(tmp_path / "hidden")
    _edit(folders[0], lambda r: r["hidden"].update({"01_small": "1" * 64}))
    assert "shards graded with different hidden checks (01_small differ): 0-of-2; 1-of-2" in _refusal(folders)
    folders = _fake_shards(tmp_path / "limits")
    _edit(folders[0], lambda r: r["limits"].update(timeout=60))
    assert "shards graded with different limits" in _refusal(folders)

    folders = _fake_shards(tmp_path / "student")
    moved = json.loads((folders[0] / "shard.json").read_text())["rows"][0]
    _edit(folders[1], lambda r: r["rows"].append(moved))
    assert f"student {moved['student']!r} has rows in shards 0-of-2, 1-of-2" in _refusal(folders)
    _edit(folders[0], lambda r: r["rows"].pop(0))
    assert f"student {moved['student']!r} is in shard 1-of-2 but its id hashes to shard 0 of 2" in _refusal(folders)
    counts = _fake_shards(tmp_path / "three", count=3)
    assert "the shards were cut for different counts [2, 3]" in _refusal([folders[0], counts[1]])


def test_the_kubernetes_manifests_fit_the_api_schema_and_the_shard_count():
    """kubernetes-validate 1.37.0 (the Kubernetes OpenAPI schemas as JSON Schema, strict: unknown fields fail), for
    Kubernetes 1.29 (backoffLimitPerIndex is beta there) and 1.37. A misspelt field and a wrong type fail."""
    import kubernetes_validate

    files = guide_files()
    grade_job, merge_job = (yaml.safe_load(files[name]) for name in ("grade-job.yaml", "merge-job.yaml"))
    for version in ("1.29.0", "1.37.0"):
        for manifest in (grade_job, merge_job):
            kubernetes_validate.validate(manifest, version, strict=True)
    for path, value in ((("spec", "backoffLimitPerIndx"), 2), (("spec", "parallelism"), "4")):
        broken = json.loads(json.dumps(grade_job))
        broken[path[0]][path[1]] = value
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, "1.37.0", strict=True)
    spec = grade_job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    command = container["command"]
    assert spec["completionMode"] == "Indexed" and spec["template"]["spec"]["restartPolicy"] == "Never"
    assert command[command.index("--shard") + 1] == f"auto/{spec['completions']}" and spec["parallelism"] == 4
    assert {"--seed", "$(SEED)", "--resume"} <= set(command) and container["env"][0]["name"] == "SEED"
    (merger,) = merge_job["spec"]["template"]["spec"]["containers"]
    out = command[command.index("--out") + 1]
    assert merger["command"][1:] == ["grade-merge", "--out", out, "--feedback", f"{Path(out).parent}/feedback"]
    claims = {job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
              for job in (grade_job, merge_job)}  # fmt: skip
    assert claims == {"gradacc-class"}


def test_gradacc_command_imports_only_the_module_of_its_sub_command():
    """``SUBCOMMANDS`` names the sub-commands each module registers (``gradacc grade`` does not import torch)."""
    for module, commands in SUBCOMMANDS.items():
        for command in commands:
            parser = build_parser(command)
            registered = parser._subparsers._group_actions[0].choices  # argparse's sub-command table
            assert set(registered) == set(commands), (module, command)
    assert sorted(build_parser()._subparsers._group_actions[0].choices) == sorted(
        c for commands in SUBCOMMANDS.values() for c in commands
    )


def test_the_guides_one_node_slurm_conf_is_the_tested_clusters():
    """cluster.md's one-node slurm.conf sets what tests/slurm_cluster.py's cluster sets (paths, ports and timings of
    the test aside), and its node holds what grade-shard.sbatch asks for (2 CPUs of 1500 MiB)."""
    guide = (ROOT / "docs" / "instructors" / "cluster.md").read_text()
    conf = re.search(r"<<CONF\n(.*?)\nCONF\n", guide, re.S).group(1)
    ours = dict(line.split("=", 1) for line in conf.splitlines() if not line.startswith(("NodeName", "Partition")))
    source = (ROOT / "tests" / "slurm_cluster.py").read_text()
    tested = dict(re.findall(r'^\s+f?"([A-Za-z]+)=([^"{]*)', source, re.M))
    local = {
        "ClusterName",
        "SlurmctldPort",
        "SlurmdPort",
        "AuthInfo",
        "KillWait",
        "MinJobAge",
        "NodeName",
        "PartitionName",
    }
    paths = {k for k in tested if k.endswith(("Location", "Dir", "File"))}
    assert {k: v for k, v in ours.items() if k not in paths} == {
        k: v for k, v in tested.items() if k not in local | paths | {"SlurmctldHost"}
    } | {"ClusterName": "one", "SlurmctldHost": "$host"}
    assert set(ours) >= paths
    node = re.search(r"^NodeName=\$host CPUs=(\d+) RealMemory=(\d+) ", conf, re.M)
    sbatch = re.search(r"#SBATCH --cpus-per-task=(\d+)\n#SBATCH --mem-per-cpu=(\d+)M", guide)
    cpus, mib = int(sbatch.group(1)), int(sbatch.group(2))
    assert int(node.group(1)) >= cpus and int(node.group(2)) >= cpus * mib == 4400
    # the guide's own sizing rule: --workers x --memory-mib (2048 by default) + about 300 MiB for the grader
    assert cpus * mib >= cpus * 2048 + 300
