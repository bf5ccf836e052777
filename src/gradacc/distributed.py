"""Gradient accumulation across real processes (lesson 07): launching workers and bringing their results back.

Three launchers, each a real multi-process run started from a notebook with a time limit:

* ``run_ddp_lesson``: ``torchrun`` (``python -m torch.distributed.run``) starts ``world_size`` processes of
  ``python -m gradacc.ddp_worker``; PyTorch ``DistributedDataParallel`` with the gloo backend on CPU (NCCL on GPUs).
* ``run_accelerate_lesson``: ``accelerate launch`` starts the lesson-04 training script ``gradacc.accel_train``.
* ``run_jax_devices``: one process with ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (``D`` CPU devices),
  running ``python -m gradacc.jax_dp_worker``.

Every run gets a free TCP port on 127.0.0.1 (never a fixed one: runs may happen in parallel), writes its result to a
file in a temporary folder, and is killed with all its descendants when it runs past ``timeout`` (seconds) or when the
caller is interrupted. A failing run raises ``WorkerError`` carrying the tail of the workers' stderr.

Terms: ``micro_batch_size`` (samples per forward/backward on one process), ``accum_steps`` (N, micro-steps per
optimizer step), ``world_size`` (processes); effective batch size = micro_batch_size x accum_steps x world_size.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

import torch

from .data import check_accum_steps

__all__ = [
    "WorkerError",
    "free_port",
    "run_processes",
    "torchrun_command",
    "accelerate_launch_command",
    "effective_batch_size",
    "AllReduceCounter",
    "single_process_group",
    "exit_worker",
    "TOKEN_LABEL_COUNTS",
    "token_windows",
    "token_vocab_size",
    "run_ddp_lesson",
    "run_accelerate_lesson",
    "run_jax_devices",
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
    with tqdm(desc=f"running {label}", bar_format="{desc}: {elapsed}", leave=False) as bar:
        while True:
            try:
                return proc.communicate(timeout=min(0.5, max(deadline - time.monotonic(), 0.01)))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                bar.update(0)
                bar.refresh()


_RETIRED_GROUPS: list[Any] = []
"""Groups made by ``single_process_group``, kept after ``destroy_process_group``: their C++ object is then never
destroyed while the kernel runs. Its destructor joins its gloo threads; run from the last
``DistributedDataParallel`` that referenced the group (``~Reducer``, GIL held), it waited forever for a gloo thread that
needed the GIL (issue 11, seen with py-spy). Each kept group holds 3 idle threads."""

SINGLE_PROCESS_TIMEOUT_S = 30.0
"""Seconds a collective of ``single_process_group`` may wait before it raises."""


@contextlib.contextmanager
def single_process_group(backend: str = "gloo") -> Iterator[Any]:
    """A world of ONE process (rank 0 of 1) inside this process, so ``DistributedDataParallel`` can wrap a model
    in a notebook kernel: every collective is real but has nothing to exchange.

    Uses an in-memory ``torch.distributed.HashStore`` (no TCP port). If a process group already exists it is used
    as it is and left alone; otherwise the group made here is destroyed on exit. Its collectives time out after
    ``SINGLE_PROCESS_TIMEOUT_S`` seconds (with one process nothing should ever wait that long).

    Yields:
        The default process group.

    Raises:
        ValueError: a backend other than ``"gloo"`` (the one that works on every machine).
    """
    import torch.distributed as dist

    if backend != "gloo":
        raise ValueError(f"single_process_group supports backend='gloo' only, got {backend!r}")
    created = False
    if not dist.is_initialized():
        # a collective that waits longer than this raises (gloo: "Timed out ...") instead of hanging the kernel
        timeout = timedelta(seconds=SINGLE_PROCESS_TIMEOUT_S)
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        created = True
    try:
        yield dist.group.WORLD
    finally:
        if created:
            _RETIRED_GROUPS.append(dist.group.WORLD)
            dist.destroy_process_group()


def exit_worker(code: int) -> NoReturn:
    """End a worker process that used gloo: flush stdout and stderr, then ``os._exit(code)``, without finalizing Python.

    Workaround for a PyTorch bug (torch 2.13, gloo): after ``destroy_process_group()`` the group's worker threads can
    still be running (a ``DistributedDataParallel`` keeps the group alive), and one that must take the GIL while the
    interpreter finalizes (to free a tensor or a callback it holds last) aborts the process: ``terminate called without
    an active exception``, SIGABRT, a failed run although every result was written. Measured here: 1 run in 12 of
    ``run_ddp_lesson`` on 2 busy cores. ``tests/test_distributed.py`` pins the bug (the process still aborts when a
    gloo thread needs the GIL at exit); PyTorch's attempted fix was an atexit ``destroy_process_group``
    (pytorch/pytorch#179291, abandoned). Call it only after the results are written and the group destroyed.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _worker_env() -> dict[str, str]:
    # One thread per worker: 2 workers on 2 cores, and torchrun does not print its OMP_NUM_THREADS warning.
    # PYTHONWARNINGS keeps library deprecation chatter out of the captured stderr.
    return {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"}


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


def accelerate_launch_command(
    module: str, module_args: Sequence[str], *, num_processes: int, port: int, host: str = "127.0.0.1"
) -> list[str]:
    """The ``accelerate launch`` command line that starts ``num_processes`` processes of ``python -m module``.

    With more than one process it passes ``--multi_gpu``: that selects Accelerate's torchrun-based launcher, and on a
    machine without GPUs each process's ``Accelerator`` then runs as ``MULTI_CPU`` with the gloo backend. The other
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


def effective_batch_size(micro_batch_size: int, accum_steps: int, world_size: int) -> int:
    """Samples per optimizer step: ``micro_batch_size x accum_steps x world_size``.

    Raises:
        ValueError: any argument < 1 (``accum_steps`` as in ``gradacc.data.check_accum_steps``).
    """
    check_accum_steps(accum_steps)
    for name, value in (("micro_batch_size", micro_batch_size), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return micro_batch_size * accum_steps * world_size


class AllReduceCounter:
    """A DDP communication hook that counts gradient all-reduces and times them; it all-reduces the mean as DDP does.

    Register its ``hook`` method: ``ddp_model.register_comm_hook(state=None, hook=counter.hook)``. DDP calls the
    hook once per gradient BUCKET (parameters grouped into buffers of about 25 MiB, ``bucket_cap_mb``) on every
    backward that synchronizes; inside ``ddp_model.no_sync()`` it is not called at all. The small models of the
    course fit in one bucket, so ``calls`` is the number of synchronizing backward passes.

    The hook waits for its all-reduce and returns an already completed ``torch.futures.Future``: no Python callback
    is attached to the process group's future. Such a callback (``default_hooks.allreduce_hook`` attaches one with
    ``Future.then``) runs, and is freed, on a gloo worker thread, which then needs the GIL. Measured with torch 2.13
    (``tests/test_distributed.py::test_torch_still_needs_the_gil_on_gloo_threads_for_python_hook_callbacks``):
    if that thread is still busy when the process exits, the interpreter is already finalizing and the process
    aborts (``terminate called without an active exception``, SIGABRT); if it is busy when the main thread frees the
    last ``DistributedDataParallel`` of a destroyed group (``~Reducer`` -> ``~ProcessGroupGloo`` joins the workers
    with the GIL held), the two threads wait for each other forever. On a busy machine both happened (issue 11).
    Waiting here costs nothing on the course's one-bucket models: DDP launches their only bucket at the end of
    backward anyway; with several buckets it removes the overlap of communication with the rest of backward.

    Attributes:
        calls: hook calls (bucket all-reduces) so far.
        elements: gradient elements all-reduced so far (float32: 4 bytes each).
        seconds: wall time of the all-reduces, summed (s). With gloo on one machine it is dominated by loopback TCP
            and thread hand-offs; over a network it grows with ``elements``.

    Source: ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook`` (divide by the world size,
    all-reduce the bucket's buffer), and the completed-future hook of the DDP communication hooks documentation.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.elements = 0
        self.seconds = 0.0

    def reset(self) -> None:
        """Set the counts and the time back to zero."""
        self.calls, self.elements, self.seconds = 0, 0, 0.0

    def hook(self, state, bucket):  # no annotations: DDP compares them with the real classes, not strings
        """The hook itself: ``(state, dist.GradBucket) -> torch.futures.Future[torch.Tensor]`` (already completed).

        ``state`` is the process group to use (``None``: the default group), as for DDP's default hooks.
        """
        import torch.distributed as dist

        group = state if state is not None else dist.group.WORLD
        buffer = bucket.buffer()
        self.calls += 1
        self.elements += buffer.numel()
        start = time.perf_counter()
        buffer.div_(group.size())
        dist.all_reduce(buffer, group=group)  # synchronous: returns once the sum is in ``buffer``
        self.seconds += time.perf_counter() - start
        future: torch.futures.Future = torch.futures.Future()
        future.set_result(buffer)
        return future


TOKEN_LABEL_COUNTS: tuple[tuple[tuple[int, ...], ...], ...] = (((2,), (1, 2)), ((4, 3), (8,)))
"""Label tokens per sequence, per micro-batch, per rank, for the token-weighting demo: rank 0 holds 2 micro-batches
with 2 and 1 + 2 = 3 tokens (5 in its window), rank 1 holds 4 + 3 = 7 and 8 (15 in its window); 20 in all."""

_TOKEN_SOURCES = (
    "textwrap.dedent",
    "json.dumps",
    "heapq.heappush",
    "bisect.bisect_left",
    "functools.reduce",
    "shutil.copyfile",
    "textwrap.wrap",
)


def _token_texts() -> list[str]:
    import importlib
    import inspect

    texts = []
    for name in _TOKEN_SOURCES:
        module, attr = name.rsplit(".", 1)
        texts.append(inspect.getdoc(getattr(importlib.import_module(module), attr)) or "")
    return texts


def _token_vocab() -> dict[str, int]:
    from .data import build_vocab

    return build_vocab(_token_texts(), max_size=200)


def token_vocab_size() -> int:
    """Size of the vocabulary of ``token_windows`` (ids 0 and 1 are ``<pad>`` and ``<unk>``)."""
    return len(_token_vocab())


def token_windows(label_counts: Sequence[Sequence[Sequence[int]]] = TOKEN_LABEL_COUNTS) -> list[list[Any]]:
    """Next-token micro-batches of real text with chosen numbers of label tokens, one accumulation window per rank.

    Sequence ``j`` overall (counting through ranks, micro-batches and sequences) is the first ``count + 1`` word
    tokens of the docstring of one of a fixed list of standard-library functions (``textwrap.dedent``, ``json.dumps``,
    ...), so it has exactly ``count`` labels; sequences of one micro-batch are right-padded (``IGNORE_INDEX`` labels).

    Args:
        label_counts: ``label_counts[rank][micro_batch]`` lists the label tokens of each sequence (each >= 1).

    Returns:
        ``windows[rank][micro_batch] = (input_ids, labels)``, both ``[B, T]`` int64 (``gradacc.data.pad_batch``).

    Raises:
        ValueError: a count < 1, an empty micro-batch, or a count longer than the docstring allows.
    """
    from .data import encode, pad_batch, tokenize

    texts = _token_texts()
    vocab = _token_vocab()
    windows: list[list[Any]] = []
    j = 0
    for rank, micro_batches in enumerate(label_counts):
        window = []
        for m, counts in enumerate(micro_batches):
            if not counts or any(c < 1 for c in counts):
                raise ValueError(f"rank {rank}, micro-batch {m}: label counts must be >= 1 each, got {list(counts)}")
            sequences = []
            for count in counts:
                text = texts[j % len(texts)]
                if count + 1 > len(tokenize(text)):
                    raise ValueError(f"a sequence of {count} labels needs {count + 1} tokens; the text has fewer")
                sequences.append(encode(text, vocab, max_len=count + 1))
                j += 1
            window.append(pad_batch(sequences))
        windows.append(window)
    return windows


def _load_result(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise WorkerError(f"the workers exited without writing their result file {path}", [], 0, "", "")
    return torch.load(path, weights_only=True)


def run_ddp_lesson(
    *,
    world_size: int = 2,
    micro_batch_size: int = 8,
    accum_steps: int = 4,
    lr: float = 0.1,
    timing_windows: int = 20,
    timing_hidden: int = 256,
    backend: str = "auto",
    timeout: float = 180.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Launch ``world_size`` DDP workers with torchrun, run lesson 07's experiments, and return rank 0's results.

    The workers (``python -m gradacc.ddp_worker``, see there for every key) train ``make_digits_model(seed=0,
    hidden=32)`` with SGD(``lr``) for one accumulation window on the first ``micro_batch_size x accum_steps x
    world_size`` digits (``DistributedSampler(shuffle=False)``: rank r takes samples r, r + world_size, ...), once
    with ``no_sync()`` and once without, counting all-reduces with ``AllReduceCounter``; then time
    ``timing_windows`` windows of a wider model (``hidden=timing_hidden``, 2 hidden layers) both ways; then compute
    token-weighted gradients of a ``TinyLM`` on ``token_windows()``.

    Args:
        backend: ``"auto"`` (NCCL when CUDA is available, else gloo), ``"gloo"`` or ``"nccl"``.
        timeout: seconds before the whole run is stopped (start-up of the processes takes a few seconds).
        progress: show the elapsed time while the workers run (``run_processes``).

    Returns:
        The dict written by rank 0 (tensors on the CPU), plus ``"launcher_s"``: wall time of the launch (s).

    Raises:
        ValueError: bad sizes (see ``effective_batch_size``), ``timing_windows < 1`` or an unknown backend.
        WorkerError: a worker failed or the run timed out (with the workers' stderr).
    """
    effective_batch_size(micro_batch_size, accum_steps, world_size)
    if timing_windows < 1:
        raise ValueError(f"timing_windows must be >= 1, got {timing_windows}")
    if backend not in ("auto", "gloo", "nccl"):
        raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")
    with tempfile.TemporaryDirectory(prefix="gradacc-ddp-") as tmp:
        out = Path(tmp) / "result.pt"
        args = [
            f"--out={out}",
            f"--micro-batch-size={micro_batch_size}",
            f"--accum-steps={accum_steps}",
            f"--lr={lr}",
            f"--timing-windows={timing_windows}",
            f"--timing-hidden={timing_hidden}",
            f"--backend={backend}",
        ]
        cmd = torchrun_command("gradacc.ddp_worker", args, nproc_per_node=world_size, port=free_port())
        start = time.perf_counter()
        run_processes(
            cmd, timeout=timeout, env=_worker_env(), what=f"torchrun ({world_size} DDP workers)", progress=progress
        )
        result = _load_result(out)
    result["launcher_s"] = time.perf_counter() - start
    return result


def run_accelerate_lesson(
    *,
    num_processes: int = 2,
    accum_steps: int = 4,
    micro_batch_size: int = 32,
    n_samples: int = 256,
    lr: float = 0.1,
    seed: int = 0,
    timeout: float = 180.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Run the lesson-04 training script ``gradacc.accel_train`` under ``accelerate launch`` on CPU processes.

    The script trains ``make_digits_model(seed=seed)`` with Accelerate's ``accumulate()`` on the first ``n_samples``
    digits (shuffled, seeded) with ``--split-batches``: every loader batch of ``micro_batch_size`` samples is split
    between the processes, so the run sees the same global micro-batches as one process with the same arguments and
    must end with the same weights (see ``gradacc.accel_train``).

    Args:
        progress: show the elapsed time while the processes run (``run_processes``).

    Returns:
        ``gradacc.accel_train.read_result`` of the file rank 0 wrote (``"num_processes"``, ``"optimizer_steps"``,
        ``"effective_batch_size"``, ``"weights"`` as tensors, ...), plus ``"launcher_s"`` (wall time, s) and
        ``"command"`` (the command line, a string).

    Raises:
        ValueError: ``num_processes < 1``, or ``micro_batch_size`` not divisible by ``num_processes`` or
            ``n_samples`` not divisible by ``micro_batch_size`` (a process would get padded or repeated samples).
        WorkerError: the launch failed or timed out (with its stderr).
    """
    from .accel_train import read_result

    check_accum_steps(accum_steps)
    if num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    if micro_batch_size % num_processes or n_samples % micro_batch_size:
        raise ValueError(
            f"micro_batch_size ({micro_batch_size}) must be divisible by num_processes ({num_processes}) and n_samples "
            f"({n_samples}) by micro_batch_size, so every process gets real, distinct samples"
        )
    with tempfile.TemporaryDirectory(prefix="gradacc-accel-") as tmp:
        out = Path(tmp) / "result.json"
        args = [
            f"--accum-steps={accum_steps}",
            f"--micro-batch-size={micro_batch_size}",
            f"--n-samples={n_samples}",
            f"--lr={lr}",
            f"--seed={seed}",
            "--split-batches",
            "--cpu",
            f"--expect-processes={num_processes}",
            f"--output={out}",
        ]
        cmd = accelerate_launch_command("gradacc.accel_train", args, num_processes=num_processes, port=free_port())
        start = time.perf_counter()
        run_processes(
            cmd,
            timeout=timeout,
            env=_worker_env(),
            what=f"accelerate launch ({num_processes} processes)",
            progress=progress,
        )
        if not out.exists():
            raise WorkerError(f"accelerate launch exited without writing {out}", cmd, 0, "", "")
        result = read_result(out)
    result["launcher_s"] = time.perf_counter() - start
    result["command"] = shlex.join(["accelerate", "launch", *cmd[3:]])
    return result


def run_jax_devices(
    *,
    devices: int = 4,
    micro_batch_size: int = 8,
    accum_steps: int = 4,
    hidden: int = 32,
    timeout: float = 180.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Data-parallel JAX on ``devices`` CPU devices with accumulation inside each device, in a fresh process.

    ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` must be set before JAX initialises its CPU backend, so it
    is set in the environment of a new process (``python -m gradacc.jax_dp_worker``); the notebook's own JAX, if any,
    is not touched. See ``gradacc.jax_dp_worker`` for what is computed and for the keys of the result.

    Args:
        devices: CPU devices to expose; each gets ``micro_batch_size x accum_steps`` digits.
        hidden: hidden width of ``make_digits_model(seed=0, hidden=hidden)``, whose weights the worker uses.
        progress: show the elapsed time while the worker runs (``run_processes``).

    Returns:
        The worker's JSON result as a dict, plus ``"launcher_s"`` (wall time, s).

    Raises:
        ValueError: bad sizes (see ``effective_batch_size``).
        WorkerError: the worker failed or timed out (with its stderr).
    """
    effective_batch_size(micro_batch_size, accum_steps, devices)
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join([f for f in flags.split() if "xla_force_host_platform_device_count" not in f])
    env = {
        **_worker_env(),
        "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={devices}".strip(),
        "JAX_PLATFORMS": "cpu",
    }
    with tempfile.TemporaryDirectory(prefix="gradacc-jax-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "gradacc.jax_dp_worker",
            f"--out={out}",
            f"--devices={devices}",
            f"--micro-batch-size={micro_batch_size}",
            f"--accum-steps={accum_steps}",
            f"--hidden={hidden}",
        ]
        start = time.perf_counter()
        run_processes(cmd, timeout=timeout, env=env, what=f"the JAX worker ({devices} CPU devices)", progress=progress)
        if not out.exists():
            raise WorkerError(f"the JAX worker exited without writing {out}", cmd, 0, "", "")
        result = json.loads(out.read_text(encoding="utf-8"))
    result["launcher_s"] = time.perf_counter() - start
    return result
