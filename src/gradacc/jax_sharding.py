"""Accumulation under JAX's automatic sharding (lesson 11, issue 32): three ways to accumulate a batch sharded over a
1-D mesh of devices (axis ``"data"``), and what XLA compiles each into.

* ``accumulate_contiguous``: ``jax.jit`` of lesson 06's ``lax.scan`` (``gradacc.jaxacc.accumulate_grads_scan``) on
  the sharded batch. Its micro-batches are contiguous rows, so each one lives on ONE device; XLA's partitioner
  gathers the batch and every device computes every micro-batch (no data parallelism at all).
* ``accumulate_strided``: the same scan over a strided split (micro-batch ``k`` holds rows ``k, k + N, k + 2N...``),
  so every micro-batch is spread over all devices. Each micro-step is data-parallel, and XLA puts the gradient
  all-reduce INSIDE the loop: one per micro-batch (AI-Hypercomputer/maxtext PR #5099 found this in MaxText's engine).
* ``accumulate_shard_map``: ``jax.shard_map`` gives each device its rows; each accumulates its micro-batches locally
  with the scan and the sums are added across devices by ONE ``jax.lax.psum`` after the loop (lesson 07's worker).

All three return the window's mean ``(loss, grads)``, the full batch's to float rounding. The worker
``gradacc.workers.jax_sharding`` runs them on CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=4``).
Parameters and batches are lesson 06's (``gradacc.jaxacc.Params``; ``x [B, 64]`` float32, ``y [B]`` int labels).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .jaxacc import Params, accumulate_grads_scan, count_items, sum_cross_entropy

__all__ = ["data_mesh", "shard_rows", "accumulate_contiguous", "accumulate_strided", "accumulate_shard_map"]


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
