"""PEFT / LoRA under accumulation (lesson 10, section 4): what the frozen base changes in memory, in activation
checkpointing and under DDP.

* ``lora_digits_model``: the digits MLP of lessons 03 and 09 with LoRA adapters (``peft.get_peft_model``) on its
  ``Linear`` layers: only the adapters require grad, so the gradient buffer that accumulation keeps between micro-steps
  and the optimizer state are adapter-sized;
* ``checkpointed_forward``: the same model with every hidden block under ``torch.utils.checkpoint``. With
  ``use_reentrant=True`` a block whose inputs do not require grad gives an output that does not either, so the
  adapters inside it get no gradient (torch warns "None of the inputs have requires_grad=True"); making the first
  block's input require grad is the fix, what ``enable_input_require_grads`` does for a transformers model (PEFT
  and transformers 5 call it for you there: ``transformers_marks_inputs``);
* ``SkipMiddle``: a model whose middle block a micro-step may skip (layer drop), so a TRAINABLE adapter misses the
  loss on that micro-step: the case DDP's ``find_unused_parameters`` exists for. Frozen base weights are not that case.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..foundations.accumulation import Batch, count_items, sum_cross_entropy
from ..foundations.models import make_digits_model

__all__ = [
    "lora_digits_model",
    "trainable_bytes",
    "checkpointed_forward",
    "transformers_marks_inputs",
    "SkipMiddle",
    "ddp_window",
]


def lora_digits_model(
    seed: int = 0, *, hidden: int = 512, depth: int = 4, rank: int = 8, random_adapters: bool = False
) -> Any:
    """``gradacc.foundations.models.make_digits_model(seed, hidden=hidden, depth=depth)`` with LoRA adapters of rank
    ``rank`` on every ``Linear`` (``peft.LoraConfig(target_modules=[...])``). PEFT starts ``lora_B`` at zero, so the
    adapted model computes what the base does and ``lora_A`` gets a zero gradient at first; ``random_adapters`` draws
    both at random (``init_lora_weights=False``), as after some training. The adapters' weights depend only on ``seed``.
    Returns the ``peft.PeftModel``: its base weights are frozen (``requires_grad=False``)."""
    import peft

    base = make_digits_model(seed=seed, hidden=hidden, depth=depth)
    targets = [name for name, module in base.named_modules() if isinstance(module, nn.Linear)]
    config = peft.LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=targets, lora_dropout=0.0, init_lora_weights=not random_adapters
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return peft.get_peft_model(base, config)


def trainable_bytes(model: nn.Module) -> tuple[int, int]:
    """``(bytes of the parameters that require grad, bytes of all parameters)``."""
    params = list(model.parameters())
    return (
        sum(p.numel() * p.element_size() for p in params if p.requires_grad),
        sum(p.numel() * p.element_size() for p in params),
    )


def _mlp(model: nn.Module) -> nn.Sequential:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.net


def checkpointed_forward(
    model: nn.Module, x: torch.Tensor, *, use_reentrant: bool, input_requires_grad: bool = False
) -> torch.Tensor:
    """``model(x)`` for a (LoRA) digits MLP with every hidden ``Linear -> ReLU`` block under
    ``torch.utils.checkpoint.checkpoint(block, h, use_reentrant=use_reentrant)`` and the output layer outside.

    ``input_requires_grad`` marks the first block's input as requiring grad: what transformers'
    ``PreTrainedModel.enable_input_require_grads`` does to the output of a language model's input embeddings (a
    forward hook), the input of its first checkpointed layer."""
    layers = list(_mlp(model))
    h = x.detach().requires_grad_(True) if input_requires_grad else x
    for i in range(0, len(layers) - 1, 2):
        h = checkpoint(nn.Sequential(layers[i], layers[i + 1]), h, use_reentrant=use_reentrant)
    return layers[-1](h)


def transformers_marks_inputs(vocab_size: int = 64) -> bool:
    """Whether transformers itself makes the input embeddings' output require grad when activation checkpointing is
    switched on with ``use_reentrant=True`` (a tiny ``LlamaForCausalLM``; ``activation_checkpointing_enable`` in
    transformers 5.24, ``gradient_checkpointing_enable`` in 5.15): True when it registered the hook of
    ``enable_input_require_grads`` (``model._require_grads_hook``)."""
    from ..frameworks.texttask import tiny_causal_lm

    model = tiny_causal_lm(vocab_size, seed=0)
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": True})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    return getattr(model, "_require_grads_hook", None) is not None


class SkipMiddle(nn.Module):
    """A (LoRA) digits MLP of depth 2 whose second hidden block is skipped while ``skip`` is True (layer drop): its
    adapter then takes no part in the loss of that micro-step."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.skip = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        net = _mlp(self.model)
        h = net[1](net[0](x))
        if not self.skip:
            h = net[3](net[2](h))
        return net[4](h)


def ddp_window(
    ddp: nn.Module, module: SkipMiddle, window: Sequence[Batch], skips: Sequence[bool], *, sync_first: bool = False
) -> None:
    """One accumulation window through a ``DistributedDataParallel``-wrapped ``SkipMiddle``: ``no_sync()`` on every
    micro-step but the last, each summed loss divided by the window's items, ``skips[k]`` setting layer drop for
    micro-step ``k``. ``sync_first`` synchronizes the first micro-step too: what ``static_graph=True`` needs on the
    very first micro-step of training (lesson 11). No optimizer step (the gradients stay in ``.grad``)."""
    items = sum(count_items(b) for b in window)
    for k, (batch, skip) in enumerate(zip(window, skips, strict=True)):
        module.skip = skip
        synced = k == len(window) - 1 or (sync_first and k == 0)
        context = contextlib.nullcontext() if synced else ddp.no_sync()
        with context:
            (sum_cross_entropy(ddp, batch) / items).backward()
