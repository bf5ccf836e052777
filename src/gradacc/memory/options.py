"""The choices a measured step is made of, checked: optimizers and their state bytes, precisions, measuring methods,
and the argument checks shared by the memory modules (errors name the value and the fix).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..foundations.data import check_accum_steps
from .tracker import _storage_bytes

__all__ = [
    "OPTIMIZERS",
    "STATE_BYTES_PER_PARAM",
    "PRECISIONS",
    "METHODS",
    "check_divisible",
    "check_budget",
    "make_optimizer",
    "optimizer_state_bytes",
]


OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "adam")
"""Optimizer names ``make_optimizer`` accepts (case-insensitive)."""


_STATE_TENSORS = {"sgd": 0, "momentum": 1, "adam": 2}
"""Parameter-sized state tensors each optimizer keeps: SGD none, SGD with momentum one (the momentum buffer), Adam two
(``exp_avg`` and ``exp_avg_sq``); see the ``torch.optim.SGD`` and ``torch.optim.Adam`` docs."""


STATE_BYTES_PER_PARAM: dict[str, int] = {name: 4 * n for name, n in _STATE_TENSORS.items()}
"""Optimizer state bytes per parameter in fp32: SGD 0, momentum 4, Adam 8 (PyTorch keeps the state in the
parameters' dtype, so bf16 halves these)."""


PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}
"""Precision names: the dtype of parameters, gradients, optimizer state and activations alike (``model.to(dtype)``;
autocast mixed precision, which keeps fp32 master weights, is not modelled here)."""


METHODS: tuple[str, ...] = ("auto", "cuda", "tracker", "storages")
"""Measuring methods: ``auto`` picks ``cuda`` for a model on a CUDA device and ``tracker`` elsewhere."""


# --------------------------------------------------------------------------------------------------------------------
# Validation


def check_divisible(effective_batch_size: int, accum_steps: int) -> int:
    """Validate that an effective batch splits into ``accum_steps`` equal micro-batches; return the micro-batch size.

    Policy: memory is measured and predicted for equal micro-batches only, so an effective batch that is not a multiple
    of N is refused (``gradacc.foundations.data.split_micro_batches`` handles unequal sizes when training).

    Raises:
        ValueError: ``accum_steps`` not an int >= 1, ``effective_batch_size`` not an int >= 1, or not divisible.
    """
    check_accum_steps(accum_steps)
    if isinstance(effective_batch_size, bool) or not isinstance(effective_batch_size, int) or effective_batch_size < 1:
        raise ValueError(f"effective_batch_size must be an int >= 1 (samples), got {effective_batch_size!r}")
    if effective_batch_size % accum_steps:
        divisors = [n for n in range(1, min(effective_batch_size, 64) + 1) if effective_batch_size % n == 0]
        raise ValueError(
            f"effective_batch_size={effective_batch_size} is not divisible by accum_steps={accum_steps}: micro-batches "
            f"would differ in size; pick accum_steps from {divisors} or an effective batch that is a multiple of "
            f"{accum_steps}"
        )
    return effective_batch_size // accum_steps


def check_budget(budget_mib: float) -> float:
    """Validate a memory budget in MiB (a positive, finite number); return it as a float.

    Raises:
        ValueError: the budget is not a number, not finite, or ``<= 0``.
    """
    try:
        value = float(budget_mib)
    except (TypeError, ValueError):
        raise ValueError(f"budget_mib must be a number of MiB, got {budget_mib!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"budget_mib must be a positive number of MiB, got {budget_mib!r}")
    return value


def _check_optimizer_name(name: str) -> str:
    key = str(name).lower() if isinstance(name, str) else name
    if key not in _STATE_TENSORS:
        raise ValueError(f"unknown optimizer {name!r}; use one of {list(OPTIMIZERS)}")
    return key


def _check_precision(name: str) -> torch.dtype:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; use one of {list(PRECISIONS)}")
    return PRECISIONS[name]


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}")
    return method


# --------------------------------------------------------------------------------------------------------------------
# Optimizers


def make_optimizer(name: str, params: Iterable[nn.Parameter], lr: float | None = None) -> torch.optim.Optimizer:
    """The course's optimizers by name: ``"sgd"`` (lr 0.1), ``"momentum"`` (SGD, momentum 0.9, lr 0.1), ``"adam"`` (lr 1e-3).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    key = _check_optimizer_name(name)
    params = list(params)
    if key == "adam":
        return torch.optim.Adam(params, lr=1e-3 if lr is None else lr)
    return torch.optim.SGD(params, lr=0.1 if lr is None else lr, momentum=0.9 if key == "momentum" else 0.0)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held by the tensors in ``optimizer.state`` now (0 before the first step creates them)."""
    seen: set[int] = set()
    total = 0
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                total += _storage_bytes(value, seen)
    return total
