"""Lesson 09's FSDP2 worker (issue 16): gradient accumulation under ``torch.distributed.fsdp.fully_shard``.

Started by torchrun, usually through ``gradacc.parallel.sharded.run_fsdp_window``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.fsdp_accum --out result.json

Each rank shards the digits MLP (every ``Linear`` and the root get ``fully_shard``: each rank holds a slice of every
parameter as a ``DTensor``) and runs one optimizer step of ``accum_steps`` micro-steps on its own slice of the
effective batch, twice:

* ``"sync each micro-step"``: FSDP2's default; every backward pass reduce-scatters its gradients, so between
  micro-steps each rank holds only its shard of the summed gradient;
* ``"sync at the boundary"``: ``model.set_requires_gradient_sync(False)`` on micro-steps 1..N-1 and ``True`` on the
  last; the unsharded gradients stay on every rank until the last backward pass reduce-scatters them once.

After each micro-step it records the gradient bytes the rank holds (sharded ``.grad`` shards, and unsharded
gradients FSDP2 keeps for a later reduce-scatter) and the collectives called so far (``"all_gather"`` and
``"reduce_scatter"``: the ``torch.distributed`` functions FSDP2 calls, ``COLLECTIVES``, counted by wrapping them). After the optimizer
step, rank 0 compares the full parameters with one process training the same model on the whole batch at once.

Then it counts the all-gathers of one optimizer step, in both modes, of the same MLP with its LAST ``Linear`` left in
the root unit (a root that holds parameters of its own; every other ``Linear`` a unit of its own), once with the
root's ``reshard_after_forward`` left to FSDP2 (False for the root) and once set to True (``ROOT_SETTINGS``): the root
is gathered once per micro-step in the first (kept from its forward pass to its backward pass, resharded after its
backward pass: ``_fsdp_param_group.py:223``, 608 and 637, torch 2.13; 193, 507 and 529 in 2.11), twice in the second.

With ``--memory-steps 1,2,4,8`` it also measures each rank's peak memory in an optimizer step (the median of
``MEASURED_STEPS``) of a fixed
effective batch (``--effective-batch-size`` samples over all ranks) for each of those ``accum_steps``, in three
settings (``MEMORY_MODES``): DDP with ``no_sync()`` on micro-steps 1..N-1 (its default buckets: a second copy of the
gradients for the all-reduce, which the tracker files as activations), and the two FSDP2 modes above. Trackers: PyTorch's
``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`` for FSDP2 and its base ``MemTracker`` for DDP
(``TorchDispatchMode``s that file every live tensor under a category; private APIs of torch 2.11-2.13). Both refuse a
module that runs forward twice without ``reset_mod_stats()`` in between (accumulation does exactly that), so the
window calls it after every micro-step: that clears per-module statistics only, not the peak.

Rank 0 writes ``{"world_size", "accum_steps", "micro_batch_size", "parameters", "parameter_bytes", "modes": {mode:
{"micro_steps": [{"sharded_grad_bytes", "unsharded_grad_bytes", "all_gather", "reduce_scatter"}, ...] (rank 0's),
"rank_grad_bytes": [[...per micro-step, sharded + unsharded] per rank], "weight_diff"}}, "units" (the ``Linear``
layers), "root_all_gathers": {mode: {root setting: all-gathers per optimizer step}}, "effective_batch_size",
"memory": {memory mode: {str(accum_steps): [{"peak_mib", "breakdown_mib": {tracker category: MiB}, "step_peaks_mib"} per rank]}}}``
(the last two only with ``--memory-steps``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from ..foundations.data import check_accum_steps, load_digits_tensors
from ..foundations.models import make_digits_model

__all__ = ["MODES", "MEMORY_MODES", "ROOT_SETTINGS", "COLLECTIVES", "build_parser", "main"]

MODES = ("sync each micro-step", "sync at the boundary")
ROOT_SETTINGS = {"root reshard_after_forward: default": None, "root reshard_after_forward=True": True}
"""The root unit's ``reshard_after_forward`` in the root-with-parameters count (None: FSDP2's default, False for the
root: ``_fully_shard.py:189-190`` and ``_fsdp_state.py:203-207``, torch 2.13; 156-157 and 193-196 in 2.11)."""
MEMORY_MODES = ("DDP", *MODES)
COLLECTIVES = {"all_gather": "all_gather_single", "reduce_scatter": "reduce_scatter_single"}
"""The ``torch.distributed`` functions FSDP2 calls for its all-gathers and reduce-scatters: ``*_single`` in torch 2.13;
torch 2.11 (Colab's) has no ``*_single`` functions and calls ``all_gather_into_tensor`` and ``reduce_scatter_tensor``
(``_LEGACY``)."""
_LEGACY = {"all_gather": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter_tensor"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="rank 0 writes the JSON result here")
    p.add_argument("--accum-steps", type=int, default=4)
    p.add_argument("--micro-batch-size", type=int, default=16, help="samples per micro-batch on each rank")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--memory-steps", default="", help="accum_steps to measure peak memory for, e.g. 1,2,4,8")
    p.add_argument("--effective-batch-size", type=int, default=128, help="samples per optimizer step, all ranks")
    return p


class _Done:
    """The handle ``_count_collectives``'s wrappers return: the collective has already completed."""

    def wait(self, *args, **kwargs) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _storage_refs(tensors: list[torch.Tensor]) -> list[int]:
    return [torch._C._storage_Use_Count(t.untyped_storage()._cdata) for t in tensors]


def _count_collectives(counts: dict[str, int], release_wait_s: float = 10.0) -> None:
    """Wrap FSDP2's collectives: count each call, and run it to completion before returning, until gloo's worker
    thread has let go of its tensors.

    gloo runs a collective on a thread of its own, which keeps a reference to the collective's tensors until it moves
    on; on a busy machine that can be after FSDP2 has dropped its own, and the buffer is then freed late, on that
    thread, still alive at the next allocation (a 1 MiB all-gather buffer in the peak of 3 of 5 steps, seen in CI).
    Waiting here until the storages' reference counts are back to what they were before the call (at most
    ``release_wait_s`` seconds) makes every buffer's lifetime the one FSDP2 gives it. It also makes the collectives
    synchronous (no overlap with computation, which gloo on one machine hardly has).
    """
    names = COLLECTIVES if all(hasattr(dist, name) for name in COLLECTIVES.values()) else _LEGACY
    for key, name in names.items():
        original = getattr(dist, name)

        @functools.wraps(original)
        def counted(*args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            before = _storage_refs(tensors)
            work = _original(*args, **{**kwargs, "async_op": True})
            work.wait()
            del work
            deadline = time.monotonic() + release_wait_s
            while any(now > was for now, was in zip(_storage_refs(tensors), before, strict=True)) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.0005)
            return _Done() if kwargs.get("async_op") else None

        setattr(dist, name, counted)


def _grad_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """(bytes of the sharded ``.grad`` shards this rank holds, bytes of unsharded gradients FSDP2 keeps)."""
    sharded = sum(p.grad.to_local().nbytes for p in model.parameters() if p.grad is not None)
    unsharded = 0
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        group = state()._fsdp_param_group if state else None
        for fsdp_param in group.fsdp_params if group else []:
            for grad in (fsdp_param.unsharded_accumulated_grad, fsdp_param._unsharded_param.grad):
                unsharded += grad.nbytes if grad is not None else 0
    return sharded, unsharded


def _sharded_model(args, root_holds_last: bool = False, root_reshard_after_forward: bool | None = None):
    """The digits MLP with every ``Linear`` a unit of its own (or every one but the last, which the root unit then
    holds), and the root."""
    model = make_digits_model(seed=0, hidden=args.hidden, depth=args.depth)
    linears = [module for module in model.modules() if isinstance(module, torch.nn.Linear)]
    for module in linears[:-1] if root_holds_last else linears:
        fully_shard(module)
    root = {} if root_reshard_after_forward is None else {"reshard_after_forward": root_reshard_after_forward}
    fully_shard(model, **root)
    return model


MEASURED_STEPS = 5
"""Optimizer steps whose peaks ``_peak_memory`` measures (after a warm-up step); it reports the median step."""


def _reset_peak(tracker: MemTracker) -> None:
    """Start a new peak from what is live now (what ``MemTracker.__enter__`` does; its attributes in torch 2.11-2.13)."""
    tracker._peak_mem_snap = tracker.get_tracker_snapshot()
    tracker._peak_mem = {dev: snap["Total"] for dev, snap in tracker._peak_mem_snap.items()}


def _peak_memory(args, mode: str, n: int, x: torch.Tensor, y: torch.Tensor) -> dict:
    """This rank's peak memory (MiB, by tracker category) in an optimizer step of ``n`` micro-steps: the median of
    ``MEASURED_STEPS`` steps' peaks. ``_count_collectives`` removes the large variation (gloo's thread freeing a
    collective's buffer late); at N = 1 a step's peak still differs now and then by 0.25 MiB, whose cause was not
    pinned down."""
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = args.effective_batch_size // world
    b = per_rank // n
    if b * n * world != args.effective_batch_size:
        raise ValueError(
            f"effective batch size {args.effective_batch_size} is not micro_batch_size x {n} x {world} for any "
            "micro_batch_size: pick accum_steps that divide it"
        )
    xs, ys = x[rank * per_rank : (rank + 1) * per_rank], y[rank * per_rank : (rank + 1) * per_rank]
    if mode == "DDP":
        model = DDP(make_digits_model(seed=0, hidden=args.hidden, depth=args.depth))
    else:
        model = _sharded_model(args)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if mode == "DDP":
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
    else:
        tracker = FSDPMemTracker(model, optimizer)
    peaks = []
    with tracker:
        for step in range(1 + MEASURED_STEPS):  # step 0 creates the momentum buffers (DDP rebuilds its buckets in 1)
            _reset_peak(tracker)
            for k in range(n):
                last = k == n - 1
                if mode == "sync at the boundary":
                    model.set_requires_gradient_sync(last)
                with model.no_sync() if mode == "DDP" and not last else contextlib.nullcontext():
                    loss = F.cross_entropy(model(xs[k * b : (k + 1) * b]), ys[k * b : (k + 1) * b], reduction="sum")
                    (loss * world / args.effective_batch_size).backward()
                tracker.reset_mod_stats()
            optimizer.step()
            optimizer.zero_grad()
            if step:
                peaks.append(next(iter(tracker.get_tracker_snapshot("peak").values())))
    peak = sorted(peaks, key=lambda p: p["Total"])[len(peaks) // 2]
    breakdown = {str(getattr(k, "value", k)): v / 2**20 for k, v in peak.items() if v and k != "Total"}
    return {
        "peak_mib": peak["Total"] / 2**20,
        "breakdown_mib": breakdown,
        "step_peaks_mib": [p["Total"] / 2**20 for p in peaks],
    }


def _window(args, mode: str, x: torch.Tensor, y: torch.Tensor, counts: dict[str, int], model=None) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    model = _sharded_model(args) if model is None else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    b, n = args.micro_batch_size, args.accum_steps
    mine = slice(rank * b * n, (rank + 1) * b * n)  # this rank's part of the effective batch
    xs, ys = x[mine], y[mine]
    for key in counts:
        counts[key] = 0
    micro_steps = []
    for k in range(n):
        if mode == "sync at the boundary":
            model.set_requires_gradient_sync(k == n - 1)
        loss = F.cross_entropy(model(xs[k * b : (k + 1) * b]), ys[k * b : (k + 1) * b], reduction="sum")
        (loss * world / x.shape[0]).backward()  # FSDP2 averages over ranks: x world makes it the window's sum / items
        sharded, unsharded = _grad_bytes(model)
        micro_steps.append({"sharded_grad_bytes": sharded, "unsharded_grad_bytes": unsharded, **counts})
    optimizer.step()
    full = {name: p.full_tensor() for name, p in model.named_parameters()}
    per_rank = [None] * world
    dist.all_gather_object(per_rank, [m["sharded_grad_bytes"] + m["unsharded_grad_bytes"] for m in micro_steps])
    return {"micro_steps": micro_steps, "rank_grad_bytes": per_rank, "full": full}


@record
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_accum_steps(args.accum_steps)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        world = dist.get_world_size()
        x, y = load_digits_tensors()
        total = args.micro_batch_size * args.accum_steps * world
        x, y = x[:total], y[:total]
        counts = dict.fromkeys(COLLECTIVES, 0)
        _count_collectives(counts)
        reference = make_digits_model(seed=0, hidden=args.hidden, depth=args.depth)
        ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        F.cross_entropy(reference(x), y).backward()  # one process, the whole effective batch at once
        ref_optimizer.step()
        modes = {}
        for mode in MODES:
            run = _window(args, mode, x, y, counts)
            full = run.pop("full")
            run["weight_diff"] = max((full[n] - p).abs().max().item() for n, p in reference.named_parameters())
            modes[mode] = run
        root_all_gathers: dict[str, dict[str, int]] = {mode: {} for mode in MODES}
        for mode in MODES:
            for setting, reshard in ROOT_SETTINGS.items():
                model = _sharded_model(args, root_holds_last=True, root_reshard_after_forward=reshard)
                run = _window(args, mode, x, y, counts, model=model)
                root_all_gathers[mode][setting] = run["micro_steps"][-1]["all_gather"]
        memory = {}
        for mode in MEMORY_MODES if args.memory_steps else ():
            memory[mode] = {}
            for n in (int(v) for v in args.memory_steps.split(",")):
                per_rank = [None] * world
                dist.all_gather_object(per_rank, _peak_memory(args, mode, n, *load_digits_tensors()))
                memory[mode][str(n)] = per_rank
        if dist.get_rank() == 0:
            result = {
                "world_size": world,
                "accum_steps": args.accum_steps,
                "micro_batch_size": args.micro_batch_size,
                "parameters": sum(p.numel() for p in reference.parameters()),
                "parameter_bytes": sum(p.nbytes for p in reference.parameters()),
                "modes": modes,
                "units": sum(isinstance(m, torch.nn.Linear) for m in reference.modules()),
                "root_all_gathers": root_all_gathers,
                **({"memory": memory, "effective_batch_size": args.effective_batch_size} if memory else {}),
            }
            Path(args.out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())  # not sys.exit: gloo's threads can abort a finalizing interpreter (see exit_worker)
