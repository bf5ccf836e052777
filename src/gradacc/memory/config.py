"""The lessons' step setups (``StepConfig``: architecture, width, optimizer, precision, effective batch) and their
measurement for one N (``measure_config``) or several (``measure_sweep``), for real or under ``FakeTensorMode``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ..foundations.models import DigitsTransformer
from ..i18n import _
from .measure import measure_step
from .options import PRECISIONS, _check_optimizer_name, _check_precision, check_divisible, make_optimizer
from .tracker import StepMemory

__all__ = [
    "ARCHS",
    "StepConfig",
    "measure_config",
    "measure_sweep",
]


ARCHS: tuple[str, ...] = ("mlp", "transformer")


@dataclass(frozen=True)
class StepConfig:
    """A training step to measure: model, optimizer, precision and effective batch (samples).

    ``arch="mlp"`` is ``gradacc.foundations.models.DigitsMLP(hidden=width, depth=depth)``; ``"transformer"`` is
    ``DigitsTransformer(width, depth)``. ``checkpoint=True`` recomputes each hidden block's activations in the
    backward pass (``torch.utils.checkpoint``, non-reentrant) instead of keeping them. The batch is
    ``effective_batch_size`` digits drawn with replacement (seeded) from scikit-learn's 1,797.

    Raises:
        ValueError: unknown ``arch``, ``optimizer`` or ``precision``; ``width``, ``depth`` or ``effective_batch_size``
            below 1.
    """

    arch: str = "mlp"
    width: int = 512
    depth: int = 4
    optimizer: str = "adam"
    precision: str = "fp32"
    effective_batch_size: int = 4096
    checkpoint: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown arch {self.arch!r}; use one of {list(ARCHS)}")
        object.__setattr__(self, "optimizer", _check_optimizer_name(self.optimizer))
        _check_precision(self.precision)
        for name in ("width", "depth", "effective_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")

    @property
    def dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]

    def with_(self, **changes: Any) -> StepConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def build_model(self, seed: int = 0) -> nn.Module:
        """The model, initialised from ``seed``, in this config's dtype (on the default device).

        Built with the config's dtype as the default dtype (not ``.to(dtype)``, which fails on fake tensors).
        """
        previous = torch.get_default_dtype()
        try:
            torch.set_default_dtype(self.dtype)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                if self.arch == "mlp":
                    from ..foundations.models import DigitsMLP

                    model: nn.Module = DigitsMLP(hidden=self.width, depth=self.depth)
                else:
                    model = DigitsTransformer(self.width, self.depth)
        finally:
            torch.set_default_dtype(previous)
        return _Checkpointed(model) if self.checkpoint else model

    def build(self, device: str | torch.device = "cpu", seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
        """``(model, optimizer)`` on ``device``."""
        model = self.build_model(seed).to(device)
        return model, make_optimizer(self.optimizer, model.parameters())

    def batch(self, device: str | torch.device = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """One effective batch: ``[E, 64]`` inputs in this config's dtype and ``[E]`` int64 labels (real digits)."""
        x, y = _digits()
        index = torch.randint(0, len(x), (self.effective_batch_size,), generator=torch.Generator().manual_seed(seed))
        return x[index].to(device=device, dtype=self.dtype), y[index].to(device)

    def label(self) -> str:
        """``mlp width 512 depth 4, adam, fp32, effective batch 4096`` (``, checkpointed``), in the learner's language
        (``gradacc.i18n``)."""
        return _label(
            self.arch,
            self.width,
            self.depth,
            self.optimizer,
            self.precision,
            self.effective_batch_size,
            self.checkpoint,
        )


_LABEL = re.compile(r"^(\w+) width (\d+) depth (\d+), (\w+), (\w+), effective batch (\d+)(, checkpointed)?$")


def _label(arch, width, depth, optimizer, precision, effective_batch_size, checkpoint) -> str:
    text = _("{arch} width {width} depth {depth}, {optimizer}, {precision}, effective batch {batch}").format(
        arch=arch, width=width, depth=depth, optimizer=optimizer, precision=precision, batch=effective_batch_size
    )
    return text + (_(", checkpointed") if checkpoint else "")


def localized_label(label: str) -> str:
    """A ``StepConfig.label()`` written in English (a stored benchmark's ``setup["config"]``) in the learner's
    language; any other text as it is."""
    match = _LABEL.match(label)
    if match is None:
        return label
    arch, width, depth, optimizer, precision, batch, checkpoint = match.groups()
    return _label(arch, width, depth, optimizer, precision, batch, bool(checkpoint))


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from ..foundations.data import load_digits_tensors

    return load_digits_tensors()


class _Checkpointed(nn.Module):
    """Wraps a model so that each hidden block is recomputed in the backward pass (``torch.utils.checkpoint``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        inner = self.inner
        if hasattr(inner, "net"):  # DigitsMLP: checkpoint every Linear+activation block, keep the head
            layers = list(inner.net)
            blocks: list[nn.Sequential] = []
            current: list[nn.Module] = []
            for layer in layers[:-1]:
                current.append(layer)
                if not isinstance(layer, nn.Linear):
                    blocks.append(nn.Sequential(*current))
                    current = []
            h = x
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False)
            for layer in current:
                h = layer(h)
            return layers[-1](h)
        tokens = inner.embed(x.reshape(x.shape[0], 8, 8)) + inner.position
        for layer in inner.layers:
            tokens = checkpoint(layer, tokens, use_reentrant=False)
        return inner.head(tokens.mean(dim=1))


_FAKE_WARNINGS = ("Accessing the data pointer of FakeTensor",)
"""PyTorch warns when its own code (attention's fast-path checks) reads a fake tensor's data pointer: harmless here."""


@contextlib.contextmanager
def _quiet_fake():
    with warnings.catch_warnings():
        for message in _FAKE_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        yield


def _fake_setup(config: StepConfig, accum_steps_batch: int | None = None):
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        model = config.build_model()
        optimizer = make_optimizer(config.optimizer, model.parameters())
        n = accum_steps_batch or config.effective_batch_size
        x = torch.empty(n, 64, dtype=config.dtype)
        y = torch.zeros(n, dtype=torch.int64)
    return mode, model, optimizer, x, y


def measure_config(
    config: StepConfig,
    accum_steps: int,
    *,
    method: str = "auto",
    device: str | torch.device | None = None,
    repeats: int = 0,
    fake: bool = False,
    seed: int = 0,
) -> StepMemory:
    """Build ``config`` afresh (model from ``seed``, a real digits batch) and ``measure_step`` it at ``accum_steps``.

    Args:
        device: where to build (default: CUDA if available, else CPU). ``method="auto"`` then measures with the CUDA
            allocator on a GPU and the tracker elsewhere.
        fake: build and run everything under ``FakeTensorMode``: the same operations and storage sizes with no data
            and no compute, so models far larger than this machine's memory can be measured (``method`` becomes
            ``"storages"`` if it was ``"auto"`` or ``"cuda"``; no time).

    Raises:
        ValueError: as ``measure_step``.
    """
    check_divisible(config.effective_batch_size, accum_steps)
    if fake:
        method = "storages" if method in ("auto", "cuda") else method
        with _quiet_fake():
            mode, model, optimizer, x, y = _fake_setup(config)
            with mode:
                return measure_step(model, optimizer, x, y, accum_steps, method=method)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, optimizer = config.build(device, seed)
    x, y = config.batch(device, seed)
    return measure_step(model, optimizer, x, y, accum_steps, method=method, repeats=repeats)


def measure_sweep(
    config: StepConfig,
    accum_steps: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    method: str = "auto",
    device: str | torch.device | None = None,
    repeats: int = 0,
    fake: bool = False,
    progress: bool | Callable[[int, int], None] = False,
) -> list[StepMemory]:
    """``measure_config`` for each N in ``accum_steps`` (each on a freshly built model); one ``StepMemory`` per N.

    Args:
        progress: ``True`` shows a ``tqdm.auto`` bar; a callable is called as ``progress(done, total)``.
    """
    values = list(accum_steps)
    for n in values:
        check_divisible(config.effective_batch_size, n)
    results = []
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(values), desc="measuring", unit="N")
    for i, n in enumerate(values):
        results.append(measure_config(config, n, method=method, device=device, repeats=repeats, fake=fake))
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(i + 1, len(values))
    if bar is not None:
        bar.close()
    return results
