"""Gradient accumulation across real processes (lesson 07): launching workers and bringing their results back.

Three launchers, each a real multi-process run started from a notebook with a time limit:

* ``run_ddp_lesson``: ``torchrun`` (``python -m torch.distributed.run``) starts ``world_size`` processes of
  ``python -m gradacc.workers.ddp``; PyTorch ``DistributedDataParallel`` with the gloo backend on CPU (NCCL on GPUs).
* ``run_checkpoint_lesson``: the same with ``python -m gradacc.workers.ddp_checkpoint`` (activation checkpointing
  inside a ``no_sync`` window, for several ``use_reentrant`` / DDP settings).
* ``run_accelerate_lesson``: ``accelerate launch`` starts the lesson-04 training script ``gradacc.workers.accelerate_train``.
* ``run_jax_devices``: one process with ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (``D`` CPU devices),
  running ``python -m gradacc.workers.jax_dp``.

Every run gets a free TCP port on 127.0.0.1 (never a fixed one: runs may happen in parallel), writes its result to a
file in a temporary folder, and is started by ``gradacc.launch.run_processes``: killed with all its descendants when it
runs past ``timeout`` (seconds) or when the caller is interrupted; a failing run raises ``WorkerError`` carrying the
tail of the workers' stderr. In one process, ``single_process_group`` lets DDP run inside a notebook kernel.

Terms: ``micro_batch_size`` (samples per forward/backward on one process), ``accum_steps`` (N, micro-steps per
optimizer step), ``world_size`` (processes); effective batch size = micro_batch_size x accum_steps x world_size.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .accumulation import Batch, LossFn, count_items, sum_cross_entropy
from .data import check_accum_steps, load_digits_tensors
from .launch import (
    WorkerError,
    _worker_env,
    accelerate_launch_command,
    free_port,
    run_processes,
    run_torchrun_json,
    torchrun_command,
)
from .tokens import TOKEN_LABEL_COUNTS, token_vocab_size, token_windows  # re-exported: lesson 07 and its worker

__all__ = [
    "SINGLE_PROCESS_TIMEOUT_S",
    "single_process_group",
    "effective_batch_size",
    "AllReduceCounter",
    "WEIGHTINGS",
    "accumulate_window",
    "TOKEN_LABEL_COUNTS",
    "token_vocab_size",
    "token_windows",
    "run_ddp_lesson",
    "run_checkpoint_lesson",
    "run_accelerate_lesson",
    "run_jax_devices",
    "run_jax_worker",
    "rank_batches",
]


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


WEIGHTINGS = ("global_items", "local_items")
"""How ``accumulate_window`` scales each micro-batch's summed loss:

* ``"global_items"``: by ``world_size / items in the window on ALL ranks`` (the count is all-reduced). DDP averages
  the ranks' gradients (divides their sum by world_size), so the result is the gradient of
  ``sum of every item loss / every item``: the big-batch gradient, whatever the counts per rank.
* ``"local_items"``: by ``1 / items in this rank's window``: each rank's gradient is its own mean, and DDP's average
  is the MEAN OF PER-RANK MEANS, which over-weights the items of ranks that hold few of them.
"""


def accumulate_window(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    micro_batches: Sequence[Batch],
    *,
    use_no_sync: bool = True,
    weighting: str = "global_items",
    loss_fn: LossFn = sum_cross_entropy,
) -> dict[str, float | int]:
    """One accumulation window on a DDP model: N micro-steps, the first N-1 inside ``no_sync()``, one optimizer step.

    ``no_sync()`` turns off DDP's gradient all-reduce for the backward passes inside it; gradients accumulate locally
    in ``.grad``. The backward of the last micro-step runs outside it and all-reduces the accumulated gradients once
    (what each rank adds up is linear, so reducing once at the end gives the same sum as reducing every micro-step).

    Args:
        model: a ``DistributedDataParallel`` model (``no_sync`` is used only if ``use_no_sync``).
        optimizer: stepped once and zeroed after the window; ``None`` leaves the gradients in ``.grad``.
        micro_batches: this rank's micro-batches of the window, N >= 1 ``(inputs, labels)`` pairs.
        use_no_sync: ``False`` all-reduces after every micro-step (N times as many all-reduces, same result).
        weighting: see ``WEIGHTINGS``.
        loss_fn: SUMMED loss of a micro-batch (default ``gradacc.accumulation.sum_cross_entropy``).

    Returns:
        ``{"local_items", "global_items", "loss"}``: items on this rank, items on all ranks, and the window's mean
        loss per item over all ranks (a float, computed with one extra all-reduce of ``[loss sum, items]``).

    Raises:
        ValueError: no micro-batches, an unknown ``weighting``, or ``use_no_sync`` on a model without ``no_sync``.
    """
    if len(micro_batches) == 0:
        raise ValueError("a window needs at least one micro-batch, got none")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    if use_no_sync and not hasattr(model, "no_sync"):
        raise ValueError("use_no_sync=True needs a DistributedDataParallel model; wrap it in DDP or pass False")
    device = next(model.parameters()).device
    world = dist.get_world_size()
    local_items = sum(count_items(b) for b in micro_batches)
    counts = torch.tensor([local_items], dtype=torch.float64, device=device)
    dist.all_reduce(counts)  # one tiny all-reduce per window: the number of items on all ranks
    global_items = int(counts.item())
    scale = world / global_items if weighting == "global_items" else 1.0 / local_items
    loss_sum = 0.0
    n = len(micro_batches)
    for i, batch in enumerate(micro_batches):
        sync = (not use_no_sync) or i == n - 1
        with contextlib.nullcontext() if sync else model.no_sync():
            loss = loss_fn(model, batch)
            (loss * scale).backward()
        loss_sum += float(loss.detach())
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    total = torch.tensor([loss_sum], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return {"local_items": local_items, "global_items": global_items, "loss": float(total.item()) / global_items}


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

    The workers (``python -m gradacc.workers.ddp``, see there for every key) train ``make_digits_model(seed=0,
    hidden=32)`` with SGD(``lr``) for one accumulation window on the first ``micro_batch_size x accum_steps x
    world_size`` digits (``DistributedSampler(shuffle=False)``: rank r takes samples r, r + world_size, ...), once
    with ``no_sync()`` and once without, counting all-reduces with ``AllReduceCounter``; then time
    ``timing_windows`` windows of a wider model (``hidden=timing_hidden``, 2 hidden layers) both ways; then compute
    token-weighted gradients of a ``TinyLM`` on ``token_windows()``.

    Args:
        backend: ``"auto"`` (NCCL when every rank has a GPU of its own, else gloo on the CPU: with fewer GPUs than
            ranks, as on a one-GPU Colab runtime, the workers do not see the GPUs), ``"gloo"`` or ``"nccl"``.
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
        cmd = torchrun_command("gradacc.workers.ddp", args, nproc_per_node=world_size, port=free_port())
        start = time.perf_counter()
        run_processes(
            cmd,
            timeout=timeout,
            env=_worker_env(world_size),
            what=f"torchrun ({world_size} DDP workers)",
            progress=progress,
        )
        result = _load_result(out)
    result["launcher_s"] = time.perf_counter() - start
    return result


def run_checkpoint_lesson(
    *, accum_steps: int = 4, micro_batch_size: int = 8, timeout: float = 120.0, progress: bool = False
) -> dict[str, Any]:
    """Launch 2 gloo workers of ``gradacc.workers.ddp_checkpoint`` and return rank 0's JSON result.

    Each setting of ``gradacc.workers.ddp_checkpoint.SETTINGS`` runs one window of ``accum_steps`` micro-steps of
    ``micro_batch_size`` digits per rank (``no_sync()`` on the first N-1); a micro-step that raises ends that
    setting's window (recorded as ``"error: <first line>"``, both ranks fail at the same micro-step).

    Returns:
        ``{"world_size", "accum_steps", "settings": {name: {..., "micro_steps": [...], "grad_diff": float | None}}}``
        plus ``"launcher_s"`` (wall seconds of the launch).

    Raises:
        ValueError: bad ``accum_steps`` or ``micro_batch_size``.
        WorkerError: a worker failed or the run timed out.
    """
    check_accum_steps(accum_steps)
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    return run_torchrun_json(
        "gradacc.workers.ddp_checkpoint",
        [f"--accum-steps={accum_steps}", f"--micro-batch-size={micro_batch_size}"],
        nproc_per_node=2,
        what="torchrun (2 checkpointing workers)",
        timeout=timeout,
        progress=progress,
    )


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
    """Run the lesson-04 training script ``gradacc.workers.accelerate_train`` under ``accelerate launch`` on CPU processes.

    The script trains ``make_digits_model(seed=seed)`` with Accelerate's ``accumulate()`` on the first ``n_samples``
    digits (shuffled, seeded) with ``--split-batches``: every loader batch of ``micro_batch_size`` samples is split
    between the processes, so the run sees the same global micro-batches as one process with the same arguments and
    must end with the same weights (see ``gradacc.workers.accelerate_train``).

    Args:
        progress: show the elapsed time while the processes run (``run_processes``).

    Returns:
        ``gradacc.workers.accelerate_train.read_result`` of the file rank 0 wrote (``"num_processes"``, ``"optimizer_steps"``,
        ``"effective_batch_size"``, ``"weights"`` as tensors, ...), plus ``"launcher_s"`` (wall time, s) and
        ``"command"`` (the command line, a string).

    Raises:
        ValueError: ``num_processes < 1``, or ``micro_batch_size`` not divisible by ``num_processes`` or
            ``n_samples`` not divisible by ``micro_batch_size`` (a process would get padded or repeated samples).
        WorkerError: the launch failed or timed out (with its stderr).
    """
    from .accelerate import read_result

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
        cmd = accelerate_launch_command(
            "gradacc.workers.accelerate_train", args, num_processes=num_processes, port=free_port()
        )
        start = time.perf_counter()
        run_processes(
            cmd,
            timeout=timeout,
            env=_worker_env(num_processes),
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
    is set in the environment of a new process (``python -m gradacc.workers.jax_dp``); the notebook's own JAX, if any,
    is not touched. See ``gradacc.workers.jax_dp`` for what is computed and for the keys of the result.

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
    args = [f"--micro-batch-size={micro_batch_size}", f"--accum-steps={accum_steps}", f"--hidden={hidden}"]
    return run_jax_worker("gradacc.workers.jax_dp", args, devices=devices, timeout=timeout, progress=progress)


def run_jax_worker(
    module: str, module_args: Sequence[str], *, devices: int, timeout: float = 180.0, progress: bool = False
) -> dict[str, Any]:
    """Run ``python -m module --out=FILE --devices=D ARGS`` in a fresh process that sees ``devices`` CPU devices
    (``XLA_FLAGS=--xla_force_host_platform_device_count=D``, ``JAX_PLATFORMS=cpu``, set before JAX starts) and return
    the JSON it wrote to ``FILE``, plus ``"launcher_s"`` (wall time of the run, s). Lessons 07 and 11 use it.

    Raises:
        ValueError: ``devices < 1``.
        WorkerError: the worker failed, timed out, or wrote no result.
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be an int >= 1, got {devices!r}")
    flags = os.environ.get("XLA_FLAGS", "")
    flags = " ".join([f for f in flags.split() if "xla_force_host_platform_device_count" not in f])
    env = {
        **_worker_env(),
        "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={devices}".strip(),
        "JAX_PLATFORMS": "cpu",
    }
    with tempfile.TemporaryDirectory(prefix="gradacc-jax-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", module, f"--out={out}", f"--devices={devices}", *module_args]
        start = time.perf_counter()
        run_processes(cmd, timeout=timeout, env=env, what=f"the JAX worker ({devices} CPU devices)", progress=progress)
        if not out.exists():
            raise WorkerError(f"the JAX worker exited without writing {out}", cmd, 0, "", "")
        result = json.loads(out.read_text(encoding="utf-8"))
    result["launcher_s"] = time.perf_counter() - start
    return result


def rank_batches(sizes: list[list[int]], rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rank ``rank``'s micro-batches: ``sizes[rank]`` samples each, read in order after every lower rank's."""
    x, y = load_digits_tensors()
    start = sum(sum(s) for s in sizes[:rank])
    batches = []
    for size in sizes[rank]:
        batches.append((x[start : start + size], y[start : start + size]))
        start += size
    return batches
