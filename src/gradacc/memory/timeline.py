"""The memory timeline of one optimizer step: live memory per category after every operation, with each micro-step's
forward and backward start and the optimizer step marked (lesson 03, "one window, operation by operation").

Where ``measure_step`` keeps only the peak, the timeline keeps every point: inside a step of N micro-steps the
activations rise during each forward pass and fall during its backward pass (N teeth), the gradient buffer appears
with the first backward pass and stays, and ``optimizer.step()`` adds its scratch at the end.

Recorded with ``LiveStorageCounter`` (any device, and under ``FakeTensorMode`` for models too large to run). On a CUDA
device each point also gets the caching allocator's ``torch.cuda.memory_allocated``. Units: MiB (2**20 bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..foundations.accumulation import sum_cross_entropy
from ..foundations.data import check_accum_steps
from .config import StepConfig, _fake_setup, _quiet_fake
from .measure import _accumulated_step, _CudaAllocator, _prepare_window
from .options import check_divisible
from .predict import MemoryProfile
from .tracker import CATEGORIES, LiveStorageCounter, _mib

__all__ = ["StepTimeline", "record_timeline", "timeline_config", "predict_timeline"]


@dataclass
class StepTimeline:
    """Live memory after each operation of one optimizer step of ``accum_steps`` micro-steps.

    Attributes:
        mib: category (``CATEGORIES``) -> MiB alive after each operation; every list has ``operations`` entries.
        events: ``(operation index, kind, micro-step)``: kind ``"forward"`` or ``"backward"`` (the first operation of
            micro-step 1..N's forward or backward pass) or ``"optimizer step"`` (micro-step 0).
        allocator_mib: on CUDA, ``torch.cuda.memory_allocated`` after each operation (MiB); else empty.
        predicted: drawn from a profile by ``predict_timeline``, not measured.
    """

    accum_steps: int
    micro_batch_size: int
    mib: dict[str, list[float]]
    events: list[tuple[int, str, int]]
    device: str = "cpu"
    fake: bool = False
    allocator_mib: list[float] = field(default_factory=list)
    predicted: bool = False

    @property
    def operations(self) -> int:
        return len(self.mib["parameters"])

    @property
    def total(self) -> list[float]:
        """MiB alive after each operation, all categories."""
        return [sum(values) for values in zip(*(self.mib[c] for c in CATEGORIES), strict=True)]

    @property
    def peak_index(self) -> int:
        total = self.total
        return max(range(len(total)), key=total.__getitem__)

    @property
    def peak_mib(self) -> float:
        return self.total[self.peak_index]

    def at(self, index: int) -> dict[str, float]:
        """The breakdown (MiB per category) after operation ``index``."""
        return {c: self.mib[c][index] for c in CATEGORIES}

    def event_index(self, kind: str, micro_step: int = 0) -> int:
        """The operation index of an event (``kind``, ``micro_step``); ``KeyError`` if there is none."""
        for index, k, step in self.events:
            if k == kind and step == micro_step:
                return index
        raise KeyError(f"no {kind!r} event for micro-step {micro_step}")

    def micro_step_spans(self) -> list[tuple[int, int]]:
        """``[start, end)`` operation ranges of micro-steps 1..N (forward start to the next forward or the step)."""
        starts = [self.event_index("forward", k) for k in range(1, self.accum_steps + 1)]
        ends = starts[1:] + [self.event_index("optimizer step")]
        return list(zip(starts, ends, strict=True))

    def teeth(self, high: float = 0.5, low: float = 0.1) -> int:
        """Counted from the data, not from the events: how often the activations climb from at most ``low`` of their
        largest value to at least ``high`` of it (two levels, so that the ups and downs inside one forward pass,
        where a layer's output replaces its input, count once)."""
        acts = self.mib["activations"]
        top = max(acts)
        count, up = 0, False
        for value in acts:
            if not up and value >= high * top:
                count, up = count + 1, True
            elif up and value <= low * top:
                up = False
        return count

    def tooth_heights(self) -> list[float]:
        """The largest activations (MiB) inside each micro-step, 1..N."""
        acts = self.mib["activations"]
        return [max(acts[a:b]) for a, b in self.micro_step_spans()]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, plus ``peak_mib`` and ``peak_index``."""
        return {
            "accum_steps": self.accum_steps,
            "micro_batch_size": self.micro_batch_size,
            "device": self.device,
            "fake": self.fake,
            "peak_mib": self.peak_mib,
            "peak_index": self.peak_index,
            "mib": self.mib,
            "events": [list(e) for e in self.events],
            "allocator_mib": self.allocator_mib,
            "predicted": self.predicted,
        }


class _TimelineCounter(LiveStorageCounter):
    """A ``LiveStorageCounter`` that also writes down every category after each operation."""

    def __init__(self, allocator: Any | None = None) -> None:
        super().__init__()
        self.rows: list[tuple[int, ...]] = []
        self.allocated: list[int] = []
        self.allocator = allocator

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        self.rows.append(tuple(self.current[c] for c in CATEGORIES))
        if self.allocator is not None:
            self.allocated.append(self.allocator.allocated_bytes())
        return out


def record_timeline(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    accum_steps: int,
    *,
    loss_fn: Callable = sum_cross_entropy,
    warmup: bool = True,
    allocator: Any | None = None,
) -> StepTimeline:
    """Record the memory timeline of one optimizer step: the plain loop of ``measure_step`` (summed loss / the
    window's items, ``backward`` per micro-batch, one ``step``, ``zero_grad(set_to_none=True)``).

    Args:
        model, optimizer, inputs, labels, loss_fn, warmup: as ``measure_step`` (real or fake tensors; ``inputs`` of
            shape ``[E, ...]`` with E a multiple of ``accum_steps``).
        accum_steps: N >= 1.
        allocator: an object with ``allocated_bytes()`` read after every operation (default: the CUDA caching
            allocator when the model is on a CUDA device with real tensors, else none). Tests pass a stand-in.

    Returns:
        A ``StepTimeline``; the model is trained by one step.

    Raises:
        ValueError: bad ``accum_steps``, or E not divisible by it.
    """
    check_accum_steps(accum_steps)
    micro, micro_size, items, fake = _prepare_window(model, optimizer, inputs, labels, accum_steps, loss_fn, warmup)
    device = next(model.parameters()).device
    if allocator is None and device.type == "cuda" and not fake:
        allocator = _CudaAllocator(device)
    counter = _TimelineCounter(allocator)
    counter.track(model, optimizer, inputs, labels)
    events: list[tuple[int, str, int]] = []

    def mark(kind: str) -> Callable[[], None]:
        def callback() -> None:
            step = 0 if kind == "optimizer step" else sum(1 for e in events if e[1] == "forward") + (kind == "forward")
            events.append((len(counter.rows), kind, step))
            counter.phase = "activations" if kind == "forward" else "temporaries"

        return callback

    try:
        with counter:
            _accumulated_step(
                model,
                optimizer,
                micro,
                loss_fn,
                items,
                before_forward=mark("forward"),
                after_forward=mark("backward"),
                before_step=mark("optimizer step"),
            )
    finally:
        counter.remove_hooks()
    columns = list(zip(*counter.rows, strict=True))
    return StepTimeline(
        accum_steps=accum_steps,
        micro_batch_size=micro_size,
        mib={c: [_mib(v) for v in columns[i]] for i, c in enumerate(CATEGORIES)},
        events=events,
        device=str(device),
        fake=fake,
        allocator_mib=[_mib(v) for v in counter.allocated],
    )


def timeline_config(
    config: StepConfig,
    accum_steps: int,
    *,
    fake: bool = False,
    device: str | torch.device | None = None,
    seed: int = 0,
) -> StepTimeline:
    """``record_timeline`` of one of the lessons' setups, built afresh as in ``measure_config`` (``fake``: under
    ``FakeTensorMode``, for models larger than this machine's memory)."""
    check_accum_steps(accum_steps)
    if fake:
        with _quiet_fake():
            mode, model, optimizer, x, y = _fake_setup(config)
            with mode:
                return record_timeline(model, optimizer, x, y, accum_steps)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, optimizer = config.build(device, seed)
    x, y = config.batch(device, seed)
    return record_timeline(model, optimizer, x, y, accum_steps)


def predict_timeline(profile: MemoryProfile, effective_batch_size: int, accum_steps: int) -> StepTimeline:
    """The timeline ``predict_step`` implies, without running the model: the profile's forward+backward timeline at
    micro-batch b = effective batch / N, N times (the gradient buffer is what the first backward pass has written so
    far, then the whole buffer), then ``optimizer.step()`` operation by operation (the profile's ``timeline_step``:
    its scratch on top of the persistent state, as many operations as the measured step has) and ``zero_grad``. Its
    peak equals ``predict_step``'s. Needs a profile from ``profile_model`` (with a timeline).

    Raises:
        ValueError: bad N, an effective batch not divisible by N, or a profile without a timeline (``analytic``).
    """
    b = check_divisible(effective_batch_size, accum_steps)
    p = profile
    if not p.timeline_activations:
        raise ValueError("predict_timeline needs a profile measured by profile_model (an analytic one has no timeline)")
    held = {
        "parameters": _mib(p.parameter_bytes),
        "optimizer_state": _mib(p.optimizer_state_bytes),
        "other": _mib(p.input_bytes_per_sample * effective_batch_size + p.other_bytes),
    }
    mib: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    events: list[tuple[int, str, int]] = []

    def point(gradients: float, activations: float = 0.0, temporaries: float = 0.0) -> None:
        values = {**held, "gradients": gradients, "activations": activations, "temporaries": temporaries}
        for c in CATEGORIES:
            mib[c].append(values[c])

    for k in range(1, accum_steps + 1):
        start = len(mib["parameters"])
        events += [(start, "forward", k), (start + p.timeline_backward_start, "backward", k)]
        for (af, a_s), (tf, ts), g in zip(p.timeline_activations, p.timeline_temporaries, p.timeline_gradients,
                                         strict=True):  # fmt: skip
            grads = g if k == 1 else p.gradient_bytes
            point(_mib(grads), _mib(max(0.0, af + a_s * b)), _mib(max(0.0, tf + ts * b)))
    events.append((len(mib["parameters"]), "optimizer step", 0))
    for scratch in p.timeline_step or [p.optimizer_step_bytes]:  # each operation of optimizer.step(), as profiled
        point(_mib(p.gradient_bytes), temporaries=_mib(scratch))
    point(0.0)  # after zero_grad(set_to_none=True)
    return StepTimeline(accum_steps=accum_steps, micro_batch_size=b, mib=mib, events=events, predicted=True)
