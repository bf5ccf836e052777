"""Reference implementations of the misconceptions checks 7.1, 7.2 and 7.3 recognise
(``gradacc.course.checks.mistakes``).

7.2's and 7.3's run on 2 ranks as the learner's do (``lesson07.epoch_on_ranks`` sends their source, with the
module-level helper they call): they are registered with ``register`` after their definition, not decorated, so that
their source is the function alone. 7.2's detail is a count of all-reduces: 12 for 12 micro-steps can only be a sync
on every micro-step, but 2 instead of 3 has several causes (a short window never synced, or dropped, or windows of the
wrong size), so that mistake is not recognised."""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from ....foundations.accumulation import count_items, sum_cross_entropy
from . import mistake, register


@mistake("7.1", "rank-own-tokens")
def loss_over_own_tokens(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum * (1.0 / local_tokens)


@mistake("7.1", "ddp-average-forgotten")
def loss_over_all_tokens(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum * (1.0 / global_tokens)


def _ddp_epoch(ddp_model, optimizer, batches, accum_steps, sync="last", count="all", times_world=True):
    """The lesson's DDP epoch with one change: ``sync`` "last" (the window's last micro-step), "every" (no
    ``no_sync``); ``count`` "all" (all-reduced) or "own"
    (this rank's); ``times_world``: multiply by the world size to undo DDP's average."""
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        if count == "all":
            dist.all_reduce(items)
        scale = (dist.get_world_size() if times_world else 1.0) / float(items)
        for i, batch in enumerate(window):
            synced = {"last": i == len(window) - 1, "every": True}
            with contextlib.nullcontext() if synced[sync] else ddp_model.no_sync():
                (sum_cross_entropy(ddp_model, batch) * scale).backward()
        optimizer.step()
        optimizer.zero_grad()


def epoch_synced_every_micro_step(ddp_model, optimizer, batches, accum_steps):
    _ddp_epoch(ddp_model, optimizer, batches, accum_steps, sync="every")


def epoch_own_count(ddp_model, optimizer, batches, accum_steps):
    _ddp_epoch(ddp_model, optimizer, batches, accum_steps, count="own")


def epoch_without_world_size(ddp_model, optimizer, batches, accum_steps):
    _ddp_epoch(ddp_model, optimizer, batches, accum_steps, times_world=False)


register("7.2", "sync-every-micro-step", epoch_synced_every_micro_step)
register("7.3", "rank-own-tokens", epoch_own_count)
register("7.3", "ddp-average-forgotten", epoch_without_world_size)
