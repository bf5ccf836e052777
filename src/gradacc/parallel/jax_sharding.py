"""Accumulation under JAX's automatic sharding (lesson 11, issue 32): three ways to accumulate a batch sharded over a
1-D mesh of devices (axis ``"data"``), and what XLA compiles each into.

* ``accumulate_contiguous``: ``jax.jit`` of lesson 06's ``lax.scan``
  (``gradacc.frameworks.jaxacc.accumulate_grads_scan``) on the sharded batch. Its micro-batches are contiguous rows, so
  each one lives on ONE device; XLA's partitioner gathers the batch and every device computes every micro-batch (no data
  parallelism at all).
* ``accumulate_strided``: the same scan over a strided split (micro-batch ``k`` holds rows ``k, k + N, k + 2N...``),
  so every micro-batch is spread over all devices. Each micro-step is data-parallel, and XLA puts the gradient
  all-reduce INSIDE the loop: one per micro-batch (AI-Hypercomputer/maxtext PR #5099 found this in MaxText's engine).
* ``accumulate_shard_map``: ``jax.shard_map`` gives each device its rows; each accumulates its micro-batches locally
  with the scan and the sums are added across devices by ONE ``jax.lax.psum`` after the loop (lesson 07's worker).

All three return the window's mean ``(loss, grads)``, the full batch's to float rounding. ``compile_accumulations``
compiles the three on the devices of the running process; the worker ``gradacc.workers.jax_sharding`` runs them on CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=4``), and ``compiled_collectives`` counts their
collectives on this process's own devices (a learner's GPUs or TPU cores: where XLA puts the all-reduce depends on
the backend's compiler, and XLA's GPU compiler runs ``WhileLoopAllReduceCodeMotion``, which the CPU counts do not
show). Parameters and batches are lesson 06's (``gradacc.frameworks.jaxacc.Params``; ``x [B, 64]`` float32, ``y [B]``
int labels).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..frameworks.jaxacc import (
    Params,
    accumulate_grads_scan,
    count_items,
    digits_arrays,
    params_from_torch,
    sum_cross_entropy,
)
from .hlo import collective_counts

__all__ = [
    "data_mesh",
    "shard_rows",
    "accumulate_contiguous",
    "accumulate_strided",
    "accumulate_shard_map",
    "compile_accumulations",
    "compiled_collectives",
]


def data_mesh(devices: int) -> Mesh:
    """A 1-D mesh named ``"data"`` over the first ``devices`` devices, with AUTOMATIC sharding (``AxisType.Auto``:
    XLA's partitioner decides where collectives go; jax 0.10's ``make_mesh`` would otherwise make the axis explicit).
    """
    return jax.make_mesh((devices,), ("data",), axis_types=(AxisType.Auto,))


def shard_rows(mesh: Mesh, *arrays: jax.Array) -> tuple[jax.Array, ...]:
    """Each array placed with its first axis (rows, samples) split evenly over the mesh's ``"data"`` devices."""
    sharding = NamedSharding(mesh, P("data"))
    return tuple(jax.device_put(a, sharding) for a in arrays)


@partial(jax.jit, static_argnames="accum_steps")
def accumulate_contiguous(params: Params, x: jax.Array, y: jax.Array, accum_steps: int) -> tuple[jax.Array, Params]:
    """Lesson 06's scan, jitted on a sharded batch: micro-batch ``k`` = rows ``k B/N`` to ``(k+1) B/N - 1``."""
    return accumulate_grads_scan(params, x, y, accum_steps)


@partial(jax.jit, static_argnames="accum_steps")
def accumulate_strided(params: Params, x: jax.Array, y: jax.Array, accum_steps: int) -> tuple[jax.Array, Params]:
    """The scan over a strided split: micro-batch ``k`` = rows ``k, k + N, k + 2N, ...`` (``[B, ...] -> [B/N, N, ...]``
    then the two axes swapped), so each keeps its rows on every device."""
    xs = jnp.swapaxes(x.reshape(-1, accum_steps, *x.shape[1:]), 0, 1)
    ys = jnp.swapaxes(y.reshape(-1, accum_steps), 0, 1)
    grad_fn = jax.value_and_grad(sum_cross_entropy)

    def micro_step(carry, batch):
        loss_sum, grad_sum = carry
        loss, grads = grad_fn(params, *batch)
        return (loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)), None

    init = (jnp.zeros((), x.dtype), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(micro_step, init, (xs, ys))
    items = jnp.maximum(count_items(y), 1).astype(loss_sum.dtype)
    return loss_sum / items, jax.tree_util.tree_map(lambda g: g / items, grad_sum)


def accumulate_shard_map(mesh: Mesh, accum_steps: int):
    """A jitted ``f(params, x, y) -> (loss, grads)``: each device accumulates ITS rows' ``accum_steps`` micro-batches
    (``accumulate_grads_scan``), turns its mean back into a sum, and one ``psum`` after the loop adds the sums and the
    item counts over ``"data"`` (``check_vma=False``: the explicit ``psum`` is the only reduction)."""

    def per_device(params, x_local, y_local):
        loss, grads = accumulate_grads_scan(params, x_local, y_local, accum_steps)
        items = count_items(y_local).astype(loss.dtype)
        total = jax.lax.psum(items, "data")
        grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g * items, "data") / total, grads)
        return jax.lax.psum(loss * items, "data") / total, grads

    spec = (P(), P("data"), P("data"))
    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=spec, out_specs=(P(), P()), check_vma=False))


def compile_accumulations(
    params: Params, x: jax.Array, y: jax.Array, devices: int, accum_steps: int
) -> dict[str, tuple[Any, tuple, Callable]]:
    """The three accumulations compiled for a batch ``x [B, 64]``, ``y [B]`` sharded by rows over the first
    ``devices`` devices of this process's default backend, ``accum_steps`` micro-batches each.

    Returns:
        ``{"contiguous" | "strided" | "shard_map": (compiled, args, function)}``: call ``compiled(*args)`` for
        ``(loss, grads)``; ``compiled.as_text()`` is the optimized HLO; ``function`` is the Python function whose
        source the lesson shows.

    Raises:
        ValueError: ``B`` not divisible by ``devices x accum_steps``, or either < 1.
    """
    if devices < 1 or accum_steps < 1 or x.shape[0] % (devices * accum_steps):
        raise ValueError(
            f"a batch of {x.shape[0]} rows does not split into {devices} devices x {accum_steps} micro-batches: "
            "use a multiple of devices x accum_steps"
        )
    mesh = data_mesh(devices)
    args = (params, *shard_rows(mesh, x, y))
    functions = {
        "contiguous": (jax.jit(lambda p, a, b: accumulate_contiguous(p, a, b, accum_steps)), accumulate_contiguous),
        "strided": (jax.jit(lambda p, a, b: accumulate_strided(p, a, b, accum_steps)), accumulate_strided),
        "shard_map": (accumulate_shard_map(mesh, accum_steps), accumulate_shard_map),
    }
    return {name: (fn.lower(*args).compile(), args, source) for name, (fn, source) in functions.items()}


def compiled_collectives(
    devices: int | None = None, *, micro_batch_size: int = 8, accum_steps: int = 4, hidden: int = 32
) -> dict[str, dict[str, dict]]:
    """Compile the three accumulations on this process's own devices (default: all of them) and count the
    collectives of each compiled program (``gradacc.parallel.hlo.collective_counts``: ``{"all-reduce": {"instructions",
    "in_loop", "per_call", "shapes"}, ...}``), on lesson 11's digits MLP and ``micro_batch_size x accum_steps x
    devices`` digits. Nothing runs: only the compiled text is read.

    Raises:
        ValueError: ``devices`` < 1 or more than this process sees, or more digits than the 1,797 there are.
    """
    from ..foundations.models import make_digits_model

    devices = len(jax.devices()) if devices is None else devices
    if not 1 <= devices <= len(jax.devices()):
        raise ValueError(f"devices must be in 1..{len(jax.devices())} (this process's devices), got {devices}")
    x, y = digits_arrays(micro_batch_size * accum_steps * devices)
    params = params_from_torch(make_digits_model(seed=0, hidden=hidden))
    compiled = compile_accumulations(params, x, y, devices, accum_steps)
    return {name: collective_counts(program.as_text()) for name, (program, _, _) in compiled.items()}
