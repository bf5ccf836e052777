"""Gradient accumulation across processes (lessons 07, 09 and 11): what each rank does, and the numbers it needs.

* ``single_process_group``: a world of one process inside a notebook kernel, so ``DistributedDataParallel`` and
  FSDP2 can wrap a model there (lessons 09, 10 and 11).
* ``effective_batch_size``: micro_batch_size x accum_steps x world_size, with clear errors.
* ``AllReduceCounter``: a DDP communication hook that counts (and times) the gradient all-reduces.
* ``accumulate_window`` (``WEIGHTINGS``): one window of N micro-steps on a DDP model, the first N-1 inside
  ``no_sync()``, each summed loss scaled by the items of the whole window on every rank or on this rank only.
* ``rank_batches``: a rank's micro-batches of given sizes, in order after every lower rank's (exercise 7's checks).

The runs that start real processes are ``gradacc.parallel.runs``; the programs the ranks run are ``gradacc.workers``
(``ddp``, ``ddp_answer`` and ``parallel_stacks`` import this module). Token windows of lesson 07 are
``gradacc.parallel.tokens``.

Terms: ``micro_batch_size`` (samples per forward/backward on one process), ``accum_steps`` (N, micro-steps per
optimizer step), ``world_size`` (processes); effective batch size = micro_batch_size x accum_steps x world_size.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..foundations.accumulation import Batch, LossFn, count_items, sum_cross_entropy
from ..foundations.data import check_accum_steps, load_digits_tensors

__all__ = [
    "SINGLE_PROCESS_TIMEOUT_S",
    "single_process_group",
    "effective_batch_size",
    "AllReduceCounter",
    "WEIGHTINGS",
    "accumulate_window",
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
        ValueError: any argument < 1 (``accum_steps`` as in ``gradacc.foundations.data.check_accum_steps``).
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
        loss_fn: SUMMED loss of a micro-batch (default ``gradacc.foundations.accumulation.sum_cross_entropy``).

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


def rank_batches(sizes: list[list[int]], rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rank ``rank``'s micro-batches: ``sizes[rank]`` samples each, read in order after every lower rank's."""
    x, y = load_digits_tensors()
    start = sum(sum(s) for s in sizes[:rank])
    batches = []
    for size in sizes[rank]:
        batches.append((x[start : start + size], y[start : start + size]))
        start += size
    return batches
