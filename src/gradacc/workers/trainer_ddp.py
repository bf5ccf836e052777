"""Lesson 05's multi-process worker: the Transformers ``Trainer`` accumulating on 2 gloo processes.

Started by torchrun, usually through ``gradacc.frameworks.trainer.run_trainer_ddp``::

    torchrun --nnodes=1 --nproc-per-node=2 ... -m gradacc.workers.trainer_ddp --out result.json

Every rank rebuilds lesson 05's causal-LM data (the first 4 training docstrings of >= 16 tokens, cut to 4, 10, 2 and
16 tokens; the lesson's word-level tokenizer; a 1-layer Llama, float32) and trains it for ONE optimizer step with
``per_device_train_batch_size=1`` and ``gradient_accumulation_steps=2`` (effective batch 1 x 2 x 2 = 4 sequences),
reading the sequences in order, once with ``average_tokens_across_devices=True`` and once with ``False``.
Rank 0 writes JSON: ``{"world_size", "transformers", "predicted_tokens", "settings": {"True" | "False": {"ranks":
[{"label_tokens": [per micro-batch], "num_items_in_batch": [...], "losses": [...]} per rank], "logged_loss",
"grad_diff": max |Trainer's gradient - the 4-sequence batch's gradient x predicted / counted|, "grad_scale"}}}``.
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

__all__ = ["LM_LENGTHS", "lm_sequences", "build_parser", "main"]

LM_LENGTHS = (4, 10, 2, 16)
"""Token lengths of lesson 05's four causal-LM sequences (3, 9, 1 and 15 predicted tokens)."""


def lm_sequences(tokenizer, texts) -> list[list[int]]:
    """Lesson 05's sequences: the first texts of >= 16 tokens, cut to ``LM_LENGTHS`` tokens (lists of token ids)."""
    long_texts = [t for t in texts if len(tokenizer(t)["input_ids"]) >= max(LM_LENGTHS)][: len(LM_LENGTHS)]
    return [
        tokenizer(t, truncation=True, max_length=n)["input_ids"] for t, n in zip(long_texts, LM_LENGTHS, strict=True)
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.trainer_ddp", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON result file written by rank 0")
    return parser


@record
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    import transformers
    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling

    from ..frameworks.trainer import (
        batch_gradients,
        family_split,
        first_step_probe,
        quiet_transformers,
        tiny_causal_lm,
        train_wordlevel_tokenizer,
    )

    quiet_transformers()
    split = family_split(eval_fraction=0.2, seed=0)
    tokenizer = train_wordlevel_tokenizer(split.train_texts, vocab_size=2000)
    sequences = lm_sequences(tokenizer, split.train_texts)
    dataset = Dataset.from_dict({"input_ids": sequences, "attention_mask": [[1] * len(s) for s in sequences]})
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)

    def make_lm():
        return tiny_causal_lm(len(tokenizer), seed=0)

    predicted = sum(len(s) - 1 for s in sequences)  # label tokens a causal LM predicts (not each first token)
    settings: dict[str, Any] = {}
    for average in (True, False):
        run = first_step_probe(
            make_lm,
            dataset,
            1,
            2,
            data_collator=collator,
            keep_tensors=True,
            average_tokens_across_devices=average,
            ddp_backend="gloo",
        )
        mine = {
            "label_tokens": [int((m["inputs"]["labels"][:, 1:] != -100).sum()) for m in run["micro_steps"]],
            "num_items_in_batch": [m["num_items_in_batch"] for m in run["micro_steps"]],
            "losses": [m["loss"] for m in run["micro_steps"]],
        }
        ranks: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, mine)
        step = run["optimizer_steps"][0]
        single = collator([{"input_ids": s, "attention_mask": [1] * len(s)} for s in sequences])
        target = batch_gradients(make_lm, step["weights_before"], single)
        # the target of a correct run: the 4-sequence batch's gradient over the window's count (lesson 05 section 5:
        # the 28 predicted tokens); without averaging each rank counts only its own
        scale = predicted / ranks[0]["num_items_in_batch"][0] if average else 1.0
        settings[str(average)] = {
            "ranks": ranks,
            "logged_loss": run["loss"],
            "grad_diff": max(float((step["grads"][k].cpu() - scale * target[k]).abs().max()) for k in target),
            "grad_scale": max(float(g.abs().max()) for g in target.values()),
        }
    if dist.get_rank() == 0:
        result = {
            "world_size": dist.get_world_size(),
            "transformers": transformers.__version__,
            "predicted_tokens": predicted,
            "settings": settings,
        }
        tmp = args.out.with_suffix(".partial")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from gradacc.foundations.launch import exit_worker

    exit_worker(main())
