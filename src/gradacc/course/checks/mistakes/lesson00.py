"""Reference implementations of the misconceptions the demonstration check 0.1 recognises
(``gradacc.course.checks.mistakes``): lesson 00's wrong answer (setup-20, the processes forgotten) shows the hint its
markdown (setup-17) promises."""

from __future__ import annotations

from . import mistake


@mistake("0.1", "one-rank-effective-batch")
def effective_batch_of_one_rank(micro_batch_size, accum_steps, world_size=1):
    return micro_batch_size * accum_steps


@mistake("0.1", "accum-steps-forgotten")
def effective_batch_without_accumulation(micro_batch_size, accum_steps, world_size=1):
    return micro_batch_size * world_size
