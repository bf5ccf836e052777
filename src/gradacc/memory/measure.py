"""Measuring one optimizer step of N micro-steps for real: its peak memory with a breakdown, its time, its work.

Three ways to measure (``method``):

* ``"cuda"``: the CUDA caching allocator's statistics (``torch.cuda.reset_peak_memory_stats`` and
  ``torch.cuda.max_memory_allocated``) give the peak; PyTorch's memory tracker gives the breakdown.
* ``"tracker"`` (CPU, and any device): ``torch.distributed._tools.mem_tracker.MemTracker``, a private PyTorch API that
  follows every tensor storage through a ``TorchDispatchMode`` and files it under a category. It refuses a second
  forward of the same module unless ``reset_mod_stats()`` is called before each micro-batch (done here).
* ``"storages"``: ``gradacc.memory.tracker.LiveStorageCounter``.

Units: MiB (2**20 bytes) and seconds; batch sizes in samples.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..foundations.accumulation import count_items, sum_cross_entropy
from ..foundations.data import check_accum_steps
from .options import _check_method, check_divisible, optimizer_state_bytes
from .tracker import CATEGORIES, LiveStorageCounter, StepMemory, _breakdown, _mib, _storage_bytes

__all__ = [
    "time_step",
    "count_step_work",
    "Run",
    "measure_run",
    "measure_step",
]


# --------------------------------------------------------------------------------------------------------------------
# Running one accumulated optimizer step with observation points


def _micro_batches(inputs: torch.Tensor, labels: torch.Tensor, accum_steps: int):
    size = check_divisible(int(inputs.shape[0]), accum_steps)
    if labels.shape[0] != inputs.shape[0]:
        raise ValueError(
            f"inputs and labels must hold the same number of samples, got {inputs.shape[0]} and {labels.shape[0]}"
        )
    return [(inputs[i * size : (i + 1) * size], labels[i * size : (i + 1) * size]) for i in range(accum_steps)], size


def _window_items(labels: torch.Tensor, fake: bool) -> int:
    # count_items reads the labels (data-dependent); fake tensors have no data, so every label counts there
    return int(labels.numel()) if fake else max(count_items((labels, labels)), 1)


def _accumulated_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable,
    items: int,
    *,
    before_forward: Callable[[], None] | None = None,
    after_forward: Callable[[], None] | None = None,
    before_step: Callable[[], None] | None = None,
) -> None:
    """The plain accumulation loop: summed loss / items in the window, backward per micro-batch, one step."""
    for batch in micro_batches:
        if before_forward is not None:
            before_forward()
        loss = loss_fn(model, batch) / items
        if after_forward is not None:
            after_forward()
        loss.backward()
        del loss
    if before_step is not None:
        before_step()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _prepare_window(model, optimizer, inputs, labels, accum_steps: int, loss_fn: Callable, warmup: bool):
    """``(micro_batches, micro_batch_size, items, fake)`` of one window; with ``warmup``, first one untracked optimizer
    step on a few samples (creates the optimizer state, as in every step after the first)."""
    micro, micro_size = _micro_batches(inputs, labels, accum_steps)
    fake = _is_fake(inputs)
    if warmup:
        few = min(micro_size, 8)
        _accumulated_step(model, optimizer, [(inputs[:few], labels[:few])], loss_fn, _window_items(labels[:few], fake))
    return micro, micro_size, _window_items(labels, fake), fake


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    accum_steps: int,
    *,
    loss_fn: Callable = sum_cross_entropy,
    repeats: int = 3,
    warmup: int = 1,
) -> float:
    """Median wall seconds of one optimizer step of ``accum_steps`` micro-steps over ``inputs`` (no tracking).

    Args:
        inputs, labels: one effective batch, ``[E, ...]`` and ``[E, ...]``; E must be divisible by ``accum_steps``.
        repeats: timed steps (>= 1); warmup: untimed steps before them.

    Raises:
        ValueError: bad ``accum_steps``, E not divisible by it, or ``repeats < 1``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    micro, _ = _micro_batches(inputs, labels, accum_steps)
    items = _window_items(labels, False)
    device = next(model.parameters()).device
    for _ in range(warmup):
        _accumulated_step(model, optimizer, micro, loss_fn, items)
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        _accumulated_step(model, optimizer, micro, loss_fn, items)
        _sync(device)
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))


def count_step_work(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    accum_steps: int,
    *,
    loss_fn: Callable = sum_cross_entropy,
) -> tuple[int, int]:
    """What one optimizer step of ``accum_steps`` micro-steps asks of the hardware, counted (not timed).

    Runs the step once (it changes the weights, as ``time_step`` does) and counts the PyTorch operations dispatched
    (each one a kernel launch on a GPU: the fixed cost every micro-step pays) and the floating-point operations of
    its matrix products (``torch.utils.flop_counter.FlopCounterMode``: 2 x m x n x k per product), which depend only on
    the samples, not on how they are split.

    Args:
        inputs, labels: one effective batch, ``[E, ...]``; E must be divisible by ``accum_steps``.

    Returns:
        ``(operations, flops)``: ATen operations dispatched, and FLOPs of the forward and backward passes.

    Raises:
        ValueError: bad ``accum_steps`` or E not divisible by it.
    """
    from torch.utils.flop_counter import FlopCounterMode

    class _OperationCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.operations = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.operations += 1
            return func(*args, **(kwargs or {}))

    micro, _ = _micro_batches(inputs, labels, accum_steps)
    items = _window_items(labels, False)
    with FlopCounterMode(display=False) as flops, _OperationCounter() as counter:
        _accumulated_step(model, optimizer, micro, loss_fn, items)
    return counter.operations, int(flops.get_total_flops())


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


Run = Callable[[Callable[[], None], Callable[[], None]], None]
"""One optimizer step to measure: ``run(before_forward, after_forward)`` must call ``before_forward()`` right before
each micro-batch's forward pass and ``after_forward()`` right after it (before its backward)."""


def _measure_storages(run: Run, tracked: Sequence[Any]) -> tuple[dict[str, float], float]:
    counter = LiveStorageCounter()
    counter.track(*tracked)
    saved = [0]

    def before_forward() -> None:
        counter.phase = "activations"

    def after_forward() -> None:
        saved[0] = max(saved[0], counter.current["activations"])
        counter.phase = "temporaries"

    try:
        with counter:
            run(before_forward, after_forward)
    finally:
        counter.remove_hooks()
    return counter.peak_mib(), _mib(saved[0])


_TRACKER_CATEGORIES = {
    "Parameter": "parameters",
    "Gradient": "gradients",
    "Optstate": "optimizer_state",
    "Activation": "activations",
    "Temp": "temporaries",
    "Buffer": "other",
    "Other": "other",
}


def _tracker_breakdown(snapshot: dict[Any, int], state_bytes: int) -> dict[str, float]:
    out = dict.fromkeys(CATEGORIES, 0.0)
    for key, value in snapshot.items():
        name = getattr(key, "value", key)
        if name in _TRACKER_CATEGORIES:
            out[_TRACKER_CATEGORIES[name]] += value
    # MemTracker files everything created inside optimizer.step() as optimizer state, scratch included: keep the
    # real state there and move the scratch to temporaries
    extra = max(0.0, out["optimizer_state"] - state_bytes)
    out["optimizer_state"] -= extra
    out["temporaries"] += extra
    return {c: _mib(v) for c, v in out.items()}


def _measure_tracker(
    run: Run, tracked: Sequence[Any], optimizer: torch.optim.Optimizer, device: torch.device
) -> tuple[dict[str, float], float]:
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(*tracked)
    saved = [0]

    def before_forward() -> None:
        tracker.reset_mod_stats()  # else a second forward of the same module raises NotImplementedError

    def after_forward() -> None:
        snap = tracker.get_tracker_snapshot("current").get(device, {})
        act = sum(v for k, v in snap.items() if getattr(k, "value", k) == "Activation")
        saved[0] = max(saved[0], act)

    with warnings.catch_warnings():
        # with activation checkpointing the tracker's backward hooks can meet a module that is already gone
        warnings.filterwarnings("ignore", message="Module is None")
        with tracker:
            run(before_forward, after_forward)
    peak = tracker.get_tracker_snapshot("peak").get(device, {})
    return _tracker_breakdown(peak, optimizer_state_bytes(optimizer)), _mib(saved[0])


class _CudaAllocator:
    """The CUDA caching allocator's statistics for one device (``torch.cuda`` memory API)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak_bytes(self) -> int:
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.max_memory_allocated(self.device))

    def allocated_bytes(self) -> int:
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.memory_allocated(self.device))


def _tensor_bytes_on(device: torch.device, objects: Sequence[Any]) -> int:
    """Bytes of the distinct storages on ``device`` held by modules (parameters, gradients, buffers), optimizers
    (state) and tensors."""
    seen: set[int] = set()
    total = 0

    def add(t: torch.Tensor | None) -> None:
        nonlocal total
        if isinstance(t, torch.Tensor) and t.device == device:
            total += _storage_bytes(t, seen)

    for obj in objects:
        if isinstance(obj, nn.Module):
            for p in obj.parameters():
                add(p)
                add(p.grad)
            for b in obj.buffers():
                add(b)
        elif isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                for value in state.values():
                    add(value)
        else:
            add(obj)
    return total


def measure_run(
    run: Run,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *tensors: torch.Tensor,
    accum_steps: int,
    micro_batch_size: int,
    method: str = "auto",
    allocator: Any | None = None,
    seconds_per_step: float | None = None,
) -> StepMemory:
    """Measure one optimizer step that ``run`` performs (any training loop: plain PyTorch, Accelerate, ...).

    Args:
        run: ``run(before_forward, after_forward)`` makes ONE optimizer step of ``accum_steps`` micro-steps and calls
            the two callbacks around each micro-batch's forward pass (the tracker needs ``reset_mod_stats()`` there).
        model, optimizer: what the step trains (their tensors exist before: registered with the tracker).
        tensors: other tensors that exist before and stay alive (the effective batch).
        accum_steps, micro_batch_size: recorded in the result.
        method: ``"auto"``, ``"cuda"``, ``"tracker"`` or ``"storages"`` (see the module docstring).
        allocator: for ``"cuda"``, an object with ``reset()`` and ``peak_bytes()`` used instead of the CUDA
            allocator (tests drive the CUDA path's logic on CPU with one).
        seconds_per_step: recorded as is (time untracked steps separately: tracking slows a step 1.5-3x).

    Returns:
        A ``StepMemory``: with ``"cuda"`` the peak is ``torch.cuda.max_memory_allocated`` less what the allocator
        already held outside tensors before the step (library workspaces such as cuBLAS's, reported as
        ``allocator_overhead_mib``); the breakdown is the tracker's, its ``other`` taking any difference (allocator
        rounding, workspaces created during the step).

    Raises:
        ValueError: unknown ``method``; ``"cuda"`` for a model that is not on a CUDA device (and no ``allocator``) or
            for fake tensors.
    """
    _check_method(method)
    device = next(model.parameters()).device
    fake = any(_is_fake(t) for t in tensors) or _is_fake(next(model.parameters()))
    if method == "auto":
        method = "cuda" if device.type == "cuda" and not fake else "tracker"
    if method == "cuda" and (fake or (device.type != "cuda" and allocator is None)):
        raise ValueError(
            f"method='cuda' needs a model on a CUDA device with real tensors, got device {device} "
            f"({'fake' if fake else 'real'} tensors); use method='tracker' or 'storages' on CPU"
        )
    tracked = (model, optimizer, *tensors)
    overhead = 0.0
    if method == "storages":
        breakdown, saved = _measure_storages(run, tracked)
        peak = sum(breakdown.values())
    elif method == "tracker":
        breakdown, saved = _measure_tracker(run, tracked, optimizer, device)
        peak = sum(breakdown.values())
    else:
        allocator = allocator or _CudaAllocator(device)
        allocator.reset()
        # memory the allocator holds outside tensors before the step (cuBLAS workspaces, for one) is reported apart
        before = getattr(allocator, "allocated_bytes", lambda: 0)()
        overhead = _mib(max(0, before - _tensor_bytes_on(device, tracked)))
        breakdown, saved = _measure_tracker(run, tracked, optimizer, device)
        allocated = _mib(allocator.peak_bytes()) - overhead
        tracked_peak = sum(breakdown.values())
        breakdown["other"] += max(0.0, allocated - tracked_peak)
        peak = max(allocated, tracked_peak)
    return StepMemory(
        accum_steps=accum_steps,
        micro_batch_size=micro_batch_size,
        peak_mib=float(peak),
        breakdown_mib=_breakdown(breakdown),
        activations_mib=float(saved),
        seconds_per_step=seconds_per_step,
        method=method,
        device=str(device),
        fake=fake,
        allocator_overhead_mib=overhead,
    )


def measure_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    accum_steps: int,
    *,
    loss_fn: Callable = sum_cross_entropy,
    method: str = "auto",
    repeats: int = 0,
    warmup: bool = True,
    allocator: Any | None = None,
) -> StepMemory:
    """Measure the peak memory of one optimizer step made of ``accum_steps`` micro-steps, with its breakdown.

    The effective batch ``inputs``/``labels`` is split into ``accum_steps`` equal micro-batches; each micro-batch's
    summed loss is divided by the items in the whole window and back-propagated; then one ``optimizer.step()`` and
    ``zero_grad(set_to_none=True)`` (the plain loop of lesson 02). A warm-up step on a few samples first creates the
    optimizer state (so Adam's moments are counted, as in every step after the first). The model is trained.

    Args:
        model: any ``nn.Module`` taking ``inputs`` micro-batches; ``loss_fn(model, (x, y))`` returns a summed loss.
        optimizer: over ``model``'s parameters.
        inputs, labels: one effective batch, shapes ``[E, ...]``; E must be a multiple of ``accum_steps``. Real
            tensors, or ``FakeTensor`` s created under ``torch._subclasses.fake_tensor.FakeTensorMode`` (then the model
            and optimizer must be fake too, ``method`` must not be ``"cuda"``, nothing is computed and no time is
            measured).
        accum_steps: N >= 1.
        method: ``"auto"`` (``"cuda"`` on a CUDA device, else ``"tracker"``), ``"cuda"``, ``"tracker"``,
            ``"storages"``; see the module docstring.
        repeats: after the measured step, one untracked warm-up step and this many timed untracked steps: their median
            wall time is ``seconds_per_step`` (0: do not time; tracking slows a step 1.5-3x, so it is never timed).
        warmup: run one untracked optimizer step on a few samples first (creates the optimizer state).
        allocator: see ``measure_run``.

    Returns:
        A ``StepMemory`` (MiB, seconds).

    Raises:
        ValueError: bad ``accum_steps``, E not divisible by it, unknown ``method``, ``method="cuda"`` without a CUDA
            model (and no ``allocator``), or fake tensors with ``method="cuda"``.
    """
    check_accum_steps(accum_steps)
    _check_method(method)
    micro, micro_size, items, fake = _prepare_window(model, optimizer, inputs, labels, accum_steps, loss_fn, warmup)

    def run(before_forward: Callable[[], None], after_forward: Callable[[], None]) -> None:
        _accumulated_step(
            model, optimizer, micro, loss_fn, items, before_forward=before_forward, after_forward=after_forward
        )

    result = measure_run(
        run,
        model,
        optimizer,
        inputs,
        labels,
        accum_steps=accum_steps,
        micro_batch_size=micro_size,
        method=method,
        allocator=allocator,
    )
    if repeats and not fake:
        result.seconds_per_step = time_step(
            model, optimizer, inputs, labels, accum_steps, loss_fn=loss_fn, repeats=repeats, warmup=1
        )
    return result
