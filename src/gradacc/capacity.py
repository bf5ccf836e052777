"""GPU memory a PyTorch process can use: the CUDA context's share, common cards' usable MiB, and this GPU's free MiB
(the memory explorer's capacity line; lesson 03)."""

from __future__ import annotations

import torch

__all__ = ["CUDA_CONTEXT_MIB", "usable_mib", "CAPACITY_PRESETS", "gpu_capacity"]


CUDA_CONTEXT_MIB: float = 287_047_680 / 2**20
"""273.8 MiB: GPU memory a PyTorch process's CUDA context takes before any tensor, with lazy module loading (PyTorch's
default since 1.13), as measured in pytorch/pytorch#86509 ("Sets CUDA_MODULE_LOADING to LAZY": 287,047,680 bytes lazy,
666,632,192 eager). The caching allocator's reserved-but-unused blocks come on top and depend on the workload."""


def usable_mib(nominal_gb: float) -> float:
    """MiB a PyTorch process can allocate on a card sold as ``nominal_gb`` GB: its ``nominal_gb`` GiB minus the CUDA
    context (``CUDA_CONTEXT_MIB``). An upper bound: ECC reservations (e.g. on a T4) and fragmentation lower it."""
    return nominal_gb * 1024.0 - CUDA_CONTEXT_MIB


CAPACITY_PRESETS: tuple[tuple[str, float], ...] = tuple(
    (f"{label} ({usable_mib(gb) / 1024:.1f} GiB usable)", usable_mib(gb))
    for label, gb in (
        ("16 GB: T4, V100 16 GB", 16),
        ("24 GB: A10G, L4, RTX 4090", 24),
        ("40 GB: A100 40 GB", 40),
        ("80 GB: A100 80 GB, H100", 80),
        ("141 GB: H200", 141),
    )
)
"""Common cards as ``(label, usable MiB)``: the nominal memory (a card sold as "16 GB" has 16 GiB) minus the CUDA
context (``usable_mib``); the label names the card and its usable GiB."""


def gpu_capacity() -> tuple[str, float] | None:
    """``(label, free MiB)`` of CUDA device 0, or ``None`` without a GPU.

    The capacity is what this process can still allocate (``torch.cuda.mem_get_info``, after the CUDA context exists),
    not the card's total (``torch.cuda.get_device_properties(0).total_memory``), which the label shows.
    """
    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info(0)
    name = torch.cuda.get_device_properties(0).name
    return f"this GPU: {name} ({total / 2**30:.0f} GiB, {free / 2**30:.1f} GiB free)", float(free / 2**20)
