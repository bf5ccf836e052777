"""Running a notebook under nbval in a process of its own, measured: ``run_nbval`` and its result, ``NbvalRun`` (the exit
code, per-cell outcomes, wall and CPU seconds, the kernel's peak RSS and, on request, the largest PSS of the kernel
with every process it starts). The tests, lesson 00 and the grader run notebooks with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
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
import pytest
rc = pytest.main(sys.argv[2:])
# Children only (the kernel): this runner's own maxrss still counts the parent it was forked from before exec.
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    json.dump({"rc": int(rc), "peak_kib": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime}, f)
sys.exit(int(rc))
"""
)


def _cell_outcomes(junit: Path) -> dict[int, dict]:
    cells: dict[int, dict] = {}
    if not junit.exists():
        return cells
    try:
        root = ET.parse(junit).getroot()
    except ET.ParseError:  # cut short (a killed run) or overwritten: no outcomes
        return cells
    for case in root.iter("testcase"):
        match = re.search(r"Cell (\d+)", case.get("name", ""))
        if not match:
            continue
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or child.text or "")[:2000]
            elif child.tag == "skipped":
                outcome = "skipped"
        cells[int(match.group(1))] = {"outcome": outcome, "message": message}
    return cells


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
    workdir: Path | None = None,
    wrap=None,
    tree_memory: bool = False,
) -> NbvalRun:
    """Run ``pytest --nbval`` (or ``--nbval-lax``) on one notebook in a separate process.

    The kernel's peak resident memory (MiB, ``getrusage`` of the runner's children, which include the kernel) and the
    wall time (s) are measured; per-cell outcomes come from pytest's JUnit XML (cell indices count code cells only, as
    nbval names its items ``Cell N``).

    Args:
        timeout: wall-clock limit for the whole run in seconds; on expiry every descendant of the runner (the kernel
            runs in a session of its own) and the runner's process group are killed and ``returncode`` is ``-9``.
        cell_timeout: nbval's per-cell limit in seconds (``--nbval-cell-timeout``).
        preexec_fn: run in the child before it starts (e.g. ``resource.setrlimit`` for a memory limit).
        max_output_bytes: keep at most this many bytes of the run's stdout in ``output`` (the rest is read and
            dropped, so a flood cannot fill the caller's memory); ``output_bytes`` counts them all. ``None``: keep all.
        python: the interpreter that runs pytest and the kernel (``--nbval-current-env``); it needs pytest and nbval.
            Default: this one (``sys.executable``).
        workdir: the folder for the runner's result file and JUnit XML (default: a temporary folder of its own).
        wrap: ``wrap(argv, env, writable) -> (argv, env)``, the command that runs the runner instead (a sandbox,
            ``gradacc.grading.sandbox.Sandbox.wrap`` with its working folder bound): ``env`` holds only the variables
            given here, ``writable`` the two files the runner writes (created empty in ``workdir`` first).
        tree_memory: sample the PSS of the runner's descendants (the kernel and the processes it starts: ranks,
            compiler workers) while it runs: ``tree_pss_mib``. The kernel's ``peak_mib`` alone misses the ranks.
    """
    notebook = Path(notebook).resolve()
    with tempfile.TemporaryDirectory(prefix="gradacc-nbval-") as tmp:
        folder = Path(workdir or tmp)
        result_file, junit = folder / "result.json", folder / "junit.xml"
        args = [
            python or sys.executable,
            "-c",
            _RUNNER,
            str(result_file),
            "--nbval-lax" if lax else "--nbval",
            "--nbval-current-env",
            f"--nbval-cell-timeout={cell_timeout}",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-o",
            "testpaths=",
            f"--junitxml={junit}",
            "-q",
            "--rootdir",
            str(notebook.parent),
            *extra_args,
            str(notebook),
        ]
        full_env = {**os.environ, **(env or {})}
        if wrap is not None:
            for path in (result_file, junit):
                path.write_bytes(b"")
            args, full_env = wrap(args, env or {}, [result_file, junit])
        start = time.perf_counter()
        proc = subprocess.Popen(
            args,
            cwd=cwd or notebook.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
        sampler = _TreeSampler(proc.pid) if tree_memory else None
        output, output_bytes, timed_out = _read_output(proc, timeout, max_output_bytes)
        if timed_out:
            _kill_tree(proc.pid)
            rest, rest_bytes, _ = _read_output(
                proc, 5, None if max_output_bytes is None else max_output_bytes - len(output)
            )
            output, output_bytes = output + rest, output_bytes + rest_bytes
        proc.wait()
        proc.stdout.close()
        returncode = -9 if timed_out else proc.returncode
        wall = time.perf_counter() - start
        peak_kib, cpu_s = 0.0, None
        try:  # the runner's last words; empty when it was killed (and, in a sandbox, writable by the kernel)
            result = json.loads(result_file.read_text())
            peak_kib, cpu_s = float(result["peak_kib"]), result.get("cpu_s")
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return NbvalRun(
            returncode,
            wall,
            peak_kib / 1024,
            output.decode("utf-8", "replace"),
            _cell_outcomes(junit),
            output_bytes,
            sampler.stop() if sampler else None,
            cpu_s,
        )


TREE_SAMPLE_S = 0.25
"""Seconds between two samples of ``_TreeSampler`` (a rank of lesson 05 or 09 lives for several seconds)."""


class _TreeSampler:
    """A thread that sums the PSS (``psutil``'s ``memory_full_info().pss``: /proc/PID/smaps_rollup) of every
    descendant of ``pid`` every ``TREE_SAMPLE_S`` seconds and keeps the largest sum (MiB). Processes that end between
    two samples are missed; a sample costs about a millisecond per process."""

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


def _read_output(proc: subprocess.Popen, timeout: float, limit: int | None) -> tuple[bytes, int, bool]:
    """Read ``proc.stdout`` until end of file, or until ``proc`` has exited and nothing came for a second (a stray
    grandchild may hold the pipe), or ``timeout`` seconds; keep at most ``limit`` bytes.

    Returns ``(kept bytes, total bytes read, whether the timeout expired first)``.
    """
    import selectors

    kept, total = bytearray(), 0
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(kept), total, True
            if not selector.select(min(left, 1.0)):
                if proc.poll() is not None:
                    return bytes(kept), total, False
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return bytes(kept), total, False
            total += len(chunk)
            if limit is None or len(kept) < limit:
                kept += chunk if limit is None else chunk[: limit - len(kept)]


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
