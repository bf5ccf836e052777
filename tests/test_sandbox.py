"""The grader's sandbox (``gradacc.grading.sandbox``: bubblewrap) against submissions that attack the machine.

One ``grade`` call (module fixture) grades, with the default sandbox and real kernels, a correct submission next to
ten attackers. Each of the first six answers the exercise correctly (or, for the two that would profit, exactly as well
as the attack lets it) and first tries one thing the sandbox must stop:

* ``net``: a TCP connection to a listener this test runs on 127.0.0.1;
* ``reader``: the hidden checks and the reference solution (the corpus's and the course's own), to copy its answer;
* ``forger``: a forged row appended to the grading journal, and the gradebook rewritten;
* ``neighbour``: another student's notebook overwritten and a file planted in that student's folder;
* ``daemon``: a process left behind by a double fork and ``setsid``;
* ``filler``: 100,000 small files.

What each attack saw inside is read from its solution cell's captured stdout (``_run_merged`` is wrapped to keep each
run's capture, ``run_nbval`` to see the grader's folder as it was when the run ended); what it did outside is checked
outside. With ``--sandbox none`` every one of these attacks succeeds (tried once by hand: the listener received the
bytes, the reader copied the reference's answer and scored 5, both files were rewritten, the neighbour's notebook
overwritten, the daemon still alive after the run, 100,000 files on the disk), so each assertion here would fail
without it.

The other four (``FORGERS``, issue 44) answer 1.1 wrongly and forge the files the grader once read its verdicts from
(``junit.xml``: every cell passed; ``capture.json``: the check's line ``correct`` and each hidden check printing the
reference's text, computed with a correct copy of the answer; ``result.json``): ``overwriter`` writes them once and
tries to write the same verdicts into every pipe of another process through ``/proc/<pid>/fd``; ``locker`` makes them
read-only; ``rewriter`` leaves a double-forked process that writes them again every 2 ms until the run ends;
``planter`` puts them, after every cell, in the working folder, ``HOME`` and ``TMPDIR``. Each must get its real 3 of 5
points and a flag, and no ``passed`` for 1.1 in its feedback. Before issue 44 (the verdicts then came from those
files), ``locker`` and ``rewriter`` got 5 of 5 and ``overwriter`` wrote into 3 pipes of its grading process.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import re
import socket
import sys
import threading
from pathlib import Path

import nbformat
import psutil
import pytest
from conftest import ROOT
from test_grading import ACCUMULATED, HIDDEN_01, WEIGHTED, WRONG_WEIGHTED, _answered, _write, small_solution_01

import gradacc.grading.run
import gradacc.grading.score
from gradacc.course.notebooks import generate_exercise
from gradacc.grading import Settings, grade, read_journal
from gradacc.grading.sandbox import start_sandbox

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("sandbox"), pytest.mark.usefixtures("bwrap")]

SCRATCH_MIB = 64
SETTINGS = Settings(
    timeout=90, cell_timeout=20, memory_mib=1024, max_output_kib=1024, workers=2, seed=4321, scratch_mib=SCRATCH_MIB
)
DAEMON = "gradacc-test-daemon-left-behind"
BUSY = "gradacc-test-busy-child"


FORGE = r'''
import contextlib, io, json, os

def _right_weighted_mean(values, weights):  # a correct copy, used only to forge what the hidden check prints
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)

def _right_accumulated_mean(chunks):
    return sum(sum(c) for c in chunks) / sum(len(c) for c in chunks)

def _forged():
    """The three files, every cell passed, and the same as the grading process's report lines (for its pipe)."""
    nb = json.load(open(next(n for n in os.listdir(".") if n.endswith(".ipynb"))))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    keys = [c.get("metadata", {}).get("gradacc_capture") for c in code]
    cells = {}
    for key, cell in zip(keys, code):
        out = io.StringIO()
        if key and key.startswith("hidden:"):
            namespace = {"weighted_mean": _right_weighted_mean, "accumulated_mean": _right_accumulated_mean}
            with contextlib.redirect_stdout(out):
                exec("".join(cell["source"]), namespace)
        elif key and key.startswith("check:"):
            out.write(f"Exercise {key[6:]}: correct\n")
        if key:
            cells[key] = {"stdout": out.getvalue(), "stderr": "", "error": None}
    capture = {"cells": cells, "events": [], "started": [k or f"Cell {i}" for i, k in enumerate(keys)]}
    cases = "".join(f'<testcase classname="nb" name="Cell {i}" time="0.1" />' for i in range(len(code)))
    junit = f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'
    lines = [{"kind": "outcome", "cell": i, "outcome": "passed", "message": ""} for i in range(len(code))]
    lines += [{"kind": "captured", "cell": k, **c} for k, c in cells.items()]
    files = {"junit.xml": junit, "result.json": json.dumps({"rc": 0, "peak_kib": 1}), "capture.json": json.dumps(capture)}
    return files, "".join(json.dumps(line) + "\n" for line in lines)

FORGED, REPORT = _forged()

def _write_forged(who, folder="."):
    for name, text in FORGED.items():
        path = os.path.join(folder, name)
        try:
            with open(path, "w") as f:
                f.write(text)
            print(who + ": wrote", path)
        except OSError as error:
            print(who + ":", path, type(error).__name__)
'''
"""The start of each forger's answer cell: ``FORGED`` (file name -> forged text), ``REPORT`` (the same verdicts as
JSON lines), ``_write_forged``."""
OVERWRITER = r"""
_write_forged("overwriter")
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as error:
        print(f"overwriter: /proc/{pid}/fd", type(error).__name__)
        continue
    errors = set()
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                    f.write(REPORT)
                print(f"overwriter: wrote into pipe {fd} of process {pid}")
        except OSError as error:
            errors.add(type(error).__name__)
    print(f"overwriter: /proc/{pid}/fd/*", *sorted(errors))
"""
LOCKER = """
_write_forged("locker")
for name in FORGED:
    os.chmod(name, 0o444)
"""
REWRITE_LOOP = """
import json, sys, time
forged = json.load(open(sys.argv[1]))
while True:
    for name, text in forged.items():
        try:
            with open(name) as f:
                same = f.read() == text
        except OSError:
            same = False
        try:
            if not same:
                with open(name, "w") as f:
                    f.write(text)
        except OSError:
            pass
    time.sleep(0.002)
"""
REWRITER = f"""
import sys, time

saved = os.path.abspath("forged-verdicts.json")
json.dump(FORGED, open(saved, "w"))
if os.fork() == 0:  # a session of its own, then a grandchild that rewrites the files until the run ends
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", {REWRITE_LOOP!r}, saved])
    os._exit(0)
time.sleep(0.5)
print("rewriter: started")
"""
PLANTER = """
def _plant(*args):
    with contextlib.redirect_stdout(io.StringIO()):  # quietly: a check cell must print its one line only
        for folder in sorted({".", os.environ.get("HOME", "."), os.environ.get("TMPDIR", ".")}):
            _write_forged("planter", folder)

_plant()
get_ipython().events.register("post_run_cell", _plant)
print("planter: planted in", sorted({".", os.environ.get("HOME", "."), os.environ.get("TMPDIR", ".")}))
"""
FORGERS = {"overwriter": OVERWRITER, "locker": LOCKER, "rewriter": REWRITER, "planter": PLANTER}


def _attack(name: str, body: str) -> str:
    """An answer cell: the attack (its findings printed as ``<name>: ...``), then the correct 1.1."""
    return f"# attack: {name}\n{body.strip()}\n\n{WEIGHTED}"


def _attackers(paths: dict[str, str], port: int) -> dict[str, dict[str, str]]:
    reader = f"""
import json

def _try_read(path):
    try:
        return open(path).read()
    except OSError as error:
        print("reader:", path, type(error).__name__)

for path in {[paths["hidden"], paths["course_hidden"], paths["course_solutions"]]!r}:
    _try_read(path)
_reference = _try_read({paths["solution"]!r})

def weighted_mean(values, weights):  # the reference's own answer, if it could be read
    if _reference is None:
        raise NotImplementedError()
    for cell in json.loads(_reference)["cells"]:
        if cell.get("id") == "ex-1-1-solution":
            namespace = {{}}
            exec("".join(cell["source"]), namespace)
            return namespace["weighted_mean"](values, weights)
"""
    forger = f"""
import json

row = {{"student": "forger", "exercise": "01_small", "status": "graded", "points": 5, "max_points": 5,
       "checks": {{"1.1": 2, "1.2": 3}}}}
for path, mode, text in [({paths["journal"]!r}, "a", json.dumps(row) + "\\n"),
                         ({paths["gradebook"]!r}, "w", "student,points\\nforger,100\\n")]:
    try:
        with open(path, mode) as f:
            f.write(text)
        print("forger: wrote", path)
    except OSError as error:
        print("forger:", path, type(error).__name__)
"""
    neighbour = f"""
for path in [{paths["alice"]!r}, {paths["alice_dir"]!r} + "/planted.txt"]:
    try:
        with open(path, "w") as f:
            f.write("{{}}")
        print("neighbour: wrote", path)
    except OSError as error:
        print("neighbour:", path, type(error).__name__)
"""
    net = f"""
import socket

print("net: interfaces", socket.if_nameindex())
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).sendall(b"the student's code was here")
    print("net: connected")
except OSError as error:
    print("net:", type(error).__name__)
"""
    daemon = f"""
import os, sys, time

if os.fork() == 0:  # child: a session of its own, then a grandchild that nobody waits for
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", {DAEMON!r}])
    os._exit(0)
time.sleep(1)
alive = [p for p in os.listdir("/proc") if p.isdigit() and {DAEMON!r} in open(f"/proc/{{p}}/cmdline").read()]
print("daemon: alive", len(alive))
"""
    filler = """
import errno, os

written, error = 0, "none"
os.mkdir("many")
try:
    for written in range(100_000):
        with open(f"many/{written}", "wb") as f:
            f.write(b"x" * 512)
    written = 100_000
except OSError as exc:
    error = errno.errorcode[exc.errno]
stat = os.statvfs(".")
print("filler:", written, error, stat.f_blocks * stat.f_frsize // 2**20, "MiB")
"""
    right = {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": ACCUMULATED}
    return {
        "alice": right,
        "net": {**right, "ex-1-1-solution": _attack("net", net)},
        "reader": {**right, "ex-1-1-solution": f"# attack: reader\n{reader.strip()}\n"},
        "forger": {**right, "ex-1-1-solution": f"# attack: forger\n{forger.strip()}\n\n{WRONG_WEIGHTED}"},
        "neighbour": {**right, "ex-1-1-solution": _attack("neighbour", neighbour)},
        "daemon": {**right, "ex-1-1-solution": _attack("daemon", daemon)},
        "filler": {**right, "ex-1-1-solution": _attack("filler", filler)},
        **{
            name: {**right, "ex-1-1-solution": f"# attack: {name}\n{FORGE.strip()}\n{body.strip()}\n\n{WRONG_WEIGHTED}"}
            for name, body in FORGERS.items()
        },
    }


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")}


def _daemons() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if DAEMON in (process.info["cmdline"] or []):
                found.append(process)
    return found


class _Listener:
    """A TCP listener on the machine's 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.accepted: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = self.socket.accept()
                with connection:
                    self.accepted.append(connection.recv(1024))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.socket.close()


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """Grade the class; return what the test needs to look at: the gradebook, each attacker's run and the paths."""
    root = tmp_path_factory.mktemp("sandbox")
    solutions, hidden, subs = root / "solutions", root / "hidden", root / "submissions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    hidden.mkdir()
    (hidden / "01_small.py").write_text(HIDDEN_01)
    journal, gradebook = root / "gradebook.csv.journal.jsonl", root / "gradebook.csv"
    gradebook.write_text("student,points\nalice,5\n")  # last week's gradebook, which the forger rewrites
    paths = {
        "hidden": str(hidden / "01_small.py"),
        "solution": str(solutions / "01_small.ipynb"),
        "course_hidden": str(ROOT / "hidden" / "01_theory.py"),
        "course_solutions": str(ROOT / "solutions" / "01_theory.ipynb"),
        "journal": str(journal),
        "gradebook": str(gradebook),
        "alice": str(subs / "alice" / "01_small.ipynb"),
        "alice_dir": str(subs / "alice"),
    }
    listener = _Listener()
    exercise = generate_exercise(small_solution_01())
    for student, answers in _attackers(paths, listener.port).items():
        _write(_answered(exercise, answers), subs / student / "01_small.ipynb")
    before = {"alice": _digest(subs / "alice"), "gradebook": gradebook.read_bytes()}

    runs: dict[str, dict] = collections.defaultdict(dict)
    real_run_nbval, real_run_merged = gradacc.grading.run.run_nbval, gradacc.grading.score._run_merged

    def recording_run_nbval(notebook, **kwargs):
        run = real_run_nbval(notebook, **kwargs)
        match = re.search(r"# attack: (\w+)", Path(notebook).read_text())
        if match:  # the grader's folder as the run left it, and the daemon's fate when the run has ended
            folder = Path(notebook).parent
            runs[match.group(1)]["files"] = {p.name: p.stat().st_size for p in folder.rglob("*")}
            runs[match.group(1)]["daemons_after"] = [p.pid for p in _daemons()]
        return run

    def recording_run_merged(nb, *args, **kwargs):
        run, capture = real_run_merged(nb, *args, **kwargs)
        match = re.search(r"# attack: (\w+)", nbformat.writes(nb))
        if match:  # what the attack printed, as the grader read it
            said = capture.get("cells", {}).get("solution:ex-1-1-solution", {}).get("stdout", "")
            runs[match.group(1)]["said"] = said
        return run, capture

    seen: list[int] = []
    watching = threading.Event()

    def watch() -> None:  # the daemon, seen from outside while its notebook runs
        while not watching.is_set():
            seen.extend(p.pid for p in _daemons() if p.pid not in seen)
            watching.wait(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(gradacc.grading.run, "run_nbval", recording_run_nbval)
            patch.setattr(gradacc.grading.score, "_run_merged", recording_run_merged)
            book = grade(
                subs,
                solutions,
                hidden=hidden,
                settings=SETTINGS,
                progress=False,
                log=print,
                journal=journal,
                private=[gradebook],
            )
    finally:
        watching.set()
        watcher.join()
        listener.close()
    for student, run in sorted(runs.items()):
        print(f"{student}: {run.get('said', '').strip()} | grader's folder after the run: {run.get('files')}")
    return {
        "book": book,
        "runs": runs,
        "before": before,
        "after": {"alice": _digest(subs / "alice"), "gradebook": gradebook.read_bytes()},
        "journal": journal,
        "listener": listener,
        "daemons_seen": seen,
        "paths": paths,
    }


def _row(attacked, student):
    return attacked["book"].row(student, "01_small")


def test_the_correct_neighbour_gets_full_points_in_the_sandbox(attacked, bwrap):
    row = _row(attacked, "alice")
    assert (row.status, row.points, row.checks) == ("graded", 5, {"1.1": 2, "1.2": 3}), row
    # e.g. bubblewrap 0.8.0, 64 MiB scratch; per notebook: 1024 MiB (cgroup v1), 1024 processes (cgroup v1)
    label = attacked["book"].sandbox
    assert label.startswith(f"{bwrap.split(',')[0]}, {SCRATCH_MIB} MiB scratch; per notebook: 1024 MiB ("), label
    assert re.fullmatch(r"bubblewrap \d+\.\d+\.\d+, 64 MiB scratch; per notebook: .*", label), label
    assert [r.student for r in attacked["book"].rows if r.sandbox != label] == []  # each row records it


def test_no_connection_reaches_the_machine_loopback(attacked):
    said = attacked["runs"]["net"]["said"]
    assert "net: interfaces [(1, 'lo')]" in said and "net: ConnectionRefusedError" in said, said
    assert attacked["listener"].accepted == []
    assert (_row(attacked, "net").status, _row(attacked, "net").points) == ("graded", 5)


def test_hidden_checks_and_reference_solutions_are_not_there(attacked):
    said = attacked["runs"]["reader"]["said"]
    paths = attacked["paths"]
    for key in ("hidden", "solution", "course_hidden", "course_solutions"):
        assert f"reader: {paths[key]} FileNotFoundError" in said, (key, said)
    row = _row(attacked, "reader")  # its 1.1 is the reference's answer only if it could read it
    assert (row.status, row.points, row.checks) == ("graded", 3, {"1.1": 0, "1.2": 3}), row
    assert row.hidden["1.1"] == "your code raised NotImplementedError"


def test_the_journal_and_the_gradebook_cannot_be_forged(attacked):
    said = attacked["runs"]["forger"]["said"]
    paths = attacked["paths"]
    assert f"forger: {paths['journal']} FileNotFoundError" in said, said
    assert f"forger: {paths['gradebook']} FileNotFoundError" in said, said
    assert attacked["after"]["gradebook"] == attacked["before"]["gradebook"]
    seed, journaled = read_journal(attacked["journal"])
    rows = {(r.student, r.exercise): r for r in attacked["book"].rows}
    assert seed == SETTINGS.seed and len(journaled) == len(rows) == 11
    assert all(r == rows[(r.student, r.exercise)] for r in journaled)  # every line is a real row, once
    forger = _row(attacked, "forger")  # its real score: 1.1 wrong, 1.2 right
    assert (forger.status, forger.points, forger.checks) == ("graded", 3, {"1.1": 0, "1.2": 3}), forger


def test_another_students_folder_is_not_there(attacked):
    said = attacked["runs"]["neighbour"]["said"]
    paths = attacked["paths"]
    assert f"neighbour: {paths['alice']} FileNotFoundError" in said, said
    assert attacked["after"]["alice"] == attacked["before"]["alice"]
    assert _row(attacked, "neighbour").points == 5


def test_a_double_forked_process_dies_with_its_run(attacked):
    assert "daemon: alive 1" in attacked["runs"]["daemon"]["said"]  # started, and alive a second later
    assert attacked["daemons_seen"], "the daemon was never seen from outside while its notebook ran"
    assert attacked["runs"]["daemon"]["daemons_after"] == []  # gone as soon as the run ended, before its row
    assert _daemons() == []
    assert (_row(attacked, "daemon").status, _row(attacked, "daemon").points) == ("graded", 5)


def test_many_small_files_stop_at_the_scratch_cap_in_memory(attacked):
    run = attacked["runs"]["filler"]
    match = re.search(r"filler: (\d+) (\w+) (\d+) MiB", run["said"])
    assert match, run["said"]
    written, error, size_mib = int(match.group(1)), match.group(2), int(match.group(3))
    assert (error, size_mib) == ("ENOSPC", SCRATCH_MIB)
    pages = SCRATCH_MIB * 2**20 // 4096  # each small file takes one 4 KiB page of the tmpfs
    assert pages - 2048 < written < pages < 100_000, written
    # the grader's folder on the disk holds the notebook, nothing else: the verdicts came through a pipe
    assert sorted(run["files"]) == ["01_small.ipynb"] and run["files"]["01_small.ipynb"] < 2**20
    row = _row(attacked, "filler")
    print(f"filler: {written} files of 512 bytes before ENOSPC; row {row.status} {row.points}: {row.message}")
    assert row.status == "graded"


@pytest.mark.parametrize("attacker", FORGERS)
def test_forged_verdict_files_earn_only_the_real_points(attacked, attacker):
    """1.1 answered wrongly, every verdict file forged: 3 points (1.2), the attempt flagged, no 'passed' for 1.1."""
    row, said = _row(attacked, attacker), attacked["runs"][attacker].get("said", "")
    print(f"{attacker}: {row.points} points, checks {row.checks}, flags {row.flags!r}, message {row.message!r}")
    assert (row.status, row.points, row.checks) == ("graded", 3, {"1.1": 0, "1.2": 3}), (row, said)
    assert row.hidden == {"1.1": "your results differ from the reference solution's", "1.2": "passed"}, row
    assert "forged verdict files" in row.flags.split("; ") and "junit.xml" in row.message, row
    own = [line for line in row.feedback if line.startswith("Exercise 1.1 ")]
    assert len(own) == 1 and "failed: `Exercise 1.1: " in own[0] and "passed" not in own[0], row.feedback
    assert not any("passed the check in the notebook" in line for line in row.feedback), row.feedback
    if attacker == "overwriter":  # the runner (pid 1) does not let it open its descriptors through /proc
        assert "overwriter: wrote ./junit.xml" in said and "wrote into pipe" not in said, said
        assert re.search(r"^overwriter: /proc/1/fd(/\*)? PermissionError$", said, re.M), said
    if attacker == "rewriter":
        assert "rewriter: started" in said, said


def test_the_sandbox_refuses_to_show_a_private_folder_and_names_the_fix(tmp_path, monkeypatch):
    """A folder on PYTHONPATH that holds the hidden checks would be shown to every submission: refused. A missing
    bwrap stops grading with one line naming the fix; an unknown kind is refused."""
    from gradacc.grading import GradingError

    (tmp_path / "hidden").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(GradingError, match=rf"would show {re.escape(str(tmp_path))} .* and with it .*hidden"):
        start_sandbox("bwrap", private=[tmp_path / "hidden"])
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(GradingError) as error:
        start_sandbox("bwrap")
    message = str(error.value)
    assert "\n" not in message and "apt-get install bubblewrap" in message and "--sandbox none knowingly" in message
    with pytest.raises(GradingError, match="'podman' is not one of bwrap, none"):
        start_sandbox("podman")
    assert start_sandbox("none").label == "none; per notebook: not limited"
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(GradingError, match="needs Linux .* not darwin"):
        start_sandbox("bwrap")
    unlimited = "none; per notebook: memory not limited, processes not limited"  # no /proc: said, never pretended
    assert start_sandbox("none", memory_mib=512, max_processes=64).label == unlimited


# ------------------------------------------------------------------------------------ limits on the whole tree (58)
LIMITED = dict(
    timeout=60,
    cell_timeout=5,
    memory_mib=768,
    max_processes=200,
    max_output_kib=256,
    workers=2,
    seed=58,
    scratch_mib=16,
)
"""A class graded with small tree limits: memory 768 MiB, 200 processes and threads, cells of 5 s."""
TREE_ATTACKS = {
    # four children touch 300 MiB each (1,200 MiB together, each under --memory-mib), say so through a pipe and wait;
    # the cell counts them 1.5 s (three of the watchdog's samples) after each said so or was stopped (3 s at most)
    "memory": """
import os, select, time
r, w = os.pipe()
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        data = b"x" * (300 * 2**20)
        os.write(w, b"1")
        time.sleep(20)
        os._exit(0)
    children.append(pid)
ready, dead, deadline = 0, set(), time.monotonic() + 3
while ready + len(dead) < 4 and time.monotonic() < deadline:  # each child touched its memory, or was stopped
    if select.select([r], [], [], 0.1)[0]:
        ready += len(os.read(r, 4))
    dead |= {pid for pid in children if pid not in dead and os.waitpid(pid, os.WNOHANG)[0] == pid}
time.sleep(1.5)
alive = [pid for pid in children if pid not in dead and os.waitpid(pid, os.WNOHANG) == (0, 0)]
print("memory: ready", ready, "alive", len(alive), "of 4")
for pid in alive:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
""",
    # up to 2,000 sleeping children, held for 2 s as a fork bomb holds them; the count that started and the error
    # that stopped the flood
    "flood": """
import os, time
started, error = 0, "none"
for started in range(2000):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    except OSError as exc:
        error = type(exc).__name__
        break
else:
    started = 2000
print("flood: started", started, error)
time.sleep(2)
""",
    # four busy children, then a wait past the cell timeout
    "busy": f"""
import subprocess, sys, time
busy = [subprocess.Popen([sys.executable, "-c", "while True: pass", {BUSY!r}]) for _ in range(4)]
print("busy: started", len(busy))
time.sleep(60)
""",
}
"""Each attack opens its 1.1 answer cell (the right answer follows), as ``_attack`` writes it."""
GRADE_AND_SAY = r"""
import json, re, sys
from pathlib import Path
import nbformat
import gradacc.grading.score as score
from gradacc.grading import Settings, grade

said = {}
real = score._run_merged
def recording(nb, *args, **kwargs):
    run, capture = real(nb, *args, **kwargs)
    match = re.search(r"# attack: (\w+)", nbformat.writes(nb))
    if match:
        said[match.group(1)] = capture["cells"].get("solution:ex-1-1-solution", {}).get("stdout", "")
    return run, capture
score._run_merged = recording
subs, solutions, settings = sys.argv[1:4]
book = grade(Path(subs), Path(solutions), settings=Settings(**json.loads(settings)), progress=False, log=print)
rows = {r.student: {k: getattr(r, k) for k in ("status", "points", "checks", "message", "sandbox", "feedback")}
        for r in book.rows}
print("RESULT " + json.dumps({"rows": rows, "said": said}))
"""
"""Grades the class in a process of its own (as root, or as an unprivileged user) and prints the rows as JSON."""


def _cgroups_left(grader: int) -> list[str]:
    """The per-notebook cgroups (``gradacc-<grader>-<n>``) that the grader process ``grader`` created below this
    process's own cgroup, in each hierarchy, still there."""
    from gradacc.grading.limits import _cgroup_parents

    found = _cgroup_parents()
    return [str(p) for _, parent in (found[1].items() if found else []) for p in parent.glob(f"gradacc-{grader}-*")]


@pytest.fixture(scope="module")
def tree_limited():
    """The class (two honest students, the three attacks) graded as root (a cgroup per notebook) and as ``nobody``
    (``RLIMIT_NPROC`` and the watchdog): ``{"root": ..., "nobody": ...}``, each with rows, what each attack saw,
    the busy children found after grading, and the cgroups left."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gradacc-test-limits-") as tmp:  # pytest's is private to root
        yield _grade_as_root_and_nobody(Path(tmp))


def _grade_as_root_and_nobody(root: Path) -> dict:
    import json
    import subprocess

    root.chmod(0o755)
    solutions = root / "solutions"
    _write(small_solution_01(), solutions / "01_small.ipynb")
    exercise = generate_exercise(small_solution_01())
    right = {"ex-1-1-solution": WEIGHTED, "ex-1-2-solution": ACCUMULATED}
    # honest students before and after the attackers: each attacker runs beside one of them
    students = {"s1-honest": right, "s4-honest": right}
    for number, (name, body) in zip((2, 3, 5), sorted(TREE_ATTACKS.items()), strict=True):
        students[f"s{number}-{name}"] = {**right, "ex-1-1-solution": _attack(name, body)}
    started = {}
    for user in ("root", "nobody"):  # both at once, each with its own class: the machine is busier, as in a suite
        subs = root / user / "submissions"
        for student, answers in students.items():
            _write(_answered(exercise, answers), subs / student / "01_small.ipynb")
        home = root / user / "home"
        home.mkdir()
        command = [sys.executable, "-c", GRADE_AND_SAY, str(subs), str(solutions), json.dumps(LIMITED)]
        env = {**os.environ, "HOME": str(home), "TMPDIR": str(home)}
        if user == "nobody":  # an unprivileged grader: no cgroup it may create, bubblewrap in a user namespace
            for path in [root / user, *(root / user).rglob("*")]:  # its class and HOME; the rest is readable
                os.chown(path, 65534, 65534)
            command = [*_as_nobody(root), *command]
        started[user] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=home
        )
    results = {}
    for user, process in started.items():
        stdout, stderr = process.communicate(timeout=600)
        result = next((line for line in stdout.splitlines() if line.startswith("RESULT ")), None)
        assert process.returncode == 0 and result, (user, stdout[-3000:], stderr[-3000:])
        results[user] = json.loads(result[len("RESULT ") :])
    for user, result in results.items():  # after both gradings ended
        result["busy_left"] = [p.pid for p in _processes_with(BUSY)]
        result["cgroups_left"] = _cgroups_left(started[user].pid)  # its grader's pid: setpriv and sh exec it
        print(user, json.dumps(result, indent=1))
    return results


def _as_nobody(root: Path) -> list[str]:
    """The command prefix that runs a command as ``nobody`` (uid 65534, no capabilities, no groups). Where this
    Python lives below a folder others may not enter (``/root/.pyenv`` here), a mount namespace of the command's own
    puts a tmpfs over that folder with only the Python installation bound back in it, at the same path."""
    assert os.geteuid() == 0, "the unprivileged grader is started by root (CI's case)"
    python = Path(os.path.realpath(sys.base_prefix))
    closed = next((p for p in reversed(python.parents) if p != Path("/") and not p.stat().st_mode & 0o001), None)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"]
    if closed is None:
        return nobody
    staged = root / "python"
    staged.mkdir()
    script = (
        f"mount --bind {python} {staged} && mount -t tmpfs -o mode=755,size=1m tmpfs {closed} && "
        f'mkdir -p {python} && mount --bind {staged} {python} && exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "as-nobody", *nobody]


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in (process.info["cmdline"] or []):
                found.append(process)
    return found


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_each_tree_limit_holds_and_the_neighbours_keep_every_point(tree_limited, user):
    """As root, a cgroup per notebook (v1 here, as in CI); as an unprivileged user, RLIMIT_NPROC in the sandbox's
    user namespace and the watchdog. The settings column names which held; honest neighbours keep 5 of 5."""
    result = tree_limited[user]
    rows, said = result["rows"], result["said"]
    held = (
        "per notebook: 768 MiB (cgroup v1), 200 processes (cgroup v1)"
        if user == "root"
        else "per notebook: 768 MiB (watchdog), 200 processes (RLIMIT_NPROC)"
    )
    assert all(row["sandbox"].endswith(f"; {held}") for row in rows.values()), rows
    for honest in ("s1-honest", "s4-honest"):
        assert (rows[honest]["status"], rows[honest]["points"]) == ("graded", 5), rows[honest]

    # the cgroup stops the children as they touch their memory past 768 MiB (two of 300 MiB fit); the watchdog at
    # its samples (0.5 s apart), so how many it stops depends on how far each child got then: at least one
    memory = rows["s5-memory"]
    ready, alive = map(int, re.search(r"memory: ready (\d) alive (\d) of 4", said["memory"]).groups())
    print(f"{user}: memory: {ready} of 4 children touched 300 MiB, {alive} alive 1.5 s later; {memory['message']}")
    assert alive <= (2 if user == "root" else 3), (said["memory"], memory)
    assert (memory["status"], memory["points"]) == ("memory-limit", 5), memory
    assert "processes together passed its memory limit of 768 MiB; the largest was stopped" in memory["message"]
    assert memory["feedback"][0].startswith("memory-limit: `the notebook's processes together passed"), memory

    flood = rows["s3-flood"]  # fork refused near 200 (the runner's and the kernel's threads count too)
    started, error = re.search(r"flood: started (\d+) (\w+)", said["flood"]).groups()
    print(f"{user}: flood: {started} children started, then {error}; {flood['message']}")
    assert error == "BlockingIOError" and 100 < int(started) < 200, said["flood"]
    assert (flood["status"], flood["points"]) == ("process-limit", 5), flood
    assert "reached its limit of 200 processes and threads; no more could start" in flood["message"], flood
    assert flood["feedback"][0].startswith("process-limit: `the notebook reached its limit of 200"), flood

    busy = rows["s2-busy"]  # interrupted at the cell timeout: 1.1 undefined, 1.2 passes; no child outlived it
    assert "busy: started 4" in said["busy"], said["busy"]
    assert (busy["status"], busy["points"], busy["checks"]) == ("timeout", 3, {"1.1": 0, "1.2": 3}), busy
    assert result["busy_left"] == [] and result["cgroups_left"] == [], result
