"""Accumulation inside the libraries practitioners train with (lesson 10): what each one counts, who divides the loss
and by what, and when it syncs (steps the optimizer), measured on the installed versions.

One module per stack, each imported on its own (importing this package imports none of the libraries):

* ``sft``: TRL's ``SFTTrainer`` with padding-free (packed) batches: what ``num_items_in_batch`` counts;
* ``moe``: a Mixture-of-Experts auxiliary loss under accumulation, in ``SFTTrainer`` and in a plain ``Trainer``;
* ``grpo``: TRL's ``GRPOTrainer`` with ``loss_type="dapo"``: which token count divides a window's loss;
* ``lora``: PEFT / LoRA: adapter-sized gradients, reentrant checkpointing, frozen weights under DDP;
* ``lit``: PyTorch Lightning's ``accumulate_grad_batches``: the short last window and an epoch shorter than N;
* ``keras3``: Keras 3's ``optimizer(gradient_accumulation_steps=N)`` on the torch backend;
* ``per_window``: what must happen once per window and not once per micro-step (EMA, step counters, checkpoints).

Lesson 12 (what else must advance once per window) adds:

* ``window_optimizers``: optimizers stepped inside ``backward()`` and ``torch.optim.Muon``, against the full batch;
* ``window_clocks``: a schedule's progress and a DP-SGD accountant (Opacus) counted in optimizer steps;
* ``window_state``: an FP8 amax carried through JAX's gradient tree, accumulated by ``lax.scan`` (imports JAX);
* ``mlx_lazy``: MLX's lazy graph across a window's micro-steps (imports MLX).

This module holds what they share: the windows of an epoch, the weight every micro-batch SHOULD get in its window's
update (``right_weights``), and the **weight probe**: a model with one weight per micro-batch, ``w``, whose per-item
loss is ``-w[k]`` for every item of micro-batch ``k``. Trained from ``w = 0`` with SGD at learning rate 1, ``w[k]``
ends up equal to the weight the training loop gave micro-batch ``k`` in its update: ``n_k / (items in its window)``
for a loop that divides by the window's items, ``1 / N`` for one that divides every micro-batch mean by N, 0 for a
micro-batch whose window never reached ``optimizer.step()``. ``plot_window_weights`` draws the probe's weights per
stack against the right ones (lesson 10's diagram).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..foundations.accumulation import train_accumulated
from ..foundations.data import check_accum_steps
from ..i18n import _

__all__ = [
    "check_item_counts",
    "windows",
    "right_weights",
    "probe_batches",
    "probe_model",
    "probe_loss_sum",
    "probe_weights",
    "loop_weights",
    "plot_window_weights",
]


def check_item_counts(item_counts: Sequence[int]) -> list[int]:
    """``item_counts`` as a list of ints, each >= 1.

    Raises:
        ValueError: empty, or a count below 1 (a micro-batch with no items has nothing to weigh).
    """
    counts = [int(n) for n in item_counts]
    if not counts:
        raise ValueError("item_counts must list at least one micro-batch, got none")
    bad = [n for n in counts if n < 1]
    if bad:
        raise ValueError(f"every micro-batch needs at least 1 item, got item_counts={counts}")
    return counts


def windows(n_micro_batches: int, accum_steps: int) -> list[range]:
    """The micro-batch indices of each accumulation window of an epoch: ``accum_steps`` consecutive micro-batches, the
    last window shorter when ``accum_steps`` does not divide ``n_micro_batches`` (``[range(0, 4), range(4, 6)]`` for 6
    micro-batches at N = 4).

    Raises:
        ValueError: ``n_micro_batches < 1`` or a bad ``accum_steps`` (``gradacc.foundations.data.check_accum_steps``).
    """
    check_accum_steps(accum_steps)
    if n_micro_batches < 1:
        raise ValueError(f"n_micro_batches must be >= 1, got {n_micro_batches}")
    return [range(start, min(start + accum_steps, n_micro_batches)) for start in range(0, n_micro_batches, accum_steps)]


def right_weights(item_counts: Sequence[int], accum_steps: int) -> list[float]:
    """The weight of each micro-batch in its window's update when every item weighs the same: ``n_k / W`` with ``W``
    the items of the window holding micro-batch ``k`` (the rule of lessons 01-02; a short last window divided by its
    own items). The weights of each window sum to 1."""
    counts = check_item_counts(item_counts)
    weights = []
    for window in windows(len(counts), accum_steps):
        total = sum(counts[k] for k in window)
        weights += [counts[k] / total for k in window]
    return weights


def probe_batches(item_counts: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The weight probe's micro-batches: micro-batch ``k`` is ``(x, labels)`` with ``x`` ``[n_k, M]`` float32 one-hot
    on column ``k`` (M = number of micro-batches) and ``labels`` ``[n_k]`` int64 zeros (so ``count_items`` counts its
    ``n_k`` items)."""
    counts = check_item_counts(item_counts)
    batches = []
    for k, n in enumerate(counts):
        x = torch.zeros(n, len(counts))
        x[:, k] = 1.0
        batches.append((x, torch.zeros(n, dtype=torch.int64)))
    return batches


def probe_model(n_micro_batches: int) -> nn.Linear:
    """``Linear(n_micro_batches, 1, bias=False)`` with zero weights: one weight per micro-batch."""
    model = nn.Linear(n_micro_batches, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    return model


def probe_loss_sum(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The summed per-item loss of a probe micro-batch: ``-w[k]`` per item (a 0-d tensor)."""
    return -model(batch[0]).sum()


def probe_weights(model: nn.Module) -> list[float]:
    """The probe's weights after training: the weight each micro-batch got in its window's update."""
    weight = model.weight if hasattr(model, "weight") else next(model.parameters())
    return [float(w) for w in weight.detach().flatten()]


def loop_weights(item_counts: Sequence[int], accum_steps: int) -> list[float]:
    """The weight probe trained by the course's own loop (``gradacc.foundations.accumulation.train_accumulated``, lesson
    02): each micro-batch's summed loss divided by its window's items, a step after every window, the short last one
    too. Returns the weight each micro-batch got."""
    counts = check_item_counts(item_counts)
    model = probe_model(len(counts))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    train_accumulated(model, optimizer, probe_batches(counts), accum_steps, probe_loss_sum)
    return probe_weights(model)


def plot_window_weights(
    ax, item_counts: Sequence[int], accum_steps: int, weights: dict[str, Sequence[float]], right: Sequence[float]
) -> None:
    """Lesson 10's diagram: one group of bars per micro-batch, one bar per stack (``weights``: stack -> the weight each
    micro-batch got in its update, from ``gradacc.stacks``' weight probe), the right weight (``right``: its items over
    its window's items) as a black tick over each group, and a dotted line between accumulation windows."""
    stacks = list(weights)
    width = 0.8 / len(stacks)
    palette = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#c44e52"]
    for i, (stack, values) in enumerate(weights.items()):
        xs = [k - 0.4 + width * (i + 0.5) for k in range(len(values))]
        ax.bar(xs, values, width=width, color=palette[i % len(palette)], label=stack)
    right_label = _("right: its items / window's items")
    ax.plot(range(len(right)), right, "_", color="black", ms=22, mew=2, label=right_label)
    for start in range(accum_steps, len(item_counts), accum_steps):
        ax.axvline(start - 0.5, color="0.4", lw=1, ls=":")
    ticks = [
        (_("{k}\n(1 item)") if n == 1 else _("{k}\n({n} items)")).format(k=k + 1, n=n)
        for k, n in enumerate(item_counts)
    ]
    ax.set_xticks(range(len(item_counts)), ticks, fontsize=9)
    ax.set_xlabel(
        _("micro-batch (N = {accum_steps}; dotted: window boundary)").format(accum_steps=accum_steps), fontsize=9
    )
    ax.set_ylabel(_("weight in its update"), fontsize=9)
    ax.set_ylim(0, 1.15 * max(max(right), *(max(v) for v in weights.values())))
    ax.legend(fontsize=9, loc="upper left", ncol=2)
