"""Measuring and predicting the memory of a training step: one API used by every lesson.

One optimizer step made of N micro-steps (accumulation steps) is run for real and its peak memory is reported with a
breakdown at the moment of the peak: parameters, gradients, optimizer state, activations (tensors the forward pass
keeps for the backward pass), temporaries (backward and optimizer-step scratch) and other (inputs, buffers, allocator
slack). Units: MiB (2**20 bytes) and seconds; batch sizes in samples.

Three ways to measure (``method``):

* ``"cuda"``: the CUDA caching allocator's statistics (``torch.cuda.reset_peak_memory_stats`` and
  ``torch.cuda.max_memory_allocated``) give the peak; PyTorch's memory tracker gives the breakdown.
* ``"tracker"`` (CPU, and any device): ``torch.distributed._tools.mem_tracker.MemTracker``, a private PyTorch API that
  follows every tensor storage through a ``TorchDispatchMode`` and files it under a category. It refuses a second
  forward of the same module unless ``reset_mod_stats()`` is called before each micro-batch (done here).
* ``"storages"``: ``LiveStorageCounter``, this module's own small ``TorchDispatchMode`` that counts live tensor
  storages: the fallback if the private tracker changes (a test checks that both agree).

``predict_step`` predicts the same breakdown analytically from a ``MemoryProfile`` (parameters x bytes, gradients,
optimizer state bytes per parameter, activations per sample measured once by ``profile_model`` and scaled by the
micro-batch size). ``jax_compiled_memory`` reads XLA's compiled memory analysis for JAX.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .accumulation import count_items, sum_cross_entropy
from .data import check_accum_steps

MIB = 2**20

__all__ = [
    "MIB",
    "CATEGORIES",
    "OPTIMIZERS",
    "PRECISIONS",
    "STATE_BYTES_PER_PARAM",
    "METHODS",
    "StepMemory",
    "format_breakdown",
    "LiveStorageCounter",
    "MemoryProfile",
    "StepConfig",
    "DigitsTransformer",
    "make_optimizer",
    "optimizer_state_bytes",
    "check_divisible",
    "check_budget",
    "measure_step",
    "measure_run",
    "measure_config",
    "measure_sweep",
    "profile_model",
    "profile_config",
    "predict_step",
    "smallest_fitting_accum_steps",
    "time_step",
    "count_step_work",
    "jax_compiled_memory",
    "jax_memory_analysis",
]

CATEGORIES: tuple[str, ...] = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "other",
)
"""The breakdown's categories, in stacking order (bottom to top)."""

OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "adam")
"""Optimizer names ``make_optimizer`` accepts (case-insensitive)."""

_STATE_TENSORS = {"sgd": 0, "momentum": 1, "adam": 2}
"""Parameter-sized state tensors each optimizer keeps: SGD none, SGD with momentum one (the momentum buffer), Adam two
(``exp_avg`` and ``exp_avg_sq``); see the ``torch.optim.SGD`` and ``torch.optim.Adam`` docs."""

STATE_BYTES_PER_PARAM: dict[str, int] = {name: 4 * n for name, n in _STATE_TENSORS.items()}
"""Optimizer state bytes per parameter in fp32: SGD 0, momentum 4, Adam 8 (PyTorch keeps the state in the
parameters' dtype, so bf16 halves these)."""

PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}
"""Precision names: the dtype of parameters, gradients, optimizer state and activations alike (``model.to(dtype)``;
autocast mixed precision, which keeps fp32 master weights, is not modelled here)."""

METHODS: tuple[str, ...] = ("auto", "cuda", "tracker", "storages")
"""Measuring methods: ``auto`` picks ``cuda`` for a model on a CUDA device and ``tracker`` elsewhere."""


def _mib(n_bytes: float) -> float:
    return float(n_bytes) / MIB


# --------------------------------------------------------------------------------------------------------------------
# Validation


def check_divisible(effective_batch_size: int, accum_steps: int) -> int:
    """Validate that an effective batch splits into ``accum_steps`` equal micro-batches; return the micro-batch size.

    Policy: memory is measured and predicted for equal micro-batches only, so an effective batch that is not a multiple
    of N is refused (``gradacc.data.split_micro_batches`` handles unequal sizes when training).

    Raises:
        ValueError: ``accum_steps`` not an int >= 1, ``effective_batch_size`` not an int >= 1, or not divisible.
    """
    check_accum_steps(accum_steps)
    if isinstance(effective_batch_size, bool) or not isinstance(effective_batch_size, int) or effective_batch_size < 1:
        raise ValueError(f"effective_batch_size must be an int >= 1 (samples), got {effective_batch_size!r}")
    if effective_batch_size % accum_steps:
        divisors = [n for n in range(1, min(effective_batch_size, 64) + 1) if effective_batch_size % n == 0]
        raise ValueError(
            f"effective_batch_size={effective_batch_size} is not divisible by accum_steps={accum_steps}: micro-batches "
            f"would differ in size; pick accum_steps from {divisors} or an effective batch that is a multiple of "
            f"{accum_steps}"
        )
    return effective_batch_size // accum_steps


def check_budget(budget_mib: float) -> float:
    """Validate a memory budget in MiB (a positive, finite number); return it as a float.

    Raises:
        ValueError: the budget is not a number, not finite, or ``<= 0``.
    """
    try:
        value = float(budget_mib)
    except (TypeError, ValueError):
        raise ValueError(f"budget_mib must be a number of MiB, got {budget_mib!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"budget_mib must be a positive number of MiB, got {budget_mib!r}")
    return value


def _check_optimizer_name(name: str) -> str:
    key = str(name).lower() if isinstance(name, str) else name
    if key not in _STATE_TENSORS:
        raise ValueError(f"unknown optimizer {name!r}; use one of {list(OPTIMIZERS)}")
    return key


def _check_precision(name: str) -> torch.dtype:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; use one of {list(PRECISIONS)}")
    return PRECISIONS[name]


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}")
    return method


# --------------------------------------------------------------------------------------------------------------------
# Optimizers


def make_optimizer(name: str, params: Iterable[nn.Parameter], lr: float | None = None) -> torch.optim.Optimizer:
    """The course's optimizers by name: ``"sgd"`` (lr 0.1), ``"momentum"`` (SGD, momentum 0.9, lr 0.1), ``"adam"`` (lr 1e-3).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    key = _check_optimizer_name(name)
    params = list(params)
    if key == "adam":
        return torch.optim.Adam(params, lr=1e-3 if lr is None else lr)
    return torch.optim.SGD(params, lr=0.1 if lr is None else lr, momentum=0.9 if key == "momentum" else 0.0)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held by the tensors in ``optimizer.state`` now (0 before the first step creates them)."""
    seen: set[int] = set()
    total = 0
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                total += _storage_bytes(value, seen)
    return total


def _storage_bytes(t: torch.Tensor, seen: set[int] | None = None) -> int:
    st = t.untyped_storage()
    key = id(st)
    if seen is not None:
        if key in seen:
            return 0
        seen.add(key)
    return int(st.nbytes())


def _param_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _trainable_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------------------------------------------------
# Results


@dataclass
class StepMemory:
    """The memory of one optimizer step of ``accum_steps`` micro-steps (MiB) and its time (s).

    ``breakdown_mib`` is taken at the moment of the peak and sums to ``peak_mib``; its keys are ``CATEGORIES``.
    ``activations_mib`` is the largest activation memory at the end of a micro-batch's forward pass (what one
    micro-batch keeps alive for its backward pass); it shrinks as 1/N at a fixed effective batch, whereas the
    activations at the peak can be 0 when the peak falls inside ``optimizer.step()``.
    """

    accum_steps: int
    micro_batch_size: int
    peak_mib: float
    breakdown_mib: dict[str, float]
    activations_mib: float
    seconds_per_step: float | None = None
    method: str = "tracker"
    device: str = "cpu"
    fake: bool = False
    allocator_overhead_mib: float = 0.0

    @property
    def effective_batch_size(self) -> int:
        return self.accum_steps * self.micro_batch_size

    def __getitem__(self, category: str) -> float:
        return self.breakdown_mib[category]

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form: the fields plus ``effective_batch_size``."""
        out = asdict(self)
        out["effective_batch_size"] = self.effective_batch_size
        return out


def _breakdown(values: dict[str, float]) -> dict[str, float]:
    return {c: float(values.get(c, 0.0)) for c in CATEGORIES}


def format_breakdown(results: Sequence[StepMemory], digits: int = 1) -> str:
    """A text table: one row per result with N, the micro-batch, each category at the peak, the peak and the saved
    activations of one micro-batch, in MiB rounded to ``digits`` decimals."""
    names = ["params", "grads", "opt state", "acts", "temps", "other"]
    head = f"{'N':>3s} {'micro':>6s} " + " ".join(f"{n:>9s}" for n in names) + f" {'peak':>9s} {'saved acts':>10s}"
    lines = [head]
    for r in results:
        cells = " ".join(f"{r.breakdown_mib[c]:9.{digits}f}" for c in CATEGORIES)
        lines.append(
            f"{r.accum_steps:3d} {r.micro_batch_size:6d} {cells} {r.peak_mib:9.{digits}f} {r.activations_mib:10.{digits}f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------------
# The live-storage counter (the fallback)


class LiveStorageCounter(TorchDispatchMode):
    """Count the bytes of live tensor storages, by category, and remember the peak.

    A ``TorchDispatchMode`` sees the output of every PyTorch operation run inside it; each new storage is filed under
    the category in ``self.phase`` (``"activations"`` during a forward pass, ``"temporaries"`` during backward and
    inside ``optimizer.step()``) and forgotten when Python frees it (a ``weakref.finalize`` on the storage). Gradients
    are re-filed as ``"gradients"`` as soon as autograd accumulates them (``register_post_accumulate_grad_hook``) and
    the optimizer's state tensors as ``"optimizer_state"`` after each step. Tensors that existed before must be
    registered with ``track`` (parameters, buffers, gradients, optimizer state, inputs).

    Attributes:
        current: category -> live bytes now.
        peak_bytes: the largest total seen (bytes).
        peak: category -> bytes at the moment of ``peak_bytes``.
        max_bytes: category -> largest bytes seen for that category alone.

    Works on any device and under ``FakeTensorMode`` (fake storages report their would-be sizes). Storages reached
    only through views are counted once. Source: PyTorch's ``torch.utils._python_dispatch.TorchDispatchMode`` docs;
    the same idea as ``torch.distributed._tools.mem_tracker.MemTracker``, with a fraction of its bookkeeping.
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase = "activations"
        self.current: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.peak_bytes = 0
        self.peak: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.max_bytes: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self._live: dict[int, list] = {}  # id(storage) -> [nbytes, category, finalizer]
        self._hooks: list[Any] = []
        self.timeline: list[tuple[int, int, int]] | None = None
        """If set to a list, each operation appends ``(activations, temporaries, gradients)`` bytes after it ran."""

    # -- registration --------------------------------------------------------------------------------------------
    def _add(self, t: torch.Tensor, category: str) -> None:
        st = t.untyped_storage()
        key = id(st)
        entry = self._live.get(key)
        if entry is not None:
            if category != entry[1] and category in ("gradients", "optimizer_state"):
                self.current[entry[1]] -= entry[0]
                self.current[category] += entry[0]
                entry[1] = category
            return
        nbytes = int(st.nbytes())
        entry = [nbytes, category, None]
        entry[2] = weakref.finalize(st, self._free, key)
        self._live[key] = entry
        self.current[category] += nbytes

    def _free(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.current[entry[1]] -= entry[0]

    def _update_peak(self) -> None:
        total = sum(self.current.values())
        for c, v in self.current.items():
            if v > self.max_bytes[c]:
                self.max_bytes[c] = v
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak = dict(self.current)

    def track(self, *objects: Any) -> LiveStorageCounter:
        """Register what existed before counting: modules (parameters, buffers, gradients), optimizers (state, and a
        step hook that files new state as optimizer state), tensors (as ``"other"``), or lists of them."""
        for obj in objects:
            if isinstance(obj, nn.Module):
                for p in obj.parameters():
                    self._add(p, "parameters")
                    if p.grad is not None:
                        self._add(p.grad, "gradients")
                    if p.requires_grad:
                        self._hooks.append(p.register_post_accumulate_grad_hook(self._grad_hook))
                for b in obj.buffers():
                    self._add(b, "other")
            elif isinstance(obj, torch.optim.Optimizer):
                self._track_state(obj)
                self._hooks.append(obj.register_step_pre_hook(self._step_pre_hook))
                self._hooks.append(obj.register_step_post_hook(self._step_post_hook))
            elif isinstance(obj, torch.Tensor):
                self._add(obj, "other")
            elif isinstance(obj, list | tuple):
                self.track(*obj)
            elif obj is not None:
                raise TypeError(f"track() takes modules, optimizers and tensors, got {type(obj).__name__}")
        self._update_peak()
        return self

    def _grad_hook(self, p: torch.Tensor) -> None:
        if p.grad is not None:
            self._add(p.grad, "gradients")
            self._update_peak()

    def _track_state(self, optimizer: torch.optim.Optimizer) -> None:
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    self._add(value, "optimizer_state")

    def _step_pre_hook(self, optimizer, args, kwargs) -> None:
        self._phase_before_step = self.phase
        self.phase = "temporaries"

    def _step_post_hook(self, optimizer, args, kwargs) -> None:
        self._track_state(optimizer)
        self.phase = getattr(self, "_phase_before_step", "activations")

    def remove_hooks(self) -> None:
        """Remove the gradient and optimizer hooks ``track`` installed."""
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    # -- the dispatch mode ---------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._add(leaf, self.phase)
        self._update_peak()
        if self.timeline is not None:
            c = self.current
            self.timeline.append((c["activations"], c["temporaries"], c["gradients"]))
        return out

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)

    # -- reading -------------------------------------------------------------------------------------------------
    @property
    def current_bytes(self) -> int:
        return sum(self.current.values())

    def peak_mib(self) -> dict[str, float]:
        """The breakdown at the peak in MiB (keys ``CATEGORIES``)."""
        return {c: _mib(self.peak[c]) for c in CATEGORIES}


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
    micro, micro_size = _micro_batches(inputs, labels, accum_steps)
    fake = _is_fake(inputs)
    items = _window_items(labels, fake)
    if warmup:
        few = min(micro_size, 8)
        _accumulated_step(model, optimizer, [(inputs[:few], labels[:few])], loss_fn, _window_items(labels[:few], fake))

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


# --------------------------------------------------------------------------------------------------------------------
# Models and configurations the lesson, the widget and the benchmark share


class DigitsTransformer(nn.Module):
    """A small transformer encoder for the 8x8 digits: each image row is a token.

    ``[B, 64] float -> [B, 10]`` logits: rows ``[B, 8, 8]`` -> ``Linear(8, width)`` + learned positions ->
    ``depth`` x ``nn.TransformerEncoderLayer(width, heads, 2*width, dropout=0, batch_first=True)`` (each initialised
    on its own, in an ``nn.ModuleList``) -> mean over the 8 tokens -> ``Linear(width, 10)``.

    Raises:
        ValueError: ``depth < 1`` or ``width`` not a multiple of ``heads``.
    """

    def __init__(self, width: int = 64, depth: int = 2, heads: int = 4) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if width % heads:
            raise ValueError(f"width must be a multiple of heads={heads}, got {width}")
        self.embed = nn.Linear(8, width)
        self.position = nn.Parameter(torch.zeros(8, width))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True) for _ in range(depth)
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x.reshape(x.shape[0], 8, 8)) + self.position
        for layer in self.layers:
            tokens = layer(tokens)
        return self.head(tokens.mean(dim=1))


ARCHS: tuple[str, ...] = ("mlp", "transformer")


@dataclass(frozen=True)
class StepConfig:
    """A training step to measure: model, optimizer, precision and effective batch (samples).

    ``arch="mlp"`` is ``gradacc.models.DigitsMLP(hidden=width, depth=depth)``; ``"transformer"`` is
    ``DigitsTransformer(width, depth)``. ``checkpoint=True`` recomputes each hidden block's activations in the
    backward pass (``torch.utils.checkpoint``, non-reentrant) instead of keeping them. The batch is
    ``effective_batch_size`` digits drawn with replacement (seeded) from scikit-learn's 1,797.

    Raises:
        ValueError: unknown ``arch``, ``optimizer`` or ``precision``; ``width``, ``depth`` or ``effective_batch_size``
            below 1.
    """

    arch: str = "mlp"
    width: int = 512
    depth: int = 4
    optimizer: str = "adam"
    precision: str = "fp32"
    effective_batch_size: int = 4096
    checkpoint: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown arch {self.arch!r}; use one of {list(ARCHS)}")
        object.__setattr__(self, "optimizer", _check_optimizer_name(self.optimizer))
        _check_precision(self.precision)
        for name in ("width", "depth", "effective_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")

    @property
    def dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]

    def with_(self, **changes: Any) -> StepConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def build_model(self, seed: int = 0) -> nn.Module:
        """The model, initialised from ``seed``, in this config's dtype (on the default device).

        Built with the config's dtype as the default dtype (not ``.to(dtype)``, which fails on fake tensors).
        """
        previous = torch.get_default_dtype()
        try:
            torch.set_default_dtype(self.dtype)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                if self.arch == "mlp":
                    from .models import DigitsMLP

                    model: nn.Module = DigitsMLP(hidden=self.width, depth=self.depth)
                else:
                    model = DigitsTransformer(self.width, self.depth)
        finally:
            torch.set_default_dtype(previous)
        return _Checkpointed(model) if self.checkpoint else model

    def build(self, device: str | torch.device = "cpu", seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
        """``(model, optimizer)`` on ``device``."""
        model = self.build_model(seed).to(device)
        return model, make_optimizer(self.optimizer, model.parameters())

    def batch(self, device: str | torch.device = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """One effective batch: ``[E, 64]`` inputs in this config's dtype and ``[E]`` int64 labels (real digits)."""
        x, y = _digits()
        index = torch.randint(0, len(x), (self.effective_batch_size,), generator=torch.Generator().manual_seed(seed))
        return x[index].to(device=device, dtype=self.dtype), y[index].to(device)

    def label(self) -> str:
        extra = ", checkpointed" if self.checkpoint else ""
        return (
            f"{self.arch} width {self.width} depth {self.depth}, {self.optimizer}, {self.precision}, "
            f"effective batch {self.effective_batch_size}{extra}"
        )


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from .data import load_digits_tensors

    return load_digits_tensors()


class _Checkpointed(nn.Module):
    """Wraps a model so that each hidden block is recomputed in the backward pass (``torch.utils.checkpoint``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        inner = self.inner
        if hasattr(inner, "net"):  # DigitsMLP: checkpoint every Linear+activation block, keep the head
            layers = list(inner.net)
            blocks: list[nn.Sequential] = []
            current: list[nn.Module] = []
            for layer in layers[:-1]:
                current.append(layer)
                if not isinstance(layer, nn.Linear):
                    blocks.append(nn.Sequential(*current))
                    current = []
            h = x
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False)
            for layer in current:
                h = layer(h)
            return layers[-1](h)
        tokens = inner.embed(x.reshape(x.shape[0], 8, 8)) + inner.position
        for layer in inner.layers:
            tokens = checkpoint(layer, tokens, use_reentrant=False)
        return inner.head(tokens.mean(dim=1))


_FAKE_WARNINGS = ("Accessing the data pointer of FakeTensor",)
"""PyTorch warns when its own code (attention's fast-path checks) reads a fake tensor's data pointer: harmless here."""


@contextlib.contextmanager
def _quiet_fake():
    with warnings.catch_warnings():
        for message in _FAKE_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        yield


def _fake_setup(config: StepConfig, accum_steps_batch: int | None = None):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        model = config.build_model()
        optimizer = make_optimizer(config.optimizer, model.parameters())
        n = accum_steps_batch or config.effective_batch_size
        x = torch.empty(n, 64, dtype=config.dtype)
        y = torch.zeros(n, dtype=torch.int64)
    return mode, model, optimizer, x, y


def measure_config(
    config: StepConfig,
    accum_steps: int,
    *,
    method: str = "auto",
    device: str | torch.device | None = None,
    repeats: int = 0,
    fake: bool = False,
    seed: int = 0,
) -> StepMemory:
    """Build ``config`` afresh (model from ``seed``, a real digits batch) and ``measure_step`` it at ``accum_steps``.

    Args:
        device: where to build (default: CUDA if available, else CPU). ``method="auto"`` then measures with the CUDA
            allocator on a GPU and the tracker elsewhere.
        fake: build and run everything under ``FakeTensorMode``: the same operations and storage sizes with no data
            and no compute, so models far larger than this machine's memory can be measured (``method`` becomes
            ``"storages"`` if it was ``"auto"`` or ``"cuda"``; no time).

    Raises:
        ValueError: as ``measure_step``.
    """
    check_divisible(config.effective_batch_size, accum_steps)
    if fake:
        method = "storages" if method in ("auto", "cuda") else method
        with _quiet_fake():
            mode, model, optimizer, x, y = _fake_setup(config)
            with mode:
                return measure_step(model, optimizer, x, y, accum_steps, method=method)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, optimizer = config.build(device, seed)
    x, y = config.batch(device, seed)
    return measure_step(model, optimizer, x, y, accum_steps, method=method, repeats=repeats)


def measure_sweep(
    config: StepConfig,
    accum_steps: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    method: str = "auto",
    device: str | torch.device | None = None,
    repeats: int = 0,
    fake: bool = False,
    progress: bool | Callable[[int, int], None] = False,
) -> list[StepMemory]:
    """``measure_config`` for each N in ``accum_steps`` (each on a freshly built model); one ``StepMemory`` per N.

    Args:
        progress: ``True`` shows a ``tqdm.auto`` bar; a callable is called as ``progress(done, total)``.
    """
    values = list(accum_steps)
    for n in values:
        check_divisible(config.effective_batch_size, n)
    results = []
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(values), desc="measuring", unit="N")
    for i, n in enumerate(values):
        results.append(measure_config(config, n, method=method, device=device, repeats=repeats, fake=fake))
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(i + 1, len(values))
    if bar is not None:
        bar.close()
    return results


# --------------------------------------------------------------------------------------------------------------------
# The predictor


@dataclass
class MemoryProfile:
    """What the predictor needs to know about a model + optimizer, in bytes (see ``profile_model``).

    Persistent: ``parameter_bytes``, ``gradient_bytes`` (one buffer the size of the trainable parameters),
    ``optimizer_state_bytes``, ``other_bytes`` (buffers). Per step: ``optimizer_step_bytes`` (scratch inside
    ``optimizer.step()``), ``input_bytes_per_sample`` (the effective batch stays in memory).

    Activations and temporaries of a micro-step's forward+backward, linear in the micro-batch size b:
    ``activation_bytes_per_sample`` (what a micro-batch keeps for its backward pass, the slope measured once) and,
    when ``profile_model`` measured them, ``timeline_*``: after each operation of the probe's forward+backward the
    activation and temporary bytes as ``fixed + per_sample * b`` and the gradient bytes written so far. The operations
    are the same for every b, so the peak at any micro-batch size is the largest point of this timeline (without a
    timeline: everything kept until the end of the forward pass).
    """

    n_params: int
    parameter_bytes: int
    gradient_bytes: int
    optimizer_state_bytes: int
    optimizer_step_bytes: float = 0.0
    input_bytes_per_sample: float = 0.0
    activation_bytes_per_sample: float = 0.0
    activation_bytes_fixed: float = 0.0
    other_bytes: float = 0.0
    timeline_activations: list[tuple[float, float]] = field(default_factory=list)
    timeline_temporaries: list[tuple[float, float]] = field(default_factory=list)
    timeline_gradients: list[float] = field(default_factory=list)
    description: str = ""

    @classmethod
    def analytic(
        cls,
        n_params: int,
        *,
        optimizer: str = "adam",
        precision: str = "fp32",
        activation_mib_per_sample: float,
        input_mib_per_sample: float = 0.0,
    ) -> MemoryProfile:
        """A profile from counts alone: parameters x bytes, gradients, optimizer state (SGD 0, momentum 4, Adam 8
        bytes per parameter in fp32), and activations per sample (MiB, measured elsewhere) kept until the backward.

        Raises:
            ValueError: unknown optimizer or precision, ``n_params < 1``, negative per-sample memory.
        """
        key = _check_optimizer_name(optimizer)
        dtype = _check_precision(precision)
        if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 1:
            raise ValueError(f"n_params must be an int >= 1, got {n_params!r}")
        if activation_mib_per_sample < 0 or input_mib_per_sample < 0:
            raise ValueError(
                f"per-sample memory must be >= 0 MiB, got activations {activation_mib_per_sample!r}, "
                f"inputs {input_mib_per_sample!r}"
            )
        size = torch.empty((), dtype=dtype).element_size()
        return cls(
            n_params=n_params,
            parameter_bytes=n_params * size,
            gradient_bytes=n_params * size,
            optimizer_state_bytes=n_params * size * _STATE_TENSORS[key],
            activation_bytes_per_sample=activation_mib_per_sample * MIB,
            input_bytes_per_sample=input_mib_per_sample * MIB,
            description=f"analytic: {n_params:,} parameters, {key}, {precision}",
        )

    @property
    def activation_mib_per_sample(self) -> float:
        return _mib(self.activation_bytes_per_sample)


def _fit(b1: int, v1: float, b2: int, v2: float) -> tuple[float, float]:
    """``(fixed, per_sample)`` of the line through ``(b1, v1)`` and ``(b2, v2)``."""
    slope = (v2 - v1) / (b2 - b1)
    return v1 - slope * b1, slope


def _forward_backward_timeline(model, optimizer, x, y, loss_fn, items) -> tuple[list[tuple[int, int, int]], int]:
    """One forward+backward from ``grad=None`` (no optimizer step): the per-operation timeline and saved activations."""
    counter = LiveStorageCounter()
    counter.track(model, optimizer, x, y)
    counter.timeline = []
    try:
        with counter:
            counter.phase = "activations"
            loss = loss_fn(model, (x, y)) / items
            saved = counter.current["activations"]
            counter.phase = "temporaries"
            loss.backward()
            del loss
    finally:
        counter.remove_hooks()
    return counter.timeline, saved


def _optimizer_step_extra(model, optimizer) -> int:
    """Bytes above the persistent state at the peak of one ``optimizer.step()`` (gradients must be in place)."""
    counter = LiveStorageCounter()
    counter.track(model, optimizer)
    base = counter.current_bytes
    try:
        with counter:
            optimizer.step()
    finally:
        counter.remove_hooks()
    return counter.peak_bytes - base


def profile_model(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    loss_fn: Callable = sum_cross_entropy,
    probe_sizes: tuple[int, int] = (16, 32),
    description: str = "",
) -> MemoryProfile:
    """Measure once what ``predict_step`` needs: one forward+backward at each of two small micro-batch sizes and one
    optimizer step, counted operation by operation with ``LiveStorageCounter``.

    Activation and temporary bytes after each operation are fitted as ``fixed + per_sample * b`` between the two
    probes (the operations are the same for every micro-batch size). The model takes optimizer steps while probing
    (the first creates the optimizer's state); pass a copy if that matters. Works on fake tensors too (model,
    optimizer and batch created under ``FakeTensorMode``).

    Args:
        inputs, labels: samples to probe with, ``[>= max(probe_sizes), ...]``.
        probe_sizes: two micro-batch sizes b1 < b2.

    Returns:
        A ``MemoryProfile`` (bytes).

    Raises:
        ValueError: ``probe_sizes`` not two increasing sizes >= 1, or fewer samples than the larger one.
        RuntimeError: the two probes ran different operations (a model whose control flow depends on the batch size).
    """
    b1, b2 = probe_sizes
    if not 1 <= b1 < b2:
        raise ValueError(f"probe_sizes must be two increasing sizes >= 1, got {probe_sizes}")
    if inputs.shape[0] < b2:
        raise ValueError(f"profile_model needs >= {b2} samples to probe with, got {inputs.shape[0]}")
    fake = _is_fake(inputs)
    x1, y1, x2, y2 = inputs[:b1], labels[:b1], inputs[:b2], labels[:b2]
    optimizer.zero_grad(set_to_none=True)
    _accumulated_step(model, optimizer, [(x1, y1)], loss_fn, _window_items(y1, fake))  # creates optimizer state
    probes = []
    for x, y in ((x1, y1), (x2, y2)):
        optimizer.zero_grad(set_to_none=True)
        probes.append(_forward_backward_timeline(model, optimizer, x, y, loss_fn, _window_items(y, fake)))
    step_extra = _optimizer_step_extra(model, optimizer)  # with the gradients of the last probe in place
    optimizer.zero_grad(set_to_none=True)
    (t1, s1), (t2, s2) = probes
    if len(t1) != len(t2):
        raise RuntimeError(
            f"the probes at micro-batch sizes {b1} and {b2} ran {len(t1)} and {len(t2)} operations; profile_model "
            "needs a model whose operations do not depend on the batch size"
        )
    acts = [_fit(b1, a1, b2, a2) for (a1, _, _), (a2, _, _) in zip(t1, t2, strict=True)]
    temps = [_fit(b1, m1, b2, m2) for (_, m1, _), (_, m2, _) in zip(t1, t2, strict=True)]
    grads = [float(g) for (_, _, g) in t2]
    saved_fixed, saved_slope = _fit(b1, s1, b2, s2)
    per_sample_input = inputs[0].numel() * inputs.element_size() + max(1, labels[0].numel()) * labels.element_size()
    params = list(model.parameters())
    return MemoryProfile(
        n_params=sum(p.numel() for p in params),
        parameter_bytes=_param_bytes(model),
        gradient_bytes=_trainable_bytes(model),
        optimizer_state_bytes=optimizer_state_bytes(optimizer),
        optimizer_step_bytes=float(step_extra),
        input_bytes_per_sample=float(per_sample_input),
        activation_bytes_per_sample=saved_slope,
        activation_bytes_fixed=saved_fixed,
        other_bytes=float(sum(b.numel() * b.element_size() for b in model.buffers())),
        timeline_activations=acts,
        timeline_temporaries=temps,
        timeline_gradients=grads,
        description=description,
    )


def profile_config(config: StepConfig, *, fake: bool = False, device: str | torch.device = "cpu") -> MemoryProfile:
    """``profile_model`` on a fresh model of ``config`` (real digits, or fake tensors with ``fake=True``)."""
    if fake:
        with _quiet_fake():
            mode, model, optimizer, x, y = _fake_setup(config, 32)
            with mode:
                return profile_model(model, optimizer, x, y, description=config.label())
    model, optimizer = config.build(device)
    x, y = config.with_(effective_batch_size=32).batch(device)
    return profile_model(model, optimizer, x, y, description=config.label())


def predict_step(profile: MemoryProfile, effective_batch_size: int, accum_steps: int) -> StepMemory:
    """Predict the peak memory of one optimizer step of N micro-steps, with its breakdown at the peak (MiB).

    Two candidate peaks; the larger is the prediction:

    * inside a micro-step's forward+backward: parameters + optimizer state + the activations and temporaries of one
      micro-batch (b = effective batch / N; from the profile's timeline, each point linear in b) + gradients (for
      N >= 2 the whole buffer, holding the sum of the earlier micro-steps; at N = 1 only what the backward pass has
      written by then) + the effective batch;
    * inside ``optimizer.step()``: parameters + gradients + optimizer state + the step's scratch + the batch.

    With Adam and small micro-batches the second wins and the peak stays flat as N grows; with large micro-batches
    the first wins and falls as 1/N until the second takes over. With SGD (no state, little scratch) the full gradient
    buffer that N >= 2 keeps during the backward pass can make the peak RISE with N.

    Raises:
        ValueError: bad N, or an effective batch not divisible by N.
    """
    b = check_divisible(effective_batch_size, accum_steps)
    p = profile
    inputs = p.input_bytes_per_sample * effective_batch_size + p.other_bytes
    if p.timeline_activations:
        best = (-1.0, 0.0, 0.0, 0.0)
        for (af, a_s), (tf, ts), g in zip(
            p.timeline_activations, p.timeline_temporaries, p.timeline_gradients, strict=True
        ):
            acts, temps = max(0.0, af + a_s * b), max(0.0, tf + ts * b)
            grads = g if accum_steps == 1 else float(p.gradient_bytes)
            if acts + temps + grads > best[0]:
                best = (acts + temps + grads, acts, temps, grads)
        _, acts, temps, grads = best
    else:
        acts = max(0.0, p.activation_bytes_fixed + p.activation_bytes_per_sample * b)
        temps, grads = 0.0, (0.0 if accum_steps == 1 else float(p.gradient_bytes))
    backward = {
        "parameters": p.parameter_bytes,
        "gradients": grads,
        "optimizer_state": p.optimizer_state_bytes,
        "activations": acts,
        "temporaries": temps,
        "other": inputs,
    }
    step = {
        "parameters": p.parameter_bytes,
        "gradients": p.gradient_bytes,
        "optimizer_state": p.optimizer_state_bytes,
        "activations": 0.0,
        "temporaries": p.optimizer_step_bytes,
        "other": inputs,
    }
    peak = max(backward, step, key=lambda d: sum(d.values()))
    breakdown = {c: _mib(v) for c, v in peak.items()}
    return StepMemory(
        accum_steps=accum_steps,
        micro_batch_size=b,
        peak_mib=sum(breakdown.values()),
        breakdown_mib=breakdown,
        activations_mib=_mib(max(0.0, p.activation_bytes_fixed + p.activation_bytes_per_sample * b)),
        method="predicted",
        device="",
    )


def smallest_fitting_accum_steps(
    peak_mib: Callable[[int], float] | MemoryProfile,
    budget_mib: float,
    candidates: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    *,
    effective_batch_size: int | None = None,
) -> int | None:
    """The smallest N in ``candidates`` whose peak fits in ``budget_mib``, or ``None`` if none does.

    Args:
        peak_mib: a function N -> peak MiB, or a ``MemoryProfile`` (then ``effective_batch_size`` is required and the
            peak is ``predict_step``'s).
        budget_mib: the memory available (MiB), > 0.
        candidates: N values to try, each >= 1; those that do not divide the effective batch are skipped.

    Raises:
        ValueError: a non-positive budget, an N < 1, or a profile without ``effective_batch_size``.
    """
    budget = check_budget(budget_mib)
    values = sorted(set(candidates))
    for n in values:
        check_accum_steps(n)
    if isinstance(peak_mib, MemoryProfile):
        if effective_batch_size is None:
            raise ValueError("pass effective_batch_size (samples) together with a MemoryProfile")
        profile = peak_mib
        values = [n for n in values if effective_batch_size % n == 0]

        def peak_fn(n: int) -> float:
            return predict_step(profile, effective_batch_size, n).peak_mib
    else:
        peak_fn = peak_mib
    for n in values:
        if peak_fn(n) <= budget:
            return n
    return None


# --------------------------------------------------------------------------------------------------------------------
# JAX


def jax_memory_analysis(compiled: Any) -> dict[str, float]:
    """The memory of an already compiled JAX executable (``jax.jit(f).lower(*args).compile()``), in MiB.

    Returns:
        ``{"argument_mib", "output_mib", "alias_mib", "temp_mib", "total_mib"}`` with ``total = argument + output -
        alias + temp`` (see ``jax_compiled_memory``).
    """
    stats = compiled.memory_analysis()
    argument, output = stats.argument_size_in_bytes, stats.output_size_in_bytes
    alias, temp = stats.alias_size_in_bytes, stats.temp_size_in_bytes
    return {
        "argument_mib": argument / MIB,
        "output_mib": output / MIB,
        "alias_mib": alias / MIB,
        "temp_mib": temp / MIB,
        "total_mib": (argument + output - alias + temp) / MIB,
    }


def jax_compiled_memory(
    fn: Callable, *args: Any, donate_argnums: tuple[int, ...] = (), **kwargs: Any
) -> dict[str, float]:
    """Memory XLA plans for ``fn(*args, **kwargs)``, from the compiled executable's memory analysis (MiB).

    ``jax.jit(fn).lower(*args).compile().memory_analysis()`` reports argument, output, alias (outputs that reuse a
    donated argument's buffer) and temporary sizes. ``temp_size_in_bytes`` alone misleads: XLA reuses output buffers as
    scratch, so temporaries can drop to 0 while the step still needs the memory. The total the step needs at once is
    ``argument + output - alias + temp`` (measured in FACTS.md: it tracks activations as N grows, temp alone does not).

    Args:
        fn: a function or an already ``jax.jit``-ed function; it is jitted with ``donate_argnums`` if it is not.
        args, kwargs: example arguments (arrays or ``jax.ShapeDtypeStruct``; nothing is executed).

    Returns:
        ``{"argument_mib", "output_mib", "alias_mib", "temp_mib", "total_mib"}`` as floats.

    Source: JAX "Ahead-of-time lowering and compilation" docs (``Compiled.memory_analysis``).
    """
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn, donate_argnums=donate_argnums)
    return jax_memory_analysis(jitted.lower(*args, **kwargs).compile())
