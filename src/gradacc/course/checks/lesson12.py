"""Checks of lesson 12 (``12_per_window``): what must advance once per window, not once per micro-batch.

Exercise 12.1 asks for ``combine_window(records) -> {"grad": tensor, "items": int, "amax": float}``: the window's
record from its micro-batches' records, each ``{"grad": the gradient of the micro-batch's MEAN loss, "items": its
samples, "amax": the largest |output| it produced}`` (``reference_combine_window``: the items-weighted mean gradient,
the total items, the maximum amax; equal to the full batch's). Exercise 12.2 asks for ``train_muon(model, optimizer,
windows)``: one ``torch.optim.Muon`` step per window of accumulated gradients (``reference_train_muon``), equal to the
full batch's steps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ...foundations.data import load_digits_tensors
from ...i18n import _
from ...stacks.window_optimizers import digit_windows, largest_difference, make_matrix_model, train_full_batch
from . import run_check

__all__ = [
    "reference_combine_window",
    "micro_batch_records",
    "micro_batch_amaxes",
    "check_combine_window",
    "MUON_LR",
    "reference_train_muon",
    "check_train_muon",
]


def reference_combine_window(records: Sequence[dict]) -> dict:
    """Exercise 12.1's answer: ``{"grad": sum(grad_k * items_k) / sum(items_k), "items": sum(items_k), "amax":
    max(amax_k)}``. The gradient of a mean is weighted by the items (lesson 01); an amax is a maximum (lesson 12,
    section 6: marin-community/marin#7659)."""
    items = sum(int(r["items"]) for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": max(float(r["amax"]) for r in records)}


def _linear(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(64, 10, generator=generator, dtype=torch.float64) * 0.1).requires_grad_()


def _record(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> dict:
    logits = x @ w
    (grad,) = torch.autograd.grad(F.cross_entropy(logits, y), w)
    return {"grad": grad, "items": len(y), "amax": float(logits.detach().abs().max())}


@functools.cache
def _digits64() -> tuple[torch.Tensor, torch.Tensor]:
    return load_digits_tensors(torch.float64)


def micro_batch_records(seed: int, sizes: Sequence[int], start: int) -> tuple[list[dict], dict]:
    """The records of a linear layer ``x @ w`` (``w`` [64, 10] float64, drawn from ``seed``) on micro-batches of
    ``sizes`` consecutive digits from row ``start``, and the full batch's record (the window as one batch).

    Returns:
        ``(records, full)``: each ``{"grad": [64, 10] float64 gradient of the mean cross-entropy, "items": int,
        "amax": float, the largest |logit|}``.
    """
    x, y = _digits64()
    w = _linear(seed)
    records, row = [], start
    for n in sizes:
        records.append(_record(w, x[row : row + n], y[row : row + n]))
        row += n
    return records, _record(w, x[start:row], y[start:row])


def micro_batch_amaxes(seed: int, sizes: Sequence[int], start: int) -> list[float]:
    """The ``"amax"`` of each record of ``micro_batch_records(seed, sizes, start)``, without autograd (the hidden
    check's draws test where the largest one lies on 1,010 seeds: tests/test_wrong_answers.py)."""
    x, y = _digits64()
    w = _linear(seed).detach()
    amaxes, row = [], start
    for n in sizes:
        amaxes.append(float((x[row : row + n] @ w).abs().max()))
        row += n
    return amaxes


# (seed, micro-batch sizes, first digit): unequal micro-batches; the largest amax (positions computed by
# tests/test_window.py) first, in the middle, last, then a window of one micro-batch
_COMBINE_CASES = (
    (0, (8, 8, 7, 7), 0),
    (7, (5, 16, 2, 11, 4), 900),
    (3, (12, 3, 9), 300),
    (2, (6,), 1200),
)
_COMBINE_TOL = 1e-6  # float32 rounding of an amax or a gradient (1e-8) is right; the mistakes are off by 1e-2


def _combine_error(got: object, full: dict, where: str) -> str | None:
    if not isinstance(got, dict) or not {"grad", "items", "amax"} <= set(got):
        return _("{where}: return a dict with the keys grad, items and amax, got {got}").format(
            where=where, got=type(got).__name__
        )
    if int(got["items"]) != full["items"]:
        return _("{where}: items = {got}, expected {want}").format(where=where, got=got["items"], want=full["items"])
    if abs(float(got["amax"]) - full["amax"]) > _COMBINE_TOL:
        return _(
            "{where}: amax = {got}, the full batch's is {want}: the window's amax is the largest of its micro-batches'"
        ).format(where=where, got=f"{float(got['amax']):.6f}", want=f"{full['amax']:.6f}")
    grad = torch.as_tensor(got["grad"], dtype=torch.float64)
    if grad.shape != full["grad"].shape:
        return _("{where}: grad has shape {got}, expected {want}").format(
            where=where, got=tuple(grad.shape), want=tuple(full["grad"].shape)
        )
    gap = float((grad - full["grad"]).abs().max())
    if not gap <= _COMBINE_TOL:
        return _(
            "{where}: grad differs from the full batch's by {gap}: weight each micro-batch's mean gradient by its items"
        ).format(where=where, gap=f"{gap:.2g}")
    return None


def check_combine_window(combine_window: Callable) -> None:
    """Exercise 12.1: ``combine_window(records)`` returns the full batch's record (gradient and amax to 1e-6, items
    exactly) on cases of its own: unequal micro-batches, the largest amax in different positions, a window of one
    micro-batch. Prints ``Exercise 12.1: correct`` or what went wrong; returns ``None``."""

    def body() -> str | None:
        for seed, sizes, start in _COMBINE_CASES:
            records, full = micro_batch_records(seed, sizes, start)
            where = _("micro-batches of {sizes} digits").format(sizes=list(sizes))
            problem = _combine_error(combine_window([dict(r) for r in records]), full, where)
            if problem:
                return problem
        return None

    run_check("12.1", body)


MUON_LR = 0.02
"""Exercise 12.2's ``torch.optim.Muon`` learning rate (momentum 0.95, its default)."""


def reference_train_muon(model: torch.nn.Module, optimizer: torch.optim.Optimizer, windows) -> None:
    """Exercise 12.2's answer: per window (a list of ``(x [B, 64] float64, y [B] int64)`` micro-batches), each
    micro-batch's summed cross-entropy divided by the window's samples and back-propagated, then ONE
    ``optimizer.step()`` and ``zero_grad()``: the window's gradient equals the full batch's, whatever the micro-batch
    sizes, so Muon's orthogonalized update does too."""
    for window in windows:
        items = sum(len(labels) for _inputs, labels in window)
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
        optimizer.step()
        optimizer.zero_grad()


# (model seed, hidden, window sizes, first digit): unequal micro-batches and a short last window; equal ones
_MUON_CASES = ((0, 32, ((8, 8, 7, 7), (12, 3, 9, 6), (5,)), 0), (3, 16, ((10, 10), (10, 10), (10, 4)), 500))
_MUON_TOL = 1e-10  # float64: equivalent loops agree to 1e-16, and so do their bfloat16 roundings


def check_train_muon(train_muon: Callable) -> None:
    """Exercise 12.2: ``train_muon(model, optimizer, windows)`` leaves the weights the full batch's loop leaves (one
    Muon step per window on the concatenated window; largest difference <= 1e-10, float64), makes one optimizer step
    per window and one forward pass per micro-batch, on cases of its own. Prints ``Exercise 12.2: correct`` or what
    went wrong; returns ``None``."""

    def body() -> str | None:
        for seed, hidden, sizes, start in _MUON_CASES:
            where = _("windows of {sizes} digits").format(sizes=[list(w) for w in sizes])
            reference = make_matrix_model(seed=seed, hidden=hidden)
            train_full_batch(
                reference, torch.optim.Muon(reference.parameters(), lr=MUON_LR), digit_windows(sizes, start)
            )
            model = make_matrix_model(seed=seed, hidden=hidden)
            optimizer = torch.optim.Muon(model.parameters(), lr=MUON_LR)
            steps, forwards = [0], []
            optimizer.register_step_post_hook(lambda *_, counter=steps: counter.__setitem__(0, counter[0] + 1))
            # on the first layer, not the Sequential: `model.forward(x)` bypasses the Sequential's own hooks
            model[0].register_forward_pre_hook(lambda _module, args, seen=forwards: seen.append(len(args[0])))
            train_muon(model, optimizer, digit_windows(sizes, start))
            if steps[0] != len(sizes):
                return _("{where}: {got} optimizer steps, expected one per window ({want})").format(
                    where=where, got=steps[0], want=len(sizes)
                )
            if sorted(forwards) != sorted(n for window in sizes for n in window):
                return _("{where}: forward passes on batches of {got} samples, expected one per micro-batch").format(
                    where=where, got=forwards
                )
            gap = largest_difference(list(model.parameters()), list(reference.parameters()))
            if not gap <= _MUON_TOL:
                return _(
                    "{where}: the weights differ from the full batch's by {diff} (tolerance {tol}): is each "
                    "micro-batch's summed loss divided by its own window's samples, and the gradient cleared after "
                    "each step?"
                ).format(where=where, diff=f"{gap:.2g}", tol=f"{_MUON_TOL:g}")
        return None

    run_check("12.2", body)
