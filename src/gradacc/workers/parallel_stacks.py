"""Lesson 11's torch worker (issues 32 and 43): who divides and when the ranks sync in a pipeline schedule, token
counts across context-parallel ranks, FSDP2's mixed precision with a layer some micro-steps do not use, and DDP's
``static_graph`` with ``no_sync()``, on 2 gloo ranks.

Started by torchrun, usually through ``gradacc.parallel.parallel_stacks.run_parallel_lesson``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.parallel_stacks --out result.json

Five groups of cases on the digits MLP ``make_digits_model(seed=0, hidden=32, depth=2)`` (the FSDP2 group: on
``gradacc.parallel.parallel_stacks.GatedMLP``), on micro-batches of ``--micro-batch-size`` digits or of that many padded
sequences of ``SEQ_LEN`` digit "tokens" (``gradacc.parallel.parallel_stacks.padded_digit_sequences``: the MLP treats
each token on its own; a label of -100 is padding). Rank 0 compares each result with one process's gradient or weights
on the same samples (the mean over every item: a sample, or a token that is not padding):

* ``"pipeline"``: a 2-stage pipeline (rank 0 runs the first half of the layers, rank 1 the rest,
  ``gradacc.parallel.parallel_stacks.pipeline_stage_module``) under ``torch.distributed.pipelining``'s schedules, each
  ``step()`` splitting its batch into ``--n-microbatches`` (M) micro-batches, for the settings of
  ``PIPELINE_CASES``. Each: ``"max_abs_diff"`` and ``"norm_ratio"`` against the full-batch gradient of the same
  ``step()`` batches (those of the last optimizer step), ``"ema_diff"``: the difference from
  ``g_1 / M**(A-1) + ... + g_A`` (each step's mean gradient divided by M once per later ``step()``), and
  ``"items_per_microbatch"``.
* ``"data_parallel"``: 2 data-parallel ranks, each a 1-stage pipeline whose module is wrapped in DDP, for the
  settings of ``DP_CASES``: ``"all_reduces"`` (gradient all-reduces DDP ran in the window, ``AllReduceCounter``;
  ``null`` with an ``"error"`` if the window raised), ``"max_abs_diff"`` against the full-batch gradient of both
  ranks' samples, ``"effective_batch_size"`` and ``"items_per_rank"``.
* ``"context_parallel"``: the 2 ranks as ONE context-parallel group: each padded sequence of a window of
  ``len(CP_LENGTHS)`` micro-steps is split in two halves along the sequence, one per rank; DDP averages the ranks'
  gradients once per window. For the token counts of ``CP_CASES``: ``"count"`` (the divisor used), ``"norm_ratio"``,
  ``"max_abs_diff"``, ``"all_reduces"`` and ``"tokens_per_rank"``.
* ``"fsdp"``: ``gradacc.parallel.parallel_stacks.fsdp_bf16_window`` on both ranks (each its own 4 micro-batches, the
  ``extra`` layer used on the last only, or on those of the case's ``extra_on``) for the settings of ``FSDP_CASES``:
  ``"outcome"``, and for a run that finished, ``"diff_from_sync_each"`` (against the same placement and use synced on
  every micro-step) and ``"rel_diff_float32"`` (against one process's float32 gradient of both ranks' micro-batches).
* ``"static_graph"``: DDP without and with ``static_graph=True``, ``no_sync()`` on micro-steps 1..N-1 of each of
  ``--windows`` windows, and with the very first micro-step of training synced: ``"outcome"`` (``"ok"`` or
  ``"error: <first line>"``), ``"all_reduces"`` per window, ``"weight_diff"`` against one process's full-batch SGD.

Rank 0 writes ``{"torch_version", "world_size", "micro_batch_size", "n_microbatches", "accum_steps", "seq_len",
"cp_lengths", "pipeline": {...}, "data_parallel": {...}, "context_parallel": {...}, "fsdp": {...}, "static_graph": {...}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.nn.parallel import DistributedDataParallel as DDP

from ..foundations.data import load_digits_tensors
from ..foundations.models import make_digits_model
from ..i18n import N_
from ..parallel.distributed import AllReduceCounter
from ..parallel.parallel_stacks import (
    MODEL,
    SEQ_LEN,
    GatedMLP,
    fsdp_bf16_window,
    item_cross_entropy,
    padded_digit_sequences,
    pipeline_stage_module,
)

__all__ = [
    "SHORT_LAST",
    "PIPELINE_CASES",
    "DP_CASES",
    "CP_LENGTHS",
    "CP_CASES",
    "FSDP_CASES",
    "sequence_lengths",
    "build_parser",
    "main",
]

SHORT_LAST = 30
"""Digits in the short last window of the pipeline's ``short`` cases (out of ``M x micro_batch_size`` rows)."""

PIPELINE_CASES: dict[str, dict[str, Any]] = {
    N_("scale_grads=True (the default), mean loss"): {"scale_grads": True, "loss": "mean", "steps": 1},
    N_("scale_grads=False, mean loss"): {"scale_grads": False, "loss": "mean", "steps": 1},
    N_("scale_grads=True, mean loss / M (divided twice)"): {"scale_grads": True, "loss": "mean/M", "steps": 1},
    N_("1F1B, scale_grads=True, mean loss"): {"scale_grads": True, "loss": "mean", "steps": 1, "schedule": "1F1B"},
    N_("2 step() calls, scale_grads=True"): {"scale_grads": True, "loss": "mean", "steps": 2},
    N_("2 step() calls, scale_grads=False, sum / items"): {"scale_grads": False, "loss": "sum/items", "steps": 2},
    N_("padded tokens, scale_grads=True, mean loss"): {"scale_grads": True, "loss": "mean", "steps": 1, "tokens": True},
    N_("padded tokens, scale_grads=False, sum / items"): {
        "scale_grads": False, "loss": "sum/items", "steps": 1, "tokens": True,
    },
    N_("short last window, padded rows, scale_grads=True, mean loss"): {
        "scale_grads": True, "loss": "mean", "steps": 1, "short": SHORT_LAST,
    },
    N_("short last window, padded rows, scale_grads=False, sum / items"): {
        "scale_grads": False, "loss": "sum/items", "steps": 1, "short": SHORT_LAST,
    },
}  # fmt: skip
"""Pipeline settings: ``loss`` is what ``loss_fn`` returns for a micro-batch: ``"mean"`` over its items, that mean
divided by M (``"mean/M"``), or the sum over its items divided by the items of the whole optimizer step
(``"sum/items"``: the general recipe); ``steps`` is A, ``step()`` calls per optimizer step; ``tokens``: padded
sequences instead of samples; ``short``: a full optimizer step first (its gradient discarded), then a short last
window of ``short`` digits padded to the full ``step()`` batch with rows of zeros labelled -100 (the stages keep the
shapes of their first ``step()``)."""

DP_CASES: dict[str, dict[str, Any]] = {
    N_("1 step() of M micro-batches"): {"steps": 1, "mult": 1},
    N_("2 step() calls of M"): {"steps": 2, "mult": 1},
    N_("2 step() calls of M, the first inside ddp.no_sync()"): {"steps": 2, "mult": 1, "no_sync_first": True},
    N_("1 step() of 2M micro-batches"): {"steps": 1, "mult": 2},
    N_("padded tokens, sum / each rank's own count"): {"steps": 1, "mult": 1, "tokens": True, "count": "local"},
    N_("padded tokens, sum x W / the all-reduced count"): {"steps": 1, "mult": 1, "tokens": True},
    N_("shapes inferred at run time, 2 windows of 1 step()"): {"steps": 1, "mult": 1, "infer_shapes": True},
}
"""Data-parallel settings: ``steps`` ``step()`` calls of ``mult x M`` micro-batches per optimizer step, with
``scale_grads=False`` and the general recipe: each micro-batch's summed loss times W (DDP averages the ranks) divided
by the optimizer step's items on all ranks (an all-reduce of the count before the first ``step()``), or by this
rank's own items with ``count="local"``. Shapes are given to ``PipelineStage`` (``input_args``, ``output_args``)
except with ``infer_shapes``, which runs two optimizer steps."""

CP_LENGTHS = (10, 8)
"""Real tokens of each padded sequence of the context-parallel window (one sequence per micro-step), padded to
``2 x SEQ_LEN``: each rank holds ``SEQ_LEN`` positions of every sequence."""

CP_CASES: dict[str, str] = {
    N_("each rank's mean over its own tokens"): "local mean",
    N_("counted before the split, summed as if data-parallel"): "before split",
    N_("counted before the split, summed, / cp (Trainer)"): "before split / cp",
    N_("counted after the split, summed"): "after split",
}
"""How the context-parallel ranks count the window's tokens: each its own mean (``loss / micro-steps``), or a summed
loss times W divided by a count all-reduced over the ranks, taken on the whole sequences (as if the ranks held
different samples), that count divided by the context-parallel size (``transformers.Trainer``'s
``num_items_in_batch / (tp x cp x sp)``), or taken on each rank's own half."""

FSDP_CASES: dict[str, dict[str, Any]] = {
    N_("root unit, sync at the boundary"): {},
    N_("root unit, sync each micro-step (FSDP2's default)"): {"sync_each": True},
    N_("root unit, boundary, 0 x sum(extra's parameters)"): {"touch_unused": "parameters"},
    N_("root unit, boundary, 0 x extra's output"): {"touch_unused": "output"},
    N_("own unit, sync at the boundary"): {"extra_unit": True},
    N_("own unit, sync each micro-step (FSDP2's default)"): {"extra_unit": True, "sync_each": True},
    N_("own unit, boundary, 0 x sum(extra's parameters)"): {"extra_unit": True, "touch_unused": "parameters"},
    N_("own unit, boundary, 0 x extra's output"): {"extra_unit": True, "touch_unused": "output"},
    N_("own unit, boundary, extra used on micro-step 0 only"): {"extra_unit": True, "extra_on": [0]},
}
"""``fsdp_bf16_window`` settings: ``extra`` in the root FSDP unit or in its own (``extra_unit``), synced on every
micro-step or at the boundary, the two ways to give it a gradient on the micro-steps that do not use it, and the
micro-steps that use it (``extra_on``, default ``[3]``: the last of 4)."""


def sequence_lengths(n: int, offset: int = 0) -> list[int]:
    """Real tokens of ``n`` padded sequences of ``SEQ_LEN``, from sequence ``offset`` on: ``1 + (i // 3) mod SEQ_LEN``
    for sequence ``i`` (runs of 3 equal lengths, 1 to ``SEQ_LEN``), so consecutive micro-batches of one shape hold
    different numbers of tokens (15, 36, 21 and 31 in the first 4 micro-batches of 8 sequences)."""
    return [1 + ((i + offset) // 3) % SEQ_LEN for i in range(n)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gradacc.workers.parallel_stacks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON result file written by rank 0")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples (or sequences) per micro-batch")
    parser.add_argument("--n-microbatches", type=int, default=4, help="micro-batches per schedule step() (M)")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-steps per window for the DDP cases (N)")
    parser.add_argument("--windows", type=int, default=3, help="optimizer steps of the static_graph cases")
    return parser


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().flatten() for t in tensors])


def _full_grad(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """One process's gradient of the mean loss over every item of ``inputs`` (samples or tokens)."""
    model = make_digits_model(seed=0, **MODEL)
    item_cross_entropy(model(inputs), targets).backward()
    return _flat(p.grad for p in model.parameters())


def _items(targets: torch.Tensor) -> int:
    return int((targets != -100).sum())


def _batches(case: dict[str, Any], rows: int, count: int, start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` consecutive ``step()`` batches of ``rows`` samples from sample ``start``, or (``case["tokens"]``)
    of ``rows`` padded sequences from sequence ``start`` (a sequence reads ``SEQ_LEN`` digits)."""
    if case.get("tokens"):
        x, y = padded_digit_sequences(sequence_lengths(rows * count, start), SEQ_LEN, start * SEQ_LEN)
        start = 0
    else:
        x, y = load_digits_tensors()
    chunks = [slice(start + a * rows, start + (a + 1) * rows) for a in range(count)]
    return [(x[chunk], y[chunk]) for chunk in chunks]


def _pipeline(case: dict[str, Any], m: int, micro: int) -> dict[str, Any]:
    """One case on the 2-stage pipeline (every rank calls it); rank 0 returns the comparison."""
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = m * micro
    batches = _batches(case, rows, case["steps"])
    windows = [batches]  # each a list of step() batches: one optimizer step
    if case.get("short"):  # a full optimizer step, then the last window: `short` digits padded to `rows` rows
        (inputs, targets), real = _batches(case, rows, 1, rows)[0], case["short"]
        padded = F.pad(inputs[:real], (0, 0, 0, rows - real)), F.pad(targets[:real], (0, rows - real), value=-100)
        batches = [padded]
        windows.append(batches)
    items = [0]  # the optimizer step's items, known before its first step(); the loss function reads it
    losses = {
        "mean": lambda out, target: item_cross_entropy(out, target),
        "mean/M": lambda out, target: item_cross_entropy(out, target) / m,
        "sum/items": lambda out, target: item_cross_entropy(out, target, "sum") / items[0],
    }
    module = pipeline_stage_module(rank, world)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    schedule = (Schedule1F1B if case.get("schedule") == "1F1B" else ScheduleGPipe)(
        stage, n_microbatches=m, loss_fn=losses[case["loss"]], scale_grads=case["scale_grads"]
    )
    for window in windows:  # the gradient of the last one is compared
        module.zero_grad()
        items[0] = sum(_items(targets) for _, targets in window)
        for inputs, targets in window:
            if rank == 0:  # the first stage takes the inputs, the last the targets
                schedule.step(inputs)
            else:
                schedule.step(target=targets)
    grads = [None] * world
    dist.all_gather_object(grads, [p.grad.detach() for p in module.parameters()])
    if rank != 0:
        return {}
    got = _flat(g for per_rank in grads for g in per_rank)
    want = _full_grad(torch.cat([i for i, _ in batches]), torch.cat([t for _, t in batches]))
    per_step = [_full_grad(inputs, targets) for inputs, targets in batches]
    steps = len(batches)
    ema = sum(g / m ** (steps - 1 - a) for a, g in enumerate(per_step))  # each step() divides ALL of .grad by M
    return {
        **case,
        "items_per_microbatch": [_items(chunk) for _, t in batches for chunk in torch.tensor_split(t, m)],
        "max_abs_diff": float((got - want).abs().max()),
        "norm_ratio": float(got.norm() / want.norm()),
        "ema_diff": float((got - ema).abs().max()),
    }


def _data_parallel(case: dict[str, Any], m: int, micro: int, own_group) -> dict[str, Any]:
    rank, world = dist.get_rank(), dist.get_world_size()
    steps, per_step = case["steps"], case["mult"] * m
    windows = 2 if case.get("infer_shapes") else 1
    rows = per_step * micro
    # the ranks read alternate blocks of `steps` step() batches: rank r's window w starts at block (w x world + r)
    mine = [_batches(case, rows, steps, ((w * world + rank) * steps) * rows) for w in range(windows)]
    model = make_digits_model(seed=0, **MODEL)
    ddp = DDP(model)
    counter = AllReduceCounter()
    ddp.register_comm_hook(None, counter.hook)
    inputs, targets = mine[0][0]  # one micro-batch's shapes: [micro, 64] or [micro, SEQ_LEN, 64] -> [..., 10]
    shapes = {"input_args": inputs[:micro], "output_args": torch.empty(*targets[:micro].shape, 10)}
    stage = PipelineStage(
        ddp, 0, 1, torch.device("cpu"), group=own_group, **({} if case.get("infer_shapes") else shapes)
    )
    divisor = [1.0]  # the optimizer step's items, set before its first step(); the loss function reads it
    schedule = ScheduleGPipe(
        stage, n_microbatches=per_step, scale_grads=False,
        loss_fn=lambda out, target: item_cross_entropy(out, target, "sum") * world / divisor[0],
    )  # fmt: skip
    counts, error, items = [], None, []
    for batches in mine:
        model.zero_grad()
        local = torch.tensor(float(sum(_items(t) for _, t in batches)))
        items = [int(local)]
        if case.get("count") == "local":
            local *= world  # cancels the x W: each rank divides its sum by its own items
        else:
            dist.all_reduce(local)  # the items of the optimizer step on every rank
        divisor[0] = float(local)
        before = counter.calls
        try:
            for a, (inputs, targets) in enumerate(batches):
                no_sync = case.get("no_sync_first") and a < steps - 1
                with ddp.no_sync() if no_sync else contextlib.nullcontext():
                    schedule.step(inputs, target=targets)
        except RuntimeError as exc:  # both ranks raise at the same place: nothing is left waiting
            error = "error: " + str(exc.__cause__ or exc).strip().splitlines()[0]
            break
        counts.append(counter.calls - before)
    result = {**case, "all_reduces": counts, "effective_batch_size": micro * per_step * steps * world}
    per_rank = [None] * world
    dist.all_gather_object(per_rank, items)
    result["items_per_rank"] = [n for rank_items in per_rank for n in rank_items]
    if error:
        return {**result, "error": error, "max_abs_diff": None}
    both = [None] * world
    dist.all_gather_object(both, mine[len(counts) - 1])
    batches = [b for rank_batches in both for b in rank_batches]
    want = _full_grad(torch.cat([i for i, _ in batches]), torch.cat([t for _, t in batches]))
    return {**result, "max_abs_diff": float((_flat(p.grad for p in model.parameters()) - want).abs().max())}


def _context_parallel(count: str) -> dict[str, Any]:
    """One window of ``len(CP_LENGTHS)`` padded sequences, each split along the sequence over the ranks (rank r holds
    positions ``r x SEQ_LEN`` to ``(r + 1) x SEQ_LEN - 1``), DDP's sync on the last micro-step only."""
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens, labels = padded_digit_sequences(CP_LENGTHS, world * SEQ_LEN)
    mine = slice(rank * SEQ_LEN, (rank + 1) * SEQ_LEN)
    model = make_digits_model(seed=0, **MODEL)
    ddp = DDP(model)
    counter = AllReduceCounter()
    ddp.register_comm_hook(None, counter.hook)
    own = _items(labels[:, mine])
    total = torch.tensor(float(_items(labels) if count.startswith("before split") else own))
    dist.all_reduce(total)  # summed over the ranks, as data-parallel counts are
    divisor = float(total) / (world if count == "before split / cp" else 1)
    steps = len(CP_LENGTHS)
    for k in range(steps):
        with ddp.no_sync() if k < steps - 1 else contextlib.nullcontext():
            out = ddp(tokens[k : k + 1, mine])
            if count == "local mean":
                loss = item_cross_entropy(out, labels[k : k + 1, mine]) / steps
            else:
                loss = item_cross_entropy(out, labels[k : k + 1, mine], "sum") * world / divisor
            loss.backward()
    per_rank = [None] * world
    dist.all_gather_object(per_rank, own)
    if rank != 0:
        return {}
    got, want = _flat(p.grad for p in model.parameters()), _full_grad(tokens, labels)
    return {
        "count": None if count == "local mean" else divisor,
        "tokens_per_rank": per_rank,
        "all_reduces": counter.calls,
        "norm_ratio": float(got.norm() / want.norm()),
        "max_abs_diff": float((got - want).abs().max()),
    }


def _fsdp(micro: int) -> dict[str, Any]:
    """``FSDP_CASES`` on every rank (rank r reads the digits after rank r-1's 4 micro-batches); rank 0 compares each
    run that finished with the same placement and ``extra_on`` synced on every micro-step (run for the comparison
    where no case is) and with one process's float32 gradient."""
    rank, world = dist.get_rank(), dist.get_world_size()
    windows = [_batches({}, micro, 4, 4 * micro * r) for r in range(world)]
    items = 4 * micro * world
    settings = {name: {"extra_on": [3], **case} for name, case in FSDP_CASES.items()}
    runs = {name: fsdp_bf16_window(windows[rank], items=items, **case) for name, case in settings.items()}

    def placement(case: dict[str, Any]) -> tuple[bool, tuple[int, ...]]:
        return bool(case.get("extra_unit")), tuple(case["extra_on"])

    synced = {placement(c): runs[n]["grads"] for n, c in settings.items() if c.get("sync_each")}
    for case in settings.values():  # every rank runs the missing ones: FSDP2's collectives need both
        unit, extra_on = placement(case)
        if (unit, extra_on) not in synced:
            synced[unit, extra_on] = fsdp_bf16_window(
                windows[rank], items=items, extra_on=extra_on, extra_unit=unit, sync_each=True
            )["grads"]
    if rank != 0:
        return {}
    results = {}
    for name, case in settings.items():
        run = runs[name]
        result: dict[str, Any] = {**case, "outcome": run["outcome"]}
        if run["grads"] is not None:
            reference = GatedMLP()
            for window in windows:
                for k, (inputs, labels) in enumerate(window):
                    logits = reference(inputs, use_extra=k in case["extra_on"])
                    (F.cross_entropy(logits, labels, reduction="sum") / items).backward()
            full = _flat(p.grad for p in reference.parameters())
            result["diff_from_sync_each"] = float((run["grads"] - synced[placement(case)]).abs().max())
            result["rel_diff_float32"] = float((run["grads"] - full).norm() / full.norm())
        results[name] = result
    return results


def _static_graph(static: bool, first_synced: bool, x, y, n: int, micro: int, windows: int) -> dict[str, Any]:
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_digits_model(seed=0, **MODEL)
    ddp = DDP(model, static_graph=static)
    counter = AllReduceCounter()
    ddp.register_comm_hook(None, counter.hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    window_rows, per_window = n * micro * world, []
    for w in range(windows):
        before = counter.calls
        for k in range(n):
            start = w * window_rows + (rank * n + k) * micro
            sync = k == n - 1 or (first_synced and w == 0 and k == 0)
            try:
                with contextlib.nullcontext() if sync else ddp.no_sync():
                    loss = F.cross_entropy(ddp(x[start : start + micro]), y[start : start + micro], reduction="sum")
                    (loss * world / window_rows).backward()  # DDP averages over the ranks
            except RuntimeError as exc:  # both ranks fail at the same micro-step
                return {"outcome": "error: " + str(exc).strip().splitlines()[0], "all_reduces": per_window}
        optimizer.step()
        optimizer.zero_grad()
        per_window.append(counter.calls - before)
    reference = make_digits_model(seed=0, **MODEL)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for w in range(windows):
        rows = slice(w * window_rows, (w + 1) * window_rows)
        F.cross_entropy(reference(x[rows]), y[rows]).backward()
        ref_optimizer.step()
        ref_optimizer.zero_grad()
    diff = float((_flat(model.parameters()) - _flat(reference.parameters())).abs().max())
    return {"outcome": "ok", "all_reduces": per_window, "weight_diff": diff}


@record
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("micro_batch_size", "n_microbatches", "accum_steps", "windows"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        torch.set_num_threads(1)
        rank, world = dist.get_rank(), dist.get_world_size()
        x, y = load_digits_tensors()
        m, micro = args.n_microbatches, args.micro_batch_size
        pipeline = {name: _pipeline(case, m, micro) for name, case in PIPELINE_CASES.items()}
        own = [dist.new_group([r]) for r in range(world)]  # every rank must create every group
        data_parallel = {name: _data_parallel(case, m, micro, own[rank]) for name, case in DP_CASES.items()}
        context_parallel = {name: _context_parallel(count) for name, count in CP_CASES.items()}
        fsdp = _fsdp(micro)
        static_graph = {}
        for name, static, first in (
            (N_("static_graph=False"), False, False),
            (N_("static_graph=True"), True, False),
            (N_("static_graph=True, first micro-step synced"), True, True),
        ):
            static_graph[name] = _static_graph(static, first, x, y, args.accum_steps, micro, args.windows)
            dist.barrier()
        if rank == 0:
            result = {
                "torch_version": torch.__version__,
                "world_size": world,
                "micro_batch_size": micro,
                "n_microbatches": m,
                "accum_steps": args.accum_steps,
                "seq_len": SEQ_LEN,
                "cp_lengths": list(CP_LENGTHS),
                "pipeline": pipeline,
                "data_parallel": data_parallel,
                "context_parallel": context_parallel,
                "fsdp": fsdp,
                "static_graph": static_graph,
            }
            tmp = args.out.with_suffix(".partial")
            tmp.write_text(json.dumps(result, indent=1))
            tmp.replace(args.out)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())
