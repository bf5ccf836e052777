"""Reference implementations of the misconceptions check 10.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

from ..lesson10 import reference_loss_factors
from . import mistake


@mistake("10.1", "library-division-forgotten")
def factors_of_your_own_loop(library, accum_steps, item_counts, reduction):
    return reference_loss_factors("pytorch", accum_steps, tuple(item_counts), reduction)


@mistake("10.1", "sum-treated-as-mean")
def factors_for_a_mean_always(library, accum_steps, item_counts, reduction):
    return reference_loss_factors(library, accum_steps, tuple(item_counts), "mean")
