"""Reference implementations of the misconceptions checks 10.1 and 10.2 recognise (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch.nn.functional as F

from ..lesson10 import reference_loss_factors
from . import mistake


@mistake("10.1", "library-division-forgotten")
def factors_of_your_own_loop(library, accum_steps, item_counts, reduction):
    return reference_loss_factors("pytorch", accum_steps, tuple(item_counts), reduction)


@mistake("10.1", "sum-treated-as-mean")
def factors_for_a_mean_always(library, accum_steps, item_counts, reduction):
    return reference_loss_factors(library, accum_steps, tuple(item_counts), "mean")


def _factors(library, accum_steps, item_counts, reduction, scale):
    """``reference_loss_factors`` with the library's scale replaced by ``scale`` (``None``: never applied)."""
    if scale is None:
        return None
    total = sum(item_counts)
    return [1.0 / (total * scale * (1.0 / n if reduction == "mean" else 1.0)) for n in item_counts]


@mistake("10.1", "library-short-window")
def factors_every_library_divides_by_the_real_window(library, accum_steps, item_counts, reduction):
    """Lightning and Accelerate taken to divide a short window by its real size, as Trainer does."""
    scale = {"pytorch": 1.0, "keras": 1.0 / accum_steps if len(item_counts) == accum_steps else None}
    return _factors(library, accum_steps, item_counts, reduction, scale.get(library, 1.0 / len(item_counts)))


@mistake("10.1", "library-short-window")
def factors_trainer_divides_by_n(library, accum_steps, item_counts, reduction):
    """Trainer taken to divide every window by N, as Accelerate and Lightning do."""
    scale = {"pytorch": 1.0, "keras": 1.0 / accum_steps if len(item_counts) == accum_steps else None}
    return _factors(library, accum_steps, item_counts, reduction, scale.get(library, 1.0 / accum_steps))


@mistake("10.1", "library-short-window")
def factors_keras_applies_the_short_window(library, accum_steps, item_counts, reduction):
    """Keras's short last window taken to be applied, divided by N."""
    scale = {"pytorch": 1.0, "trainer": 1.0 / len(item_counts)}
    return _factors(library, accum_steps, item_counts, reduction, scale.get(library, 1.0 / accum_steps))


def _lightning(module, batch, batch_idx, per_window=False):
    inputs, labels = batch
    if not per_window:
        return F.cross_entropy(module.model(inputs), labels)
    n = module.trainer.accumulate_grad_batches
    start = batch_idx - batch_idx % n
    window = module.item_counts[start : start + n]
    return F.cross_entropy(module.model(inputs), labels, reduction="sum") * (1.0 / sum(window))


@mistake("10.2", "mean-of-means")
def lightning_mean_loss(module, batch, batch_idx):
    return _lightning(module, batch, batch_idx)


@mistake("10.2", "library-division-forgotten")
def lightning_window_sum(module, batch, batch_idx):
    return _lightning(module, batch, batch_idx, per_window=True)


@mistake("10.2", "library-short-window")
def lightning_real_window_size(module, batch, batch_idx):
    n = module.trainer.accumulate_grad_batches
    start = batch_idx - batch_idx % n
    return _lightning(module, batch, batch_idx, per_window=True) * len(module.item_counts[start : start + n])
