"""GPU memory a PyTorch process can use: common cards' real totals, the CUDA context's share, and this GPU's free
plus reserved MiB (the memory explorer's capacity line; lesson 03)."""

from __future__ import annotations

import torch

from ..i18n import N_, _

__all__ = [
    "CARD_TOTAL_MIB",
    "CUDA_CONTEXT_MIB",
    "usable_mib",
    "CAPACITY_PRESETS",
    "card_size",
    "card_label",
    "gpu_capacity",
]


CARD_TOTAL_MIB: dict[str, int] = {
    N_("T4 (Colab's GPU)"): 15_360,
    "A10G": 23_028,
    "L4": 23_034,
    "A100 40 GB": 40_960,
    "A100 80 GB": 81_920,
    "H100 80 GB HBM3": 81_559,
    "H200": 143_771,
}
"""A card's total memory as ``nvidia-smi`` reports it (the "Memory-Usage" total, MiB; ECC on, as on cloud and Colab
GPUs), read from public ``nvidia-smi`` printouts. Less than the nominal size: a T4 sold as "16 GB" shows 15,360 MiB,
not 16,384; an H100 "80 GB" 81,559 MiB. On your own card read ``torch.cuda.mem_get_info()`` instead (``gpu_capacity``).
"""

CUDA_CONTEXT_MIB: float = (287_047_680 - 20 * 2**20) / 2**20
"""253.75 MiB: GPU memory a PyTorch process's CUDA context took before any tensor, with lazy module loading (PyTorch's
default since 1.13), in ONE measurement, pytorch/pytorch#86509 ("Sets CUDA_MODULE_LOADING to LAZY"). That PR read
287,047,680 bytes (273.75 MiB) in use after creating one 6.1 MiB tensor, which the caching allocator serves from a
20 MiB segment (allocations between 1 and 10 MiB share 20 MiB blocks: ``kMinLargeAlloc`` in
``c10/core/AllocatorConfig.h``, ``kLargeBuffer`` in ``c10/cuda/CUDACachingAllocator.cpp``); without it, about
254 MiB. In general about 250-400 MiB, by card, driver and CUDA version (about 300 and 400 MB in answers on PyTorch's
issue tracker, pytorch/pytorch#107667 and #109888), and the cuBLAS / cuDNN workspaces of the first matrix products and
convolutions come on top. Neither a lower nor an upper bound: a typical
value; on your own card read ``torch.cuda.mem_get_info()`` once the context exists (``gpu_capacity``)."""


def usable_mib(total_mib: float) -> float:
    """MiB a PyTorch process can at most allocate on a card whose ``nvidia-smi`` total is ``total_mib``: the total
    minus a typical CUDA context (``CUDA_CONTEXT_MIB``, about 254 MiB; 250-400 MiB in general). Workspaces, the caching
    allocator's reserved but unused blocks and fragmentation lower it further; budget against
    ``torch.cuda.max_memory_reserved()``."""
    return float(total_mib) - CUDA_CONTEXT_MIB


CAPACITY_PRESETS: tuple[tuple[str, float], ...] = tuple(
    (card, usable_mib(total)) for card, total in CARD_TOTAL_MIB.items()
)
"""Common cards as ``(card, usable MiB)``: the ``nvidia-smi`` total (``CARD_TOTAL_MIB``) minus the CUDA context
(``usable_mib``). One size per card: wherever the course names a card as a capacity (the explorer's menu and sentence,
lesson 03's table) it gives this usable size (``card_size``), never the total or the nominal size beside it."""


def card_size(mib: float) -> str:
    """A card's usable memory as the course writes it: GiB with one decimal (``"14.8 GiB"``), whatever the view."""
    return f"{mib / 1024:,.1f} GiB"


def card_label(card: str, mib: float) -> str:
    """A card with its one size, in the learner's language: ``"T4 (Colab's GPU), 14.8 GiB usable"`` (the explorer's
    capacity menu; lesson 03, section 4)."""
    return _("{card}, {size} usable").format(card=_(card), size=card_size(mib))


def gpu_capacity() -> tuple[str, float] | None:
    """``(label, MiB)`` of CUDA device 0, or ``None`` without a GPU.

    The capacity is what this process can use for tensors: the device's free memory (``torch.cuda.mem_get_info``,
    read after the CUDA context exists, so the context is already taken off) plus what PyTorch's caching allocator
    already reserved in this process (``torch.cuda.memory_reserved``: blocks it holds and reuses, counted as used by
    the driver). The label names the card; its size is the capacity (one size per card: ``CAPACITY_PRESETS``).
    """
    if not torch.cuda.is_available():
        return None
    free, _total = torch.cuda.mem_get_info(0)
    reserved = torch.cuda.memory_reserved(0)
    name = torch.cuda.get_device_properties(0).name
    usable = (free + reserved) / 2**20
    return _("this GPU, {name}").format(name=name), float(usable)
