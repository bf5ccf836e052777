"""Checks of lesson 04 (``04_accelerate``): an Accelerate accumulation loop, and the last window's loss scale."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...foundations.accumulation import max_abs_diff, train_accumulated
from ...foundations.data import digits_loader
from ...foundations.models import make_digits_model
from ...i18n import _
from . import close, run_check

__all__ = ["check_train_epoch", "check_window_loss_scale", "reference_window_loss_scale"]


def _manual(accum_steps: int, micro_batch_size: int, n_samples: int, max_norm: float | None, seed: int) -> dict:
    model = make_digits_model(seed=seed, hidden=24)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    loader = digits_loader(micro_batch_size, seed=seed, n_samples=n_samples)
    train_accumulated(model, optimizer, loader, accum_steps, max_norm=max_norm)
    return model.state_dict()


def _with_accelerate(train_epoch: Callable, accum_steps: int, micro_batch_size: int, n_samples: int, max_norm, seed):
    from accelerate import Accelerator

    from ...frameworks.accelerate import reset_accelerate_state

    reset_accelerate_state()
    accelerator = Accelerator(gradient_accumulation_steps=accum_steps, cpu=True)
    model = make_digits_model(seed=seed, hidden=24)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    loader = digits_loader(micro_batch_size, seed=seed, n_samples=n_samples)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    train_epoch(accelerator, model, optimizer, loader, max_norm)
    state = {k: v.detach().cpu() for k, v in accelerator.unwrap_model(model).state_dict().items()}
    reset_accelerate_state()
    return state


# (accum_steps, micro_batch_size, n_samples, max_norm, seed): every window full, so Accelerate's division by N is right
_EPOCH_CASES = ((3, 8, 96, 0.3, 1), (2, 16, 128, None, 2), (4, 8, 128, 0.2, 3))


def check_train_epoch(train_epoch: Callable) -> None:
    """Exercise 4.1: ``train_epoch(accelerator, model, optimizer, loader, max_norm)`` with Accelerate.

    The learner's loop must use ``accelerator.accumulate``, ``accelerator.backward`` and clip the accumulated gradient
    with ``accelerator.clip_grad_norm_`` on sync steps only (``max_norm=None``: no clipping). The check prepares its
    own digits models (hidden width 24, lr 0.2), loaders and Accelerators for several N, micro-batch sizes and clipping
    thresholds and compares the final weights with ``gradacc.foundations.accumulation.train_accumulated`` (max
    |difference| <= 1e-6). Prints one line.
    """

    def body(train_epoch=train_epoch) -> str | None:
        for accum_steps, micro, n_samples, max_norm, seed in _EPOCH_CASES:
            got = _with_accelerate(train_epoch, accum_steps, micro, n_samples, max_norm, seed)
            want = _manual(accum_steps, micro, n_samples, max_norm, seed)
            diff = max_abs_diff(got.values(), want.values())
            if not diff <= 1e-6:
                return _(
                    "with N={accum_steps}, micro-batches of {micro}, max_norm={max_norm} your weights differ from the "
                    "manual loop's by up to {diff}; accumulate inside accelerator.accumulate(model), use "
                    "accelerator.backward, and clip only when accelerator.sync_gradients is true"
                ).format(accum_steps=accum_steps, micro=micro, max_norm=max_norm, diff=f"{diff:.2e}")
        return None

    run_check("4.1", body)


def reference_window_loss_scale(batch_index: int, n_batches: int, accum_steps: int) -> float:
    """The factor that makes Accelerate's update of a short last window full-size (equal micro-batch sizes).

    ``accelerator.backward`` divides by N; a window of ``k`` micro-batches needs a division by ``k``; so scale by
    ``N / k``, where ``k`` is the number of micro-batches in the window holding ``batch_index`` (0-based).
    """
    window_start = (batch_index // accum_steps) * accum_steps
    in_window = min(accum_steps, n_batches - window_start)
    return accum_steps / in_window


_SCALE_CASES = ((10, 4), (9, 3), (7, 3), (5, 8), (1, 1), (13, 5))


def _train_with_scale(window_loss_scale: Callable, n_batches: int, accum_steps: int) -> dict:
    import torch.nn.functional as F
    from accelerate import Accelerator

    from ...frameworks.accelerate import reset_accelerate_state

    reset_accelerate_state()
    accelerator = Accelerator(gradient_accumulation_steps=accum_steps, cpu=True)
    model = make_digits_model(seed=4, hidden=24)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    loader = digits_loader(8, seed=4, n_samples=8 * n_batches)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for index, (inputs, labels) in enumerate(loader):
        with accelerator.accumulate(model):
            scale = float(window_loss_scale(index, n_batches, accum_steps))
            accelerator.backward(F.cross_entropy(model(inputs), labels) * scale)
            optimizer.step()
            optimizer.zero_grad()
    state = {k: v.detach().cpu() for k, v in accelerator.unwrap_model(model).state_dict().items()}
    reset_accelerate_state()
    return state


def check_window_loss_scale(window_loss_scale: Callable) -> None:
    """Exercise 4.2: ``window_loss_scale(batch_index, n_batches, accum_steps) -> float``.

    Checked on every batch of several epochs (10 batches with N=4, 9 with N=3, 7 with N=3, 5 with N=8, ...) against
    ``reference_window_loss_scale`` (tolerance 1e-12), then used in an Accelerate loop over 10 digit batches of 8 with
    N=4, whose weights must match ``train_accumulated`` (max |difference| <= 1e-6). Prints one line.
    """

    def body(window_loss_scale=window_loss_scale) -> str | None:
        for n_batches, accum_steps in _SCALE_CASES:
            for index in range(n_batches):
                call = f"window_loss_scale({index}, {n_batches}, {accum_steps})"
                want = reference_window_loss_scale(index, n_batches, accum_steps)
                problem = close(call, window_loss_scale(index, n_batches, accum_steps), want, 1e-12)
                if problem:
                    return problem
        got = _train_with_scale(window_loss_scale, 10, 4)
        model = make_digits_model(seed=4, hidden=24)
        train_accumulated(model, torch.optim.SGD(model.parameters(), lr=0.2), digits_loader(8, seed=4, n_samples=80), 4)
        diff = max_abs_diff(got.values(), model.state_dict().values())
        if not diff <= 1e-6:
            return _("an Accelerate loop using your scale differs from the manual loop by {diff}").format(
                diff=f"{diff:.2e}"
            )
        return None

    run_check("4.2", body)
