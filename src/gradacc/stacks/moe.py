"""An auxiliary loss under accumulation: a Mixture-of-Experts load-balancing loss (lesson 10, section 2).

A Mixture-of-Experts (MoE) layer sends every token to ``top_k`` of its experts; its **load-balancing loss** (Switch
Transformer, arXiv:2101.03961, eqs. 4-6; ``load_balancing_loss_func`` in transformers) is one number per forward pass,
computed from the routing of that pass's tokens, and the model adds it to the token loss with a small coefficient
(``router_aux_loss_coef``). Under accumulation the two terms must be scaled alike:

* the token loss of a micro-batch is its summed token NLL over the WINDOW's tokens (``num_items_in_batch``);
* the auxiliary loss is a per-micro-batch mean already, so each micro-batch's must be divided by the window's number
  of micro-batches: TRL's ``SFTTrainer`` does exactly that (``trl/trainer/sft_trainer.py:1623-1629``, trl 1.16.0:
  the token loss times the data-parallel processes, then ``loss + weighted_aux_loss / steps`` with ``steps =
  current_gradient_accumulation_steps``), right on any number of processes;
* transformers' own ``MixtralForCausalLM`` adds ``router_aux_loss_coef x aux_loss`` to the loss it returns, but only
  with ``output_router_logits=True`` (``models/mixtral/modeling_mixtral.py:600-602`` and ``625-633``, transformers
  5.24; the config's default is False, ``configuration_mixtral.py:86``); ``Trainer``, which passes
  ``num_items_in_batch`` to a model that accepts loss kwargs, does not divide the result by the micro-batches
  (``trainer.py:2110-2119``; 1952-1954 in 5.15) and multiplies it, auxiliary term included, by the data-parallel
  processes, ``world_size = num_processes // tp_size`` (``average_tokens_across_devices``, True by default:
  ``trainer.py:2207-2215``; 2040-2050 in 5.15): after DDP's average over the ranks the auxiliary term weighs
  N x world_size times too much, while the logged loss hardly changes. The fix with a plain ``Trainer``:
  ``router_aux_loss_coef / (N x world_size)``.

Even scaled right, a load-balancing loss per micro-batch depends on the micro-batch size: it multiplies each
expert's share of the tokens by its mean router probability, both over ONE forward pass, so the mean of the
micro-batches' losses is not the loss of the window's tokens taken together. **Global-batch balancing**
(arXiv:2501.11873) counts the experts over the whole window (and over the data-parallel ranks) instead;
``window_objective(..., balance="window")`` computes that objective.

``tiny_moe_lm`` builds the small random MoE model, ``run_trainer`` runs a plain ``transformers.Trainer`` on it (on
one process, or on each rank of a ``torchrun`` launch: ``run_trainer_on_ranks`` and ``gradacc.workers.moe_trainer``),
and ``window_objective`` computes the window's objective and its gradient in one graph.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .sft import _with_labels, check_window

__all__ = [
    "BALANCES",
    "tiny_moe_lm",
    "TrainerRun",
    "run_trainer",
    "run_trainer_on_ranks",
    "WindowObjective",
    "window_objective",
]

BALANCES = ("micro-batch", "window")
"""Where ``window_objective`` computes the load-balancing loss: per micro-batch (the mean of the micro-batches' losses,
what TRL computes) or over the window's tokens taken together (global-batch balancing)."""


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
    weights from ``seed``; no download) that returns its load-balancing loss (``output_router_logits=True``; the
    config's default, False, returns none and adds none) and adds ``router_aux_loss_coef`` times it to its token loss
    when given labels. The word-level tokenizer's ids as in
    ``gradacc.frameworks.texttask.tiny_causal_lm``: 0 pads, 2 and 3 begin and end."""
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
    clipping, on the CPU, silently. On each rank of a ``torchrun`` launch (``WORLD_SIZE`` ranks, gloo) every rank
    passes the same ``examples``, the window of all ranks: accelerate deals its micro-batches out in turn (rank r gets
    micro-batches r, r + world_size, ...: ``BatchSamplerShard``), and ``grads`` are DDP's average over the ranks.

    Raises:
        ValueError: the examples do not fill exactly one window of ``accum_steps`` micro-batches on every rank.
    """
    world_size = check_window(examples, accum_steps, micro_batch_size)
    from datasets import Dataset
    from torch.utils.data import SequentialSampler
    from transformers import DataCollatorWithFlattening, Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from ..frameworks.texttask import quiet_transformers

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
            ddp_backend="gloo" if world_size > 1 else None,
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


def run_trainer_on_ranks(*, world_size: int = 2, timeout: float = 300.0) -> dict[str, Any]:
    """Launch ``gradacc.workers.moe_trainer`` on ``world_size`` gloo processes with torchrun: one optimizer step of a
    plain ``Trainer`` with ``router_aux_loss_coef`` = coef, coef / N and coef / (N x world_size), and of
    ``SFTTrainer`` with coef, each against the window's objective over all ranks' micro-batches.

    Returns:
        Rank 0's JSON (see ``gradacc.workers.moe_trainer``: per run the largest gradient difference from the
        objective, and how many extra times its auxiliary part the gradient holds) plus ``"launcher_s"``.

    Raises:
        ValueError: ``world_size < 1``.
        WorkerError: a worker failed or the run timed out.
    """
    from ..foundations.launch import run_torchrun_json
    from ..i18n import _

    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return run_torchrun_json(
        "gradacc.workers.moe_trainer",
        [],
        nproc_per_node=world_size,
        what=(
            _("torchrun ({world_size} Trainer workers)") if world_size > 1 else _("torchrun (1 Trainer worker)")
        ).format(world_size=world_size),
        timeout=timeout,
    )


@dataclass
class WindowObjective:
    """The window's objective, ``sum_k NLL_k / T + coef x aux`` (``T`` the window's label tokens, ``NLL_k``
    micro-batch k's summed token loss, ``aux`` the load-balancing loss of the objective's ``balance``: the mean of the
    micro-batches' ``aux_k``, or the loss of the window's tokens taken together), its value and gradient, and the
    gradient of its auxiliary part ``coef x aux`` alone (in the order of ``names``, the model's parameter names);
    ``aux`` lists the ``aux_k`` (floats), ``aux_loss`` is the ``aux`` of the objective (float)."""

    names: list[str]
    value: float
    grads: list[torch.Tensor]
    aux_grads: list[torch.Tensor]
    aux: list[float]
    aux_loss: float


def window_objective(
    model: torch.nn.Module, micro_batches: Sequence[dict[str, Any]], *, balance: str = "micro-batch"
) -> WindowObjective:
    """Compute the window's objective in one autograd graph: each micro-batch (a padding-free row: ``input_ids``,
    ``labels``, ``position_ids``; no padding) through the model once, its summed token NLL divided by the window's
    label tokens, plus ``router_aux_loss_coef`` times the load-balancing loss of ``balance`` (``BALANCES``):

    * ``"micro-batch"``: the mean of the micro-batches' own losses (``aux_k``), what TRL's ``SFTTrainer`` computes; at
      N = 1 it is the model's own loss;
    * ``"window"``: transformers' ``load_balancing_loss_func`` on the router logits of all the window's micro-batches
      taken together: the expert counts and router probabilities over the window's tokens (global-batch balancing,
      arXiv:2501.11873), the same at every N. A training loop cannot know the later micro-batches' routing when it
      runs the first backward pass: this is the objective such a loop approximates, computed with every micro-batch's
      activations alive.

    Raises:
        ValueError: ``balance`` is not one of ``BALANCES``.
    """
    if balance not in BALANCES:
        raise ValueError(f"balance must be one of {BALANCES}, got {balance!r}")
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    coef = model.config.router_aux_loss_coef
    tokens = sum(int((b["labels"][..., 1:] != -100).sum()) for b in micro_batches)
    nll, aux, router_logits = [], [], []
    for batch in micro_batches:
        out = model(**{k: batch[k] for k in ("input_ids", "labels", "position_ids")}, use_cache=False,
                    num_items_in_batch=tokens)  # fmt: skip
        nll.append(out.loss - coef * out.aux_loss)  # the model's loss is NLL_k / tokens + coef x aux_k
        aux.append(out.aux_loss)
        router_logits.extend(out.router_logits)  # one [tokens, experts] tensor per MoE layer
    if balance == "micro-batch":
        aux_loss = torch.stack(aux).mean()
    else:
        experts, top_k = model.config.num_local_experts, model.config.num_experts_per_tok
        aux_loss = load_balancing_loss_func((torch.cat(router_logits),), experts, top_k)
    aux_part = coef * aux_loss
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
        aux_loss=aux_loss.item(),
    )
