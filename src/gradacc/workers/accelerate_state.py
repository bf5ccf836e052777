"""What each process's ``Accelerator`` sees under ``accelerate launch`` (lesson 07, section 4).

Started by ``gradacc.parallel.runs.run_accelerator_state``::

    accelerate launch --multi_gpu --num_processes 2 ... -m gradacc.workers.accelerate_state --output state [--cpu]

Every process builds ``Accelerator(cpu=...)`` and writes ``<output>.<RANK>.json`` (``RANK`` from the launcher's
environment): ``"rank"`` and ``"world_size"`` (what the launcher set), ``"distributed_type"``, ``"num_processes"`` and
``"process_index"``, ``"is_main_process"`` (what Accelerate made of it) and ``"loader_items"`` (the items this
process gets from ``accelerator.prepare(DataLoader(range(12), batch_size=2))``). On a machine without CUDA, ``--multi_gpu`` without ``--cpu``
leaves accelerate's ``PartialState._prepare_backend`` with no backend: every process gets ``DistributedType.NO`` and
``num_processes == 1``, is its own main process and gets all 12 items: it would train alone on all the data; with
``--cpu`` (or ``ACCELERATE_USE_CPU=1`` in the environment) it is ``MULTI_CPU`` over gloo and the loader is sharded.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.accelerate_state", description=__doc__)
    parser.add_argument("--cpu", action="store_true", help="pass cpu=True to Accelerator")
    parser.add_argument("--output", required=True, type=Path, help="file prefix: each rank writes <output>.<RANK>.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch.distributed as dist
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    accelerator = Accelerator(cpu=args.cpu)
    loader = accelerator.prepare(DataLoader(list(range(12)), batch_size=2))
    rank = int(os.environ.get("RANK", "0"))
    result = {
        "rank": rank,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "distributed_type": str(accelerator.distributed_type),
        "num_processes": accelerator.num_processes,
        "process_index": accelerator.process_index,
        "is_main_process": accelerator.is_main_process,
        "loader_items": [int(item) for batch in loader for item in batch],
    }
    path = args.output.with_name(f"{args.output.name}.{rank}.json")
    path.with_suffix(".partial").write_text(json.dumps(result), encoding="utf-8")
    path.with_suffix(".partial").replace(path)
    if dist.is_initialized():  # Accelerate joins the launcher's group even when it then reports DistributedType.NO
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())  # not sys.exit: gloo's threads can abort a finalizing interpreter (see exit_worker)
