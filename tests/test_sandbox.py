"""The grader's sandbox (``gradacc.grading.sandbox``: bubblewrap) against submissions that attack the machine.

One ``grade`` call (module fixture) grades, with the default sandbox and real kernels, a correct submission next to
six attackers. Each attacker answers the exercise correctly (or, for the two that would profit, exactly as well as the
attack lets it) and first tries one thing the sandbox must stop:

* ``net``: a TCP connection to a listener this test runs on 127.0.0.1;
* ``reader``: the hidden checks and the reference solution (the corpus's and the course's own), to copy its answer;
* ``forger``: a forged row appended to the grading journal, and the gradebook rewritten;
* ``neighbour``: another student's notebook overwritten and a file planted in that student's folder;
* ``daemon``: a process left behind by a double fork and ``setsid``;
* ``filler``: 100,000 small files.

What each attack saw inside is read from its solution cell's captured stdout (``run_nbval`` is wrapped to keep each
run's capture and the grader's folder as it was when the run ended); what it did outside is checked outside. With
``--sandbox none`` every one of these attacks succeeds (tried once by hand: the listener received the bytes, the
reader copied the reference's answer and scored 5, both files were rewritten, the neighbour's notebook overwritten,
the daemon still alive after the run, 100,000 files on the disk), so each assertion here would fail without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import sys
import threading
from pathlib import Path

import psutil
import pytest
from conftest import ROOT
from test_grading import ACCUMULATED, HIDDEN_01, WEIGHTED, WRONG_WEIGHTED, _answered, _write, small_solution_01

import gradacc.grading.run
from gradacc.course.notebooks import generate_exercise
from gradacc.grading import Settings, grade, read_journal
from gradacc.grading.sandbox import start_sandbox

pytestmark = [pytest.mark.notebook, pytest.mark.xdist_group("sandbox"), pytest.mark.usefixtures("bwrap")]

SCRATCH_MIB = 64
SETTINGS = Settings(
    timeout=90, cell_timeout=20, memory_mib=1024, max_output_kib=1024, workers=2, seed=4321, scratch_mib=SCRATCH_MIB
)
DAEMON = "gradacc-test-daemon-left-behind"


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

    runs: dict[str, dict] = {}
    real_run_nbval = gradacc.grading.run.run_nbval

    def recording_run_nbval(notebook, **kwargs):
        run = real_run_nbval(notebook, **kwargs)
        match = re.search(r"# attack: (\w+)", Path(notebook).read_text())
        if match:  # the grader's folder as the run left it, and the daemon's fate when the run has ended
            folder = Path(notebook).parent
            capture = json.loads((folder / "capture.json").read_text() or "{}")
            runs[match.group(1)] = {
                "files": {p.name: p.stat().st_size for p in folder.rglob("*")},
                "said": capture.get("cells", {}).get("solution:ex-1-1-solution", {}).get("stdout", ""),
                "daemons_after": [p.pid for p in _daemons()],
            }
        return run

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
        print(f"{student}: {run['said'].strip()} | grader's folder after the run: {run['files']}")
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
    label = f"{bwrap.split(',')[0]}, {SCRATCH_MIB} MiB scratch"  # e.g. bubblewrap 0.8.0, 64 MiB scratch
    assert re.fullmatch(r"bubblewrap \d+\.\d+\.\d+, 64 MiB scratch", label) and attacked["book"].sandbox == label
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
    assert seed == SETTINGS.seed and len(journaled) == len(rows) == 7
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
    # the grader's folder on the disk holds the notebook and the three files the grader reads back, nothing else
    assert sorted(run["files"]) == ["01_small.ipynb", "capture.json", "junit.xml", "result.json"]
    assert sum(run["files"].values()) < 2**20
    row = _row(attacked, "filler")
    print(f"filler: {written} files of 512 bytes before ENOSPC; row {row.status} {row.points}: {row.message}")
    assert row.status == "graded"


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
    assert start_sandbox("none").label == "none"
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(GradingError, match="needs Linux .* not darwin"):
        start_sandbox("bwrap")
