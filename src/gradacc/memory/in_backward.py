"""The memory of an optimizer run inside ``backward()`` against accumulation (lesson 12, section 2).

In-backward stepping (``register_post_accumulate_grad_hook``; ``torch.distributed.optim._apply_optimizer_in_backward``)
frees each gradient once its parameter has stepped, so the gradient buffer shrinks to the largest parameter's; but it
cannot accumulate (``gradacc.stacks.window_optimizers``), so the whole effective batch must fit in one micro-batch.
``step_memory`` measures both with the course's tracker (``gradacc.memory.measure.measure_run``, lesson 03).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

__all__ = ["step_memory"]


def _mlp(width: int, depth: int) -> nn.Sequential:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(width, width)] + ([nn.ReLU()] if i < depth - 1 else [])
        return nn.Sequential(*layers)


def step_memory(mode: str, effective_batch_size: int, accum_steps: int, width: int = 512, depth: int = 4):
    """Peak memory of one Adam step of a ``depth`` x ``Linear(width)`` MLP (float32, squared-output loss), measured by
    the course's tracker (``gradacc.memory.measure.measure_run``, lesson 03), with its breakdown.

    Args:
        mode: ``"accumulate"``: ``accum_steps`` micro-batches, the gradient buffer kept across them, one
            ``optimizer.step()``; ``"in_backward"``: ONE micro-batch of the whole effective batch (in-backward stepping
            cannot accumulate), one Adam over all parameters stepped inside ``backward()`` by a
            ``register_post_accumulate_grad_hook`` per parameter that then frees that gradient (Adam skips the
            parameters whose ``.grad`` is ``None``).
        effective_batch_size: samples per optimizer step; a multiple of ``accum_steps``.

    Returns:
        A ``gradacc.memory.StepMemory`` (MiB).

    Raises:
        ValueError: an unknown ``mode``, or ``accum_steps`` != 1 with ``"in_backward"``.
    """
    from .measure import measure_run

    if mode not in ("accumulate", "in_backward"):
        raise ValueError(f"mode must be 'accumulate' or 'in_backward', got {mode!r}")
    if mode == "in_backward" and accum_steps != 1:
        raise ValueError("in-backward stepping cannot accumulate: use accum_steps=1")
    model = _mlp(width, depth)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(effective_batch_size, width, generator=torch.Generator().manual_seed(0))
    if mode == "in_backward":

        def hook(param: torch.Tensor) -> None:
            optimizer.step()
            param.grad = None

        for p in model.parameters():
            p.register_post_accumulate_grad_hook(hook)
    (model(x[:2]) ** 2).sum().backward()  # a first step creates Adam's moments, as in every later step
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    def run(before_forward, after_forward) -> None:
        for chunk in x.chunk(accum_steps):
            before_forward()
            out = model(chunk)
            after_forward()
            ((out**2).sum() / effective_batch_size).backward()
        if mode == "accumulate":
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    with warnings.catch_warnings():  # the tracker warns about the gradients the hooks set to None
        warnings.simplefilter("ignore")
        return measure_run(
            run, model, optimizer, x, accum_steps=accum_steps, micro_batch_size=effective_batch_size // accum_steps,
            method="tracker",
        )  # fmt: skip
