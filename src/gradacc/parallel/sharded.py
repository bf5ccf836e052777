"""Accumulation under sharded data parallel (FSDP2, ``torch.distributed.fsdp.fully_shard``), measured on real
processes: the first piece of lesson 09 (issue 16).

``run_fsdp_window`` launches 2 (or 1) gloo ranks of ``gradacc.workers.fsdp_accum`` with torchrun
(``gradacc.foundations.launch``: a free port, timeouts, a clean stop) and returns what they measured: per micro-step the
gradient bytes each rank holds and the all-gathers and reduce-scatters called so far, for FSDP2's default (gradients
reduce-scattered on every micro-step) and for ``set_requires_gradient_sync(False)`` until the last micro-step, and each
mode's largest weight difference from one process training on the whole effective batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..foundations.data import check_accum_steps
from ..foundations.launch import run_torchrun_json
from ..i18n import _

__all__ = ["run_fsdp_window"]


def run_fsdp_window(
    *,
    accum_steps: int = 4,
    micro_batch_size: int = 16,
    hidden: int = 64,
    depth: int = 2,
    world_size: int = 2,
    memory_steps: Sequence[int] = (),
    effective_batch_size: int = 128,
    timeout: float = 120.0,
    progress: bool = False,
) -> dict[str, Any]:
    """One optimizer step of ``accum_steps`` micro-steps of ``micro_batch_size`` digits per rank on ``world_size``
    FSDP2 ranks, in both sync modes (``gradacc.workers.fsdp_accum.MODES``), on the digits MLP of width ``hidden`` and
    ``depth`` hidden layers (float32, SGD); with ``memory_steps`` (accumulation steps, e.g. ``(1, 2, 4, 8)``) also each
    rank's peak memory (MiB) in DDP and both FSDP2 modes at a fixed ``effective_batch_size`` (samples, all ranks).

    Returns:
        Rank 0's JSON (see ``gradacc.workers.fsdp_accum``; bytes, counts, the weight difference as a float, MiB) plus
        ``"launcher_s"`` (wall seconds of the launch).

    Raises:
        ValueError: bad ``accum_steps``, ``micro_batch_size``, ``hidden`` or ``depth``; ``world_size`` not 1 or 2; an N
            in ``memory_steps`` whose product with ``world_size`` does not divide ``effective_batch_size``.
        WorkerError: a worker failed or the run timed out.
    """
    check_accum_steps(accum_steps)
    for name, value in (("micro_batch_size", micro_batch_size), ("hidden", hidden), ("depth", depth)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if world_size not in (1, 2):
        raise ValueError(f"world_size must be 1 or 2 (processes this lesson starts on one machine), got {world_size}")
    for n in memory_steps:
        check_accum_steps(n)
        if effective_batch_size % (n * world_size):
            raise ValueError(
                f"memory_steps holds {n}, which with world_size {world_size} does not divide effective_batch_size "
                f"{effective_batch_size}: pick accum_steps whose product with world_size divides it"
            )
    return run_torchrun_json(
        "gradacc.workers.fsdp_accum",
        [
            f"--accum-steps={accum_steps}",
            f"--micro-batch-size={micro_batch_size}",
            f"--hidden={hidden}",
            f"--depth={depth}",
            f"--memory-steps={','.join(str(n) for n in memory_steps)}",
            f"--effective-batch-size={effective_batch_size}",
        ],  # fmt: skip
        nproc_per_node=world_size,
        what=(_("torchrun ({world_size} FSDP2 workers)") if world_size > 1 else _("torchrun (1 FSDP2 worker)")).format(
            world_size=world_size
        ),
        timeout=timeout,
        progress=progress,
    )
