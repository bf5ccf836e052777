"""Optimizers that must step once per window: in-backward hooks and Muon, measured against the full batch.

Taught in lessons/12_per_window.ipynb, sections 2 and 3.

A *window* is the list of ``(inputs, labels)`` micro-batches of one optimizer step. The reference is the full batch:
the window's micro-batches concatenated, its mean loss, one ``optimizer.step()``. Every loop here divides each
micro-batch's SUMMED loss by the items of the whole window (lesson 02), so unequal micro-batches and a short last
window are handled; what differs is WHEN the optimizer steps.

Sources (each computed on the installed code where a lesson cites it):

* ``torch.Tensor.register_post_accumulate_grad_hook`` (torch 2.13.0, ``torch/_tensor.py``): a hook that runs once
  the gradient of a leaf is accumulated into ``.grad``, on every ``backward()``;
* ``torch.distributed.optim._apply_optimizer_in_backward`` (torch 2.13.0,
  ``torch/distributed/optim/apply_optimizer_in_backward.py``): steps a per-parameter optimizer in such a hook and
  sets ``param.grad = None``; pytorch/pytorch#124523 reports that it cannot accumulate;
* GaLore's per-layer optimizer hook (jiaweizzhao/GaLore#78) and its fix, deferring the steps to the boundary
  (jiaweizzhao/GaLore#79, open);
* ``torch.optim.Muon`` (torch 2.13.0, ``torch/optim/_muon.py``): momentum, then Newton-Schulz orthogonalization
  (``_zeropower_via_newtonschulz``, computed in bfloat16) of the momentum, on 2-D parameters only; DeepSpeed ZeRO-3
  ran it once per micro-batch (deepspeedai/DeepSpeed#8443, fix proposed in #8600).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..foundations.accumulation import accumulation_step
from ..foundations.data import load_digits_tensors

__all__ = [
    "Batch",
    "Window",
    "make_matrix_model",
    "digit_windows",
    "short_last_window_sizes",
    "train_full_batch",
    "train_accumulated",
    "train_step_per_micro_batch",
    "train_backward_only",
    "step_in_backward",
    "DeferredSteps",
    "parameters_of",
    "relative_difference",
    "largest_difference",
    "optimizer_step_counts",
    "orthogonalize",
]

Batch = tuple[torch.Tensor, torch.Tensor]
Window = Sequence[Batch]


def make_matrix_model(seed: int = 0, hidden: int = 32, dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """A bias-free digits MLP, ``[B, 64] -> [B, 10]`` logits, whose every parameter is a matrix (what Muon accepts).

    ``Linear(64, hidden, bias=False) -> ReLU -> Linear(hidden, 10, bias=False)``; the weights depend only on ``seed``.
    Float64 by default: ``torch.optim.Muon`` rounds its input to bfloat16 (``_zeropower_via_newtonschulz``), and
    float32 rounding differences between two equivalent loops (1e-8) would sometimes cross a bfloat16 rounding
    boundary; in float64 they do not.

    Raises:
        ValueError: ``hidden`` < 1.
    """
    if hidden < 1:
        raise ValueError(f"hidden must be >= 1, got {hidden}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(64, hidden, bias=False), nn.ReLU(), nn.Linear(hidden, 10, bias=False))
    return model.to(dtype)


def digit_windows(sizes: Sequence[Sequence[int]], start: int = 0, dtype: torch.dtype = torch.float64) -> list[list]:
    """Windows of consecutive digits from row ``start``: ``sizes[w][k]`` samples in micro-batch ``k`` of window ``w``.

    Returns ``[[(x [n, 64] dtype, y [n] int64), ...], ...]`` (copies, not views).

    Raises:
        ValueError: a size < 1, or more rows than the 1,797 digits from ``start``.
    """
    x, y = load_digits_tensors(dtype)
    if any(n < 1 for window in sizes for n in window):
        raise ValueError(f"every micro-batch needs >= 1 sample, got sizes {[list(w) for w in sizes]}")
    if start < 0 or start + sum(map(sum, sizes)) > len(y):
        raise ValueError(f"rows {start}..{start + sum(map(sum, sizes))} do not fit in the {len(y)} digits")
    windows, row = [], start
    for window in sizes:
        micro_batches = []
        for n in window:
            micro_batches.append((x[row : row + n].clone(), y[row : row + n].clone()))
            row += n
        windows.append(micro_batches)
    return windows


def short_last_window_sizes(samples: int, micro_batch_size: int, accum_steps: int) -> list[list[int]]:
    """Micro-batch sizes of ``samples`` read ``micro_batch_size`` at a time, ``accum_steps`` micro-batches a window.

    The last micro-batch and the last window may be short: ``short_last_window_sizes(70, 8, 4)`` is
    ``[[8, 8, 8, 8], [8, 8, 8, 8], [6]]`` (what a ``DataLoader`` without ``drop_last`` gives).

    Raises:
        ValueError: an argument < 1.
    """
    if min(samples, micro_batch_size, accum_steps) < 1:
        raise ValueError(f"all arguments must be >= 1, got {samples}, {micro_batch_size}, {accum_steps}")
    micro = [min(micro_batch_size, samples - i) for i in range(0, samples, micro_batch_size)]
    return [micro[i : i + accum_steps] for i in range(0, len(micro), accum_steps)]


def _window_loss(model: nn.Module, batch: Batch, items: int) -> torch.Tensor:
    inputs, labels = batch
    return nn.functional.cross_entropy(model(inputs), labels, reduction="sum") / items


def train_full_batch(model: nn.Module, optimizer: torch.optim.Optimizer, windows: Sequence[Window]) -> None:
    """The reference loop: per window, the micro-batches concatenated into one batch, its mean cross-entropy,
    ``backward()``, one ``optimizer.step()`` and ``zero_grad()``."""
    for window in windows:
        inputs = torch.cat([x for x, _ in window])
        labels = torch.cat([y for _, y in window])
        _window_loss(model, (inputs, labels), len(labels)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def train_accumulated(model: nn.Module, optimizer: torch.optim.Optimizer, windows: Sequence[Window]) -> None:
    """Accumulation (lesson 02's loop, ``gradacc.foundations.accumulation.accumulation_step``): each micro-batch's
    summed loss divided by the window's samples, ``backward()`` per micro-batch, ONE ``optimizer.step()`` per window."""
    for window in windows:
        accumulation_step(model, optimizer, window)


def train_step_per_micro_batch(model: nn.Module, optimizer: torch.optim.Optimizer, windows: Sequence[Window]) -> None:
    """The mistake: the same scaled losses, but ``optimizer.step()`` and ``zero_grad()`` after EVERY micro-batch (what
    an optimizer run inside ``backward()`` does, and DeepSpeed ZeRO-3's Muon before deepspeedai/DeepSpeed#8600)."""
    for window in windows:
        items = sum(len(y) for _, y in window)
        for batch in window:
            _window_loss(model, batch, items).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


def train_backward_only(
    model: nn.Module, windows: Sequence[Window], boundary: Callable[[], None] | None = None
) -> None:
    """Only forward and ``backward()`` per micro-batch (scaled by the window's samples), for optimizers that run
    inside ``backward()``; ``boundary()``, if given, is called at the end of each window."""
    for window in windows:
        items = sum(len(y) for _, y in window)
        for batch in window:
            _window_loss(model, batch, items).backward()
        if boundary is not None:
            boundary()


def step_in_backward(
    model: nn.Module, make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer]
) -> dict[nn.Parameter, torch.optim.Optimizer]:
    """Optimizer in backward, the hook way: one optimizer per parameter, stepped (then ``.grad`` freed) by a
    ``register_post_accumulate_grad_hook`` as soon as that parameter's gradient is accumulated, on EVERY
    ``backward()``.

    This is the pattern of PyTorch's tutorial "How to save memory by fusing the optimizer step into the backward
    pass" and of GaLore's per-layer optimizers (jiaweizzhao/GaLore#78: it also steps a scheduler there). Only one
    parameter's gradient is alive at a time, so the gradient buffer shrinks to the largest parameter, and the
    gradient can never be accumulated over micro-batches.

    Returns:
        ``{parameter: its optimizer}``.
    """
    optimizers = {p: make_optimizer([p]) for p in model.parameters() if p.requires_grad}

    def hook(param: torch.Tensor) -> None:
        optimizers[param].step()
        optimizers[param].zero_grad(set_to_none=True)

    for param in optimizers:
        param.register_post_accumulate_grad_hook(hook)
    return optimizers


class DeferredSteps:
    """GaLore PR #79's fix: the per-parameter hook only records the parameter; ``step()`` at the window boundary steps
    each recorded parameter's optimizer once and frees its gradient.

    The gradient then stays alive for the whole window, like ordinary accumulation: the fix gives up the memory
    in-backward stepping saved (the PR says so: "Accumulated gradients stay resident with this change").

    Args:
        model: its trainable parameters each get an optimizer from ``make_optimizer([p])``.
    """

    def __init__(self, model: nn.Module, make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer]) -> None:
        self.optimizers = {p: make_optimizer([p]) for p in model.parameters() if p.requires_grad}
        self.pending: list[torch.Tensor] = []
        for param in self.optimizers:
            param.register_post_accumulate_grad_hook(self._record)

    def _record(self, param: torch.Tensor) -> None:
        if not any(param is p for p in self.pending):
            self.pending.append(param)

    def step(self) -> None:
        """Step every parameter whose gradient arrived since the last boundary, once, then free its gradient."""
        for param in self.pending:
            self.optimizers[param].step()
            self.optimizers[param].zero_grad(set_to_none=True)
        self.pending.clear()


def parameters_of(model: nn.Module) -> list[torch.Tensor]:
    """Detached copies of ``model``'s parameters (a snapshot to compare against later)."""
    return [p.detach().clone() for p in model.parameters()]


def relative_difference(after: Sequence[torch.Tensor], reference: Sequence[torch.Tensor], before: Sequence) -> float:
    """``||(after - before) - (reference - before)|| / ||reference - before||``: how far an update is from the
    reference update, relative to the reference update's size (all parameters as one vector, L2 norms; a float)."""
    diff = torch.cat([(a - r).flatten() for a, r in zip(after, reference, strict=True)])
    step = torch.cat([(r - b).flatten() for r, b in zip(reference, before, strict=True)])
    return float(diff.norm() / step.norm())


def largest_difference(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Largest absolute element-wise difference between two equally long lists of tensors (a float)."""
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def optimizer_step_counts(optimizers: Sequence[torch.optim.Optimizer]) -> list[int]:
    """The ``"step"`` each optimizer's state records for each of its parameters (Adam, AdamW; 0 before any step)."""
    counts = []
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for p in group["params"]:
                counts.append(int(optimizer.state[p]["step"]) if "step" in optimizer.state.get(p, {}) else 0)
    return counts


def orthogonalize(matrix: torch.Tensor) -> torch.Tensor:
    """Muon's orthogonalization of a 2-D tensor, by ``torch.optim.Muon``'s own function at its defaults
    (``torch.optim._muon._zeropower_via_newtonschulz``: 5 Newton-Schulz steps, coefficients (3.4445, -4.7750,
    2.0315), computed in bfloat16). Returns a bfloat16 tensor of the same shape.

    Raises:
        ValueError: ``matrix`` is not 2-D (raised by torch).
    """
    from torch.optim import _muon

    coefficients = (_muon.DEFAULT_A, _muon.DEFAULT_B, _muon.DEFAULT_C)
    return _muon._zeropower_via_newtonschulz(matrix, coefficients, _muon.DEFAULT_NS_STEPS, _muon.EPS)
