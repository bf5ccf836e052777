"""The DDP worker of lesson 07: gradient accumulation with ``DistributedDataParallel`` across real processes.

Started by torchrun (one process per rank), usually through ``gradacc.parallel.runs.run_ddp_lesson``::

    torchrun --nnodes=1 --nproc-per-node=2 --master-addr=127.0.0.1 --master-port=PORT \\
        -m gradacc.workers.ddp --out result.pt --micro-batch-size 8 --accum-steps 4

``init_process_group`` reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from torchrun's
environment. Backend: gloo on CPU, NCCL when CUDA is available (``--backend auto``, the default). The same file runs
unchanged on several GPU machines (lesson 07, section 6). Rank 0 writes one ``torch.save`` file (load it with
``torch.load(path, weights_only=True)``) holding:

``"world_size"``, ``"backend"``, ``"micro_batch_size"``, ``"accum_steps"``, ``"effective_batch_size"``,
``"samples_per_rank"`` (list), ``"samples_total"`` (all-gathered), ``"rank0_indices"`` (the digits rank 0 read);

``"no_sync"`` and ``"sync_every_micro_step"``: one window of ``make_digits_model(seed=0, hidden=32)`` with SGD,
with and without ``no_sync()`` on the first N-1 micro-steps: ``"weights"`` (list of tensors, parameter order),
``"allreduce_calls"``, ``"allreduce_elements"``, ``"max_rank_weight_diff"`` (largest difference between the ranks'
weights after the step: DDP keeps replicas identical), ``"loss"`` (mean loss of the window over all ranks);

``"no_sync_backward_only"``: the same window with the forward OUTSIDE ``no_sync()`` and only ``backward()`` inside it
(a silent mistake: DDP decides in the forward whether the next backward all-reduces): the same keys;

``"no_sync_forward_only"``: every forward inside ``no_sync()`` and every ``backward()`` outside it (the reverse
mistake: no all-reduce at all, ``"max_rank_weight_diff" > 0``): the same keys;

``"timing"``: ``"windows"``, ``"parameters"``, ``"no_sync_s"`` / ``"sync_s"`` (median wall seconds per window on
rank 0), ``"no_sync_comm_s"`` / ``"sync_comm_s"`` (all-reduce seconds per window), ``"no_sync_calls"`` /
``"sync_calls"`` (hook calls per window);

``"tokens"`` (two ranks only): ``"tokens_per_rank"``, ``"loss_sum_per_rank"`` (summed token losses),
``"grads_local_items"`` (each rank divides by its own tokens: DDP then averages the per-rank means) and
``"grads_global_items"`` (each rank divides by the all-reduced token count and multiplies by world_size, so DDP's
average is the sum of all token losses / all tokens).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ..foundations.accumulation import Batch, count_items, sum_cross_entropy
from ..foundations.data import check_accum_steps, load_digits_tensors
from ..foundations.models import TinyLM, make_digits_model
from ..parallel.distributed import (
    WEIGHTINGS,
    AllReduceCounter,
    accumulate_window,
    effective_batch_size,
)
from ..parallel.tokens import (
    TOKEN_LABEL_COUNTS,
    token_vocab_size,
    token_windows,
)

__all__ = ["build_parser", "main"]


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _max_rank_diff(model: nn.Module) -> float:
    mine = _flat(model)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


def _wrap(model: nn.Module, device: torch.device) -> tuple[DDP, AllReduceCounter]:
    model = model.to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    counter = AllReduceCounter()
    ddp.register_comm_hook(state=None, hook=counter.hook)
    return ddp, counter


def _to(batches: Sequence[Batch], device: torch.device) -> list[Batch]:
    return [(x.to(device), y.to(device)) for x, y in batches]


def _no_sync_around_one_part(micro_batches, device, lr: float, part: str) -> dict[str, Any]:
    """``accumulate_window``'s window with ``no_sync()`` around one part of each micro-step only (two silent mistakes).

    ``part="backward"``: the forward outside ``no_sync()``, ``backward()`` inside it on the first N-1 micro-steps. DDP's
    ``forward`` reads ``require_backward_grad_sync`` and prepares the reducer for an all-reduce, so every micro-step
    synchronizes (the gradient stays right). ``part="forward"``: every forward inside ``no_sync()``, every
    ``backward()`` outside it, the last one included: no forward prepared the reducer, so nothing is all-reduced and
    each rank steps with its own gradient (the replicas drift apart).
    """
    if part not in ("backward", "forward"):
        raise ValueError(f"part must be 'backward' or 'forward', got {part!r}")
    ddp, counter = _wrap(make_digits_model(seed=0, hidden=32), device)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    counts = torch.tensor([sum(count_items(b) for b in micro_batches)], dtype=torch.float64, device=device)
    dist.all_reduce(counts)
    scale = dist.get_world_size() / counts.item()
    for i, batch in enumerate(micro_batches):
        if part == "backward":
            loss = sum_cross_entropy(ddp, batch)  # the forward, outside no_sync()
            with contextlib.nullcontext() if i == len(micro_batches) - 1 else ddp.no_sync():
                (loss * scale).backward()
        else:
            with ddp.no_sync():
                loss = sum_cross_entropy(ddp, batch)
            (loss * scale).backward()  # outside no_sync(), but the forward did not prepare an all-reduce
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {
        "weights": [p.detach().cpu().clone() for p in ddp.module.parameters()],
        "allreduce_calls": counter.calls,
        "allreduce_elements": counter.elements,
        "max_rank_weight_diff": _max_rank_diff(ddp.module),
    }


def _one_window(micro_batches, device, lr: float, use_no_sync: bool) -> dict[str, Any]:
    ddp, counter = _wrap(make_digits_model(seed=0, hidden=32), device)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    info = accumulate_window(ddp, optimizer, micro_batches, use_no_sync=use_no_sync)
    return {
        "weights": [p.detach().cpu().clone() for p in ddp.module.parameters()],
        "allreduce_calls": counter.calls,
        "allreduce_elements": counter.elements,
        "max_rank_weight_diff": _max_rank_diff(ddp.module),
        "loss": info["loss"],
        "local_items": info["local_items"],
        "global_items": info["global_items"],
    }


def _timing(micro_batches, device, hidden: int, windows: int, lr: float) -> dict[str, Any]:
    ddp, counter = _wrap(make_digits_model(seed=0, hidden=hidden, depth=2), device)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    modes = (True, False)
    for use_no_sync in modes:  # warm-up: DDP rebuilds its buckets after the first iteration
        accumulate_window(ddp, optimizer, micro_batches, use_no_sync=use_no_sync)
    seconds: dict[bool, list[float]] = {m: [] for m in modes}
    comm: dict[bool, float] = dict.fromkeys(modes, 0.0)
    calls: dict[bool, int] = dict.fromkeys(modes, 0)
    for _ in range(windows):
        for use_no_sync in modes:  # interleaved, so a slow spell on a busy machine hits both modes
            counter.reset()
            dist.barrier()
            start = time.perf_counter()
            accumulate_window(ddp, optimizer, micro_batches, use_no_sync=use_no_sync)
            seconds[use_no_sync].append(time.perf_counter() - start)
            comm[use_no_sync] += counter.seconds
            calls[use_no_sync] += counter.calls
    return {
        "windows": windows,
        "parameters": sum(p.numel() for p in ddp.parameters()),
        "no_sync_s": statistics.median(seconds[True]),
        "sync_s": statistics.median(seconds[False]),
        "no_sync_comm_s": comm[True] / windows,
        "sync_comm_s": comm[False] / windows,
        "no_sync_calls": calls[True] / windows,
        "sync_calls": calls[False] / windows,
    }


def _tokens(rank: int, device: torch.device) -> dict[str, Any]:
    window = _to(token_windows()[rank], device)
    result: dict[str, Any] = {}
    for weighting in WEIGHTINGS:
        ddp, _ = _wrap(TinyLM(token_vocab_size(), dim=16, seed=0), device)
        info = accumulate_window(ddp, None, window, weighting=weighting)
        result[f"grads_{weighting}"] = [p.grad.detach().cpu().clone() for p in ddp.module.parameters()]
        with torch.no_grad():
            loss_sum = sum(float(sum_cross_entropy(ddp.module, b)) for b in window)
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, (info["local_items"], loss_sum))
        result["tokens_per_rank"] = [g[0] for g in gathered]
        result["loss_sum_per_rank"] = [g[1] for g in gathered]
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.ddp", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="result file written by rank 0 (torch.save)")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples per micro-batch per rank")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-batches per optimizer step (N)")
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument("--timing-windows", type=int, default=20, help="windows timed per mode")
    parser.add_argument("--timing-hidden", type=int, default=256, help="hidden width of the timed model")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    return parser


@record  # a failing rank's traceback goes into torchrun's error report
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_accum_steps(args.accum_steps)
    backend = args.backend
    if backend == "auto":
        world = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun
        backend = "nccl" if torch.cuda.device_count() >= world else "gloo"  # NCCL needs a GPU per rank
    dist.init_process_group(backend, timeout=timedelta(seconds=120))
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if backend == "nccl":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        torch.set_num_threads(1)
        micro, n = args.micro_batch_size, args.accum_steps
        total = effective_batch_size(micro, n, world)
        x, y = load_digits_tensors()
        dataset = TensorDataset(x[:total], y[:total])
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
        micro_batches = _to(list(DataLoader(dataset, batch_size=micro, sampler=sampler)), device)
        if len(micro_batches) != n:
            raise RuntimeError(f"rank {rank} got {len(micro_batches)} micro-batches, expected accum_steps={n}")
        samples = torch.tensor([sum(len(b[1]) for b in micro_batches)], device=device)
        per_rank = [torch.zeros_like(samples) for _ in range(world)]
        dist.all_gather(per_rank, samples)
        result: dict[str, Any] = {
            "world_size": world,
            "backend": backend,
            "micro_batch_size": micro,
            "accum_steps": n,
            "effective_batch_size": total,
            "samples_per_rank": [int(s.item()) for s in per_rank],
            "samples_total": int(sum(s.item() for s in per_rank)),
            "rank0_indices": [int(i) for i in sampler],  # written by rank 0: its own indices
            "no_sync": _one_window(micro_batches, device, args.lr, use_no_sync=True),
            "sync_every_micro_step": _one_window(micro_batches, device, args.lr, use_no_sync=False),
            "no_sync_backward_only": _no_sync_around_one_part(micro_batches, device, args.lr, "backward"),
            "no_sync_forward_only": _no_sync_around_one_part(micro_batches, device, args.lr, "forward"),
            "timing": _timing(micro_batches, device, args.timing_hidden, args.timing_windows, args.lr),
            "tokens": _tokens(rank, device) if world == len(TOKEN_LABEL_COUNTS) else None,
        }
        if rank == 0:
            tmp = args.out.with_suffix(".partial")
            torch.save(result, tmp)
            tmp.replace(args.out)  # the launcher never sees a half-written file
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())  # not sys.exit: gloo's threads can abort a finalizing interpreter (see exit_worker)
