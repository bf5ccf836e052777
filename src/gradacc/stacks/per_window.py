"""What must happen once per window, not once per micro-step (lesson 10, section 7): the EMA of the weights, max-norm
constraints, step counters and learning-rate schedules, checkpoints.

The plain PyTorch loop of lesson 02 with one more thing done per micro-step or only at the window boundary (the
micro-step that calls ``optimizer.step()``; ``accelerator.sync_gradients`` is True exactly there, lesson 04):

* ``train_with_ema``: an exponential moving average of the weights, updated every micro-step (the bug of
  SWivid/F5-TTS#631) or at the boundary;
* ``train_with_max_norm``: a max-norm constraint on the weights, applied every micro-step (kohya-ss/sd-scripts PR
  #1908 moved it under ``sync_gradients``) or at the boundary;
* ``train_with_checkpoint``: a checkpoint (model and optimizer ``state_dict``) taken mid-window or at a boundary, then
  training resumed from it in a fresh model;
* ``keras_ema_and_schedule``: Keras 3's own EMA (``use_ema=True``) and a learning-rate schedule under
  ``gradient_accumulation_steps``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ..foundations.accumulation import Batch, count_items, sum_cross_entropy
from . import windows

__all__ = [
    "ema_reference",
    "train_with_ema",
    "max_norm_",
    "train_with_max_norm",
    "train_with_checkpoint",
    "train_uninterrupted",
    "keras_ema_and_schedule",
    "keras_ema_per_update",
    "per_window_schedule",
]


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _micro_steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Batch],
    accum_steps: int,
    after: Callable[[int, bool], None],
    start: int = 0,
) -> None:
    """Lesson 02's loop: each micro-batch's summed loss over its window's items, a step at each window's end; then
    ``after(micro_step, at_boundary)`` (1-based micro-step). Micro-batches before index ``start`` are skipped (their
    window keeps its item count): a job resumed at micro-step ``start``."""
    for span in windows(len(micro_batches), accum_steps):
        items = sum(count_items(micro_batches[k]) for k in span)
        for k in (k for k in span if k >= start):
            (sum_cross_entropy(model, micro_batches[k]) / items).backward()
            boundary = k == span[-1]
            if boundary:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            after(k + 1, boundary)


def ema_reference(snapshots: Sequence[Sequence[torch.Tensor]], decay: float) -> list[torch.Tensor]:
    """The EMA updated once per optimizer step: ``ema = decay * ema + (1 - decay) * w_t`` from ``ema = w_0``, over
    ``snapshots = [w_0, w_1, ..., w_S]`` (the weights before training and after each optimizer step)."""
    ema = [w.clone() for w in snapshots[0]]
    for weights in snapshots[1:]:
        ema = [decay * e + (1 - decay) * w for e, w in zip(ema, weights, strict=True)]
    return ema


def train_with_ema(
    model: nn.Module,
    micro_batches: Sequence[Batch],
    accum_steps: int,
    *,
    decay: float,
    every_micro_step: bool,
    lr: float = 0.5,
) -> dict[str, Any]:
    """Train ``model`` (SGD at ``lr``) with an EMA of its weights updated after every micro-step or only at the window
    boundary.

    Returns:
        ``{"ema": the EMA tensors, "ema_updates": int, "optimizer_steps": int, "snapshots": [w_0, w_1, ...] (the
        weights before training and after each optimizer step)}``.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    ema = _params(model)
    snapshots = [_params(model)]
    counts = {"ema_updates": 0}

    def after(micro_step: int, boundary: bool) -> None:
        nonlocal ema
        if boundary:
            snapshots.append(_params(model))
        if every_micro_step or boundary:
            ema = [decay * e + (1 - decay) * p.detach() for e, p in zip(ema, model.parameters(), strict=True)]
            counts["ema_updates"] += 1

    _micro_steps(model, optimizer, micro_batches, accum_steps, after)
    return {
        "ema": ema,
        "ema_updates": counts["ema_updates"],
        "optimizer_steps": len(snapshots) - 1,
        "snapshots": snapshots,
    }


@torch.no_grad()
def max_norm_(model: nn.Module, max_norm: float) -> None:
    """Scale every row of every ``Linear`` weight whose L2 norm exceeds ``max_norm`` down to ``max_norm`` (a
    projection: applying it twice changes nothing more)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            norms = module.weight.norm(dim=1, keepdim=True)
            module.weight.mul_(torch.where(norms > max_norm, max_norm / norms, torch.ones_like(norms)))


def train_with_max_norm(
    model: nn.Module,
    micro_batches: Sequence[Batch],
    accum_steps: int,
    *,
    max_norm: float,
    every_micro_step: bool,
    lr: float = 0.5,
) -> dict[str, Any]:
    """Train ``model`` (SGD at ``lr``) applying ``max_norm_`` after every micro-step or only at the boundary.

    Returns:
        ``{"weights": the final weights, "calls": times the constraint ran}``.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    counts = {"calls": 0}

    def after(micro_step: int, boundary: bool) -> None:
        if every_micro_step or boundary:
            counts["calls"] += 1
            max_norm_(model, max_norm)

    _micro_steps(model, optimizer, micro_batches, accum_steps, after)
    return {"weights": _params(model), **counts}


def train_with_checkpoint(
    make_model: Callable[[], nn.Module],
    micro_batches: Sequence[Batch],
    accum_steps: int,
    *,
    save_after: int,
    lr: float = 0.5,
) -> list[torch.Tensor]:
    """Train a model from ``make_model()`` (SGD with momentum 0.9 at ``lr``), save a checkpoint (``state_dict`` of the
    model and of the optimizer) after micro-step ``save_after`` and stop there (a crash); then load the checkpoint into
    a fresh model and optimizer and run the micro-steps after ``save_after``, with the same windows, as a resumed job
    does. Returns the resumed run's final weights.

    A ``state_dict`` holds the weights and the optimizer state, not the gradients accumulated so far: a checkpoint
    taken mid-window loses the micro-steps of its unfinished window.

    Raises:
        ValueError: ``save_after`` outside ``1 .. len(micro_batches) - 1``.
    """
    if not 1 <= save_after < len(micro_batches):
        raise ValueError(f"save_after must be in 1..{len(micro_batches) - 1}, got {save_after}")
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    saved: dict[str, Any] = {}

    def crash_after_saving(micro_step: int, boundary: bool) -> None:
        if micro_step == save_after:
            saved.update(model=copy.deepcopy(model.state_dict()), optimizer=copy.deepcopy(optimizer.state_dict()))
            raise _Crash

    try:
        _micro_steps(model, optimizer, micro_batches, accum_steps, crash_after_saving)
    except _Crash:
        pass
    resumed = make_model()
    resumed.load_state_dict(saved["model"])
    optimizer = torch.optim.SGD(resumed.parameters(), lr=lr, momentum=0.9)
    optimizer.load_state_dict(saved["optimizer"])
    _micro_steps(resumed, optimizer, micro_batches, accum_steps, lambda micro_step, boundary: None, start=save_after)
    return _params(resumed)


def train_uninterrupted(
    make_model: Callable[[], nn.Module], micro_batches: Sequence[Batch], accum_steps: int, *, lr: float = 0.5
) -> list[torch.Tensor]:
    """``train_with_checkpoint``'s run without the crash: its final weights."""
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    _micro_steps(model, optimizer, micro_batches, accum_steps, lambda micro_step, boundary: None)
    return _params(model)


class _Crash(Exception):
    pass


def per_window_schedule(schedule: Any, accum_steps: int) -> Any:
    """A Keras learning-rate schedule that reads optimizer steps instead of micro-steps: it calls ``schedule`` at
    ``step // accum_steps``. Keras calls a schedule with ``optimizer._iterations``, which counts every batch
    (``keras/src/optimizers/base_optimizer.py:777-781`` in keras 3.15.1, 785-789 in 3.13.2), so at update ``u``
    (1-based) the plain schedule is read at micro-step ``N * u - 1``; this one at ``u - 1``, as without accumulation."""
    from .keras3 import keras_on_torch

    keras = keras_on_torch()

    class PerWindow(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return schedule(keras.ops.floor_divide(step, accum_steps))

    return PerWindow()


def keras_ema_and_schedule(
    accum_steps: int, windows_run: int, *, ema_momentum: float = 0.5, decay_rate: float = 0.5, per_window: bool = False
) -> dict[str, Any]:
    """Keras 3's own EMA and a learning-rate schedule under ``gradient_accumulation_steps``, on one weight.

    A one-weight model (``Dense(1)`` without bias, weight 0) whose loss is ``-w`` on every sample, so every update adds
    exactly the learning rate to ``w``; SGD with ``ExponentialDecay(1.0, decay_steps=1, decay_rate)`` (wrapped in
    ``per_window_schedule`` when ``per_window``), ``use_ema=True, ema_momentum=ema_momentum``; ``windows_run *
    accum_steps`` batches through ``train_on_batch``.

    Returns:
        ``{"lrs": the learning rate of each update (read from the weight's increments), "weights": [w after each
        update], "ema": Keras's EMA of w at the end}``.
    """
    import numpy as np

    from .keras3 import keras_on_torch

    keras = keras_on_torch()
    schedule = keras.optimizers.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=decay_rate)
    if per_window:
        schedule = per_window_schedule(schedule, accum_steps)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
    optimizer = keras.optimizers.SGD(
        learning_rate=schedule, gradient_accumulation_steps=accum_steps, use_ema=True, ema_momentum=ema_momentum
    )
    model.compile(optimizer=optimizer, loss=lambda y_true, y_pred: -y_pred[:, 0])
    x, y = np.ones((2, 1), "float32"), np.zeros((2, 1), "float32")
    weights = []
    for micro_step in range(1, windows_run * accum_steps + 1):
        model.train_on_batch(x, y)
        if micro_step % accum_steps == 0:
            weights.append(float(keras.ops.convert_to_numpy(model.layers[-1].kernel.value).ravel()[0]))
    ema_value = float(keras.ops.convert_to_numpy(optimizer._model_variables_moving_average[0].value).ravel()[0])
    lrs = [weights[0]] + [b - a for a, b in zip(weights, weights[1:], strict=False)]
    return {"lrs": lrs, "weights": weights, "ema": ema_value}


def keras_ema_per_update(weights: Sequence[float], ema_momentum: float) -> float:
    """The EMA Keras defines (``keras/src/optimizers/base_optimizer.py:970-985``), updated once per optimizer update:
    the first update sets it to the weight (momentum 0 while ``optimizer.iterations == 0``), each later one
    ``ema = ema_momentum * ema + (1 - ema_momentum) * w``; ``weights`` are the weight after each update."""
    ema = weights[0]
    for w in weights[1:]:
        ema = ema_momentum * ema + (1 - ema_momentum) * w
    return ema
