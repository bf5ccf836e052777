"""Checks of lesson 02 (``02_pytorch``): one accumulation window, and an epoch loop with a short last window.

Each check runs the learner's function on digits and models of its own (not the notebook's), compares with the
full-batch update or with ``gradacc.foundations.accumulation.train_accumulated``, prints exactly one line
(``Exercise 2.1: correct`` or ``Exercise 2.1: incorrect - <what is wrong>``) and returns ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...foundations.accumulation import max_abs_diff, train_accumulated
from ...foundations.data import digits_loader, load_digits_tensors
from ...foundations.graphs import SavedTensorMeter
from ...foundations.models import make_digits_model
from ...i18n import _
from . import close, grouped, run_check

__all__ = ["check_accumulation_window", "check_train_epoch"]

_TOL = 1e-6  # float32 equivalence tolerance (COURSE.md)


def _count_steps(optimizer: torch.optim.Optimizer) -> list[int]:
    counter = [0]

    def after_step(*_args) -> None:
        counter[0] += 1

    optimizer.register_step_post_hook(after_step)
    return counter


def _grads_are_clear(model: nn.Module) -> bool:
    return all(p.grad is None or not p.grad.any() for p in model.parameters())


def _window(sizes: Sequence[int], offset: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = load_digits_tensors()
    bounds = torch.tensor((offset, *sizes)).cumsum(0).tolist()
    return [(x[a:b].clone(), y[a:b].clone()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _peak_of_one_micro_batch(model: nn.Module, batch, exclude) -> int:
    with SavedTensorMeter(exclude=exclude) as meter:
        loss = F.cross_entropy(model(batch[0]), batch[1], reduction="sum")
    del loss
    return meter.peak_bytes


def check_accumulation_window(accumulation_window: Callable) -> None:
    """Exercise 2.1: ``accumulation_window(model, optimizer, micro_batches) -> float``.

    One optimizer step from one window: each micro-batch's summed cross-entropy divided by the number of samples in
    the whole window, ``backward`` after each micro-batch (so only one micro-batch's activations are alive at a time),
    one ``optimizer.step()``, gradients zeroed; returns the window's mean loss as a Python float. Tested on real digit
    micro-batches of unequal sizes against one full-batch step, with SGD and with SGD + momentum.
    """

    def body(accumulation_window=accumulation_window) -> str | None:
        cases = [((40, 40, 16), 500, dict(lr=0.3)), ((8, 8, 8, 8), 900, dict(lr=0.1, momentum=0.9)), ((5,), 1200, {})]
        for sizes, offset, sgd in cases:
            micro_batches = _window(sizes, offset)
            inputs = torch.cat([b[0] for b in micro_batches])
            labels = torch.cat([b[1] for b in micro_batches])

            reference = make_digits_model(seed=7, hidden=48)
            reference_optimizer = torch.optim.SGD(reference.parameters(), **{"lr": 0.2, **sgd})
            full_loss = F.cross_entropy(reference(inputs), labels)
            full_loss.backward()
            reference_optimizer.step()

            model = make_digits_model(seed=7, hidden=48)
            optimizer = torch.optim.SGD(model.parameters(), **{"lr": 0.2, **sgd})
            steps = _count_steps(optimizer)
            exclude = [*model.parameters(), *(t for b in micro_batches for t in b)]
            one_micro_batch = max(_peak_of_one_micro_batch(model, b, exclude) for b in micro_batches)
            with SavedTensorMeter(exclude=exclude) as meter:
                result = accumulation_window(model, optimizer, micro_batches)

            if steps[0] != 1:
                return _(
                    "with micro-batches of {sizes} samples it made {steps} optimizer steps; a window makes exactly one"
                ).format(sizes=sizes, steps=steps[0])
            if not isinstance(result, float):
                return _("return the window's mean loss as a Python float (loss.item()), got {got}").format(
                    got=type(result).__name__
                )
            if meter.peak_bytes > 1.5 * one_micro_batch:
                return _(
                    "with micro-batches of {sizes} samples the activations of several micro-batches were alive at "
                    "once (peak {peak} bytes saved for backward, one micro-batch needs {one}): call backward after "
                    "each micro-batch's forward"
                ).format(sizes=sizes, peak=grouped(meter.peak_bytes), one=grouped(one_micro_batch))
            diff = max_abs_diff(model.parameters(), reference.parameters())
            if not diff <= _TOL:
                return _(
                    "with micro-batches of {sizes} samples the weights after the step differ from one full-batch step "
                    "by {diff} (tolerance {tol}): sum each micro-batch's loss and divide by the {samples} samples of "
                    "the whole window"
                ).format(sizes=sizes, diff=f"{diff:.2g}", tol=f"{_TOL:g}", samples=sum(sizes))
            if not _grads_are_clear(model):
                return _("the gradients are not zeroed after the optimizer step")
            name = _("the returned loss for micro-batches of {sizes} samples").format(sizes=sizes)
            problem = close(name, result, full_loss.item(), 1e-5)
            if problem:
                return problem + " " + _("(the mean loss per sample over the whole window)")
        return None

    run_check("2.1", body)


def _epoch_setup(seed: int):
    model = make_digits_model(seed=seed, hidden=24)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1.0 + step))
    return model, optimizer, scheduler


def check_train_epoch(train_epoch: Callable) -> None:
    """Exercise 2.2: ``train_epoch(model, optimizer, scheduler, batches, accum_steps) -> list[float]``.

    One epoch over ``batches`` with one optimizer step per ``accum_steps`` micro-batches; a shorter last window still
    makes a step, divided by its own number of samples; the scheduler steps once per optimizer step; gradients are
    zeroed after each step; returns the mean loss of each window as floats. Compared with
    ``gradacc.foundations.accumulation.train_accumulated`` on real digits (10 micro-batches with N = 4; 7 with N = 3 and
    a last micro-batch of 5 samples; 10 with N = 4 whose short last window holds a full micro-batch of 16 beside one of
    6; N = 1).
    """

    def body(train_epoch=train_epoch) -> str | None:
        cases = [(16, 160, 4, 3), (16, 101, 3, 21), (16, 150, 4, 5), (10, 30, 1, 4)]
        for micro_batch_size, n_samples, accum_steps, seed in cases:
            batches = list(digits_loader(micro_batch_size, seed=seed, n_samples=n_samples))
            model, optimizer, scheduler = _epoch_setup(seed)
            want = train_accumulated(model, optimizer, batches, accum_steps, scheduler=scheduler)
            want_lr = optimizer.param_groups[0]["lr"]

            got_model, got_optimizer, got_scheduler = _epoch_setup(seed)
            steps = _count_steps(got_optimizer)
            losses = train_epoch(got_model, got_optimizer, got_scheduler, batches, accum_steps)

            where = _("{count} micro-batches with accum_steps={accum_steps}").format(
                count=len(batches), accum_steps=accum_steps
            )
            if steps[0] != len(want):
                return _("{where}: {steps} optimizer steps, expected {want} (the last window may be shorter)").format(
                    where=where, steps=steps[0], want=len(want)
                )
            lr = got_optimizer.param_groups[0]["lr"]
            if abs(lr - want_lr) > 1e-12:
                return _(
                    "{where}: the learning rate after the epoch is {lr}, expected {want}: step the scheduler once per "
                    "optimizer step"
                ).format(where=where, lr=f"{lr:.6g}", want=f"{want_lr:.6g}")
            diff = max_abs_diff(got_model.parameters(), model.parameters())
            if not diff <= _TOL:
                return _(
                    "{where}: the weights after the epoch differ from the reference by {diff} (tolerance {tol}): "
                    "divide each window's summed loss by the number of samples in that window"
                ).format(where=where, diff=f"{diff:.2g}", tol=f"{_TOL:g}")
            if not _grads_are_clear(got_model):
                return _("{where}: gradients are left in .grad after the epoch").format(where=where)
            if not isinstance(losses, (list, tuple)) or len(losses) != len(want):
                return _("{where}: return a list with one loss per optimizer step ({count})").format(
                    where=where, count=len(want)
                )
            if not all(isinstance(loss, float) for loss in losses):
                return _("{where}: return the losses as Python floats (loss.item())").format(where=where)
            for step, (loss, record) in enumerate(zip(losses, want, strict=True), start=1):
                name = _("{where}: the loss of optimizer step {step}").format(where=where, step=step)
                problem = close(name, loss, record["loss"], 1e-5)
                if problem:
                    return problem + " " + _("(the mean loss per sample of that window)")
        return None

    run_check("2.2", body)
