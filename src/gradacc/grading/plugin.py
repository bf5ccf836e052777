"""The pytest plugin inside every grading run (``pytest -p gradacc.grading.plugin --nbval-lax ...``).

``gradacc.grading`` loads it into the separate pytest process that runs one merged notebook under nbval; it does nothing
unless the environment variable ``GRADACC_GRADING`` holds its settings (JSON), which it removes before the kernel
starts. In that process, before the kernel exists, it:

* sets resource limits that the kernel inherits: ``RLIMIT_NPROC`` where the grader enforces the notebook's process
  limit with it (``gradacc.grading.limits``), ``RLIMIT_DATA`` (memory: heap and private mappings, in bytes; Linux
  counts anonymous ``mmap`` in it since 4.7, so numpy and torch allocations fail with ``MemoryError`` /
  ``RuntimeError: ... can't allocate memory`` instead of swapping the machine), ``RLIMIT_FSIZE`` (largest file the
  kernel may write) and ``RLIMIT_CORE = 0``;
* dies with the grader (unsandboxed runs; in the sandbox, bubblewrap's ``--die-with-parent`` and the pid namespace
  do it): ``PR_SET_PDEATHSIG`` (Linux) sends this process SIGKILL when the grader that started it dies (a killed
  ``gradacc grade``, later resumed with ``--resume``), and its kernel, whose parent this process is, then exits by
  itself (ipykernel polls its parent); nothing of a killed run keeps running;
* sends the kernel's own stdout/stderr file descriptors to ``/dev/null`` (nbval already does it for stderr), so a
  kernel writing straight to fd 1 cannot flood the grader's pipe;
* counts the bytes of every IOPub output message (stream text, display data, errors) as it arrives, also while nbval
  is still waiting for the cell to finish, and stops the kernel as soon as the notebook's total passes the cap
  (event ``output-limit``): what the runner holds in memory stays bounded by the cap;
* notices a dead kernel within half a second instead of waiting for the cell timeout (event ``kernel-died``), and
  records cell timeouts (event ``cell-timeout``);
* sends, through the runner's report pipe (``gradacc.course.nbval_run.run_nbval``: a descriptor only the runner holds,
  never a file), each cell as it starts, the events above as they happen, and, for every cell whose metadata carries
  ``gradacc_capture`` (a key chosen by the grader), the text the cell printed to stdout plus the ``text/plain`` of its
  results (capped), its stderr (capped) and its error name and value; at the end, which of the file names the grader
  once read its verdicts from (``PLANTED``) the notebook's code left in the working folder (the grader ignores them
  and flags the row).

nbval internals patched (nbval 0.11): ``nbval.kernel.start_new_kernel``, ``RunningKernel.get_message``,
``RunningKernel.await_reply`` and ``IPyNbCell.runtest``. tests/test_grading.py exercises every one of them.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from queue import Empty

ENV = "GRADACC_GRADING"
PLANTED = ("junit.xml", "result.json", "capture.json")
"""Where a forged verdict would once have been read (before issue 44): the runner reports them if they exist."""


class _SkipSlowImport:
    """A ``sys.meta_path`` finder that makes ``import rfc3987_syntax`` fail in the grading process.

    nbval imports nbformat, which imports jsonschema, which imports the optional ``rfc3987_syntax`` (it compiles a
    grammar at import: about 2.5 s of CPU, the largest single cost of a small grading run) only to validate the
    ``iri`` string format, which the notebook schema does not use; jsonschema skips it on ``ImportError``. Active only
    when this module is loaded by a grading run (``-p gradacc.grading.plugin`` before ``-p nbval.plugin``).
    """

    def find_spec(self, name, path=None, target=None):
        if name == "rfc3987_syntax" or name.startswith("rfc3987_syntax."):
            raise ImportError(f"{name} is not needed in a grading run")
        return None


if ENV in os.environ:
    import sys

    sys.meta_path.insert(0, _SkipSlowImport())
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "update_display_data", "error")

_settings: dict = {}
_state: dict = {"output_bytes": 0, "current": None, "report": None}


def _send(record: dict) -> None:
    _state["report"].send(record)


def _event(kind: str, detail: str = "") -> None:
    _send({"kind": "event", "event": kind, "cell": _state["current"], "detail": detail})


def _message_bytes(msg: dict) -> int:
    if msg.get("msg_type") not in _OUTPUT_TYPES:
        return 0
    content = msg.get("content", {})
    size = len(content.get("text", "")) + len(content.get("evalue", ""))
    size += sum(len(line) for line in content.get("traceback", []))
    for value in content.get("data", {}).values():
        size += len(value) if isinstance(value, str) else len(json.dumps(value))
    return size


def _patch_nbval() -> None:
    import nbval.kernel
    import nbval.plugin

    start_new_kernel = nbval.kernel.start_new_kernel

    def start_quiet_kernel(*args, **kwargs):
        kwargs["stdout"] = open(os.devnull, "w")  # noqa: SIM115 - the kernel process keeps it
        kwargs["stderr"] = open(os.devnull, "w")  # noqa: SIM115
        manager, client = start_new_kernel(*args, **kwargs)
        _first_for_the_oom_killer(manager)
        return manager, client

    nbval.kernel.start_new_kernel = start_quiet_kernel
    kernel_class = nbval.kernel.RunningKernel
    get_message = kernel_class.get_message

    def take_iopub(kernel, timeout):
        msg = get_message(kernel, "iopub", timeout=timeout)
        _state["output_bytes"] += _message_bytes(msg)
        if _state["output_bytes"] > _settings["output_bytes"]:
            _event("output-limit", f"{_state['output_bytes']} bytes")
            kernel.stop()
            raise RuntimeError(
                f"the notebook's output passed the grader's limit of {_settings['output_bytes']} bytes;"
                " the kernel was stopped"
            )
        return msg

    def patched_get_message(self, stream, timeout=None):
        if stream == "iopub":
            pending = self.__dict__.setdefault("_gradacc_pending", collections.deque())
            if pending:
                return pending.popleft()
            return take_iopub(self, timeout)
        return get_message(self, stream, timeout=timeout)

    def patched_await_reply(self, msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = self.__dict__.setdefault("_gradacc_pending", collections.deque())
        while True:
            # Drain IOPub while waiting, so a cell that prints in a loop is measured (and stopped) as it prints.
            while True:
                try:
                    pending.append(take_iopub(self, 0))
                except Empty:
                    break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                _event("cell-timeout", f"{timeout:g} s")
                raise Empty
            try:
                msg = get_message(self, "shell", timeout=0.5 if left is None else min(0.5, left))
            except Empty:
                if not self.is_alive():
                    _event("kernel-died")
                    raise RuntimeError("the kernel died while running this cell") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["content"]["status"] == "aborted":
                    raise RuntimeError("Kernel aborted execution request")
                return

    kernel_class.get_message = patched_get_message
    kernel_class.await_reply = patched_await_reply

    cell_class = nbval.plugin.IPyNbCell
    runtest = cell_class.runtest

    def patched_runtest(self):
        key = self.cell.get("metadata", {}).get("gradacc_capture")
        _state["current"] = key or f"Cell {self.cell_num}"
        _send({"kind": "started", "cell": _state["current"]})
        try:
            runtest(self)
        finally:
            if key:
                _send({"kind": "captured", "cell": key, **_summarize(self.test_outputs or [])})

    cell_class.runtest = patched_runtest


def _first_for_the_oom_killer(manager) -> None:
    """Raise the kernel's ``oom_score_adj`` to 1000 (its children inherit it): past a notebook's cgroup memory limit
    the OOM killer takes the submission's processes before this grading process, which then reports the cells that
    passed. Raising it needs no privilege; where ``/proc`` refuses, nothing changes."""
    process = getattr(getattr(manager, "provisioner", None), "process", None)
    if process is not None and sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{process.pid}/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass


def _summarize(outputs: list) -> dict:
    cap = _settings["text_bytes"]
    stdout, stderr, error = [], [], None
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            (stdout if out.get("name") == "stdout" else stderr).append(out.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            text = out.get("data", {}).get("text/plain")
            if text is not None:
                stdout.append(text if text.endswith("\n") else text + "\n")
        elif kind == "error":
            error = {"ename": str(out.get("ename", ""))[:200], "evalue": str(out.get("evalue", ""))[:cap]}
    return {"stdout": "".join(stdout)[:cap], "stderr": "".join(stderr)[:cap], "error": error}


def _die_with_the_grader(grader_pid: int | None) -> None:
    if grader_pid is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1 (linux/prctl.h)
    if os.getppid() != grader_pid:  # the grader died before the line above: nobody will send the signal
        os._exit(1)


def pytest_configure(config) -> None:
    raw = os.environ.pop(ENV, None)
    if raw is None:
        return
    _settings.update(json.loads(raw))
    _state["report"] = config.pluginmanager.get_plugin("gradacc-report")
    if _state["report"] is None:
        raise RuntimeError("the grading plugin runs only under gradacc.course.nbval_run.run_nbval (its report pipe)")
    _die_with_the_grader(_settings.get("grader_pid"))
    if _settings.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_DATA, (_settings["memory_bytes"], _settings["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_settings["file_bytes"], _settings["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if _settings.get("max_processes"):  # counted per user namespace: the sandbox's processes and threads only
        resource.setrlimit(resource.RLIMIT_NPROC, (_settings["max_processes"], _settings["max_processes"]))
    _patch_nbval()


def pytest_sessionfinish(session) -> None:
    if _settings:  # the kernel has stopped; a process it left behind lives until this one ends
        _send({"kind": "planted", "names": [name for name in PLANTED if os.path.lexists(name)]})
