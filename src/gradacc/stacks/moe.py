"""An auxiliary loss under accumulation: a Mixture-of-Experts load-balancing loss (lesson 10, section 2).

A Mixture-of-Experts (MoE) layer sends every token to ``top_k`` of its experts; its **load-balancing loss** (Switch
Transformer, arXiv:2101.03961, eqs. 4-6; ``load_balancing_loss_func`` in transformers) is one number per forward pass,
computed from the routing of that pass's tokens, and the model adds it to the token loss with a small coefficient
(``router_aux_loss_coef``). Under accumulation the two terms must be scaled alike:

* the token loss of a micro-batch is its summed token NLL over the WINDOW's tokens (``num_items_in_batch``);
* the auxiliary loss is a per-micro-batch mean already, so each micro-batch's must be divided by the window's number
  of micro-batches: TRL's ``SFTTrainer`` does exactly that (``trl/trainer/sft_trainer.py:1625-1629``, trl 1.16.0:
  ``loss + weighted_aux_loss / steps`` with ``steps = current_gradient_accumulation_steps``);
* transformers' own ``MixtralForCausalLM`` adds ``router_aux_loss_coef x aux_loss`` to the loss it returns
  (``models/mixtral/modeling_mixtral.py:626-633``, transformers 5.24; 651-658 in 5.15) and ``Trainer``, which passes
  ``num_items_in_batch`` to a model that accepts loss kwargs, does not divide the result by the micro-batches
  (``trainer.py:2110-2119``; 1952-1954 in 5.15): the auxiliary term then weighs N times too much, while the logged
  loss hardly changes.

``tiny_moe_lm`` builds the small random MoE model, ``run_trainer`` runs a plain ``transformers.Trainer`` on it, and
``window_objective`` computes the window's objective and its gradient in one graph (at N = 1 it is the model's own
loss).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["tiny_moe_lm", "TrainerRun", "run_trainer", "WindowObjective", "window_objective"]


def tiny_moe_lm(
    vocab_size: int,
    *,
    seed: int = 0,
    hidden_size: int = 32,
    num_experts: int = 4,
    top_k: int = 2,
    router_aux_loss_coef: float = 0.02,
):
    """A small ``MixtralForCausalLM`` (one decoder layer, ``num_experts`` experts, ``top_k`` per token; random
    weights from ``seed``; no download) that returns its load-balancing loss (``output_router_logits=True``) and adds
    ``router_aux_loss_coef`` times it to its token loss when given labels. The word-level tokenizer's ids as in
    ``gradacc.texttask.tiny_causal_lm``: 0 pads, 2 and 3 begin and end."""
    from transformers import AutoModelForCausalLM, MixtralConfig

    config = MixtralConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_local_experts=num_experts,
        num_experts_per_tok=top_k,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        tie_word_embeddings=False,
        output_router_logits=True,
        router_aux_loss_coef=router_aux_loss_coef,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config)


@dataclass
class TrainerRun:
    """One optimizer step of a plain ``transformers.Trainer``: the ``num_items_in_batch`` each micro-step got, the
    accumulated gradient just before ``optimizer.step()``, and the training loss ``Trainer`` reports (the sum of its
    micro-steps' losses, float)."""

    num_items: list[int | None] = field(default_factory=list)
    grads: list[torch.Tensor] = field(default_factory=list)
    training_loss: float = 0.0


def run_trainer(
    model: torch.nn.Module, examples: Sequence[dict], *, accum_steps: int, micro_batch_size: int
) -> TrainerRun:
    """One optimizer step of ``transformers.Trainer`` with the model's own loss, on ``examples`` in order
    (``gradacc.stacks.sft.sft_examples``: completion-only labels), each micro-batch one padding-free row made by
    transformers' ``DataCollatorWithFlattening`` (the rows of TRL's collator, lesson 10 section 2); float32, no
    clipping, on the CPU, silently.

    Raises:
        ValueError: the examples do not fill exactly one window of ``accum_steps`` micro-batches.
    """
    if len(examples) != accum_steps * micro_batch_size:
        raise ValueError(f"give exactly one window: {accum_steps} x {micro_batch_size} examples, got {len(examples)}")
    from datasets import Dataset
    from torch.utils.data import SequentialSampler
    from transformers import DataCollatorWithFlattening, Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from ..texttask import quiet_transformers
    from .sft import _with_labels

    quiet_transformers()
    run = TrainerRun()

    class Recorder(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            run.grads = [p.grad.detach().clone() for p in model.parameters()]

    class RecordingTrainer(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            run.num_items.append(None if num_items_in_batch is None else int(num_items_in_batch))
            return super().training_step(model, inputs, num_items_in_batch)

    with tempfile.TemporaryDirectory(prefix="gradacc-moe-") as out:
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=micro_batch_size,
            gradient_accumulation_steps=accum_steps,
            max_steps=1,
            max_grad_norm=0.0,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            use_cpu=True,
            seed=0,
        )
        trainer = RecordingTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(_with_labels(examples)),
            data_collator=DataCollatorWithFlattening(return_position_ids=True),
            callbacks=[Recorder()],
        )
        trainer.remove_callback(PrinterCallback)
        trainer._get_train_sampler = lambda *args, **kwargs: SequentialSampler(trainer.train_dataset)  # in order
        run.training_loss = float(trainer.train().training_loss)
    return run


@dataclass
class WindowObjective:
    """The window's objective, ``sum_k NLL_k / W + coef x mean_k aux_k`` (``W`` the window's label tokens,
    ``aux_k`` micro-batch k's load-balancing loss), its value and gradient, and the gradient of its auxiliary part
    ``coef x mean_k aux_k`` alone (in the order of ``names``, the model's parameter names); ``aux`` lists the
    ``aux_k`` (floats)."""

    names: list[str]
    value: float
    grads: list[torch.Tensor]
    aux_grads: list[torch.Tensor]
    aux: list[float]


def window_objective(model: torch.nn.Module, micro_batches: Sequence[dict[str, Any]]) -> WindowObjective:
    """Compute the window's objective in one autograd graph: each micro-batch (a padding-free row: ``input_ids``,
    ``labels``, ``position_ids``) through the model once, its summed token NLL divided by the window's label
    tokens, plus ``router_aux_loss_coef`` times the mean of the micro-batches' load-balancing losses."""
    coef = model.config.router_aux_loss_coef
    tokens = sum(int((b["labels"][..., 1:] != -100).sum()) for b in micro_batches)
    nll, aux = [], []
    for batch in micro_batches:
        out = model(**{k: batch[k] for k in ("input_ids", "labels", "position_ids")}, use_cache=False,
                    num_items_in_batch=tokens)  # fmt: skip
        nll.append(out.loss - coef * out.aux_loss)  # the model's loss is NLL_k / tokens + coef x aux_k
        aux.append(out.aux_loss)
    aux_part = coef * torch.stack(aux).mean()
    objective = torch.stack(nll).sum() + aux_part
    params = list(model.parameters())
    grads = torch.autograd.grad(objective, params, retain_graph=True)
    aux_grads = torch.autograd.grad(aux_part, params, allow_unused=True)
    return WindowObjective(
        names=[name for name, _ in model.named_parameters()],
        value=objective.item(),
        grads=[g.detach() for g in grads],
        aux_grads=[torch.zeros_like(p) if g is None else g.detach() for g, p in zip(aux_grads, params, strict=True)],
        aux=[a.item() for a in aux],
    )
