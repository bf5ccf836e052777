"""Hidden checks of exercises/05_trainer.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import tempfile

import torch
from transformers import DataCollatorWithPadding
from transformers.trainer_callback import PrinterCallback

from gradacc.frameworks.trainer import (
    encode_dataset,
    family_split,
    probe_args,
    takes_loss_kwargs,
    tiny_bert_classifier,
    train_wordlevel_tokenizer,
)


def draw_5_2(rng) -> dict:
    """One optimizer step (``probe_args``: max_steps 1) of N >= 2 micro-batches on a drawn docstring split."""
    micro_batch_size, accum_steps = rng.choice([4, 6, 8]), rng.randint(2, 4)
    return {
        "micro_batch_size": micro_batch_size,
        "accum_steps": accum_steps,
        "split_seed": rng.randint(0, 99),
        "samples": micro_batch_size * accum_steps * rng.randint(1, 2)
        + rng.randint(1, micro_batch_size * (accum_steps - 1)),
        "model_seed": rng.randrange(2**31),
    }


def edges_5_2(case: dict) -> dict[str, bool]:
    return {  # every corpus mistake is N times off, or 1/N: a plain Trainer, a per-micro-batch mean, dividing twice
        "N >= 2 in the step taken": case["accum_steps"] >= 2
        and case["samples"] >= case["micro_batch_size"] * case["accum_steps"],
    }


EDGE_CASES = {"5.2": (draw_5_2, edges_5_2)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 5.1 is replayed in full (it is cheap)."""


# %% hidden 5.1
for case in range(3):  # every seed: no count (case 0), a window's count larger than this micro-batch's (case 1)
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    rows, width, vocab = rng.randint(1, 4), rng.randint(3, 9), rng.randint(3, 20)
    logits = torch.randn(rows, width, vocab, generator=generator)
    labels = torch.randint(0, vocab, (rows, width), generator=generator)
    for row in range(rows):
        labels[row, rng.randint(2, width - 1) :] = -100  # padding after at least 2 real tokens, in every row
    own = int((labels[:, 1:] != -100).sum())
    count = [None, own + rng.randint(1, 30), rng.choice([None, own + rng.randint(0, 30)])][case]
    loss = quietly(causal_lm_loss, {"logits": logits}, labels, num_items_in_batch=count)
    print(f"case {case}: logits {tuple(logits.shape)}, num_items_in_batch={count}: loss {float(loss):.5f}")

# %% hidden 5.2
case = draw_5_2(rng)
micro_batch_size, accum_steps, samples = case["micro_batch_size"], case["accum_steps"], case["samples"]
split = family_split(seed=case["split_seed"])
tokenizer = train_wordlevel_tokenizer(split.train_texts, vocab_size=400)
dataset = encode_dataset(tokenizer, split.train_texts[:samples], split.train_labels[:samples], max_length=24)
model = tiny_bert_classifier(len(tokenizer), 4, seed=case["model_seed"], hidden_size=16, num_layers=1)
takes_loss_kwargs(model)  # as transformers 5's BERT: a plain Trainer is N times off
before = [p.detach().clone().double() for p in model.parameters()]
with tempfile.TemporaryDirectory() as tmp:
    args = probe_args(tmp, micro_batch_size, accum_steps, use_cpu=True, dataloader_pin_memory=False)
    trainer = quietly(make_fixed_trainer, model, args, dataset, DataCollatorWithPadding(tokenizer))
    trainer.remove_callback(PrinterCallback)
    quietly(trainer.train)
after = [p.detach().cpu().double() for p in trainer.model.parameters()]
update = sum(float((a - b).pow(2).sum()) for a, b in zip(after, before, strict=True)) ** 0.5
print(f"B={micro_batch_size} N={accum_steps}: update norm {update:.5f}, classifier sum {float(after[-2].sum()):.4f}")
