"""Lesson 10's Mixture-of-Experts worker: a plain ``Trainer`` and TRL's ``SFTTrainer`` accumulating an auxiliary
loss on gloo ranks.

Started by torchrun, usually through ``gradacc.stacks.moe.run_trainer_on_ranks``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.moe_trainer --out result.json

Every rank builds lesson 10's tiny Mixture-of-Experts model (``gradacc.stacks.moe.tiny_moe_lm``, seed 0, coefficient
``COEF``) and runs ONE optimizer step of ``ACCUM_STEPS`` micro-batches of ``MICRO_BATCH_SIZE`` sequences on its share
of a window of ``ACCUM_STEPS x MICRO_BATCH_SIZE x world_size`` sequences (lesson 10's four examples for rank 0's
share, the same four reversed for the next: the ranks hold different micro-batches), once for each run of ``RUNS``:
``Trainer`` with the model's own loss and ``router_aux_loss_coef`` set to ``COEF``, ``COEF / N`` and ``COEF / (N x
world_size)``, and ``SFTTrainer`` with ``COEF``. Rank 0 computes the window's objective over all ``N x world_size``
micro-batches in one process (``gradacc.stacks.moe.window_objective``) and writes JSON: ``{"world_size",
"accum_steps", "runs": {run: {"coefficient", "num_items": [per micro-step], "objective_gap": max |g - objective|,
"aux_times": the k of 0..N x world_size whose objective + k x its auxiliary part is nearest to g, "aux_times_gap":
that max |g - (objective + k x auxiliary part)|}}}`` (the gradient ``g`` is DDP's average, read before the optimizer
step).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

__all__ = ["ACCUM_STEPS", "MICRO_BATCH_SIZE", "COEF", "RUNS", "build_parser", "main"]

ACCUM_STEPS = 2
MICRO_BATCH_SIZE = 2
COEF = 0.02
RUNS = ("Trainer, coef", "Trainer, coef / N", "Trainer, coef / (N x world_size)", "SFTTrainer, coef")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.moe_trainer", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON result file written by rank 0")
    return parser


@record
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    from ..foundations.accumulation import max_abs_diff
    from ..stacks import moe, sft

    world = int(os.environ.get("WORLD_SIZE", "1"))
    tokenizer = sft.sft_tokenizer()
    examples = sft.sft_examples(tokenizer)
    window = [e for r in range(world) for e in (examples if r % 2 == 0 else examples[::-1])]
    vocab, n = tokenizer.vocab_size, ACCUM_STEPS
    coefficients = dict(zip(RUNS, (COEF, COEF / n, COEF / (n * world), COEF), strict=True))
    results: dict[str, Any] = {}
    for name, coefficient in coefficients.items():
        model = moe.tiny_moe_lm(vocab, seed=0, router_aux_loss_coef=coefficient)
        if name.startswith("SFTTrainer"):
            run = sft.run_sft(model, tokenizer, window, accum_steps=n, micro_batch_size=MICRO_BATCH_SIZE)
        else:
            run = moe.run_trainer(model, window, accum_steps=n, micro_batch_size=MICRO_BATCH_SIZE)
        results[name] = {"coefficient": coefficient, "num_items": run.num_items, "grads": run.grads}
    if not dist.is_initialized() or dist.get_rank() == 0:  # Trainer starts the process group on 2 or more ranks
        rows = [window[k : k + MICRO_BATCH_SIZE] for k in range(0, len(window), MICRO_BATCH_SIZE)]
        objective = moe.window_objective(moe.tiny_moe_lm(vocab, seed=0), [sft.padding_free_batch(r) for r in rows])
        for run in results.values():
            grads = run.pop("grads")
            gaps = [
                max_abs_diff(grads, [g + k * a for g, a in zip(objective.grads, objective.aux_grads, strict=True)])
                for k in range(n * world + 1)
            ]
            run.update(objective_gap=gaps[0], aux_times=gaps.index(min(gaps)), aux_times_gap=min(gaps))
        result = {"world_size": world, "accum_steps": n, "runs": results}
        tmp = args.out.with_suffix(".partial")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())  # not sys.exit: gloo's threads can abort a finalizing interpreter (see exit_worker)
