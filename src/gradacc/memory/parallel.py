"""Per-rank memory of accumulation under data parallelism: DDP and FSDP2 (sharded) with the gradient sync on every
micro-step or only at the window's boundary (lesson 09, the memory explorer's "data parallel" choice).

``predict_parallel`` turns the one-process prediction of ``gradacc.memory.predict.predict_step`` (for one rank's
share of the effective batch) into one rank's peak, following what PyTorch allocates (float32, MiB):

* ``"DDP"``: every rank holds the whole model, its gradients and optimizer state, plus DDP's gradient buckets (a
  second copy of the gradients that the all-reduce works on; ``gradient_as_bucket_view=True`` removes it). Source:
  the ``DistributedDataParallel`` docs (``bucket_cap_mb``, ``gradient_as_bucket_view``).
* ``"FSDP, sync each micro-step"`` (FSDP2's default): parameters, gradients and optimizer state are sharded, 1/W each;
  while a unit (here each ``fully_shard``-ed layer) runs, its parameters are all-gathered (the gathered copy plus the
  all-gather buffer) and its gradients reduce-scattered (the reduce-scatter input): about 3 x the largest unit's
  parameter bytes on top. Source: the FSDP2 design (``torch.distributed.fsdp.fully_shard`` docs) and the categories
  of ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker``.
* ``"FSDP, sync at the boundary"`` (``set_requires_gradient_sync(False)`` on micro-steps 1..N-1): the same, except
  that for N >= 2 every rank keeps the whole UNSHARDED gradient between micro-steps (memory grows by about the
  unsharded gradient size; the reduce-scatters fall N-fold).

``gradacc.workers.fsdp_accum`` measures the same three settings with PyTorch's trackers on real ranks;
``tests/test_parallel.py`` holds this model to within 10 % of them on lesson 09's model at world sizes 1 and 2.
"""

from __future__ import annotations

from dataclasses import replace

from torch import nn

from ..i18n import N_, _
from .predict import MemoryProfile, predict_step
from .tracker import MIB, StepMemory

__all__ = ["PARALLEL_MODES", "SETTING_LABELS", "setting_label", "predict_parallel", "largest_unit_bytes"]

PARALLEL_MODES: tuple[str, ...] = ("none", "DDP", "FSDP, sync each micro-step", "FSDP, sync at the boundary")
"""The data-parallel settings ``predict_parallel`` knows ("none": one process)."""
SETTING_LABELS: tuple[str, ...] = (
    N_("FSDP, sync each micro-step"),
    N_("FSDP, sync at the boundary"),
    N_("sync each micro-step"),
    N_("sync at the boundary"),
)
"""The names of the data-parallel settings that lesson 09 prints and draws (``PARALLEL_MODES``, and the keys of
``gradacc.workers.fsdp_accum``'s results), translated in ``gradacc.po``."""


def setting_label(name: str) -> str:
    """How a data-parallel setting's name (a key of ``PARALLEL_MODES`` or of lesson 09's measurements, which stay
    English in code) reads in the learner's language: ``"FSDP, sync at the boundary"`` -> ``"FSDP, sincroniza
    na fronteira"`` in the pt-BR edition; any other name (``"DDP"``) as it is.

    Example:
        >>> setting_label("DDP")
        'DDP'
    """
    return _(name) if name in SETTING_LABELS else name


def predict_parallel(
    profile: MemoryProfile,
    effective_batch_size: int,
    accum_steps: int,
    *,
    world_size: int = 1,
    mode: str = "none",
    largest_unit_bytes: float = 0.0,
) -> StepMemory:
    """One rank's predicted peak memory (MiB, with its breakdown) for one optimizer step of ``accum_steps``
    micro-steps on ``world_size`` ranks that share ``effective_batch_size`` samples (micro_batch_size =
    effective_batch_size / (accum_steps x world_size)).

    Args:
        profile: the one-process profile of the model and optimizer (``gradacc.memory.predict.profile_model``).
        mode: one of ``PARALLEL_MODES``.
        largest_unit_bytes: the parameter bytes of the largest ``fully_shard``-ed unit (FSDP modes only).

    The breakdown's ``"other"`` holds the communication buffers (DDP's buckets; FSDP's gathered unit, all-gather and
    reduce-scatter buffers) and the batch.

    Raises:
        ValueError: an unknown ``mode``; ``world_size < 1``, or ``world_size != 1`` with ``mode="none"``;
            ``effective_batch_size`` not divisible by ``accum_steps x world_size``; a negative ``largest_unit_bytes``.
    """
    if mode not in PARALLEL_MODES:
        raise ValueError(f"mode must be one of {PARALLEL_MODES}, got {mode!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if mode == "none" and world_size != 1:
        raise ValueError(f"mode 'none' is one process: world_size must be 1, got {world_size}; pick 'DDP' or FSDP")
    if largest_unit_bytes < 0:
        raise ValueError(f"largest_unit_bytes must be >= 0, got {largest_unit_bytes!r}")
    if effective_batch_size % world_size:
        raise ValueError(
            f"effective_batch_size {effective_batch_size} is not divisible by world_size {world_size}: every rank "
            "takes the same share; pick a multiple of accum_steps x world_size"
        )
    one = predict_step(profile, effective_batch_size // world_size, accum_steps)
    parts = dict(one.breakdown_mib)
    w, full_grads = world_size, profile.gradient_bytes / MIB
    if mode == "DDP":
        parts["other"] += full_grads
    elif mode.startswith("FSDP"):
        keep_unsharded = mode.endswith("boundary") and accum_steps > 1
        parts["parameters"] /= w
        parts["optimizer_state"] /= w
        parts["gradients"] = full_grads if keep_unsharded else parts["gradients"] / w
        parts["other"] += 3 * largest_unit_bytes / MIB
    return replace(one, peak_mib=sum(parts.values()), breakdown_mib=parts, method=f"predicted, {mode}, W={w}")


def largest_unit_bytes(model: nn.Module) -> int:
    """Parameter bytes of the largest ``nn.Linear`` in ``model``: the largest unit when ``fully_shard`` is applied to
    every ``Linear`` (lesson 09). Works on a model built on the ``meta`` device (no memory used)."""
    sizes = [sum(p.nbytes for p in m.parameters()) for m in model.modules() if isinstance(m, nn.Linear)]
    return max(sizes, default=0)
