"""Run the lesson-04 Accelerate loop as a script, on one process or under ``accelerate launch``.

One process::

    python -m gradacc.workers.accelerate_train --accum-steps 4 --micro-batch-size 32 --output one.json

Two CPU processes (gloo), each its own copy of the model, gradients averaged by DDP at every sync step::

    accelerate launch --multi_gpu --num_processes 2 -m gradacc.workers.accelerate_train --accum-steps 4 --micro-batch-size 16 \
        --expect-processes 2 --output two.json
    # or, equivalently: torchrun --nproc_per_node 2 -m gradacc.workers.accelerate_train --cpu ... (same arguments)

``--multi_gpu`` selects Accelerate's torchrun launcher; on a machine without CUDA the script then passes ``cpu=True``
to ``Accelerator`` itself (Accelerate's gloo "MULTI_CPU" mode needs it). Beware: ``accelerate launch --cpu
--num_processes 2`` (accelerate 1.15) starts ONE process unless an MPI hostfile is given, and launched CPU processes
without ``cpu=True`` each train alone; ``--expect-processes 2`` turns either mistake into exit status 3.

Which runs match one process (measured, float32, 640 samples, N = 4: max |difference| 1.5e-8):

* without ``--split-batches`` each process draws its own ``--micro-batch-size`` samples: 2 processes x 16 match one
  process with ``--micro-batch-size 32`` (global micro-batch = micro_batch_size x processes; effective batch =
  micro_batch_size x accum_steps x processes = 128);
* with ``--split-batches`` each loader batch is split between the processes: 2 processes with
  ``--micro-batch-size 32 --split-batches`` match one process with ``--micro-batch-size 32``.

Keep ``--n-samples`` a multiple of the global micro-batch so no process is padded with repeated samples.

Arguments (all optional except ``--output``):
    --accum-steps N         micro-batches per optimizer step (default 4)
    --micro-batch-size B    samples per loader batch (default 16)
    --n-samples S           digits used, the first S of 1,797 (default 640)
    --epochs E              passes over the data (default 1)
    --lr LR                 SGD learning rate (default 0.1)
    --seed SEED             initial weights and shuffling (default 0)
    --dtype {float32,float64}
    --max-norm C            clip the accumulated gradient at sync steps
    --normalize {mean,items}  see gradacc.frameworks.accelerate.NORMALIZATIONS ("items": one process only)
    --no-sync-with-dataloader  GradientAccumulationPlugin(sync_with_dataloader=False)
    --split-batches         split each loader batch across processes (see above)
    --cpu                   force the CPU (implied when WORLD_SIZE > 1 and CUDA is absent)
    --expect-processes K    exit with status 3 unless Accelerate sees K processes
    --output PATH           JSON file written by rank 0 only (see ``write_result``)

The JSON holds ``"args"``, ``"num_processes"``, ``"effective_batch_size"``, ``"optimizer_steps"``, ``"history"``
(rank 0's per-micro-step records, see ``gradacc.frameworks.accelerate.AccelerateRun``) and ``"weights"`` (name -> nested
lists of the final parameters; float32 values survive the JSON round trip exactly). ``read_result(path)`` turns the
weights back into tensors; with several processes, ``"unequal_items"``: ``gradacc.frameworks.accelerate.unequal_items_window``
run after the training (a window with unequal items on the processes, weighted with and without
``accelerator.num_processes``). Exit status 0 on success.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from ..frameworks.accelerate import (
    NORMALIZATIONS,
    WEIGHT_DTYPES,
    train_with_accelerate,
    unequal_items_window,
    write_result,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gradacc.workers.accelerate_train",
        description="Train the digits MLP with Accelerate's gradient accumulation (lesson 04's loop); "
        "works under `accelerate launch`.",
    )
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-batches per optimizer step (N)")
    parser.add_argument("--micro-batch-size", type=int, default=16, help="samples per loader batch")
    parser.add_argument("--n-samples", type=int, default=640, help="digits used (first S of 1,797)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=sorted(WEIGHT_DTYPES), default="float32")
    parser.add_argument("--max-norm", type=float, default=None, help="clip the accumulated gradient at sync steps")
    parser.add_argument("--normalize", choices=NORMALIZATIONS, default="mean")
    parser.add_argument("--no-sync-with-dataloader", action="store_true", help="let windows cross epoch boundaries")
    parser.add_argument("--split-batches", action="store_true", help="split each loader batch across processes")
    parser.add_argument(
        "--cpu", action="store_true", help="force the CPU (implied when launched with WORLD_SIZE > 1 and no CUDA)"
    )
    parser.add_argument(
        "--expect-processes",
        type=int,
        default=None,
        help="exit with status 3 unless Accelerate sees exactly this many processes",
    )
    parser.add_argument("--output", required=True, type=Path, help="JSON result file (written by rank 0)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    # Accelerate picks its gloo MULTI_CPU mode only when told to use the CPU; without it, launched CPU processes each
    # think they are alone (DistributedType.NO) and silently train separate models.
    cpu = args.cpu or (world_size > 1 and not torch.cuda.is_available())
    run = train_with_accelerate(
        args.accum_steps,
        micro_batch_size=args.micro_batch_size,
        n_samples=args.n_samples,
        epochs=args.epochs,
        lr=args.lr,
        seed=args.seed,
        dtype=WEIGHT_DTYPES[args.dtype],
        max_norm=args.max_norm,
        normalize=args.normalize,
        sync_with_dataloader=not args.no_sync_with_dataloader,
        split_batches=args.split_batches,
        cpu=cpu,
        reset_state=False,  # a fresh process: nothing to reset, and the launcher's state must stay
    )
    from accelerate import PartialState

    state = PartialState()
    unequal = unequal_items_window(cpu=cpu) if run.num_processes > 1 else None
    if args.expect_processes is not None and run.num_processes != args.expect_processes:
        print(
            f"error: expected {args.expect_processes} processes, Accelerate sees {run.num_processes} "
            f"(distributed type {state.distributed_type}); see `python -m gradacc.workers.accelerate_train --help`",
            file=sys.stderr,
        )
        return 3
    if state.is_main_process:
        arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        write_result(args.output, run, arguments, {"unequal_items": unequal})
        print(
            f"wrote {args.output}: {run.num_processes} process(es), {run.optimizer_steps} optimizer steps, "
            f"effective batch {run.effective_batch_size} samples"
        )
    state.wait_for_everyone()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())  # not sys.exit: gloo's threads can abort a finalizing interpreter (see exit_worker)
