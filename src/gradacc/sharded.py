"""Accumulation under sharded data parallel (FSDP2, ``torch.distributed.fsdp.fully_shard``), measured on real
processes: the first piece of lesson 09 (issue 16).

``run_fsdp_window`` launches 2 gloo ranks of ``gradacc.workers.fsdp_accum`` with torchrun (``gradacc.launch``: a free
port, timeouts, a clean stop) and returns what they measured: per micro-step the gradient bytes each rank holds and
the all-gathers and reduce-scatters called so far, for FSDP2's default (gradients reduce-scattered on every
micro-step) and for ``set_requires_gradient_sync(False)`` until the last micro-step, and each mode's largest weight
difference from one process training on the whole effective batch.
"""

from __future__ import annotations

from typing import Any

from .data import check_accum_steps
from .launch import run_torchrun_json

__all__ = ["run_fsdp_window"]


def run_fsdp_window(
    *,
    accum_steps: int = 4,
    micro_batch_size: int = 16,
    hidden: int = 64,
    depth: int = 2,
    timeout: float = 120.0,
    progress: bool = False,
) -> dict[str, Any]:
    """One optimizer step of ``accum_steps`` micro-steps of ``micro_batch_size`` digits per rank on 2 FSDP2 ranks, in
    both sync modes (``gradacc.workers.fsdp_accum.MODES``), on the digits MLP of width ``hidden`` and ``depth`` hidden
    layers (float32, SGD).

    Returns:
        Rank 0's JSON (see ``gradacc.workers.fsdp_accum``; bytes, counts, the weight difference as a float) plus
        ``"launcher_s"`` (wall seconds of the launch).

    Raises:
        ValueError: bad ``accum_steps``, ``micro_batch_size``, ``hidden`` or ``depth``.
        WorkerError: a worker failed or the run timed out.
    """
    check_accum_steps(accum_steps)
    for name, value in (("micro_batch_size", micro_batch_size), ("hidden", hidden), ("depth", depth)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    return run_torchrun_json(
        "gradacc.workers.fsdp_accum",
        [
            f"--accum-steps={accum_steps}",
            f"--micro-batch-size={micro_batch_size}",
            f"--hidden={hidden}",
            f"--depth={depth}",
        ],  # fmt: skip
        nproc_per_node=2,
        what="torchrun (2 FSDP2 workers)",
        timeout=timeout,
        progress=progress,
    )
