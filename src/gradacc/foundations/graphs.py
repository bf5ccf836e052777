"""What autograd graphs keep alive (the bytes of tensors saved for backward, the number of graph nodes) and how often
Python reads a tensor's value (a host-device synchronisation on a GPU).

Lesson 02 (flaw d) and lesson 08 (graphs kept alive) measure with these: a loss tensor accumulated for logging keeps
its graph reachable; before ``backward`` has run, that graph still holds every saved activation; ``loss.item()`` on
every micro-step reads the device N times per optimizer step.

Units: bytes (``int``) and MiB (2**20 bytes).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostReadCounter", "SavedTensorMeter", "count_graph_nodes"]


class _Packed:
    """A saved tensor as autograd stores it while a ``SavedTensorMeter`` is active; freeing it updates the meter."""

    __slots__ = ("tensor", "key", "meter", "__weakref__")

    def __init__(self, tensor: torch.Tensor, key: int | None, meter: SavedTensorMeter) -> None:
        self.tensor = tensor
        self.key = key
        self.meter = weakref.ref(meter)

    def __del__(self) -> None:
        meter = self.meter()
        if meter is not None and self.key is not None:
            meter._release(self.key)


class SavedTensorMeter:
    """Measure the bytes of tensors that autograd graphs save for backward, live and at their peak.

    Inside ``with SavedTensorMeter() as meter:`` every tensor an operation saves for backward is counted (through
    ``torch.autograd.graph.saved_tensors_hooks``) until the graph releases it: ``backward`` frees a graph's saved
    tensors, and so does dropping the last reference to the graph's output. A storage saved by several operations
    (or several views of it) is counted once, with its full size. Storages listed in ``exclude`` (for example the
    model's parameters, which autograd saves by reference and which exist anyway) are not counted.

    Measurements stay valid after the ``with`` block (graphs recorded inside it keep reporting when they are freed);
    operations run after the block are not counted.

    Attributes:
        live_bytes: bytes of distinct saved storages that some graph still holds now (``int``).
        peak_bytes: the largest ``live_bytes`` seen so far (``int``).

    Example:
        >>> with SavedTensorMeter(exclude=model.parameters()) as meter:
        ...     loss = model(x).sum()
        >>> meter.live_bytes > 0
        True

    Source: PyTorch docs, "Hooks for saved tensors" (``torch.autograd.graph.saved_tensors_hooks``).
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self._counts: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self.live_bytes = 0
        self.peak_bytes = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    @property
    def live_mib(self) -> float:
        """``live_bytes`` in MiB."""
        return self.live_bytes / 2**20

    @property
    def peak_mib(self) -> float:
        """``peak_bytes`` in MiB."""
        return self.peak_bytes / 2**20

    def reset_peak(self) -> None:
        """Set ``peak_bytes`` to the current ``live_bytes``."""
        self.peak_bytes = self.live_bytes

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._hooks.__exit__(*exc_info)

    def _pack(self, tensor: torch.Tensor) -> _Packed:
        # Keep a detached alias (same storage, no grad_fn): holding the tensor itself would make a reference cycle
        # (saved output -> its grad_fn -> the saved variable -> the output) that outlives the graph.
        tensor = tensor.detach()
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self._excluded or storage.nbytes() == 0:
            return _Packed(tensor, None, self)
        count = self._counts.get(key, 0)
        self._counts[key] = count + 1
        if count == 0:
            self._sizes[key] = storage.nbytes()
            self.live_bytes += storage.nbytes()
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return _Packed(tensor, key, self)

    @staticmethod
    def _unpack(packed: _Packed) -> torch.Tensor:
        return packed.tensor

    def _release(self, key: int) -> None:
        self._counts[key] -= 1
        if self._counts[key] == 0:
            del self._counts[key]
            self.live_bytes -= self._sizes.pop(key)


def count_graph_nodes(tensor: torch.Tensor) -> int:
    """Number of distinct autograd nodes reachable from ``tensor.grad_fn`` (0 for a tensor without a graph).

    A float (``loss.item()``) or a detached tensor holds no node; ``total = total + loss`` holds every loss's graph.
    """
    root = tensor.grad_fn
    if root is None:
        return 0
    seen = {root}
    stack = [root]
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return len(seen)


_HOST_READS = {
    torch.Tensor.item: "item",
    torch.Tensor.__float__: "float",
    torch.Tensor.__int__: "int",
    torch.Tensor.__bool__: "bool",
    torch.Tensor.tolist: "tolist",
    torch.Tensor.numpy: "numpy",
}


class HostReadCounter(TorchFunctionMode):
    """Count how often Python reads a tensor's value inside ``with HostReadCounter() as reads:``.

    A read is ``t.item()``, ``float(t)``, ``int(t)``, ``bool(t)`` (an ``if`` on a tensor), ``t.tolist()`` or
    ``t.numpy()``. On a GPU each one copies a value to the host and waits for every kernel queued before it: a
    host-device synchronisation (PyTorch docs, "CUDA semantics", asynchronous execution; on CUDA,
    ``torch.cuda.set_sync_debug_mode("warn")`` reports them). On a CPU nothing waits, but the count is the same, so a
    training loop's synchronisations can be counted on any machine.

    Attributes:
        count: reads so far (int).
        calls: reads per kind, e.g. ``{"item": 16}``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.calls: dict[str, int] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kind = _HOST_READS.get(func)
        if kind is not None:
            self.count += 1
            self.calls[kind] = self.calls.get(kind, 0) + 1
        return func(*args, **(kwargs or {}))
