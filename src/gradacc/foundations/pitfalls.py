"""Where accumulation is NOT one big batch (lesson 08): the tools to reproduce each case with a number.

* ``accumulated_gradients``: the gradients of one accumulation window, with ``backward`` per micro-batch (the right
  way) or on the sum of the N losses (same gradient, N graphs alive at once).
* ``two_views`` and ``info_nce_loss``: a contrastive setup with in-batch negatives on the digits.
* ``dropout_masks`` and ``mask_agreement``: the masks of every ``nn.Dropout`` of a model during forward passes.
* ``recorded_forwards`` and ``first_pass_gradient``: what GradCache must reproduce when the encoder draws random
  numbers (dropout): the gradient of the loss computed from the first, graph-free pass, with that pass's masks.
* ``SentenceEmbeddingAdapter``: any encoder in the shape sentence-transformers' losses call (lesson 08 runs its own
  cached loss on the digits).

The bytes a graph keeps alive are measured with ``gradacc.foundations.graphs.SavedTensorMeter`` (shared with lesson 02).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .accumulation import Batch, LossFn, count_items, sum_cross_entropy

__all__ = [
    "accumulated_gradients",
    "two_views",
    "info_nce_loss",
    "dropout_masks",
    "mask_agreement",
    "recorded_forwards",
    "first_pass_gradient",
    "SentenceEmbeddingAdapter",
]


def accumulated_gradients(
    model: nn.Module,
    micro_batches: Sequence[Batch],
    loss_fn: LossFn = sum_cross_entropy,
    *,
    sum_losses_first: bool = False,
) -> list[torch.Tensor]:
    """The gradient of the mean item loss of a window, accumulated over its micro-batches (no optimizer step).

    Each micro-batch's SUMMED loss is divided by the number of items in the whole window (``count_items``), so for a
    model whose output for a sample does not depend on the other samples of its batch the result equals
    ``gradacc.foundations.accumulation.full_batch_gradients`` on the concatenated batch.

    Args:
        model: any module; its ``.grad`` fields are cleared before and after (the result is returned instead).
            Modules in training mode update their state as usual (BatchNorm running statistics, dropout RNG).
        micro_batches: the window, N >= 1 ``(inputs, labels)`` pairs.
        loss_fn: summed loss of a micro-batch.
        sum_losses_first: ``False``: ``backward()`` after each micro-batch (one graph alive at a time).
            ``True``: add the N scaled losses and call ``backward()`` once: the same gradient, but all N graphs (and
            their saved activations) stay alive until that call.

    Returns:
        Detached gradient tensors in ``model.parameters()`` order (zeros for parameters the loss does not use).

    Raises:
        ValueError: an empty window, or a window without items.
    """
    if len(micro_batches) == 0:
        raise ValueError("a window needs at least one micro-batch, got none")
    items = sum(count_items(b) for b in micro_batches)
    if items == 0:
        raise ValueError("the window holds no items to average over (every label equals IGNORE_INDEX)")
    params = list(model.parameters())
    model.zero_grad(set_to_none=True)
    if sum_losses_first:
        total = sum(loss_fn(model, b) / items for b in micro_batches)
        total.backward()
    else:
        for batch in micro_batches:
            (loss_fn(model, batch) / items).backward()
    grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    model.zero_grad(set_to_none=True)
    return grads


def two_views(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two "augmented views" of 8x8 digits for contrastive learning: the image, and the image shifted one pixel right.

    Args:
        x: ``[B, 64]`` float images (rows of 8 pixels, as ``gradacc.foundations.data.load_digits_tensors`` gives them).

    Returns:
        ``(view_a, view_b)``, both ``[B, 64]``; ``view_b`` moves every row one pixel to the right (the left column
        becomes 0). Deterministic: no random numbers.

    Raises:
        ValueError: ``x`` is not ``[B, 64]``.
    """
    if x.dim() != 2 or x.shape[1] != 64:
        raise ValueError(f"x must be [B, 64] flattened 8x8 images, got shape {tuple(x.shape)}")
    images = x.reshape(-1, 8, 8)
    shifted = torch.zeros_like(images)
    shifted[:, :, 1:] = images[:, :, :-1]
    return x, shifted.reshape(-1, 64)


def info_nce_loss(z_a: torch.Tensor, z_b: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    """InfoNCE with in-batch negatives: row ``i`` of ``z_a`` must pick row ``i`` of ``z_b`` among all ``B`` rows.

    ``logits = normalize(z_a) @ normalize(z_b).T / temperature`` (``[B, B]`` cosine similarities) and the loss is
    the mean cross-entropy with targets ``0..B-1``: each sample has 1 positive and ``B - 1`` negatives, namely the
    other samples of the SAME batch. With untrained, uninformative embeddings the loss is about ``log(B)``.

    Args:
        z_a, z_b: ``[B, D]`` embeddings (float).
        temperature: > 0.

    Returns:
        A 0-d tensor (mean over the ``B`` rows).

    Raises:
        ValueError: shapes differ or are not 2-D, or ``temperature <= 0``.

    Source: van den Oord et al., "Representation Learning with Contrastive Predictive Coding" (2018, arXiv
    1807.03748); in-batch negatives as in SimCLR (Chen et al., 2020) and DPR (Karpukhin et al., 2020).
    """
    if z_a.dim() != 2 or z_a.shape != z_b.shape:
        raise ValueError(f"z_a and z_b must both be [B, D], got {tuple(z_a.shape)} and {tuple(z_b.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logits = F.normalize(z_a, dim=1) @ F.normalize(z_b, dim=1).T / temperature
    return F.cross_entropy(logits, torch.arange(z_a.shape[0], device=z_a.device))


@contextlib.contextmanager
def dropout_masks(model: nn.Module) -> Iterator[list[list[torch.Tensor]]]:
    """Record the masks of every ``nn.Dropout`` in ``model`` during the forward passes inside the context.

    Yields a list with one list per dropout module (in ``model.modules()`` order); every forward appends that
    module's mask to its list: an ``int8`` tensor of the output's shape, ``1`` where the unit was kept, ``0`` where
    it was dropped, ``-1`` where its input was already 0 (after a ReLU: the mask cannot be seen there).
    Compare two masks with ``mask_agreement``.
    """
    modules = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    masks: list[list[torch.Tensor]] = [[] for _ in modules]

    def recorder(i: int) -> Callable:
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            mask = (output != 0).to(torch.int8)
            masks[i].append(torch.where(inputs[0] == 0, torch.full_like(mask, -1), mask).detach())

        return hook

    handles = [m.register_forward_hook(recorder(i)) for i, m in enumerate(modules)]
    try:
        yield masks
    finally:
        for handle in handles:
            handle.remove()


def mask_agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of units on which two ``dropout_masks`` masks agree, over units visible (not ``-1``) in both.

    Two independent masks with drop probability ``p`` agree on about ``p**2 + (1 - p)**2`` of the units (0.5 for
    ``p = 0.5``); identical masks give 1.0.

    Raises:
        ValueError: different shapes, or no unit visible in both.
    """
    if a.shape != b.shape:
        raise ValueError(f"masks must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    visible = (a >= 0) & (b >= 0)
    if not bool(visible.any()):
        raise ValueError("no unit is visible in both masks (every input was 0)")
    return float((a[visible] == b[visible]).float().mean())


@contextlib.contextmanager
def recorded_forwards(model: nn.Module) -> Iterator[list[tuple[torch.Tensor, torch.Tensor, bool]]]:
    """Record every forward call of ``model`` inside the context: a copy of its input, the CPU generator's state
    (``torch.get_rng_state()``) just before the call and whether autograd was recording it
    (``torch.is_grad_enabled()``), in call order.

    With those a call can be replayed exactly, dropout masks included (``first_pass_gradient``). Only the CPU
    generator is recorded: use it for CPU models (a CUDA model draws its dropout masks from its device's generator,
    ``torch.cuda.get_rng_state``, which this does not keep).
    """
    calls: list[tuple[torch.Tensor, torch.Tensor, bool]] = []

    def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        calls.append((inputs[0].detach().clone(), torch.get_rng_state(), torch.is_grad_enabled()))

    handle = model.register_forward_pre_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()


def _row_key(row: torch.Tensor) -> bytes:
    return row.detach().cpu().contiguous().numpy().tobytes()


def first_pass_gradient(
    model: nn.Module,
    calls: Sequence[tuple[torch.Tensor, torch.Tensor, bool]],
    views_a: torch.Tensor,
    views_b: torch.Tensor,
    temperature: float = 0.1,
) -> tuple[float, list[torch.Tensor]]:
    """The InfoNCE loss and gradient that GradCache must give when ``model`` draws random numbers (dropout).

    GradCache computes the loss from the embeddings of a first pass without a graph, then re-runs each chunk with
    one. The loss it reports belongs to the first pass's dropout masks, so its exact gradient is the gradient with
    THOSE masks. A sample's first pass is the LAST graph-free call (``torch.is_grad_enabled()`` False) that held it
    before the first call with a graph that held it (the re-run); a sample never re-run takes its last graph-free
    call, and one never embedded without a graph takes its first call. So a probe or a sanity forward made before
    the first pass does not count, and the order and the chunking of the calls do not matter. This function replays
    each sample's first-pass call (``recorded_forwards``) from that call's generator state, with a graph, computes
    the full-batch ``info_nce_loss`` of those embeddings and its gradient.

    Args:
        model: the encoder as it was before the recorded calls (same parameters; training mode for dropout).
        calls: ``(input, rng_state, grad_enabled)`` triples from ``recorded_forwards``, in call order.
        views_a, views_b: the ``[B, 64]`` pairs; every row of both must be distinct (a row is found by its values).

    Returns:
        ``(loss, gradients)``: the loss as a float, and the gradients in ``model.parameters()`` order.

    Raises:
        ValueError: two rows of the views are equal, or a row was never embedded by a recorded call.
    """
    keys = [_row_key(row) for row in torch.cat([views_a, views_b])]
    if len(set(keys)) != len(keys):
        raise ValueError("every row of views_a and views_b must be distinct to find its first forward")
    wanted = set(keys)
    first_pass: dict[bytes, int] = {}  # sample -> index of its first-pass call, fixed at its first call with a graph
    last_free: dict[bytes, int] = {}  # sample -> index of its latest graph-free call so far
    for index, (inputs, _state, grad_enabled) in enumerate(calls):
        for row in inputs:
            key = _row_key(row)
            if key not in wanted or key in first_pass:
                continue
            if grad_enabled:
                first_pass[key] = last_free.get(key, index)
            else:
                last_free[key] = index
    for key, index in last_free.items():
        first_pass.setdefault(key, index)
    missing = sum(key not in first_pass for key in keys)
    if missing:
        raise ValueError(f"{missing} of the {len(keys)} samples were never embedded by a recorded forward")
    embedded: dict[bytes, torch.Tensor] = {}
    for index in sorted(set(first_pass.values())):
        inputs, state, _grad_enabled = calls[index]
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(state)
            outputs = model(inputs)
        for row, output in zip(inputs, outputs, strict=True):
            key = _row_key(row)
            if first_pass.get(key) == index:
                embedded[key] = output
    z = torch.stack([embedded[key] for key in keys])
    loss = info_nce_loss(z[: len(views_a)], z[len(views_a) :], temperature)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    return float(loss.detach()), grads


class SentenceEmbeddingAdapter(nn.Module):
    """Wrap an encoder in the interface sentence-transformers' losses call: a features dict in, ``{"sentence_embedding":
    [B, D]}`` out, and ``adapter[0]`` (the losses inspect the model's first module).

    ``features[key]`` is passed to ``encoder``; the losses cut every tensor of the dict into mini-batches. Used in
    lessons/08_pitfalls.ipynb, section 3, to run ``CachedMultipleNegativesRankingLoss`` on the digits encoder.
    """

    def __init__(self, encoder: nn.Module, key: str = "pixels") -> None:
        super().__init__()
        self.encoder, self.key = encoder, key

    def __getitem__(self, index: int) -> nn.Module:
        return self.encoder

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"sentence_embedding": self.encoder(features[self.key])}
