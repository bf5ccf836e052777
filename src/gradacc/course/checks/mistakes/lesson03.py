"""Reference implementations of the misconceptions check 3.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

from . import mistake


@mistake("3.1", "whole-batch-activations")
def activations_of_the_effective_batch(activation_mib_per_sample, effective_batch_size, accum_steps):
    if accum_steps < 1 or effective_batch_size % accum_steps != 0:
        raise ValueError("the micro-batches cannot be equal")
    return float(effective_batch_size) * activation_mib_per_sample
