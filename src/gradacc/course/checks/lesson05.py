"""Checks of lesson 05 (``05_trainer``): a ``compute_loss_func`` for a causal LM, and a Trainer fixed for BERT."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable

import torch

from ...i18n import _
from . import close, run_check

__all__ = ["check_causal_lm_loss", "check_fixed_trainer", "reference_causal_lm_loss"]


def reference_causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """transformers' own causal-LM loss (``ForCausalLMLoss``): shift by one, sum over labels != -100, divide by
    ``num_items_in_batch`` (or by this batch's count of shifted labels when it is ``None``)."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1], num_items_in_batch=num_items_in_batch)


def _loss_cases():
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 7, 11, generator=generator)
    labels = torch.randint(0, 11, (3, 7), generator=generator)
    labels[0, 5:] = -100  # padding at the end of row 0
    labels[2, 2:] = -100  # row 2: 2 tokens, 1 predicted
    # predicted tokens: labels[..., 1:] != -100 -> 4 + 6 + 1 = 11; labels != -100 would count 14
    return logits, labels, (None, 11, 40, torch.tensor(40))


@functools.lru_cache(maxsize=1)
def _lm_setup():
    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling

    from ...frameworks.trainer import family_split, train_wordlevel_tokenizer

    split = family_split(seed=1)
    tokenizer = train_wordlevel_tokenizer(split.train_texts[:200], vocab_size=300)
    texts = [t for t in split.train_texts if len(tokenizer(t)["input_ids"]) >= 12][:3]
    sequences = [
        tokenizer(t, truncation=True, max_length=n)["input_ids"] for t, n in zip(texts, (12, 3, 7), strict=True)
    ]
    dataset = Dataset.from_dict({"input_ids": sequences, "attention_mask": [[1] * len(s) for s in sequences]})
    return tokenizer, dataset, DataCollatorForLanguageModeling(tokenizer, mlm=False), sequences


def _trainer_gradient_gap(compute_loss_func: Callable) -> float:
    """Max |Trainer's accumulated gradient (N=3, one sequence per micro-batch) - the single batch's sum of token
    losses divided by the ``num_items_in_batch`` Trainer passed|. transformers 5 passes the 19 predicted tokens, so the
    target is the single batch's mean-loss gradient."""
    from ...frameworks.trainer import batch_gradients, first_step_probe, tiny_causal_lm

    tokenizer, dataset, collator, sequences = _lm_setup()

    def make_lm():
        return tiny_causal_lm(len(tokenizer), seed=2, hidden_size=16)

    run = first_step_probe(
        make_lm,
        dataset,
        1,
        3,
        data_collator=collator,
        compute_loss_func=compute_loss_func,
        keep_tensors=True,
        use_cpu=True,
        dataloader_pin_memory=False,
    )
    step = run["optimizer_steps"][0]
    batch = collator([{"input_ids": s, "attention_mask": [1] * len(s)} for s in sequences])
    predicted = int((batch["labels"][:, 1:] != -100).sum())
    scale = predicted / run["micro_steps"][0]["num_items_in_batch"]
    target = batch_gradients(make_lm, step["weights_before"], batch)
    return max(float((step["grads"][k].cpu() - scale * target[k]).abs().max()) for k in target)


def check_causal_lm_loss(causal_lm_loss: Callable) -> None:
    """Exercise 5.1: ``causal_lm_loss(outputs, labels, num_items_in_batch=None)``, a Trainer ``compute_loss_func``.

    First on the check's own logits ``[3, 7, 11]`` and labels with -100 padding, for ``num_items_in_batch`` None, 11,
    40 and a 0-d tensor 40, against transformers' ``ForCausalLMLoss`` (tolerance 1e-5); then as the
    ``compute_loss_func`` of a ``Trainer`` on three real sequences of 11, 2 and 6 predicted tokens with N = 3: the
    accumulated gradient must equal the single batch's sum of token losses divided by the ``num_items_in_batch`` that
    Trainer passed (max |difference| <= 1e-6, float32): on transformers 5 the single batch's mean-loss gradient.
    Prints one line.
    """

    def body(causal_lm_loss=causal_lm_loss) -> str | None:
        logits, labels, counts = _loss_cases()
        for count in counts:
            shown = f"tensor({int(count)})" if torch.is_tensor(count) else count
            got = causal_lm_loss({"logits": logits.clone()}, labels.clone(), num_items_in_batch=count)
            want = reference_causal_lm_loss(logits, labels, count)
            if not torch.is_tensor(got) or got.dim() != 0:
                return _("causal_lm_loss should return a 0-d tensor (a scalar loss), got {got}").format(got=repr(got))
            name = _("the loss with num_items_in_batch={count}").format(count=shown)
            problem = close(name, got, float(want), 1e-5)
            if problem:
                return problem
        gap = _trainer_gradient_gap(causal_lm_loss)
        if not gap <= 1e-6:
            return _(
                "as a Trainer compute_loss_func (N=3) the gradient differs from the single batch's (summed token "
                "losses / num_items_in_batch) by {gap}"
            ).format(gap=f"{gap:.2e}")
        return None

    run_check("5.1", body)


@functools.lru_cache(maxsize=1)
def _classifier_setup():
    from transformers import DataCollatorWithPadding

    from ...frameworks.trainer import encode_dataset, family_split, train_wordlevel_tokenizer

    split = family_split(seed=2)
    tokenizer = train_wordlevel_tokenizer(split.train_texts, vocab_size=500)
    dataset = encode_dataset(tokenizer, split.train_texts[:48], split.train_labels[:48], max_length=32)
    return tokenizer, dataset, DataCollatorWithPadding(tokenizer)


def _weights_after_one_step(make_trainer: Callable | None, micro_batch_size: int, accum_steps: int, seed: int):
    from ...frameworks.trainer import ProbeTrainer, probe_args, takes_loss_kwargs, tiny_bert_classifier

    tokenizer, dataset, collator = _classifier_setup()
    # forward takes **kwargs (as transformers 5's BERT does): a plain Trainer is N times off
    model = takes_loss_kwargs(tiny_bert_classifier(len(tokenizer), 4, seed=seed, hidden_size=32, num_layers=1))
    with tempfile.TemporaryDirectory(prefix="gradacc-check-") as tmp:
        args = probe_args(tmp, micro_batch_size, accum_steps, use_cpu=True, dataloader_pin_memory=False)
        if make_trainer is None:
            trainer = ProbeTrainer(model=model, args=args, train_dataset=dataset, data_collator=collator)
        else:
            trainer = make_trainer(model, args, dataset, collator)
            from transformers import Trainer
            from transformers.trainer_callback import PrinterCallback

            if not isinstance(trainer, Trainer):
                raise TypeError(
                    _("make_fixed_trainer must return a transformers.Trainer, got {got}").format(
                        got=type(trainer).__name__
                    )
                )
            trainer.remove_callback(PrinterCallback)
        if trainer.args.gradient_accumulation_steps != accum_steps:
            raise ValueError(
                _("keep args.gradient_accumulation_steps = {want}, got {got}").format(
                    want=accum_steps, got=trainer.args.gradient_accumulation_steps
                )
            )
        trainer.train()
    return {k: v.detach().cpu().clone() for k, v in trainer.model.named_parameters()}


def check_fixed_trainer(make_fixed_trainer: Callable) -> None:
    """Exercise 5.2: ``make_fixed_trainer(model, args, train_dataset, data_collator) -> Trainer``.

    The check builds its own 1-layer BERT classifiers (hidden size 32, two seeds), a docstring dataset and
    ``TrainingArguments`` (SGD, lr 0.1, no clipping, one optimizer step, samples in order) with micro-batches of 6 x
    N=4 and 8 x N=3; the learner's Trainer must make the same step as a plain Trainer on one batch of 24
    (update ratio within 1e-4 of 1, max |weight difference| <= 1e-6). Prints one line.
    """

    def body(make_fixed_trainer=make_fixed_trainer) -> str | None:
        from ...frameworks.trainer import tiny_bert_classifier, update_ratio

        tokenizer = _classifier_setup()[0]
        for micro, accum, seed in ((6, 4, 3), (8, 3, 4)):
            start = {
                k: v.detach().clone()
                for k, v in tiny_bert_classifier(
                    len(tokenizer), 4, seed=seed, hidden_size=32, num_layers=1
                ).named_parameters()
            }
            one_batch = _weights_after_one_step(None, micro * accum, 1, seed)
            got = _weights_after_one_step(make_fixed_trainer, micro, accum, seed)
            ratio = update_ratio(got, one_batch, start)
            diff = max(float((got[k] - one_batch[k]).abs().max()) for k in got)
            if not (abs(ratio - 1) <= 1e-4 and diff <= 1e-6):
                return _(
                    "with micro-batches of {micro} and N={accum} your Trainer's update is {ratio}x the one-batch "
                    "update (max |weight difference| {diff})"
                ).format(micro=micro, accum=accum, ratio=f"{ratio:.3f}", diff=f"{diff:.2e}")
        return None

    run_check("5.2", body)
