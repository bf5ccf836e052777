"""Starting real processes from a notebook and never leaving any behind: ``run_processes`` (a time limit, the whole
process tree stopped on time-out, error or interrupt, ``WorkerError`` with the tail of stderr), free TCP ports, the
``torchrun`` and ``accelerate launch`` command lines, and ``exit_worker`` for the workers themselves.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ..i18n import _

__all__ = [
    "WorkerError",
    "free_port",
    "run_processes",
    "exit_worker",
    "torchrun_command",
    "ranks_command",
    "run_torchrun_json",
    "accelerate_launch_command",
]


class WorkerError(RuntimeError):
    """A launched run failed (non-zero exit) or ran past its time limit.

    Attributes:
        cmd: the command that was run (a list of strings).
        returncode: its exit status (``None`` when it was killed for running past the limit).
        stdout, stderr: everything it printed (the message shows the last lines of ``stderr``).
    """

    def __init__(self, message: str, cmd: Sequence[str], returncode: int | None, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free right now (the OS picks it: bind to port 0, read it, close).

    Another process could take it before the launcher binds it; the window is milliseconds, and each run asks for its
    own port, so parallel runs (tests, several notebooks) do not collide on a fixed port such as 29500.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _tail(text: str, lines: int = 40, chars: int = 6000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def _kill_tree(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Stop ``proc`` and every process it started, even those in their own sessions (torchrun's workers are)."""
    import psutil

    parent: psutil.Process | None
    try:
        parent = psutil.Process(proc.pid)
        family = [parent, *parent.children(recursive=True)]
    except psutil.Error:
        parent, family = None, []
    # SIGTERM first: torchrun and accelerate forward it to their workers and exit cleanly.
    for p in family:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(family, timeout=grace_s)
    if parent is not None:
        with contextlib.suppress(psutil.Error):
            alive += [c for c in parent.children(recursive=True) if c not in alive]  # started during the grace
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything left in the launcher's own session
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def run_processes(
    cmd: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    what: str = "workers",
    progress: bool = False,
) -> subprocess.CompletedProcess:
    """Run a launcher command to completion and return its output; never leave processes behind.

    The command runs in its own session with stdout and stderr captured (text). On time-out, on a non-zero exit and
    when the caller is interrupted (``KeyboardInterrupt``: the notebook's stop button), the launcher and all its
    descendants are stopped (SIGTERM, then SIGKILL after 5 s).

    Args:
        cmd: the program and its arguments.
        timeout: wall-clock limit in seconds (> 0).
        env: variables added to (or replacing those of) this process's environment.
        cwd: working directory of the command.
        what: a name for error messages and the progress bar (e.g. ``"torchrun (2 DDP workers)"``).
        progress: show the elapsed seconds while waiting (``tqdm.auto``, on stderr).

    Returns:
        The ``subprocess.CompletedProcess`` (``returncode`` 0, ``stdout``, ``stderr``).

    Raises:
        ValueError: ``timeout <= 0`` or an empty command.
        WorkerError: non-zero exit status or time-out; the message holds the last 40 lines of stderr.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    if not cmd:
        raise ValueError("cmd must name a program to run, got an empty command")
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,
    )
    try:
        stdout, stderr = _wait(proc, timeout, what if progress else None)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        stdout, stderr = proc.communicate()
        raise WorkerError(
            f"{what}: ran past the {timeout:g} s limit, stopped with all its processes (command: {shlex.join(cmd)}). "
            f"Last lines of stderr:\n{_tail(stderr) or '(nothing)'}",
            cmd,
            None,
            stdout,
            stderr,
        ) from None
    except BaseException:  # KeyboardInterrupt and friends: clean up, then let it propagate
        _kill_tree(proc)
        raise
    if proc.returncode != 0:
        _kill_tree(proc)  # normally nothing is left; make sure
        raise WorkerError(
            f"{what}: failed with exit status {proc.returncode} (command: {shlex.join(cmd)}). "
            f"Last lines of stderr:\n{_tail(stderr) or '(nothing)'}",
            cmd,
            proc.returncode,
            stdout,
            stderr,
        )
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


def _wait(proc: subprocess.Popen, timeout: float, label: str | None) -> tuple[str, str]:
    """``proc.communicate(timeout=...)``, ticking a tqdm bar of elapsed seconds when ``label`` is given."""
    if label is None:
        return proc.communicate(timeout=timeout)
    from tqdm.auto import tqdm

    deadline = time.monotonic() + timeout
    # TRANSLATORS: a progress line while worker processes run; {what} names them ("torchrun (2 DDP workers)")
    with tqdm(desc=_("running {what}").format(what=label), bar_format="{desc}: {elapsed}", leave=False) as bar:
        while True:
            try:
                return proc.communicate(timeout=min(0.5, max(deadline - time.monotonic(), 0.01)))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                bar.update(0)
                bar.refresh()


def exit_worker(code: int | None) -> NoReturn:
    """End a worker process that used gloo: flush stdout and stderr, then ``os._exit(code)``, without finalizing Python.

    Workaround for a PyTorch bug (torch 2.13, gloo): after ``destroy_process_group()`` the group's worker threads can
    still be running (a ``DistributedDataParallel`` keeps the group alive), and one that must take the GIL while the
    interpreter finalizes (to free a tensor or a callback it holds last) aborts the process: ``terminate called without
    an active exception``, SIGABRT, a failed run although every result was written. Measured here: 1 run in 12 of
    ``run_ddp_lesson`` on 2 busy cores. ``tests/test_distributed.py`` pins the bug (the process still aborts when a
    gloo thread needs the GIL at exit); PyTorch's attempted fix was an atexit ``destroy_process_group``
    (pytorch/pytorch#179291, abandoned). Call it only after the results are written and the group destroyed.
    ``None`` exits with 0: a ``main`` wrapped in torch's ``record`` returns it for ``SystemExit(0)`` (``--help``;
    ``torch/distributed/elastic/multiprocessing/errors/__init__.py:368`` @ torch 2.13).
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0 if code is None else code)


def _worker_env(processes: int = 1) -> dict[str, str]:
    # One thread per worker: 2 workers on 2 cores, and torchrun does not print its OMP_NUM_THREADS warning.
    # PYTHONWARNINGS keeps library deprecation chatter out of the captured stderr.
    import torch

    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"}
    if processes > 1 and torch.cuda.device_count() < processes:
        # Fewer GPUs than ranks (a Colab GPU runtime has one): rank 1 would ask for cuda:1 and fail with "invalid
        # device ordinal" (seen on a 1-GPU machine). Hide the GPUs: every rank runs on the CPU with gloo.
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def torchrun_command(
    module: str, module_args: Sequence[str], *, nproc_per_node: int, port: int, host: str = "127.0.0.1"
) -> list[str]:
    """The ``torchrun`` command line (one machine) that starts ``nproc_per_node`` copies of ``python -m module``.

    Equivalent to ``torchrun --nnodes=1 --nproc-per-node=P --master-addr=HOST --master-port=PORT -m module ARGS``;
    it is spelled ``python -m torch.distributed.run`` so it uses this interpreter. torchrun sets ``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` for each worker; ``init_process_group``
    reads them. On several machines the same script runs with ``--nnodes``, ``--node-rank`` or ``--rdzv-backend=c10d
    --rdzv-endpoint=HOST:PORT --rdzv-id=JOB`` (see lesson 07, section 6).

    Raises:
        ValueError: ``nproc_per_node < 1``.
    """
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc_per_node}",
        f"--master-addr={host}",
        f"--master-port={port}",
        "-m",
        module,
        *module_args,
    ]


def ranks_command(
    module: str, module_args: Sequence[str], *, nproc_per_node: int, port: int, preload: Sequence[str] = ()
) -> list[str]:
    """The command that runs ``module`` as ``python -m`` does in ``nproc_per_node`` processes with torchrun's variables
    but without its agent process (``gradacc.workers.ranks``); used by exercise 7's checks. The ranks are forked after
    the launcher imported the ``preload`` modules once (torch: about 2 s of CPU saved per rank).

    Raises:
        ValueError: ``nproc_per_node < 1``.
    """
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    return [
        sys.executable,
        "-m",
        "gradacc.workers.ranks",
        f"--nproc-per-node={nproc_per_node}",
        f"--master-port={port}",
        *([f"--preload={','.join(preload)}"] if preload else []),
        "-m",
        module,
        *module_args,
    ]


def run_torchrun_json(
    module: str, module_args: Sequence[str], *, nproc_per_node: int, what: str, timeout: float, progress: bool = False
) -> dict:
    """Run ``python -m module --out=FILE ARGS`` on ``nproc_per_node`` processes with torchrun (a free port, one thread
    per worker, ``run_processes``'s limits) and return the JSON that a worker wrote to ``FILE``, plus ``"launcher_s"``
    (wall seconds of the launch, start-up included).

    Raises:
        WorkerError: a worker failed, the run took longer than ``timeout`` seconds, or no result file was written.
    """
    import json
    import tempfile
    import time

    with tempfile.TemporaryDirectory(prefix="gradacc-torchrun-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = torchrun_command(module, [f"--out={out}", *module_args], nproc_per_node=nproc_per_node, port=free_port())
        start = time.perf_counter()
        run_processes(cmd, timeout=timeout, env=_worker_env(nproc_per_node), what=what, progress=progress)
        if not out.exists():
            raise WorkerError(f"the workers exited without writing their result file {out}", cmd, 0, "", "")
        result = json.loads(out.read_text())
    result["launcher_s"] = time.perf_counter() - start
    return result


def accelerate_launch_command(
    module: str, module_args: Sequence[str], *, num_processes: int, port: int, host: str = "127.0.0.1"
) -> list[str]:
    """The ``accelerate launch`` command line that starts ``num_processes`` processes of ``python -m module``.

    With more than one process it passes ``--multi_gpu``: that selects Accelerate's torchrun-based launcher; on a
    machine without GPUs each process's ``Accelerator`` then runs as ``MULTI_CPU`` with the gloo backend only if the
    script builds it with ``cpu=True`` (without, each process gets ``DistributedType.NO`` and trains alone:
    ``gradacc.parallel.runs.run_accelerator_state``). The other
    spelling, ``accelerate launch --cpu --num_processes 2``, selects the "simple" launcher, which starts ONE process
    unless MPI is configured (``--mpirun_hostfile``): measured with accelerate 1.15, the script saw
    ``num_processes == 1``. Every setting is passed explicitly so no ``accelerate config`` file is read and no
    "defaults used" warning is printed.

    Raises:
        ValueError: ``num_processes < 1``.
    """
    if num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    mode = ["--multi_gpu"] if num_processes > 1 else ["--cpu"]
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        *mode,
        f"--num_processes={num_processes}",
        "--num_machines=1",
        "--mixed_precision=no",
        "--dynamo_backend=no",
        "--num_cpu_threads_per_process=1",
        f"--main_process_ip={host}",
        f"--main_process_port={port}",
        "-m",
        module,
        *module_args,
    ]
