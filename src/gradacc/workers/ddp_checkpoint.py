"""Lesson 07's activation-checkpointing worker: ``torch.utils.checkpoint`` inside a DDP accumulation window.

Started by torchrun, usually through ``gradacc.parallel.runs.run_checkpoint_lesson``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.ddp_checkpoint --out result.json

Each rank runs one window of ``accum_steps`` micro-steps (``no_sync()`` on the first N-1) of ``SharedBlockMLP``,
whose hidden block is applied twice, each application under its own ``checkpoint`` call, for every setting in
``SETTINGS``. Rank 0 writes a JSON file: ``{"world_size", "accum_steps", "settings": {name: {"use_reentrant",
"find_unused_parameters", "static_graph", "micro_steps": ["ok" | "error: <first line>", ...],
"grad_diff": max |.grad - .grad without checkpointing| or null}}}``.
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
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

from ..foundations.data import check_accum_steps, load_digits_tensors
from ..i18n import N_

__all__ = ["SETTINGS", "SharedBlockMLP", "build_parser", "main"]

SETTINGS: dict[str, dict[str, Any]] = {
    N_("no checkpointing"): {"checkpointing": False, "use_reentrant": False, "find_unused_parameters": False},
    N_("reentrant"): {"checkpointing": True, "use_reentrant": True, "find_unused_parameters": False},
    N_("reentrant, find_unused_parameters"): {
        "checkpointing": True,
        "use_reentrant": True,
        "find_unused_parameters": True,
    },
    N_("reentrant, static_graph"): {
        "checkpointing": True,
        "use_reentrant": True,
        "find_unused_parameters": False,
        "static_graph": True,
    },
    "use_reentrant=False": {"checkpointing": True, "use_reentrant": False, "find_unused_parameters": False},
    "use_reentrant=False, find_unused_parameters": {
        "checkpointing": True,
        "use_reentrant": False,
        "find_unused_parameters": True,
    },
}
"""The settings compared: the reference without checkpointing first (its gradients are what the others must give)."""


class SharedBlockMLP(nn.Module):
    """``Linear(64, 32) -> ReLU -> [block -> ReLU] x 2 -> Linear(32, 10)``: ``[B, 64] -> [B, 10]`` logits.

    The same ``block`` (one ``Linear(32, 32)``) is applied twice, as a weight-tied or looped layer would be; with
    ``checkpointing`` each application runs under its own ``torch.utils.checkpoint.checkpoint`` call.
    """

    def __init__(self, *, checkpointing: bool, use_reentrant: bool, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.inp, self.block, self.out = nn.Linear(64, 32), nn.Linear(32, 32), nn.Linear(32, 10)
        self.checkpointing, self.use_reentrant = checkpointing, use_reentrant

    def _block(self, h: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.block(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        for _ in range(2):
            h = checkpoint(self._block, h, use_reentrant=self.use_reentrant) if self.checkpointing else self._block(h)
        return self.out(h)


def _window(setting: dict[str, Any], micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[str], Any]:
    model = SharedBlockMLP(checkpointing=setting["checkpointing"], use_reentrant=setting["use_reentrant"])
    ddp = DDP(
        model,
        find_unused_parameters=setting["find_unused_parameters"],
        static_graph=setting.get("static_graph", False),
    )
    window_items = sum(len(y) for _, y in micro_batches)
    outcome: list[str] = []
    for i, (x, y) in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        try:
            with contextlib.nullcontext() if last else ddp.no_sync():
                loss = nn.functional.cross_entropy(ddp(x), y, reduction="sum") / window_items
                loss.backward()
            outcome.append("ok")
        except RuntimeError as error:  # both ranks fail at the same micro-step: no collective is left waiting
            outcome.append("error: " + str(error).strip().splitlines()[0])
            return outcome, None
    return outcome, [p.grad.detach().clone() for p in model.parameters()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gradacc.workers.ddp_checkpoint", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON result file written by rank 0")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-batches per optimizer step (N)")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples per micro-batch per rank")
    return parser


@record
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_accum_steps(args.accum_steps)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.set_num_threads(1)
        x, y = load_digits_tensors()
        micro = args.micro_batch_size
        start = rank * micro * args.accum_steps
        micro_batches = [
            (x[start + i * micro : start + (i + 1) * micro], y[start + i * micro : start + (i + 1) * micro])
            for i in range(args.accum_steps)
        ]
        settings: dict[str, Any] = {}
        reference = None
        for name, setting in SETTINGS.items():
            outcome, grads = _window(setting, micro_batches)
            if reference is None:
                reference = grads
            diff = (
                None
                if grads is None
                else max(float((g - r).abs().max()) for g, r in zip(grads, reference, strict=True))
            )
            settings[name] = {**setting, "micro_steps": outcome, "grad_diff": diff}
            dist.barrier()
        if rank == 0:
            result = {"world_size": world, "accum_steps": args.accum_steps, "settings": settings}
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
