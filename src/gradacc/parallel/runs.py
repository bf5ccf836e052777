"""Accumulation across real processes, started from a notebook (lesson 07, and the launches of lesson 11): each run
launches workers of ``gradacc.workers``, waits with a time limit and brings their result back.

* ``run_ddp_lesson``: ``torchrun`` (``python -m torch.distributed.run``) starts ``world_size`` processes of
  ``python -m gradacc.workers.ddp``; PyTorch ``DistributedDataParallel`` with the gloo backend on CPU (NCCL on GPUs).
* ``run_checkpoint_lesson``: the same with ``python -m gradacc.workers.ddp_checkpoint`` (activation checkpointing
  inside a ``no_sync`` window, for several ``use_reentrant`` / DDP settings).
* ``run_accelerate_lesson``: ``accelerate launch`` starts the lesson-04 training script
  ``gradacc.workers.accelerate_train``.
* ``run_accelerator_state``: ``accelerate launch`` starts ``gradacc.workers.accelerate_state``, which reports what
  each process's ``Accelerator`` made of the launch (with or without ``cpu=True``).
* ``run_jax_devices``: one process with ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (``D`` CPU devices),
  running ``python -m gradacc.workers.jax_dp``; ``run_jax_worker`` runs any such JAX worker (lesson 11's too).

Every run gets a free TCP port on 127.0.0.1 (never a fixed one: runs may happen in parallel), writes its result to a
file in a temporary folder, and is started by ``gradacc.foundations.launch.run_processes``: killed with all its
descendants when it runs past ``timeout`` (seconds) or when the caller is interrupted; a failing run raises
``WorkerError`` carrying the tail of the workers' stderr. What each rank does is ``gradacc.parallel.distributed``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..foundations.data import check_accum_steps
from ..foundations.launch import (
    WorkerError,
    _worker_env,
    accelerate_launch_command,
    free_port,
    run_processes,
    run_torchrun_json,
    torchrun_command,
)
from ..i18n import _
from .distributed import effective_batch_size

__all__ = [
    "run_ddp_lesson",
    "run_checkpoint_lesson",
    "run_accelerate_lesson",
    "run_accelerator_state",
    "run_jax_devices",
    "run_jax_worker",
    "case_label",
]


def case_label(name: str) -> str:
    """A setting's name in a worker's results (``run_checkpoint_lesson``'s ``"no checkpointing"``, lesson 11's
    ``"root unit, sync at the boundary"``: keys that stay English in code) as the learner reads it: translated in the
    pt-BR edition (the workers mark their names for ``gradacc.po``), as it is otherwise. Shown in lessons 07 and 11.

    Example:
        >>> case_label("reentrant, static_graph")
        'reentrant, static_graph'
    """
    return _(name)


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
    with ``no_sync()`` and once without, and once with ``no_sync()`` around ``backward()`` only (the forward outside
    it), counting all-reduces with ``AllReduceCounter``; then time
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
            what=_("torchrun ({world_size} DDP workers)").format(world_size=world_size),
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
        what=_("torchrun (2 checkpointing workers)"),
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
    """Run the lesson-04 training script ``gradacc.workers.accelerate_train`` under ``accelerate launch`` on CPU
    processes.

    The script trains ``make_digits_model(seed=seed)`` with Accelerate's ``accumulate()`` on the first ``n_samples``
    digits (shuffled, seeded) with ``--split-batches``: every loader batch of ``micro_batch_size`` samples is split
    between the processes, so the run sees the same global micro-batches as one process with the same arguments and
    must end with the same weights (see ``gradacc.workers.accelerate_train``).

    Args:
        progress: show the elapsed time while the processes run (``run_processes``).

    Returns:
        ``gradacc.workers.accelerate_train.read_result`` of the file rank 0 wrote (``"num_processes"``,
        ``"optimizer_steps"``, ``"effective_batch_size"``, ``"weights"`` as tensors, ...), plus ``"launcher_s"`` (wall
        time, s) and ``"command"`` (the command line, a string).

    Raises:
        ValueError: ``num_processes < 1``, or ``micro_batch_size`` not divisible by ``num_processes`` or
            ``n_samples`` not divisible by ``micro_batch_size`` (a process would get padded or repeated samples).
        WorkerError: the launch failed or timed out (with its stderr).
    """
    from ..frameworks.accelerate import read_result

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
            what=_("accelerate launch ({num_processes} processes)").format(num_processes=num_processes),
            progress=progress,
        )
        if not out.exists():
            raise WorkerError(f"accelerate launch exited without writing {out}", cmd, 0, "", "")
        result = read_result(out)
    result["launcher_s"] = time.perf_counter() - start
    result["command"] = shlex.join(["accelerate", "launch", *cmd[3:]])
    return result


def run_accelerator_state(
    *, num_processes: int = 2, cpu: bool = False, timeout: float = 120.0, progress: bool = False
) -> list[dict[str, Any]]:
    """Launch ``num_processes`` processes with ``accelerate launch --multi_gpu`` (``accelerate_launch_command``) and
    return what each one's ``Accelerator(cpu=cpu)`` reports, in rank order (``gradacc.workers.accelerate_state``:
    ``"rank"``, ``"world_size"``, ``"distributed_type"``, ``"num_processes"``, ``"process_index"``,
    ``"is_main_process"``, ``"loader_items"``: what it gets from a prepared loader of ``range(12)``).

    Raises:
        ValueError: ``num_processes < 2`` (one process is launched without ``--multi_gpu``).
        WorkerError: the launch failed, timed out, or a process wrote no result.
    """
    if num_processes < 2:
        raise ValueError(f"num_processes must be >= 2 for a --multi_gpu launch, got {num_processes}")
    with tempfile.TemporaryDirectory(prefix="gradacc-accel-state-") as tmp:
        out = Path(tmp) / "state"
        args = [f"--output={out}", *(["--cpu"] if cpu else [])]
        cmd = accelerate_launch_command(
            "gradacc.workers.accelerate_state", args, num_processes=num_processes, port=free_port()
        )
        run_processes(
            cmd,
            timeout=timeout,
            env=_worker_env(num_processes),
            what=_("accelerate launch ({num_processes} processes)").format(num_processes=num_processes),
            progress=progress,
        )
        paths = [out.with_name(f"state.{rank}.json") for rank in range(num_processes)]
        missing = [p.name for p in paths if not p.exists()]
        if missing:
            raise WorkerError(f"accelerate launch exited without writing {missing}", cmd, 0, "", "")
        return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


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
        run_processes(
            cmd,
            timeout=timeout,
            env=env,
            what=_("the JAX worker ({devices} CPU devices)").format(devices=devices),
            progress=progress,
        )
        if not out.exists():
            raise WorkerError(f"the JAX worker exited without writing {out}", cmd, 0, "", "")
        result = json.loads(out.read_text(encoding="utf-8"))
    result["launcher_s"] = time.perf_counter() - start
    return result
