"""Misconceptions about what to divide by: which items a window's mean is taken over (lesson 01 and its uses)."""

from __future__ import annotations

from ...i18n import N_
from . import Misconception

MEAN_OF_MEANS = Misconception(
    id="mean-of-means",
    name=N_("a mean of micro-batch means"),
    why=N_(
        "Averaging the micro-batch means gives every micro-batch the same weight, so an item of a small micro-batch "
        "counts more than an item of a large one; in general it equals the window's mean only when all micro-batches "
        "hold the same number of items. Divide each micro-batch's summed loss by the number of items in the whole window."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("3. Unequal micro-batches: weight by counts"),
    cell="theory-16",
)

DIVIDED_BY_MICRO_BATCHES = Misconception(
    id="divided-by-micro-batches",
    name=N_("a sum over the window's items divided by the number of micro-batches"),
    why=N_(
        "The mean over a window is the sum of its items' losses divided by the number of items, not by the number "
        "of micro-batches. Dividing by the micro-batch count makes the result too large by the average "
        "micro-batch size."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("4. Mean or sum: what each reduction needs"),
    cell="theory-19",
)

DIVIDED_TWICE = Misconception(
    id="divided-twice",
    name=N_("dividing twice"),
    why=N_(
        "A loss already divided by the number of items in the window is divided again by the number of "
        "micro-batches, so the gradient is N times too small (with SGD the update too; Adam hides a constant "
        "factor, but not a clipping threshold or unequal weights). Find what divides already, and divide once."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("4. Mean or sum: what each reduction needs"),
    cell="theory-19",
)

PADDING_COUNTED = Misconception(
    id="padding-counted",
    name=N_("padding counted as items"),
    why=N_(
        "Padding positions (label -100) add nothing to the loss, but counting them makes the divisor too large, so "
        "every update is too small; where each micro-batch is divided by its own padded length, a micro-batch with "
        "more padding also weighs too little. Count only the real items: the labels that are not -100 (the "
        "predicted ones, after the shift, for a causal LM)."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("5. Padding tokens"),
    cell="theory-23",
)
