"""Reference implementations of the misconceptions check 5.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch.nn.functional as F

from . import mistake


def _token_loss(outputs, labels, num_items_in_batch, shift=True, mean=False, count_padding=False):
    logits = outputs["logits"]
    if shift:
        logits, labels = logits[:, :-1, :], labels[:, 1:]
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1)
    if mean:
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
    total = F.cross_entropy(flat_logits, flat_labels, reduction="sum", ignore_index=-100)
    if num_items_in_batch is None:
        num_items_in_batch = labels.numel() if count_padding else (labels != -100).sum()
    return total / num_items_in_batch


@mistake("5.1", "no-label-shift")
def loss_without_shift(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, shift=False)


@mistake("5.1", "num-items-ignored")
def loss_mean_of_the_micro_batch(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, mean=True)


@mistake("5.1", "padding-counted")
def loss_padding_counted(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, count_padding=True)
