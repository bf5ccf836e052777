"""Where a memory tracker is started changes what it reports (lesson 03, "measure the whole window").

A tracker that reports a span's own peak, the rise above the memory already live when it started, sees only what the
span allocates: on a GPU, ``torch.cuda.reset_peak_memory_stats()`` at the start, then ``max_memory_allocated()`` minus
the ``memory_allocated()`` read at the start, taken as "what this span needs"; or a report per segment of the step, as
tt-train's (one segment per forward and backward pass of each micro-batch; tenstorrent/tt-metal#50909, "Fix memory
usage underreporting with gradient accumulation"). Put around one steady-state micro-step of an accumulation window,
it misses the gradient buffer: micro-step 1 allocated it, and it stays live until the optimizer step.
``measure_spans`` runs one window under a ``LiveStorageCounter`` and reads that rise for every micro-step, for the
optimizer step, and for the whole window. Units: MiB (2**20 bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..foundations.accumulation import sum_cross_entropy
from ..foundations.data import check_accum_steps
from .config import StepConfig
from .measure import _accumulated_step, _prepare_window
from .tracker import LiveStorageCounter, _mib

__all__ = ["WindowSpans", "measure_spans", "spans_config"]


@dataclass
class WindowSpans:
    """What a tracker started at each point of one window reports, in MiB.

    Attributes:
        accum_steps: N, the window's micro-steps.
        start_mib: live memory when the window starts (parameters, optimizer state, the inputs; no gradients).
        peak_mib: the window's peak, all live memory counted.
        window_rise_mib: the window's peak minus ``start_mib``: what a tracker around the whole window reports.
        micro_step_rise_mib: for micro-steps 1..N, the span's peak minus the live memory at its start: what a
            tracker around that micro-step alone reports.
        micro_step_net_mib: for micro-steps 1..N, the live memory at the span's end minus at its start: what a
            tracker that reports each segment's net change reports (micro-step 1 keeps the gradient buffer it
            allocated; the later ones keep nothing).
        step_rise_mib: the same as ``micro_step_rise_mib`` for ``optimizer.step()`` and ``zero_grad``.
        gradient_mib: the gradient buffer (MiB) at the end of the last micro-step.
    """

    accum_steps: int
    start_mib: float
    peak_mib: float
    window_rise_mib: float
    micro_step_rise_mib: list[float]
    micro_step_net_mib: list[float]
    step_rise_mib: float
    gradient_mib: float


def measure_spans(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    accum_steps: int,
    *,
    loss_fn: Callable = sum_cross_entropy,
    warmup: bool = True,
) -> WindowSpans:
    """Run one window of the plain loop (as ``measure_step``: summed loss / the window's items, ``backward`` per
    micro-batch, one ``step``, ``zero_grad(set_to_none=True)``) under one ``LiveStorageCounter``, and read the peak
    rise of every span: each micro-step, the optimizer step, the whole window.

    Args:
        model, optimizer, inputs, labels, loss_fn, warmup: as ``measure_step`` (real tensors; ``inputs`` of shape
            ``[E, ...]`` with E a multiple of ``accum_steps``).
        accum_steps: N >= 1.

    Returns:
        A ``WindowSpans``; the model is trained by one step.

    Raises:
        ValueError: bad ``accum_steps``, or E not divisible by it.

    Example:
        >>> spans = spans_config(StepConfig(), 4)  # doctest: +SKIP
        >>> spans.window_rise_mib - spans.micro_step_rise_mib[-1]  # the gradient buffer: 3.15 MiB  # doctest: +SKIP
    """
    check_accum_steps(accum_steps)
    micro, _, items, _ = _prepare_window(model, optimizer, inputs, labels, accum_steps, loss_fn, warmup)
    counter = LiveStorageCounter()
    counter.track(model, optimizer, inputs, labels)
    start = counter.current_bytes
    spans: list[tuple[int, int]] = []  # (live bytes at the span's start, its peak) per span, in order
    window_peak = [start]

    def open_span() -> None:
        close_span()
        spans.append((counter.current_bytes, counter.current_bytes))
        counter.peak_bytes = counter.current_bytes  # the counter's peak now follows this span alone

    def close_span() -> None:
        if spans:
            spans[-1] = (spans[-1][0], counter.peak_bytes)
            window_peak[0] = max(window_peak[0], counter.peak_bytes)

    gradients = [0]

    def before_forward() -> None:
        if spans:
            gradients[0] = counter.current["gradients"]
        counter.phase = "activations"
        open_span()

    def before_step() -> None:
        gradients[0] = counter.current["gradients"]
        counter.phase = "temporaries"
        open_span()

    try:
        with counter:
            _accumulated_step(
                model,
                optimizer,
                micro,
                loss_fn,
                items,
                before_forward=before_forward,
                after_forward=lambda: setattr(counter, "phase", "temporaries"),
                before_step=before_step,
            )
        close_span()
    finally:
        counter.remove_hooks()
    rises = [_mib(peak - base) for base, peak in spans]
    return WindowSpans(
        accum_steps=accum_steps,
        start_mib=_mib(start),
        peak_mib=_mib(window_peak[0]),
        window_rise_mib=_mib(window_peak[0] - start),
        micro_step_rise_mib=rises[:-1],
        micro_step_net_mib=[_mib(later[0] - span[0]) for span, later in zip(spans[:-1], spans[1:], strict=True)],
        step_rise_mib=rises[-1],
        gradient_mib=_mib(gradients[0]),
    )


def spans_config(config: StepConfig, accum_steps: int, *, device: str | torch.device = "cpu", seed: int = 0):
    """``measure_spans`` of one of the lessons' setups, built afresh as in ``measure_config``."""
    model, optimizer = config.build(device, seed)
    x, y = config.batch(device, seed)
    return measure_spans(model, optimizer, x, y, accum_steps)
