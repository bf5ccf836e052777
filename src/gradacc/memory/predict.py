"""Predicting a step's memory analytically: ``MemoryProfile`` (parameters x bytes, gradients, optimizer state bytes per
parameter, activations per sample measured once by ``profile_model``), ``predict_step`` for any N and effective batch,
and ``smallest_fitting_accum_steps`` for a budget in MiB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..foundations.accumulation import sum_cross_entropy
from ..foundations.data import check_accum_steps
from ..i18n import _
from .config import StepConfig, _fake_setup, _quiet_fake
from .measure import _accumulated_step, _is_fake, _window_items
from .options import (
    _STATE_TENSORS,
    _check_optimizer_name,
    _check_precision,
    check_budget,
    check_divisible,
    optimizer_state_bytes,
)
from .tracker import MIB, LiveStorageCounter, StepMemory, _mib, _param_bytes, _trainable_bytes

__all__ = [
    "MemoryProfile",
    "profile_model",
    "profile_config",
    "predict_step",
    "smallest_fitting_accum_steps",
    "smallest_n_line",
]


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
    timeline: everything kept until the end of the forward pass); ``timeline_backward_start`` is the index of the
    backward pass's first operation in it.
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
    timeline_backward_start: int = 0
    timeline_step: list[float] = field(default_factory=list)
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


def _forward_backward_timeline(model, optimizer, x, y, loss_fn, items) -> tuple[list[tuple[int, int, int]], int, int]:
    """One forward+backward from ``grad=None`` (no optimizer step): the per-operation timeline, the saved activations
    and the index of the backward pass's first operation."""
    counter = LiveStorageCounter()
    counter.track(model, optimizer, x, y)
    counter.timeline = []
    try:
        with counter:
            counter.phase = "activations"
            loss = loss_fn(model, (x, y)) / items
            saved = counter.current["activations"]
            backward_start = len(counter.timeline)
            counter.phase = "temporaries"
            loss.backward()
            del loss
    finally:
        counter.remove_hooks()
    return counter.timeline, saved, backward_start


def _optimizer_step_extra(model, optimizer) -> tuple[int, list[float]]:
    """Bytes above the persistent state at the peak of one ``optimizer.step()`` (gradients must be in place), and
    after each of its operations."""
    counter = LiveStorageCounter()
    counter.track(model, optimizer)
    base = counter.current_bytes
    counter.timeline = []
    try:
        with counter:
            optimizer.step()
    finally:
        counter.remove_hooks()
    return counter.peak_bytes - base, [float(acts + temps) for acts, temps, _ in counter.timeline]


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
    step_extra, step_timeline = _optimizer_step_extra(model, optimizer)  # with the gradients of the last probe in place
    optimizer.zero_grad(set_to_none=True)
    (t1, s1, _), (t2, s2, backward_start) = probes
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
        timeline_backward_start=backward_start,
        timeline_step=step_timeline,
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


def smallest_n_line(card: str, smallest: int | None, peak_mib: float, largest: int = 64) -> str:
    """What ``smallest_fitting_accum_steps`` found for ``card``, as one line in the learner's language: the card, then
    the smallest N and its peak, or that no N up to ``largest`` fits and the peak at ``largest``. Shown in
    lessons/03_memory.ipynb, section 4 (one line per card).

    Args:
        card: what the budget is (``"A10G, 22.2 GiB usable"``: ``gradacc.memory.capacity.card_label``), printed as
            given and followed by a colon (a line whose card is a message of the catalog translates whole: no
            padding inside it).
        smallest: the smallest N that fits, or ``None``.
        peak_mib: the peak (MiB) at ``smallest``, or at ``largest`` when ``smallest`` is ``None``; printed in GiB.
        largest: the largest N tried.

    Example:
        >>> smallest_n_line("T4", None, 16189.4)
        'T4: no N up to 64 fits (peak at N = 64: 15.81 GiB)'
    """
    peak = f"{peak_mib / 1024:.2f}"
    if smallest is None:
        line = _("{card}: no N up to {largest} fits (peak at N = {largest}: {peak} GiB)")
        return line.format(card=card, largest=largest, peak=peak)
    return _("{card}: smallest N that fits: {n} (peak {peak} GiB)").format(card=card, n=smallest, peak=peak)
