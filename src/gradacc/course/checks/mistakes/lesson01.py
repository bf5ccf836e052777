"""Reference implementations of the misconceptions checks 1.1 and 1.2 recognise (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ....foundations.data import IGNORE_INDEX
from . import mistake


@mistake("1.1", "mean-of-means")
def combine_means_unweighted(means, counts):
    """Every micro-batch's mean weighs the same, whatever its count."""
    total = means[0]
    for mean in means[1:]:
        total = total + mean
    return total / len(counts)


@mistake("1.1", "divided-by-micro-batches")
def combine_means_by_micro_batches(means, counts):
    """The items' sum (each mean times its count) divided by the number of micro-batches."""
    total = means[0] * counts[0]
    for mean, count in zip(means[1:], counts[1:], strict=True):
        total = total + mean * count
    return total / len(counts)


def _token_sums(logits_list, labels_list) -> list[torch.Tensor]:
    return [
        F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum", ignore_index=IGNORE_INDEX)
        for logits, labels in zip(logits_list, labels_list, strict=True)
    ]


@mistake("1.2", "mean-of-means")
def token_losses_mean_of_means(logits_list, labels_list):
    """Each micro-batch's mean over its own real tokens, divided by the number of micro-batches."""
    sums = _token_sums(logits_list, labels_list)
    return [s / (labels != IGNORE_INDEX).sum() / len(sums) for s, labels in zip(sums, labels_list, strict=True)]


@mistake("1.2", "padding-counted")
def token_losses_padding_counted(logits_list, labels_list):
    """The window's summed token losses divided by every label position, padding included."""
    positions = sum(labels.numel() for labels in labels_list)
    return [s / positions for s in _token_sums(logits_list, labels_list)]
