"""Counting live tensor memory by category: the breakdown's categories, ``StepMemory`` and ``LiveStorageCounter``.

Units: MiB (2**20 bytes). ``LiveStorageCounter`` is the course's own ``TorchDispatchMode`` that counts live tensor
storages (the fallback if PyTorch's private ``MemTracker`` changes; a test checks that both agree).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..i18n import N_, _

__all__ = [
    "MIB",
    "CATEGORIES",
    "StepMemory",
    "format_breakdown",
    "LiveStorageCounter",
]


MIB = 2**20


CATEGORIES: tuple[str, ...] = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "other",
)
"""The breakdown's categories, in stacking order (bottom to top)."""


def _mib(n_bytes: float) -> float:
    return float(n_bytes) / MIB


def _storage_bytes(t: torch.Tensor, seen: set[int] | None = None) -> int:
    st = t.untyped_storage()
    key = id(st)
    if seen is not None:
        if key in seen:
            return 0
        seen.add(key)
    return int(st.nbytes())


def _param_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _trainable_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------------------------------------------------
# Results


@dataclass
class StepMemory:
    """The memory of one optimizer step of ``accum_steps`` micro-steps (MiB) and its time (s).

    ``breakdown_mib`` is taken at the moment of the peak and sums to ``peak_mib``; its keys are ``CATEGORIES``.
    ``activations_mib`` is the largest activation memory at the end of a micro-batch's forward pass (what one
    micro-batch keeps alive for its backward pass); it shrinks as 1/N at a fixed effective batch, whereas the
    activations at the peak can be 0 when the peak falls inside ``optimizer.step()``.
    """

    accum_steps: int
    micro_batch_size: int
    peak_mib: float
    breakdown_mib: dict[str, float]
    activations_mib: float
    seconds_per_step: float | None = None
    method: str = "tracker"
    device: str = "cpu"
    fake: bool = False
    allocator_overhead_mib: float = 0.0

    @property
    def source(self) -> str:
        """Where this peak comes from: ``"predicted"``, ``"measured on fake tensors"`` or ``"measured"``."""
        if self.method.startswith("predicted"):
            return "predicted"
        return "measured on fake tensors" if self.fake else "measured"

    @property
    def effective_batch_size(self) -> int:
        return self.accum_steps * self.micro_batch_size

    def __getitem__(self, category: str) -> float:
        return self.breakdown_mib[category]

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form: the fields plus ``effective_batch_size``."""
        out = asdict(self)
        out["effective_batch_size"] = self.effective_batch_size
        return out


BREAKDOWN_HEADERS = (
    N_("params"),
    N_("grads"),
    # TRANSLATORS: a column of format_breakdown's table: the optimizer state's MiB at the peak
    N_("opt state"),
    N_("acts"),
    N_("temps"),
    N_("other"),
)
"""``format_breakdown``'s column headers for ``CATEGORIES``, in that order (translated where shown)."""


def _breakdown(values: dict[str, float]) -> dict[str, float]:
    return {c: float(values.get(c, 0.0)) for c in CATEGORIES}


def format_breakdown(results: Sequence[StepMemory], digits: int = 1) -> str:
    """A text table: one row per result with N, the micro-batch, each category at the peak, the peak and the saved
    activations of one micro-batch, in MiB rounded to ``digits`` decimals; the headers in the learner's language
    (``gradacc.i18n``), each column as wide as its header needs (9 characters at least)."""
    names = [_(n) for n in BREAKDOWN_HEADERS]
    widths = [max(9, len(n)) for n in names]
    peak, saved = _(N_("peak")), _(N_("saved acts"))
    wide_peak, wide_saved = max(9, len(peak)), max(10, len(saved))
    head = (
        f"{'N':>3s} {'micro':>6s} "
        + " ".join(f"{n:>{w}s}" for n, w in zip(names, widths, strict=True))
        + f" {peak:>{wide_peak}s} {saved:>{wide_saved}s}"
    )
    lines = [head]
    for r in results:
        cells = " ".join(f"{r.breakdown_mib[c]:{w}.{digits}f}" for c, w in zip(CATEGORIES, widths, strict=True))
        lines.append(
            f"{r.accum_steps:3d} {r.micro_batch_size:6d} {cells} {r.peak_mib:{wide_peak}.{digits}f} "
            f"{r.activations_mib:{wide_saved}.{digits}f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------------
# The live-storage counter (the fallback)


class LiveStorageCounter(TorchDispatchMode):
    """Count the bytes of live tensor storages, by category, and remember the peak.

    A ``TorchDispatchMode`` sees the output of every PyTorch operation run inside it; each new storage is filed under
    the category in ``self.phase`` (``"activations"`` during a forward pass, ``"temporaries"`` during backward and
    inside ``optimizer.step()``) and forgotten when Python frees it (a ``weakref.finalize`` on the storage). Gradients
    are re-filed as ``"gradients"`` as soon as autograd accumulates them (``register_post_accumulate_grad_hook``) and
    the optimizer's state tensors as ``"optimizer_state"`` after each step. Tensors that existed before must be
    registered with ``track`` (parameters, buffers, gradients, optimizer state, inputs).

    Attributes:
        current: category -> live bytes now.
        peak_bytes: the largest total seen (bytes).
        peak: category -> bytes at the moment of ``peak_bytes``.
        max_bytes: category -> largest bytes seen for that category alone.

    Works on any device and under ``FakeTensorMode`` (fake storages report their would-be sizes). Storages reached
    only through views are counted once. Source: PyTorch's ``torch.utils._python_dispatch.TorchDispatchMode`` docs;
    the same idea as ``torch.distributed._tools.mem_tracker.MemTracker``, with a fraction of its bookkeeping.
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase = "activations"
        self.current: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.peak_bytes = 0
        self.peak: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.max_bytes: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self._live: dict[int, list] = {}  # id(storage) -> [nbytes, category, finalizer]
        self._hooks: list[Any] = []
        self.timeline: list[tuple[int, int, int]] | None = None
        """If set to a list, each operation appends ``(activations, temporaries, gradients)`` bytes after it ran."""

    # -- registration --------------------------------------------------------------------------------------------
    def _add(self, t: torch.Tensor, category: str) -> None:
        st = t.untyped_storage()
        key = id(st)
        entry = self._live.get(key)
        if entry is not None:
            if category != entry[1] and category in ("gradients", "optimizer_state"):
                self.current[entry[1]] -= entry[0]
                self.current[category] += entry[0]
                entry[1] = category
            return
        nbytes = int(st.nbytes())
        entry = [nbytes, category, None]
        entry[2] = weakref.finalize(st, self._free, key)
        self._live[key] = entry
        self.current[category] += nbytes

    def _free(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self.current[entry[1]] -= entry[0]

    def _update_peak(self) -> None:
        total = sum(self.current.values())
        for c, v in self.current.items():
            if v > self.max_bytes[c]:
                self.max_bytes[c] = v
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak = dict(self.current)

    def track(self, *objects: Any) -> LiveStorageCounter:
        """Register what existed before counting: modules (parameters, buffers, gradients), optimizers (state, and a
        step hook that files new state as optimizer state), tensors (as ``"other"``), or lists of them."""
        for obj in objects:
            if isinstance(obj, nn.Module):
                for p in obj.parameters():
                    self._add(p, "parameters")
                    if p.grad is not None:
                        self._add(p.grad, "gradients")
                    if p.requires_grad:
                        self._hooks.append(p.register_post_accumulate_grad_hook(self._grad_hook))
                for b in obj.buffers():
                    self._add(b, "other")
            elif isinstance(obj, torch.optim.Optimizer):
                self._track_state(obj)
                self._hooks.append(obj.register_step_pre_hook(self._step_pre_hook))
                self._hooks.append(obj.register_step_post_hook(self._step_post_hook))
            elif isinstance(obj, torch.Tensor):
                self._add(obj, "other")
            elif isinstance(obj, list | tuple):
                self.track(*obj)
            elif obj is not None:
                raise TypeError(f"track() takes modules, optimizers and tensors, got {type(obj).__name__}")
        self._update_peak()
        return self

    def _grad_hook(self, p: torch.Tensor) -> None:
        if p.grad is not None:
            self._add(p.grad, "gradients")
            self._update_peak()

    def _track_state(self, optimizer: torch.optim.Optimizer) -> None:
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    self._add(value, "optimizer_state")

    def _step_pre_hook(self, optimizer, args, kwargs) -> None:
        self._phase_before_step = self.phase
        self.phase = "temporaries"

    def _step_post_hook(self, optimizer, args, kwargs) -> None:
        self._track_state(optimizer)
        self.phase = getattr(self, "_phase_before_step", "activations")

    def remove_hooks(self) -> None:
        """Remove the gradient and optimizer hooks ``track`` installed."""
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    # -- the dispatch mode ---------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._add(leaf, self.phase)
        self._update_peak()
        if self.timeline is not None:
            c = self.current
            self.timeline.append((c["activations"], c["temporaries"], c["gradients"]))
        return out

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)

    # -- reading -------------------------------------------------------------------------------------------------
    @property
    def current_bytes(self) -> int:
        return sum(self.current.values())

    def peak_mib(self) -> dict[str, float]:
        """The breakdown at the peak in MiB (keys ``CATEGORIES``)."""
        return {c: _mib(self.peak[c]) for c in CATEGORIES}
