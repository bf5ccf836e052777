"""Reference implementations of the misconceptions check 7.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

from . import mistake


@mistake("7.1", "rank-own-tokens")
def loss_over_own_tokens(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum * (1.0 / local_tokens)


@mistake("7.1", "ddp-average-forgotten")
def loss_over_all_tokens(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum * (1.0 / global_tokens)
