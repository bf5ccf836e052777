"""Reference gradient-accumulation code for PyTorch: what lessons 01-02 build up to.

The rule the course teaches: the gradient of one large batch is recovered from micro-batches when every micro-batch
loss is a SUM over its items (samples or tokens) divided by the number of items in the whole accumulation WINDOW
(all micro-batches of one optimizer step). Dividing each micro-batch mean by N is the special case of equal sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .data import IGNORE_INDEX, check_accum_steps

__all__ = [
    "Batch",
    "LossFn",
    "sum_cross_entropy",
    "count_items",
    "accumulation_step",
    "train_accumulated",
    "full_batch_gradients",
    "max_abs_diff",
]

Batch = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def sum_cross_entropy(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Summed (not averaged) cross-entropy of a micro-batch, skipping labels equal to ``IGNORE_INDEX``.

    Works for classification (inputs ``[B, ...]``, labels ``[B]``) and next-token prediction (inputs ``[B, T]``,
    labels ``[B, T]``, logits ``[B, T, V]``). Returns a 0-d float tensor.
    """
    inputs, labels = batch
    logits = model(inputs)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum", ignore_index=IGNORE_INDEX
    )


def count_items(batch: Batch) -> int:
    """Number of items a micro-batch contributes to the loss: labels not equal to ``IGNORE_INDEX``.

    For classification that is the number of samples; for language models the number of real (non-padding) label tokens.
    """
    return int((batch[1] != IGNORE_INDEX).sum())


def _check_batches(micro_batches: Sequence[Batch]) -> None:
    if len(micro_batches) == 0:
        raise ValueError("an optimizer step needs at least one micro-batch, got none")
    for i, (inputs, labels) in enumerate(micro_batches):
        if inputs.shape[0] != labels.shape[0]:
            raise ValueError(
                f"micro-batch {i}: inputs and labels must hold the same number of samples, got {inputs.shape[0]} "
                f"inputs and {labels.shape[0]} labels"
            )


def accumulation_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Batch],
    loss_fn: LossFn = sum_cross_entropy,
    *,
    max_norm: float | None = None,
    scheduler: Any | None = None,
) -> dict[str, float | int]:
    """One optimizer step from the micro-batches of one accumulation window.

    Each micro-batch's summed loss is divided by the number of items in the whole window before ``backward``, so the
    accumulated gradient equals the gradient of the mean loss over the concatenated batch, whatever the micro-batch
    sizes. Clipping (if ``max_norm``) happens once, on the accumulated gradient; the scheduler steps once.

    Args:
        micro_batches: the window's ``(inputs, labels)`` pairs, N >= 1 of them.
        loss_fn: returns the SUM of the item losses of a micro-batch (default ``sum_cross_entropy``).
        max_norm: clip the accumulated gradient's global L2 norm to this value (``torch.nn.utils.clip_grad_norm_``).
        scheduler: a learning-rate scheduler stepped once after the optimizer step.

    Returns:
        ``{"loss": mean loss per item (float), "items": items in the window, "micro_steps": N,
        "grad_norm": L2 norm of the accumulated gradient before clipping (float), "lr": learning rate used}``.

    Raises:
        ValueError: no micro-batches, a micro-batch whose inputs and labels disagree in size, or a window with no
            items to average over (every label ignored).
    """
    _check_batches(micro_batches)
    items = sum(count_items(b) for b in micro_batches)
    if items == 0:
        raise ValueError("the window holds no items to average over (every label equals IGNORE_INDEX)")
    lr = float(optimizer.param_groups[0]["lr"])
    total = torch.zeros(())
    for batch in micro_batches:
        loss = loss_fn(model, batch) / items
        loss.backward()
        total = total.to(loss.device) + loss.detach()  # on the loss's device, no graph: no synchronisation here
    params = [p for p in model.parameters() if p.grad is not None]
    if max_norm is not None:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    else:
        grad_norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params])))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if scheduler is not None:
        scheduler.step()
    return {"loss": total.item(), "items": items, "micro_steps": len(micro_batches), "grad_norm": grad_norm, "lr": lr}


def train_accumulated(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterable[Batch],
    accum_steps: int,
    loss_fn: LossFn = sum_cross_entropy,
    *,
    max_norm: float | None = None,
    scheduler: Any | None = None,
    progress: bool = False,
) -> list[dict[str, float | int]]:
    """Train over ``batches`` (e.g. one epoch of a DataLoader), one optimizer step per ``accum_steps`` micro-batches.

    A final window of fewer than ``accum_steps`` micro-batches still makes an optimizer step, divided by the real
    number of items in that window (not by ``accum_steps``), so it is as large as any other step. The scheduler steps
    once per optimizer step; clipping happens at the window boundary only; logged values are plain floats.

    Returns:
        One dict per optimizer step, as returned by ``accumulation_step``, plus ``"optimizer_step"`` (1-based).

    Raises:
        ValueError: bad ``accum_steps`` (see ``gradacc.foundations.data.check_accum_steps``) or a bad micro-batch.
    """
    check_accum_steps(accum_steps)
    iterator: Iterable[Batch] = batches
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(batches, desc="micro-steps", unit="micro-batch")
    history: list[dict[str, float | int]] = []
    window: list[Batch] = []

    def flush() -> None:
        record = accumulation_step(model, optimizer, window, loss_fn, max_norm=max_norm, scheduler=scheduler)
        history.append({"optimizer_step": len(history) + 1, **record})
        window.clear()

    for batch in iterator:
        window.append(batch)
        if len(window) == accum_steps:
            flush()
    if window:
        flush()
    return history


def full_batch_gradients(model: nn.Module, batch: Batch, loss_fn: LossFn = sum_cross_entropy) -> list[torch.Tensor]:
    """Gradients of the mean item loss over one whole batch (the target accumulation must reproduce).

    Leaves ``model``'s ``.grad`` untouched; returns detached tensors in ``model.parameters()`` order.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    loss = loss_fn(model, batch) / count_items(batch)
    return [g.detach() for g in torch.autograd.grad(loss, params)]


def max_abs_diff(a: Iterable[torch.Tensor], b: Iterable[torch.Tensor]) -> float:
    """Largest absolute element-wise difference between two equally long lists of tensors (a float)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"tensor lists differ in length: {len(a)} vs {len(b)}")
    return max(float((x.detach() - y.detach()).abs().max()) for x, y in zip(a, b, strict=True))
