"""Running a notebook under nbval in a process of its own, measured: ``run_nbval`` and its result, ``NbvalRun`` (the exit
code, per-cell outcomes, wall and CPU seconds, the kernel's peak RSS and, on request, the largest PSS of the kernel
with every process it starts). The tests, lesson 00 and the grader run notebooks with it. The run's verdicts reach the
caller through a pipe only the runner holds, never through a file (issue 44).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NbvalRun", "run_nbval", "TREE_SAMPLE_S"]


@dataclass
class NbvalRun:
    """The result of ``run_nbval``: exit code, wall seconds, the kernel's peak memory, and per-cell outcomes."""

    returncode: int
    wall_s: float
    peak_mib: float
    output: str
    cells: dict[int, dict] = field(default_factory=dict)
    """code-cell index -> ``{"outcome": "passed" | "failed" | "skipped", "message": str}``"""
    output_bytes: int = 0
    """bytes the run wrote to its stdout in all; ``output`` keeps at most ``max_output_bytes`` of them"""
    tree_pss_mib: float | None = None
    """with ``tree_memory``: the largest PSS (MiB) of the kernel and every process it started, summed, sampled every
    ``TREE_SAMPLE_S`` seconds (what a container's memory limit counts, shared pages split fairly)"""
    cpu_s: float | None = None
    """CPU seconds (user + system) of the kernel and every process it started and waited for"""
    reports: list[dict] = field(default_factory=list)
    """the records other pytest plugins of the runner sent through its report pipe, in order (``gradacc.grading.plugin``:
    cells started, captured outputs, events)"""

    @property
    def failed_cells(self) -> list[int]:
        return sorted(i for i, c in self.cells.items() if c["outcome"] == "failed")


_RUNNER_PRELUDE = r"""
import json, resource, sys
# nbval imports nbformat, nbformat jsonschema, and jsonschema 4.26.0 imports rfc3987_syntax when it is installed
# (jsonschema/_format.py line 328, for the "iri" formats; jupyter-events requires it), whose syntax_helpers module
# builds about 35 Lark parsers at import: 0.7 s of CPU in every notebook run, for a format no notebook schema uses.
# Without it jsonschema skips those two formats (python-jsonschema/jsonschema#1428 asked for a lazy import).
sys.modules.setdefault("rfc3987_syntax", None)
"""
"""The runner's first lines (``tests/test_notebooks.py`` checks what it spares)."""

_RUNNER = (
    _RUNNER_PRELUDE
    + r"""
import os, re
# The report pipe (descriptor argv[1]) is the only way the run's verdicts leave this process; the kernel does not
# inherit it. Not dumpable, this process lets no process without CAP_SYS_PTRACE (none in the sandbox), even of its
# own user, ptrace it or open its /proc/<pid>/fd, mem or environ (Linux kernel/ptrace.c, __ptrace_may_access).
channel = os.fdopen(int(sys.argv[1]), "w", encoding="utf-8")
os.set_inheritable(channel.fileno(), False)
if sys.platform.startswith("linux"):
    import ctypes
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4 (linux/prctl.h)
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
import pytest

class Report:
    # a pytest plugin: each cell's outcome as pytest's JUnit XML gives it (a failed set-up or tear-down fails the
    # cell), and send() for the other plugins (config.pluginmanager.get_plugin("gradacc-report"))
    __name__ = "gradacc-report"  # the name pytest registers it under

    def send(self, record):
        channel.write(json.dumps(record) + "\n")
        channel.flush()

    def pytest_runtest_logreport(self, report):
        # nbval's "Cell N", or a cell of a graded notebook named for the learner ("check 2.1 (cell 7/11 in
        # JupyterLab)": gradacc.course.pytest_plugin keeps nbval's N in the report's user_properties)
        match = re.search(r"::Cell (\d+)$", report.nodeid)
        cell = dict(report.user_properties).get("nbval-cell", match and int(match.group(1)))
        if cell is not None and (report.when == "call" or not report.passed):
            message = ""
            if report.failed:
                crash = getattr(report.longrepr, "reprcrash", None)
                message = str(report.longrepr) if crash is None else crash.message
                if report.when != "call":
                    message = f'failed on {report.when} with "{message}"'
            self.send({"kind": "outcome", "cell": cell, "outcome": report.outcome, "message": message[:2000]})

report = Report()
rc = pytest.main(sys.argv[2:], plugins=[report])
# Children only (the kernel): this runner's own maxrss still counts the parent it was forked from before exec.
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
report.send({"kind": "end", "peak_kib": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime})
sys.exit(int(rc))
"""
)
_REPORT_BYTES = 2**25
"""The most of a run's report pipe ``run_nbval`` keeps (32 MiB; a grading run's plugin caps each cell's text)."""


def run_nbval(
    notebook: Path,
    *,
    lax: bool = False,
    timeout: float = 600,
    cell_timeout: float = 300,
    cwd: Path | None = None,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    preexec_fn=None,
    max_output_bytes: int | None = None,
    python: str | None = None,
    wrap=None,
    tree_memory: bool = False,
    watch=None,
) -> NbvalRun:
    """Run ``pytest --nbval`` (or ``--nbval-lax``) on one notebook in a separate process.

    The kernel's peak resident memory (MiB, ``getrusage`` of the runner's children, which include the kernel) and the
    wall time (s) are measured. Per-cell outcomes (cell indices count code cells only, as nbval names its items
    ``Cell N``) come from the runner itself, as JSON lines on a pipe only it holds, never from a file the notebook's
    code could write (the kernel does not inherit the pipe, nor can it open it through ``/proc``: see ``_RUNNER``).

    Args:
        timeout: wall-clock limit for the whole run in seconds; on expiry every descendant of the runner (the kernel
            runs in a session of its own) and the runner's process group are killed and ``returncode`` is ``-9``.
        cell_timeout: nbval's per-cell limit in seconds (``--nbval-cell-timeout``).
        preexec_fn: run in the child before it starts (e.g. ``resource.setrlimit`` for a memory limit).
        max_output_bytes: keep at most this many bytes of the run's stdout in ``output`` (the rest is read and
            dropped, so a flood cannot fill the caller's memory); ``output_bytes`` counts them all. ``None``: keep all.
        python: the interpreter that runs pytest and the kernel (``--nbval-current-env``); it needs pytest and nbval.
            Default: this one (``sys.executable``).
        wrap: ``wrap(argv, env) -> (argv, env)``, the command that runs the runner instead (a sandbox,
            ``gradacc.grading.sandbox.Sandbox.wrap``); ``env`` holds only the variables given here. The report pipe's
            descriptor passes through it (bubblewrap keeps inherited descriptors).
        tree_memory: sample the PSS of the runner's descendants (the kernel and the processes it starts: ranks,
            compiler workers) while it runs: ``tree_pss_mib``. The kernel's ``peak_mib`` alone misses the ranks.
    """
    notebook = Path(notebook).resolve()
    read_end, write_end = os.pipe()
    args = [
        python or sys.executable,
        "-c",
        _RUNNER,
        str(write_end),
        "--nbval-lax" if lax else "--nbval",
        "--nbval-current-env",
        f"--nbval-cell-timeout={cell_timeout}",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-o",
        "testpaths=",
        "-q",
        "--rootdir",
        str(notebook.parent),
        *extra_args,
        str(notebook),
    ]
    full_env = {**os.environ, **(env or {})}
    if wrap is not None:
        args, full_env = wrap(args, env or {})
    start = time.perf_counter()
    with open(read_end, "rb", buffering=0):
        try:
            proc = subprocess.Popen(
                args,
                cwd=cwd or notebook.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
                preexec_fn=preexec_fn,
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)  # the runner's copy is the only one: the pipe ends when the runner does
        sampler = _TreeSampler(proc.pid) if tree_memory else None
        watcher = watch(proc.pid) if watch is not None else None
        with proc.stdout:
            pipes = _Pipes(proc, read_end, max_output_bytes)
            timed_out = pipes.read(timeout)
            if timed_out:
                _kill_tree(proc.pid)
                pipes.read(5)
            proc.wait()
        if watcher is not None:
            watcher.stop()
    wall = time.perf_counter() - start
    cells, peak_kib, cpu_s, reports = _read_report(bytes(pipes.kept["report"]))
    return NbvalRun(
        -9 if timed_out else proc.returncode,
        wall,
        peak_kib / 1024,
        bytes(pipes.kept["output"]).decode("utf-8", "replace"),
        cells,
        pipes.total["output"],
        sampler.stop() if sampler else None,
        cpu_s,
        reports,
    )


def _read_report(data: bytes) -> tuple[dict[int, dict], float, float | None, list[dict]]:
    """``(cell outcomes, peak KiB, CPU seconds, other records)`` from the runner's JSON lines; a line cut short (a killed run, or
    past ``_REPORT_BYTES``) is dropped, and a failed phase of a cell is never replaced by a later one."""
    cells, peak_kib, cpu_s, reports = {}, 0.0, None, []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kind") == "outcome":
            if cells.get(record["cell"], {}).get("outcome") != "failed":
                cells[record["cell"]] = {"outcome": record["outcome"], "message": record["message"]}
        elif record.get("kind") == "end":
            peak_kib, cpu_s = float(record["peak_kib"]), record.get("cpu_s")
        else:
            reports.append(record)
    return cells, peak_kib, cpu_s, reports


class _Pipes:
    """The runner's stdout (``output``: ``limit`` bytes kept, ``None``: all; every byte counted) and its report pipe
    (``report``: ``_REPORT_BYTES`` kept), read together so that neither fills up while the other is waited on."""

    def __init__(self, proc: subprocess.Popen, report_fd: int, limit: int | None) -> None:
        self.proc, self.names = proc, {proc.stdout.fileno(): "output", report_fd: "report"}
        self.limits = {"output": limit, "report": _REPORT_BYTES}
        self.kept, self.total = {"output": bytearray(), "report": bytearray()}, {"output": 0, "report": 0}
        self.open = set(self.names)

    def read(self, timeout: float) -> bool:
        """Read until both pipes end, or the runner has exited and nothing came for a second (a stray grandchild may
        hold its stdout), or ``timeout`` seconds; return whether the timeout expired first."""
        import selectors

        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self.open:
                selector.register(fd, selectors.EVENT_READ)
            while self.open:
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                ready = selector.select(min(left, 1.0))
                if not ready and self.proc.poll() is not None:
                    return False
                for key, _ in ready:
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        self.open.discard(key.fd)
                        continue
                    name = self.names[key.fd]
                    self.total[name] += len(chunk)
                    kept, limit = self.kept[name], self.limits[name]
                    kept += chunk if limit is None else chunk[: max(0, limit - len(kept))]
        return False


def _kill_tree(pid: int) -> None:
    """SIGKILL every descendant of ``pid`` (found while ``pid`` still lives) and then its process group."""
    import signal

    import psutil

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    for process in descendants:
        try:
            process.kill()
        except psutil.Error:
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


TREE_SAMPLE_S = 1.0
"""Seconds between two samples of ``_TreeSampler`` (a rank of lesson 05 or 09 lives for several seconds, its memory a
plateau while it trains). Every sample costs CPU in the sampling process: at 0.25 s, 2.2-3.0 s of CPU for a 25-30 s
run of lesson 07, about 110 s of CPU over the test suite's notebook runs (2026-12-03)."""


class _TreeSampler:
    """A thread that sums the PSS (``psutil``'s ``memory_full_info().pss``: /proc/PID/smaps_rollup) of every
    descendant of ``pid`` every ``TREE_SAMPLE_S`` seconds and keeps the largest sum (MiB). Processes that end between
    two samples are missed; a sample costs 5-12 ms of CPU per process that imported torch (psutil 7, 2026-12-03)."""

    def __init__(self, pid: int) -> None:
        import threading

        import psutil

        self._root, self._psutil = psutil.Process(pid), psutil
        self.peak_mib = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> float:
        total = 0
        try:
            processes = self._root.children(recursive=True)
        except self._psutil.Error:
            return 0.0
        for process in processes:
            try:
                total += process.memory_full_info().pss
            except self._psutil.Error:  # ended meanwhile, or not ours to read
                pass
        return total / 2**20

    def _run(self) -> None:
        while not self._done.wait(TREE_SAMPLE_S):
            self.peak_mib = max(self.peak_mib, self._sample())

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak_mib
