"""Checks of lesson 01 (``01_theory``): combining micro-batch means, and token-weighted micro-batch losses.

Each check runs the learner's function on inputs of its own (real digits and real docstrings, not the notebook's),
prints exactly one line (``Exercise 1.1: correct`` or ``Exercise 1.1: incorrect - <what is wrong>``) and returns
``None``, so a check cell shows that line and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from ...foundations.data import IGNORE_INDEX, build_vocab, docstring_corpus, encode, load_digits_tensors, pad_batch
from ...foundations.models import TinyLM, make_digits_model
from ...i18n import _
from . import close, run_check

__all__ = ["check_combine_means", "check_window_token_losses"]

_TOL = 1e-6  # float32 equivalence tolerance (COURSE.md)


def _micro_batch_means(sizes: Sequence[int], offset: int = 300) -> tuple[list[torch.Tensor], torch.Tensor, list]:
    """Mean losses and mean weight-gradients of digit micro-batches of ``sizes``, and those of the whole window."""
    x, y = load_digits_tensors()
    model = make_digits_model(seed=11)
    weight = model.net[0].weight
    stop = offset + sum(sizes)
    full_loss = F.cross_entropy(model(x[offset:stop]), y[offset:stop])
    (full_grad,) = torch.autograd.grad(full_loss, weight)
    bounds = torch.tensor((offset, *sizes)).cumsum(0).tolist()
    losses, grads = [], []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        loss = F.cross_entropy(model(x[start:end]), y[start:end])
        (grad,) = torch.autograd.grad(loss, weight)
        losses.append(loss.detach())
        grads.append(grad)
    return losses, grads, [full_loss.detach(), full_grad]


def check_combine_means(combine_means: Callable) -> None:
    """Exercise 1.1: ``combine_means(means, counts)`` returns the mean over all items of a window.

    ``means[k]`` is the mean of micro-batch ``k`` (a float or a tensor of any shape, e.g. a gradient) and
    ``counts[k]`` its number of items; the answer is ``sum(counts[k] * means[k]) / sum(counts)``, of the same kind
    as the means. Tested on plain numbers, on the mean losses and on the mean weight gradients of real digit
    micro-batches of unequal sizes.
    """

    def body(combine_means=combine_means) -> str | None:
        problem = close("combine_means([2.0, 4.0], [10, 30])", combine_means([2.0, 4.0], [10, 30]), 3.5, 1e-9)
        if problem:
            return problem + " " + _("(weight each mean by its count: 10 items of 2.0 and 30 of 4.0)")
        problem = close("combine_means([5.0], [7])", combine_means([5.0], [7]), 5.0, 1e-9)
        if problem:
            return problem
        for sizes in ((10, 22), (1, 5, 26), (16, 16, 16, 16)):
            losses, grads, (full_loss, full_grad) = _micro_batch_means(sizes)
            got = combine_means(losses, list(sizes))
            name = _("the combined mean loss of digit micro-batches of {sizes}").format(sizes=sizes)
            problem = close(name, got, full_loss.item(), _TOL)
            if problem:
                return problem
            got = combine_means(grads, list(sizes))
            if not torch.is_tensor(got) or got.shape != full_grad.shape:
                shape = tuple(got.shape) if torch.is_tensor(got) else type(got).__name__
                return _(
                    "for gradient tensors of shape {shape} it returned {got}; return a tensor of that shape"
                ).format(shape=tuple(full_grad.shape), got=shape)
            error = (got - full_grad).abs().max().item()
            if not error <= _TOL:
                return _(
                    "the combined gradient of digit micro-batches of {sizes} is off by {error} (tolerance {tol}): "
                    "weight each micro-batch's mean by counts[k] / sum(counts)"
                ).format(sizes=sizes, error=f"{error:.2g}", tol=f"{_TOL:g}")
        return None

    run_check("1.1", body)


def _token_windows() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Logits (leaf tensors) and labels of three padded micro-batches of real docstrings of different lengths."""
    corpus = [entry["text"] for entry in docstring_corpus(min_words=12, max_words=160)]
    texts = corpus[-9:]  # other docstrings than the lesson's
    vocab = build_vocab(texts, max_size=400)
    sequences = [encode(text, vocab) for text in texts]
    model = TinyLM(len(vocab), dim=16, seed=5)
    logits_list, labels_list = [], []
    for group in (sequences[:1], sequences[1:5], sequences[5:]):
        input_ids, labels = pad_batch(group)
        with torch.no_grad():
            logits = model(input_ids)
        logits_list.append(logits.clone().requires_grad_())
        labels_list.append(labels)
    return logits_list, labels_list


def check_window_token_losses(window_token_losses: Callable) -> None:
    """Exercise 1.2: ``window_token_losses(logits_list, labels_list)`` returns one loss per micro-batch.

    ``logits_list[k]`` is ``[B_k, T_k, V]`` float, ``labels_list[k]`` is ``[B_k, T_k]`` int64 with ``IGNORE_INDEX``
    at padding. The returned 0-d tensors must add up to the mean cross-entropy over all real tokens of the window,
    and so must their gradients (summed token losses of each micro-batch divided by the window's token count).
    Tested on three micro-batches of real docstrings padded to different lengths.
    """

    def body(window_token_losses=window_token_losses) -> str | None:
        logits_list, labels_list = _token_windows()
        token_losses = [
            F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none", ignore_index=IGNORE_INDEX)
            for logits, labels in zip(logits_list, labels_list, strict=True)
        ]
        tokens = sum(int((labels != IGNORE_INDEX).sum()) for labels in labels_list)
        target = torch.cat(token_losses).sum() / tokens
        want_grads = torch.autograd.grad(target, logits_list)

        losses = window_token_losses(logits_list, labels_list)
        losses = list(losses) if isinstance(losses, (list, tuple)) else losses
        if not isinstance(losses, list) or len(losses) != len(logits_list):
            return _("return a list with one loss per micro-batch ({count} here), got {got}").format(
                count=len(logits_list), got=type(losses).__name__
            )
        if not all(torch.is_tensor(loss) and loss.dim() == 0 and loss.requires_grad for loss in losses):
            return _("each loss must be a 0-d tensor that autograd can differentiate (do not call .item())")
        total = float(sum(loss.detach() for loss in losses))
        per_sequence = sum(
            (tl.sum() / (labels != IGNORE_INDEX).sum()).item() / len(losses)
            for tl, labels in zip(token_losses, labels_list, strict=True)
        )
        if abs(total - per_sequence) < 1e-5 < abs(per_sequence - target.item()):
            return _(
                "the losses add up to {total}, the mean of the micro-batch means; the mean over the window's "
                "{tokens} real tokens is {want}: divide each micro-batch's summed token losses by {tokens}"
            ).format(total=f"{total:.6g}", tokens=tokens, want=f"{target.item():.6g}")
        problem = close(_("the sum of the micro-batch losses"), total, target.item(), 1e-5)
        if problem:
            hint = _("(the mean over the window's {tokens} real tokens; padding labels are {ignore})")
            return problem + " " + hint.format(tokens=tokens, ignore=IGNORE_INDEX)
        got_grads = torch.autograd.grad(sum(losses), logits_list, allow_unused=True)
        for k, (got, want) in enumerate(zip(got_grads, want_grads, strict=True)):
            if got is None:
                return _("the loss does not depend on micro-batch {k}'s logits").format(k=k)
            error = (got - want).abs().max().item()
            if not error <= _TOL:
                return _(
                    "the gradient with respect to micro-batch {k}'s logits is off by {error} (tolerance {tol})"
                ).format(k=k, error=f"{error:.2g}", tol=f"{_TOL:g}")
        return None

    run_check("1.2", body)
