"""Reference implementations of the misconceptions checks 2.1 and 2.2 recognise (``gradacc.course.checks.mistakes``).

Each is the lesson's loop with one thing changed: ``_window`` and ``_epoch`` take that change as an argument."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F

from . import mistake


def _window(model, optimizer, micro_batches, divisor: Callable, step_each=False, zero_each=False, after_backward=None):
    """One window: each micro-batch's summed loss divided by ``divisor(window, labels)``; returns the summed loss.
    ``after_backward`` (a scheduler's ``step``) is called after every micro-batch's backward."""
    total = 0.0
    for inputs, labels in micro_batches:
        if zero_each:
            optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / divisor(micro_batches, labels)
        loss.backward()
        total += loss.item()
        if after_backward is not None:
            after_backward()
        if step_each:
            optimizer.step()
            optimizer.zero_grad()
    if not step_each:
        optimizer.step()
        if not zero_each:
            optimizer.zero_grad()
    return total


def _items(window, labels) -> int:
    return sum(len(y) for _, y in window)


@mistake("2.1", "mean-of-means")
def window_mean_of_means(model, optimizer, micro_batches):
    return _window(model, optimizer, micro_batches, lambda w, labels: len(labels) * len(w))


@mistake("2.1", "divided-twice")
def window_divided_twice(model, optimizer, micro_batches):
    return _window(model, optimizer, micro_batches, lambda w, labels: _items(w, labels) * len(w))


@mistake("2.1", "step-every-micro-batch")
def window_step_each(model, optimizer, micro_batches):
    return _window(model, optimizer, micro_batches, _items, step_each=True)


def _epoch(model, optimizer, scheduler, batches, accum_steps, divisor=_items, drop_last=False, **window_options):
    """The lesson's epoch with one change; ``scheduler_each``: the scheduler steps after every micro-batch's
    backward instead of after the optimizer step."""
    scheduler_each = window_options.pop("scheduler_each", False)
    if scheduler_each:
        window_options["after_backward"] = scheduler.step
    windows = [batches[i : i + accum_steps] for i in range(0, len(batches), accum_steps)]
    if drop_last and len(windows[-1]) < accum_steps:
        windows = windows[:-1]
    losses = []
    for window in windows:
        losses.append(_window(model, optimizer, window, divisor, **window_options))
        if not scheduler_each:
            scheduler.step()
    return losses


@mistake("2.2", "last-window-dropped")
def epoch_drop_last(model, optimizer, scheduler, batches, accum_steps):
    return _epoch(model, optimizer, scheduler, batches, accum_steps, drop_last=True)


@mistake("2.2", "scheduler-every-micro-step")
def epoch_scheduler_each(model, optimizer, scheduler, batches, accum_steps):
    return _epoch(model, optimizer, scheduler, batches, accum_steps, scheduler_each=True)


@mistake("2.2", "zero-grad-every-micro-step")
def epoch_zero_each(model, optimizer, scheduler, batches, accum_steps):
    return _epoch(model, optimizer, scheduler, batches, accum_steps, zero_each=True)


@mistake("2.2", "full-window-divisor")
def epoch_full_window_divisor(model, optimizer, scheduler, batches, accum_steps):
    full = accum_steps * len(batches[0][1])
    return _epoch(model, optimizer, scheduler, batches, accum_steps, divisor=lambda w, labels: full)


@mistake("2.2", "full-micro-batch-divisor")
def epoch_first_size_divisor(model, optimizer, scheduler, batches, accum_steps):
    return _epoch(model, optimizer, scheduler, batches, accum_steps, divisor=lambda w, labels: len(w) * len(w[0][1]))
