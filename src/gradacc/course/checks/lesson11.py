"""Checks of lesson 11 (``11_parallel``): who divides in a pipeline schedule with accumulation and data parallelism,
and an accumulation loop under bfloat16 autocast that does not train on stale weight casts.

Exercise 11.1 asks for ``count_items(micro_batches, shifts_labels) -> list[int]`` (``reference_count_items``: the
labels the loss predicts in each collated micro-batch, ``labels[..., 1:]`` that are not ``-100`` for a causal LM, TRL's
packed and padded rows included) and ``window_plan(micro_batch_size, n_microbatches,
step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items) -> {"effective_batch_size": int,
"loss_factor": float | None}`` (``reference_window_plan``). Exercise 11.2 asks for ``train_bf16(model, optimizer,
windows)``: the lesson's broken loop (one ``torch.autocast`` around everything) fixed, so that it trains as
``reference_train_bf16`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ...foundations.accumulation import max_abs_diff
from ...foundations.data import load_digits_tensors
from ...foundations.models import make_digits_model
from ...i18n import _
from . import run_check

__all__ = [
    "LOSS_REDUCTIONS",
    "PACKED_DOCUMENTS",
    "reference_count_items",
    "count_items_cases",
    "reference_window_plan",
    "check_window_plan",
    "reference_train_bf16",
    "bf16_windows",
    "check_train_bf16",
]

LOSS_REDUCTIONS = ("mean", "sum")
"""What exercise 11.1's ``loss_fn`` returns per micro-batch: the mean or the sum of its items' losses."""


PACKED_DOCUMENTS: tuple[tuple[int, ...], ...] = (
    (7, 5, 4, 4, 4, 6, 6, 9, 3),
    (6, 6, 6, 6, 8, 4),
    (12, 11, 1, 5, 5, 2, 3, 3, 3, 3),
    (9, 3, 2, 2, 2, 2, 2, 2, 6, 6),
)
"""Document lengths that TRL's ``pack_dataset`` (``"bfd"``) packs into full rows of 12 tokens, 1 to 6 documents
each: every pack has the same length, and TRL's collator leaves 12 minus its documents loss items in it
(``[10, 10, 10, 9]``, ``[10, 10, 10]``: equal, ``[11, 10, 9, 8]``, ``[10, 10, 6]``)."""

PACKED_SEQ_LENGTH = 12
"""The length TRL packs ``PACKED_DOCUMENTS`` to."""


def reference_count_items(micro_batches: Sequence[dict], shifts_labels: bool) -> list[int]:
    """Exercise 11.1's first answer: the loss items of each micro-batch, a dict as a collator returns it, whose
    ``"labels"`` (int64, any shape) mark padding, a prompt and, in TRL's padding-free packing, the first token of every
    document with ``-100``. An item is a label the loss predicts. ``shifts_labels``: the model's loss shifts the labels
    by one position itself (a causal LM: token ``t`` predicts the label at ``t + 1``), so it never predicts a row's
    first label, and the items are ``labels[..., 1:]`` that are not ``-100`` (the Trainer's count,
    ``transformers/trainer.py:2333-2343`` at 5.24.0). Otherwise (a classifier, or a model that reads each token on its
    own), every label that is not ``-100``. On TRL's padding-free rows both counts agree, since each row starts with a
    ``-100``; on rows its collator padded without packing they differ by one per row that starts with a token (not
    with a masked prompt). ``equal_items`` holds exactly when every count is the same; packing to one length does not
    make it so."""
    return [
        int(((batch["labels"][..., 1:] if shifts_labels else batch["labels"]) != -100).sum()) for batch in micro_batches
    ]


PADDED_DOCUMENTS: tuple[int, ...] = (5, 3, 7, 2, 4, 6)
"""Document lengths that TRL's collator pads, 2 rows per micro-batch, without packing (``trl_padded_micro_batches``):
a causal LM predicts ``[6, 7, 8]`` of their labels, ``[8, 9, 10]`` are not ``-100``."""


def count_items_cases() -> list[tuple[str, list[dict], bool]]:
    """``(what, micro_batches, shifts_labels)`` for the visible check of ``count_items``: micro-batches of samples, the
    last one padded with ``-100`` rows, and of digit "token" sequences padded with ``-100`` (a model that reads each
    token on its own: no shift); then a causal LM's micro-batches: TRL-packed rows of one length (one and two packs per
    micro-batch, built by TRL's own ``pack_dataset`` and collator) and documents TRL's collator padded without
    packing."""
    from ...parallel.parallel_stacks import padded_digit_sequences, trl_packed_micro_batches, trl_padded_micro_batches

    y = load_digits_tensors()[1]
    samples = [{"labels": y[0:8].clone()}, {"labels": y[8:16].clone()}, {"labels": F.pad(y[16:22], (0, 2), value=-100)}]
    tokens = padded_digit_sequences(lengths=[6, 5, 2, 6, 3, 1], seq_len=6)[1]
    cases = [
        (_("samples, the last micro-batch padded with -100 rows"), samples, False),
        (_("digit sequences padded with -100, read token by token"), [{"labels": t} for t in tokens.split(2)], False),
    ]
    for documents, packs in ((PACKED_DOCUMENTS[0], 1), (PACKED_DOCUMENTS[2], 2), (PACKED_DOCUMENTS[1], 1)):
        batches = trl_packed_micro_batches(documents, PACKED_SEQ_LENGTH, packs_per_micro_batch=packs)
        what = _("TRL's packing of documents of {lengths} tokens into rows of {length}, {packs} per micro-batch")
        cases.append((what.format(lengths=list(documents), length=PACKED_SEQ_LENGTH, packs=packs), batches, True))
    what = _("TRL's collator on documents of {lengths} tokens, not packed, {rows} rows per micro-batch")
    cases.append(
        (what.format(lengths=list(PADDED_DOCUMENTS), rows=2), trl_padded_micro_batches(PADDED_DOCUMENTS, 2), True)
    )
    return cases


def reference_window_plan(
    micro_batch_size: int,
    n_microbatches: int,
    step_calls: int,
    world_size: int,
    loss_reduction: str,
    scale_grads: bool,
    global_items: int,
    equal_items: bool,
) -> dict[str, int | float | None]:
    """Exercise 11.1's answer, for a ``torch.distributed.pipelining`` schedule whose every ``step()`` splits its batch
    into ``n_microbatches`` (M) micro-batches of ``micro_batch_size`` samples, called ``step_calls`` (A) times before
    each ``optimizer.step()``, on ``world_size`` (W) data-parallel ranks that DDP averages. ``global_items``: the loss
    items of the optimizer step on all ranks (samples, or tokens that are not padding). ``equal_items``: whether every
    micro-batch (of every ``step()`` call, on every rank) holds the same number of items (the labels the loss
    predicts, ``reference_count_items``): one item per sample, for instance. Packing to one length does not ensure it:
    with TRL's default packing (``"bfd"``, padding-free) its collator sets the first label of every document to
    ``-100``, so a row holds its length minus its documents; TRL's ``"wrapped"`` packing with the padded collator
    leaves every row of one length the same items (its length minus one, for a causal LM).

    * ``"effective_batch_size"``: ``micro_batch_size x M x A x W`` samples per optimizer step;
    * ``"loss_factor"``: the constant ``c`` to multiply ``loss_fn``'s value by so that ``.grad`` holds the mean
      gradient over the ``global_items`` items (the full-batch gradient). ``.grad`` sums ``c x`` every micro-batch's
      loss gradient; with ``scale_grads=True`` each ``step()`` then divides ALL of ``.grad`` by M
      (``stage.scale_grads``, a ``div_`` in place), so for A >= 2 and M >= 2 no constant works, whatever the loss
      (the earlier calls' gradients are divided again by every later call: ``None``, turn ``scale_grads`` off); at
      M = 1 the division by 1 changes nothing. Otherwise, with ``s`` = M if the schedule divides and 1 if not: a summed loss needs ``c = s x W / global_items`` (DDP
      divides the sum over the ranks by W); a mean loss needs ``c = s / (M x A)`` when every micro-batch holds the same
      number of items, and no constant works when they differ (``None``: the mean of unequal micro-batch means,
      lesson 01).
    """
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1  # what the schedule divides .grad by after step()
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# (micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items):
# one item per sample (the library's default, sums, a single sample per micro-batch, no library division, accumulation
# outside with and without it, a summed loss with the division on and A >= 2), padded tokens (micro-batches with
# different numbers of tokens: summed and mean losses, with and without division), micro-batches that hold the same
# number of tokens, more than one per sample, and one micro-batch per step() (M = 1: scale_grads divides by 1, so
# A >= 2 step() calls need no special case; M = A = 1 on 2 ranks with different items: DDP's mean of rank means)
_PLAN_CASES = (
    (8, 4, 1, 2, "mean", True, 64, True),
    (8, 4, 1, 2, "sum", True, 64, True),
    (1, 2, 1, 1, "sum", True, 2, True),
    (16, 8, 1, 4, "mean", False, 512, True),
    (4, 4, 2, 2, "mean", True, 64, True),
    (4, 4, 2, 2, "sum", True, 64, True),
    (4, 4, 3, 2, "sum", False, 96, True),
    (2, 8, 4, 8, "mean", False, 512, True),
    (4, 4, 2, 2, "sum", False, 3001, False),
    (8, 2, 1, 4, "sum", True, 1500, False),
    (4, 4, 2, 2, "sum", True, 1000, False),
    (4, 4, 1, 2, "mean", True, 777, False),
    (2, 8, 2, 1, "mean", False, 250, False),
    (4, 4, 1, 2, "mean", True, 1024, True),
    (2, 8, 2, 1, "mean", False, 256, True),
    (4, 4, 2, 2, "sum", False, 768, True),
    (8, 1, 3, 2, "mean", True, 48, True),
    (8, 1, 2, 2, "sum", True, 777, False),
    (8, 1, 1, 2, "mean", True, 13, False),
)


def _plan_error(got: object, want: dict, where: str) -> str | None:
    if not isinstance(got, dict) or set(got) != set(want):
        return _("{where}: return a dict with the keys {keys}, got {got}").format(
            where=where, keys=sorted(want), got=repr(got)
        )
    effective = got["effective_batch_size"]
    if isinstance(effective, bool) or effective != want["effective_batch_size"]:
        return _("{where}: effective_batch_size = {got}, expected {want} (which counts?)").format(
            where=where, got=repr(effective), want=want["effective_batch_size"]
        )
    factor, expected = got["loss_factor"], want["loss_factor"]
    if expected is None or factor is None:
        if factor is not expected:
            return _(
                "{where}: loss_factor = {got}, expected {want} (does one constant give the window's mean when every "
                "step() divides all of .grad, or when micro-batches hold different numbers of items?)"
            ).format(where=where, got=repr(factor), want=repr(expected))
        return None
    try:
        value = float(factor)
    except (TypeError, ValueError):
        return _("{where}: loss_factor should be a number or None, got {got}").format(where=where, got=repr(factor))
    if not math.isclose(value, expected, rel_tol=1e-9):
        return _(
            "{where}: loss_factor = {got}, expected {want} (how many items does the optimizer step hold, who divides "
            "already, and by what?)"
        ).format(where=where, got=f"{value:.6g}", want=f"{expected:.6g}")
    return None


def _count_error(count_items: Callable) -> str | None:
    for what, batches, shifts in count_items_cases():
        want = reference_count_items(batches, shifts)
        got = count_items(batches, shifts)
        try:
            same = [int(n) for n in got] == want and all(not isinstance(n, bool) for n in got)
        except (TypeError, ValueError):
            same = False
        if not same:
            return _(
                "count_items on {what}, shifts_labels={shifts}: got {got}, expected {want} (which labels does the "
                "loss predict, and does a pack of one length hold the same number of them as the next?)"
            ).format(what=what, shifts=shifts, got=repr(got), want=want)
    return None


def check_window_plan(window_plan: Callable, count_items: Callable) -> None:
    """Exercise 11.1: ``count_items(micro_batches, shifts_labels) -> list[int]`` on micro-batches of samples and of
    padded digit sequences (no shift), on TRL-packed rows of one length and on TRL-padded rows of a causal LM
    (``reference_count_items``, exactly), then ``window_plan(micro_batch_size, n_microbatches,
    step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items) -> {"effective_batch_size",
    "loss_factor"}`` on cases of its own (``reference_window_plan``): one item per sample, padded tokens (different
    numbers per micro-batch), the same number of tokens per micro-batch, and M = 1 (with A = 1 on 2 ranks too), each
    with a given global count.
    The effective batch exactly, the factor to a relative 1e-9, ``None`` exactly where no constant works. Prints
    ``Exercise 11.1: correct`` or what went wrong; returns ``None``.
    """

    def body(window_plan=window_plan, count_items=count_items) -> str | None:
        error = _count_error(count_items)
        if error:
            return error
        for case in _PLAN_CASES:
            b, m, a, w, reduction, scale, items, equal = case
            where = _(
                "micro-batches of {b}, M = {m}, {a} step() call(s), {w} rank(s), {reduction} loss, "
                "scale_grads={scale}, {items} items, {per_micro_batch}"
            ).format(
                b=b,
                m=m,
                a=a,
                w=w,
                reduction=reduction,
                scale=scale,
                items=items,
                per_micro_batch=_("equal items per micro-batch") if equal else _("different items per micro-batch"),
            )
            error = _plan_error(window_plan(*case), reference_window_plan(*case), where)
            if error:
                return error
        return None

    run_check("11.1", body)


BF16_LR = 0.5
"""Exercise 11.2's SGD learning rate: large enough that the weights move visibly in a few optimizer steps."""


def reference_train_bf16(model: torch.nn.Module, optimizer: torch.optim.Optimizer, windows) -> None:
    """Exercise 11.2's answer: for each window (a list of ``(x [B, 64] float32, y [B] int64)`` micro-batches), every
    micro-batch's forward pass and summed cross-entropy under ``torch.autocast("cpu", dtype=torch.bfloat16)``,
    divided by the window's samples, ``backward()`` outside the context, then one ``optimizer.step()`` and
    ``zero_grad()``. Each autocast context is left before ``optimizer.step()`` changes the weights, so its cache of
    bfloat16 weight copies (``torch.clear_autocast_cache`` on leaving the outermost context) never outlives them."""
    for window in windows:
        items = sum(len(labels) for _inputs, labels in window)
        for inputs, labels in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def bf16_windows(sizes: Sequence[Sequence[int]], start: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Windows of consecutive digits from ``start``: ``sizes[w][k]`` samples in micro-batch ``k`` of window ``w``."""
    x, y = load_digits_tensors()
    windows, row = [], start
    for window in sizes:
        micro_batches = []
        for size in window:
            micro_batches.append((x[row : row + size].clone(), y[row : row + size].clone()))
            row += size
        windows.append(micro_batches)
    return windows


# (model seed, hidden, window sizes, first digit): unequal micro-batches over 3 windows; one micro-batch per window
_BF16_CASES = ((0, 32, ((8, 16, 5), (12, 12), (7, 9, 3, 11)), 0), (3, 16, ((20,), (20,)), 600))
_BF16_TOL = 1e-5  # the reference's own loop written another way (the loss inside or outside the context) gives 0.0


def check_train_bf16(train_bf16: Callable) -> None:
    """Exercise 11.2: ``train_bf16(model, optimizer, windows)`` leaves the weights ``reference_train_bf16`` leaves
    (largest difference <= 1e-5; the stale loop of the lesson is off by about 1e-2), with SGD at ``BF16_LR`` on cases
    of its own, and makes one optimizer step per window. Prints ``Exercise 11.2: correct`` or what went wrong;
    returns ``None``.
    """

    def body(train_bf16=train_bf16) -> str | None:
        for seed, hidden, sizes, start in _BF16_CASES:
            where = _("windows of {sizes} digits").format(sizes=[list(w) for w in sizes])
            reference = make_digits_model(seed=seed, hidden=hidden)
            reference_train_bf16(
                reference, torch.optim.SGD(reference.parameters(), lr=BF16_LR), bf16_windows(sizes, start)
            )
            model = make_digits_model(seed=seed, hidden=hidden)
            optimizer = torch.optim.SGD(model.parameters(), lr=BF16_LR)
            steps = [0]
            optimizer.register_step_post_hook(lambda *_, counter=steps: counter.__setitem__(0, counter[0] + 1))
            train_bf16(model, optimizer, bf16_windows(sizes, start))
            if steps[0] != len(sizes):
                return _("{where}: {got} optimizer steps, expected one per window ({want})").format(
                    where=where, got=steps[0], want=len(sizes)
                )
            diff = max_abs_diff(model.parameters(), reference.parameters())
            if not diff <= _BF16_TOL:
                return _(
                    "{where}: the weights differ from the reference loop's by {diff} (tolerance {tol}): is every "
                    "forward pass computed with the weights as they are now, and each micro-batch's summed loss "
                    "divided by the window's samples?"
                ).format(where=where, diff=f"{diff:.2g}", tol=f"{_BF16_TOL:g}")
        return None

    run_check("11.2", body)
