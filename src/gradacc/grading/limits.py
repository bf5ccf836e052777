"""Per-notebook limits that count the whole process tree: memory and processes of one grading run (its grading
process, its kernel and every process they start), however many processes the submission's code starts.

``start_limits(memory_mib, max_processes, sandbox)`` chooses, once per grading, how each limit is enforced here, and
never silently: ``NotebookLimits.label`` names the mechanism of each limit, and every gradebook row records it.

* **A cgroup per notebook** where the grader may create one (as root, or in a cgroup delegated to its user):
  cgroup v2 (``memory.max``, ``memory.swap.max = 0``, ``pids.max``) where the grader's own cgroup already lets its
  children have the ``memory`` and ``pids`` controllers (``cgroup.subtree_control``; the grader never writes it), or
  cgroup v1's ``memory`` and ``pids`` hierarchies (``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes``,
  ``pids.max``). The grader creates ``gradacc-<pid>-<n>`` BELOW the cgroup it runs in, moves only the run's first
  process into it (a ``/bin/sh`` that writes ``0``, itself, into ``cgroup.procs`` and then ``exec``s the run: every
  process the run starts is born inside), kills what is left in it when the run ends, and removes it. It never writes
  a cgroup it did not create. Past the memory limit the Linux kernel reclaims, then its OOM killer kills the largest
  process of that cgroup only (``memory-limit``: ``oom_kill`` in ``memory.oom_control`` / ``memory.events``); past
  the process limit ``fork`` and ``clone`` fail with ``EAGAIN`` in that notebook only (``process-limit``: ``max`` in
  ``pids.events``). The grading process's ``oom_score_adj`` stays 0 and its kernel's is raised to 1000
  (``gradacc.grading.plugin``): the OOM killer takes the submission's processes first.
* **Unprivileged** (no cgroup may be created): processes by ``RLIMIT_NPROC``, set in the sandbox's grading process.
  Linux (5.14 and newer, ``kernel/ucount.c``) counts it per user and user namespace, and bubblewrap gives each
  notebook a user namespace of its own: the limit counts that notebook's processes and threads only. It does not
  hold for root (``kernel/fork.c`` exempts ``INIT_USER``) nor without the sandbox (it would count all of the
  instructor's processes): there the process limit is ``none`` and the label says so. Memory by a watchdog: a
  thread of the grader sums the anonymous resident memory (``RssAnon`` of ``/proc/<pid>/status``) of the run's
  processes every ``WATCH_S`` seconds, and when that passes the limit, sums it again with each shared page counted
  once (``Pss_Anon`` + ``Pss_Shmem`` of ``smaps_rollup``: a forked child shares its parent's pages); past the limit
  it kills the largest process below the grading process (as the OOM killer would) until the sum is below it. It
  also records a run whose processes and threads reached the process limit. Between two samples a tree can hold
  more: at most ``max_processes`` processes of ``RLIMIT_DATA`` (``--memory-mib``) each; the scratch ``tmpfs`` and
  kernel memory are not counted.

``RLIMIT_DATA`` (``--memory-mib``) still holds for each process as well (``gradacc.grading.plugin``): one process
past it gets a ``MemoryError`` instead of being killed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NotebookLimits", "RunLimits", "start_limits", "WATCH_S"]

WATCH_S = 0.5
"""Seconds between two samples of the unprivileged memory watchdog (about 0.2 ms of CPU per process sampled)."""
_PREFIX = "gradacc-"
_counter = itertools.count()
_ENTER = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
"""The run's first process: writes itself into each cgroup given, then becomes the run (``sh -c`` with arguments
``COUNT PROCS... ARGV...``); exit code 125 when it cannot."""


def _own_cgroups() -> dict[str, str]:
    """Controller (``memory``, ``pids``; ``""`` for v2) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _mounts() -> dict[str, Path]:
    """Controller (``memory``, ``pids``; ``""`` for the cgroup2 mount) -> where its hierarchy is mounted."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype, _, options = right.split(" ")[:3]
            point = Path(left.split(" ")[4])
            if fstype == "cgroup2":
                found.setdefault("", point)
            elif fstype == "cgroup":
                for option in options.split(","):
                    if option in ("memory", "pids"):
                        found.setdefault(option, point)
    return found


def _cgroup_parents() -> tuple[str, dict[str, Path]] | None:
    """``("cgroup v2" | "cgroup v1", {controller: the folder of this process's own cgroup})`` where a child cgroup
    with both limits can be created here, else ``None``: v2 needs ``memory`` and ``pids`` already in the own cgroup's
    ``cgroup.subtree_control``; v1 needs both hierarchies mounted. Whether it may create one is tried by
    ``start_limits``."""
    own, mounts = _own_cgroups(), _mounts()
    if "" in mounts and "" in own:
        folder = mounts[""] / own[""].lstrip("/")
        with contextlib.suppress(OSError):
            if {"memory", "pids"} <= set((folder / "cgroup.subtree_control").read_text().split()):
                return "cgroup v2", {"": folder}
    if all(name in mounts and name in own for name in ("memory", "pids")):
        return "cgroup v1", {name: mounts[name] / own[name].lstrip("/") for name in ("memory", "pids")}
    return None


@dataclass(frozen=True)
class NotebookLimits:
    """The limits of every grading run and how each is enforced here (``start_limits`` makes one).

    Attributes:
        memory_mib: the most memory (MiB, 2**20 bytes) a run's processes hold together.
        max_processes: the most processes and threads a run has at once (a cgroup's ``pids.max`` and
            ``RLIMIT_NPROC`` both count threads).
        memory_by: ``"cgroup v2"``, ``"cgroup v1"``, ``"watchdog"`` or ``"none"`` (not Linux).
        processes_by: ``"cgroup v2"``, ``"cgroup v1"``, ``"RLIMIT_NPROC"`` or ``"none"``.
        parents: controller -> the grader's own cgroup folder, below which each run's cgroup is created.
    """

    memory_mib: int
    max_processes: int
    memory_by: str
    processes_by: str
    parents: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """What a gradebook row records, e.g. ``per notebook: 2048 MiB (cgroup v1), 1024 processes (cgroup v1)``."""
        processes = (
            "processes not limited"
            if self.processes_by == "none"
            else f"{self.max_processes} processes ({self.processes_by})"
        )
        memory = "memory not limited" if self.memory_by == "none" else f"{self.memory_mib} MiB ({self.memory_by})"
        return f"per notebook: {memory}, {processes}"

    def run(self) -> RunLimits:
        """The limits of one run: ``with limits.run() as run: ...`` (creates and removes its cgroups)."""
        return RunLimits(self)


@dataclass
class RunLimits:
    """One grading run's limits: its cgroups (created on ``__enter__``, emptied and removed on ``__exit__``), the
    command that enters them (``wrap``), the watchdog (``watch``) and what held the run back (``events``)."""

    limits: NotebookLimits
    folders: dict[str, Path] = field(default_factory=dict)
    _watchdog: _Watchdog | None = None

    def __enter__(self) -> RunLimits:
        if self.limits.memory_by.startswith("cgroup"):
            self.folders = _create(self.limits, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
        return self

    def __exit__(self, *exc) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        for folder in self.folders.values():
            _remove(folder)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this run's cgroups (unchanged without cgroups)."""
        if not self.folders:
            return list(argv)
        procs = [str(folder / "cgroup.procs") for folder in self.folders.values()]
        return ["/bin/sh", "-c", _ENTER, "gradacc-cgroup", str(len(procs)), *procs, *argv]

    @property
    def nproc(self) -> int | None:
        """The ``RLIMIT_NPROC`` the run's grading process sets (``gradacc.grading.plugin``), or ``None``."""
        return self.limits.max_processes if self.limits.processes_by == "RLIMIT_NPROC" else None

    def watch(self, pid: int):
        """Start the watchdog on the run whose first process is ``pid`` (``run_nbval``'s ``watch``); a no-op with
        cgroups. Returns an object with ``stop()``."""
        if self.limits.memory_by == "watchdog":
            self._watchdog = _Watchdog(pid, self.limits)
            return self._watchdog
        return None

    def events(self) -> list[dict]:
        """What held the run back, as the grading plugin's events (``kind`` ``memory-limit`` / ``process-limit``,
        ``cell`` ``None``, ``detail``); call it after the run ended, before ``__exit__``."""
        found = []
        if self._watchdog is not None:
            self._watchdog.stop()
            found += self._watchdog.events
        by = self.limits.memory_by
        if "memory" in self.folders or "" in self.folders:
            memory = self.folders.get("memory") or self.folders[""]
            name = "memory.oom_control" if by == "cgroup v1" else "memory.events"
            kills = _counter_in(memory / name, "oom_kill")
            if kills:
                peak = _number(memory / ("memory.max_usage_in_bytes" if by == "cgroup v1" else "memory.peak"))
                held = f" (peak {peak / 2**20:.0f} MiB)" if peak else ""
                detail = f"{kills} process(es) killed by the OOM killer at {self.limits.memory_mib} MiB{held}"
                found.append(_event("memory-limit", detail))
        if "pids" in self.folders or "" in self.folders:
            refused = _counter_in((self.folders.get("pids") or self.folders[""]) / "pids.events", "max")
            if refused:
                found.append(_event("process-limit", f"{refused} fork(s) refused at {self.limits.max_processes}"))
        return found


def _event(kind: str, detail: str) -> dict:
    return {"kind": kind, "cell": None, "detail": detail}


def _number(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return 0


def _counter_in(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _create(limits: NotebookLimits, name: str) -> dict[str, Path]:
    """Create the run's cgroups ``name`` below the grader's own and write their limits; on failure remove what was
    created and raise ``OSError``."""
    memory = str(limits.memory_mib * 2**20)
    settings = {
        "": [("memory.max", memory), ("memory.swap.max", "0"), ("pids.max", str(limits.max_processes))],
        "memory": [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
        "pids": [("pids.max", str(limits.max_processes))],
    }
    created: dict[str, Path] = {}
    try:
        for controller, parent in limits.parents:
            folder = Path(parent) / name
            folder.mkdir()
            created[controller] = folder
            for file, value in settings[controller]:
                if file == "memory.memsw.limit_in_bytes" and not (folder / file).exists():
                    continue  # no swap accounting (no swap): memory.limit_in_bytes is the limit
                (folder / file).write_text(value)
    except OSError:
        for folder in created.values():
            _remove(folder)
        raise
    return created


def _remove(folder: Path) -> None:
    """Kill what is left in a run's cgroup (it holds only the run's processes), wait until it is empty, remove it."""
    deadline = time.monotonic() + 10
    while True:
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except OSError:
            return  # already gone
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for _ in range(100):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY a moment after the last process died
            time.sleep(0.05)
    folder.rmdir()


def _remove_stale(parent: Path) -> None:
    """Remove the empty run cgroups (``gradacc-<pid>-<n>``) that a grader killed by ``SIGKILL`` left below
    ``parent``: those whose grader process ``<pid>`` is gone. A cgroup that still holds a process is left alone."""
    for folder in parent.glob(f"{_PREFIX}*-*"):
        pid = folder.name[len(_PREFIX) :].split("-")[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(OSError):
            if not (folder / "cgroup.procs").read_text().split():
                folder.rmdir()


class _Watchdog:
    """A thread that sums the ``RssAnon`` (past the limit: ``_pss_anon``) and counts the threads of every process
    below ``pid`` every ``WATCH_S`` seconds; past ``memory_mib`` it kills the largest process below the grading process (the first process of the
    run whose pid in its own namespace is 1, or ``pid`` itself unsandboxed)."""

    def __init__(self, pid: int, limits: NotebookLimits) -> None:
        import psutil

        self.root, self.limits, self.psutil = psutil.Process(pid), limits, psutil
        self.events: list[dict] = []
        self.peak_mib, self.peak_tasks, self.killed = 0.0, 0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(WATCH_S):
            self.sample()

    def sample(self) -> None:
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except self.psutil.Error:
            return
        status = {p.pid: _status(p.pid) for p in tree}
        runner = next((p.pid for p in tree if status[p.pid].get("NSpid", "").split()[-1:] == ["1"]), self.root.pid)
        below = _descendants(runner, {pid: int(s.get("PPid", "0") or 0) for pid, s in status.items()})
        inside = [s for s in status.values() if len(s.get("NSpid", "").split()) > 1] or list(status.values())
        tasks = sum(int(s.get("Threads", "0").split()[0]) for s in inside)  # RLIMIT_NPROC counts the namespace's
        anon = {pid: int(s.get("RssAnon", "0 kB").split()[0]) * 1024 for pid, s in status.items()}
        total = sum(anon.values())
        if total > self.limits.memory_mib * 2**20:  # forked children share pages: count each page once
            anon = {pid: _pss_anon(pid) for pid in anon}
            total = sum(anon.values())
        self.peak_mib, self.peak_tasks = max(self.peak_mib, total / 2**20), max(self.peak_tasks, tasks)
        limit = self.limits.memory_mib * 2**20
        while total > limit and below:
            largest = max(below, key=lambda pid: anon.get(pid, 0))
            with contextlib.suppress(OSError):
                os.kill(largest, signal.SIGKILL)
                self.killed += 1
            total -= anon.pop(largest, 0)
            below.discard(largest)
        if self.killed and not any(e["kind"] == "memory-limit" for e in self.events):
            self.events.append(_event("memory-limit", f"killed the largest process at {self.limits.memory_mib} MiB"))
        if (
            self.limits.processes_by == "RLIMIT_NPROC"
            and tasks >= self.limits.max_processes
            and not any(e["kind"] == "process-limit" for e in self.events)
        ):
            self.events.append(_event("process-limit", f"{tasks} processes and threads at {self.limits.max_processes}"))

    def stop(self) -> None:
        if not self._done.is_set():
            self._done.set()
            self._thread.join()
            for event in self.events:
                event["detail"] += f" (sampled: peak {self.peak_mib:.0f} MiB, {self.peak_tasks} processes and threads)"


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def _pss_anon(pid: int) -> int:
    """Bytes of anonymous and shared memory (``Pss_Anon`` + ``Pss_Shmem`` of ``/proc/<pid>/smaps_rollup``) of a
    process, pages shared with other processes split between them (a forked child shares its parent's pages)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    fields = {k: v.split()[0] for k, _, v in (line.partition(":") for line in text.splitlines()) if v.strip()}
    keys = ("Pss_Anon", "Pss_Shmem") if "Pss_Anon" in fields else ("Pss",)
    return sum(int(fields.get(key, 0)) for key in keys) * 1024


def _descendants(pid: int, parent: dict[int, int]) -> set[int]:
    """The pids below ``pid`` in ``parent`` (pid -> its parent's pid)."""
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, up in parent.items() if up in frontier and child not in found}
        found |= frontier
    return found


def start_limits(memory_mib: int, max_processes: int, sandbox: str) -> NotebookLimits:
    """How each limit is enforced here: a cgroup per notebook where one can be created (tried now, removed at once),
    else ``RLIMIT_NPROC`` in the sandbox's user namespace (not as root, not with ``sandbox == "none"``) and the
    memory watchdog.

    Raises:
        ValueError: ``memory_mib`` or ``max_processes`` is not positive.
    """
    if not memory_mib > 0 or not max_processes > 0:
        raise ValueError(f"memory_mib and max_processes must be > 0, got {memory_mib} and {max_processes}")
    if sys.platform.startswith("linux"):
        found = _cgroup_parents()
        if found is not None:
            kind, parents = found
            limits = NotebookLimits(
                memory_mib, max_processes, kind, kind, tuple((k, str(v)) for k, v in parents.items())
            )
            try:
                with limits.run():
                    pass
            except OSError:
                pass  # not ours to create: the unprivileged path below
            else:
                for _, parent in limits.parents:
                    _remove_stale(Path(parent))
                return limits
    if not sys.platform.startswith("linux"):  # no /proc to watch (the bwrap sandbox is Linux-only anyway)
        return NotebookLimits(memory_mib, max_processes, "none", "none")
    processes = "RLIMIT_NPROC" if sandbox != "none" and os.geteuid() != 0 else "none"
    return NotebookLimits(memory_mib, max_processes, "watchdog", processes)
