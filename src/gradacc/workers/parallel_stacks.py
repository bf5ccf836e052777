"""Lesson 11's torch worker (issue 32): who divides and when the ranks sync in a pipeline schedule, and DDP's
``static_graph`` with ``no_sync()``, on 2 gloo ranks.

Started by torchrun, usually through ``gradacc.parallel_stacks.run_parallel_lesson``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.parallel_stacks --out result.json

Three groups of cases, on the digits MLP ``make_digits_model(seed=0, hidden=32, depth=2)`` and micro-batches of
``--micro-batch-size`` digits, each compared by rank 0 with one process's gradient or weights on the same samples:

* ``"pipeline"``: a 2-stage pipeline (rank 0 runs the first half of the layers, rank 1 the rest,
  ``gradacc.parallel_stacks.pipeline_stage_module``) under ``torch.distributed.pipelining``'s schedules, each
  ``step()`` splitting its batch into ``--n-microbatches`` (M) micro-batches, for the settings of
  ``PIPELINE_CASES``: the library's division on or off (``scale_grads``), the loss divided again, and ``step()``
  called A times before the optimizer would step (accumulation outside the schedule). Each: ``"max_abs_diff"`` and
  ``"norm_ratio"`` against the full-batch mean gradient of the same A x M micro-batches, and ``"ema_diff"``: the
  difference from ``g_1 / M**(A-1) + ... + g_A`` (each step's mean gradient divided by M once per later ``step()``).
* ``"data_parallel"``: 2 data-parallel ranks, each a 1-stage pipeline whose module is wrapped in DDP, for the settings
  of ``DP_CASES``: ``"all_reduces"`` (gradient all-reduces DDP ran in the window, ``AllReduceCounter``; ``null`` with
  an ``"error"`` if the window raised), ``"max_abs_diff"`` against the full-batch gradient of both ranks' samples, and
  ``"effective_batch_size"``.
* ``"static_graph"``: DDP without and with ``static_graph=True``, ``no_sync()`` on micro-steps 1..N-1 of each of
  ``--windows`` windows, and with the very first micro-step of training synced: ``"outcome"`` (``"ok"`` or
  ``"error: <first line>"``), ``"all_reduces"`` per window, ``"weight_diff"`` against one process's full-batch SGD.

Rank 0 writes ``{"torch_version", "world_size", "micro_batch_size", "n_microbatches", "pipeline": {...},
"data_parallel": {...}, "static_graph": {...}}``.
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

from ..data import load_digits_tensors
from ..distributed import AllReduceCounter
from ..models import make_digits_model
from ..parallel_stacks import MODEL, pipeline_stage_module

__all__ = ["PIPELINE_CASES", "DP_CASES", "build_parser", "main"]

PIPELINE_CASES: dict[str, dict[str, Any]] = {
    "scale_grads=True (the default), mean loss": {"scale_grads": True, "loss_divisor": "1", "steps": 1},
    "scale_grads=False, mean loss": {"scale_grads": False, "loss_divisor": "1", "steps": 1},
    "scale_grads=True, mean loss / M (divided twice)": {"scale_grads": True, "loss_divisor": "M", "steps": 1},
    "1F1B, scale_grads=True, mean loss": {"scale_grads": True, "loss_divisor": "1", "steps": 1, "schedule": "1F1B"},
    "2 step() calls, scale_grads=True": {"scale_grads": True, "loss_divisor": "1", "steps": 2},
    "2 step() calls, scale_grads=False, loss / (M x 2)": {"scale_grads": False, "loss_divisor": "MA", "steps": 2},
}
"""Pipeline settings: ``loss_divisor`` is what the mean loss of a micro-batch is divided by (``"1"``, ``"M"``
micro-batches per ``step()``, ``"MA"`` micro-batches per optimizer step); ``steps`` is A, ``step()`` calls per
optimizer step."""

DP_CASES: dict[str, dict[str, Any]] = {
    "1 step() of M micro-batches": {"steps": 1, "mult": 1},
    "2 step() calls of M": {"steps": 2, "mult": 1},
    "2 step() calls of M, the first inside ddp.no_sync()": {"steps": 2, "mult": 1, "no_sync_first": True},
    "1 step() of 2M micro-batches": {"steps": 1, "mult": 2},
    "shapes inferred at run time, 2 windows of 1 step()": {"steps": 1, "mult": 1, "infer_shapes": True},
}
"""Data-parallel settings: ``steps`` ``step()`` calls of ``mult x M`` micro-batches per optimizer step; every loss is
divided by the micro-batches of the optimizer step and ``scale_grads=False``. Shapes are given to ``PipelineStage``
(``input_args``, ``output_args``) except with ``infer_shapes``, which runs two optimizer steps."""

_LOSS_DIVISORS = {"1": lambda m, a: 1, "M": lambda m, a: m, "MA": lambda m, a: m * a}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gradacc.workers.parallel_stacks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON result file written by rank 0")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples per micro-batch")
    parser.add_argument("--n-microbatches", type=int, default=4, help="micro-batches per schedule step() (M)")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-steps per window for the DDP cases (N)")
    parser.add_argument("--windows", type=int, default=3, help="optimizer steps of the static_graph cases")
    return parser


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().flatten() for t in tensors])


def _mean_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model = make_digits_model(seed=0, **MODEL)
    F.cross_entropy(model(x), y).backward()
    return _flat(p.grad for p in model.parameters())


def _pipeline(case: dict[str, Any], x, y, m: int, micro: int) -> dict[str, Any]:
    """One case on the 2-stage pipeline (every rank calls it); rank 0 returns the comparison."""
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = case["steps"]
    module = pipeline_stage_module(rank, world)
    stage = PipelineStage(module, rank, world, torch.device("cpu"))
    divisor = _LOSS_DIVISORS[case["loss_divisor"]](m, steps)
    schedule = (Schedule1F1B if case.get("schedule") == "1F1B" else ScheduleGPipe)(
        stage, n_microbatches=m, loss_fn=lambda out, target: F.cross_entropy(out, target) / divisor,
        scale_grads=case["scale_grads"],
    )  # fmt: skip
    rows = m * micro
    for a in range(steps):
        chunk = slice(a * rows, (a + 1) * rows)
        if rank == 0:  # the first stage takes the inputs, the last the targets
            schedule.step(x[chunk])
        else:
            schedule.step(target=y[chunk])
    grads = [None] * world
    dist.all_gather_object(grads, [p.grad.detach() for p in module.parameters()])
    if rank != 0:
        return {}
    got = _flat(g for per_rank in grads for g in per_rank)
    want = _mean_grad(x[: steps * rows], y[: steps * rows])
    per_step = [_mean_grad(x[a * rows : (a + 1) * rows], y[a * rows : (a + 1) * rows]) for a in range(steps)]
    ema = sum(g / m ** (steps - 1 - a) for a, g in enumerate(per_step))  # each step() divides ALL of .grad by M
    return {
        **case,
        "max_abs_diff": float((got - want).abs().max()),
        "norm_ratio": float(got.norm() / want.norm()),
        "ema_diff": float((got - ema).abs().max()),
    }


def _data_parallel(case: dict[str, Any], x, y, m: int, micro: int, own_group) -> dict[str, Any]:
    rank, world = dist.get_rank(), dist.get_world_size()
    steps, per_step = case["steps"], case["mult"] * m
    model = make_digits_model(seed=0, **MODEL)
    ddp = DDP(model)
    counter = AllReduceCounter()
    ddp.register_comm_hook(None, counter.hook)
    shapes = {} if case.get("infer_shapes") else {"input_args": x[:micro], "output_args": torch.empty(micro, 10)}
    stage = PipelineStage(ddp, 0, 1, torch.device("cpu"), group=own_group, **shapes)
    total = steps * per_step
    schedule = ScheduleGPipe(
        stage, n_microbatches=per_step, loss_fn=lambda out, target: F.cross_entropy(out, target) / total,
        scale_grads=False,
    )  # fmt: skip
    rows = per_step * micro
    windows = 2 if case.get("infer_shapes") else 1
    counts, error = [], None
    for window in range(windows):
        model.zero_grad()
        before = counter.calls
        try:
            for a in range(steps):
                start = ((window * steps + a) * world + rank) * rows  # the ranks read alternate blocks
                no_sync = case.get("no_sync_first") and a < steps - 1
                with ddp.no_sync() if no_sync else contextlib.nullcontext():
                    schedule.step(x[start : start + rows], target=y[start : start + rows])
        except RuntimeError as exc:  # both ranks raise at the same place: nothing is left waiting
            error = "error: " + str(exc.__cause__ or exc).strip().splitlines()[0]
            break
        counts.append(counter.calls - before)
    result = {**case, "all_reduces": counts, "effective_batch_size": micro * per_step * steps * world}
    if error:
        return {**result, "error": error, "max_abs_diff": None}
    last = len(counts) - 1
    blocks = [((last * steps + a) * world + r) * rows for a in range(steps) for r in range(world)]
    want = _mean_grad(torch.cat([x[s : s + rows] for s in blocks]), torch.cat([y[s : s + rows] for s in blocks]))
    return {**result, "max_abs_diff": float((_flat(p.grad for p in model.parameters()) - want).abs().max())}


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
        pipeline = {name: _pipeline(case, x, y, m, micro) for name, case in PIPELINE_CASES.items()}
        own = [dist.new_group([r]) for r in range(world)]  # every rank must create every group
        data_parallel = {name: _data_parallel(case, x, y, m, micro, own[rank]) for name, case in DP_CASES.items()}
        static_graph = {}
        for name, static, first in (
            ("static_graph=False", False, False),
            ("static_graph=True", True, False),
            ("static_graph=True, first micro-step synced", True, True),
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
                "pipeline": pipeline,
                "data_parallel": data_parallel,
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
    from gradacc.launch import exit_worker

    exit_worker(main())
