"""Reference implementations of the misconceptions checks 6.1 and 6.2 recognise (``gradacc.course.checks.mistakes``).

Each sums the micro-batches' losses and gradients in a ``jax.lax.scan`` (6.1) or a loop (6.2) and divides them by
the wrong count."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ....frameworks import jaxacc
from . import mistake


def _scan(params, x, y, accum_steps, loss_fn):
    xs, ys = x.reshape(accum_steps, -1, *x.shape[1:]), y.reshape(accum_steps, -1)
    grad_fn = jax.value_and_grad(loss_fn)

    def micro_step(carry, batch):
        loss, grads = grad_fn(params, *batch)
        return jax.tree_util.tree_map(jnp.add, carry, (loss, grads)), None

    zero = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    return jax.lax.scan(micro_step, zero, (xs, ys))[0]


def _divided(total, divisor):
    return jax.tree_util.tree_map(lambda t: t / divisor, total)


@mistake("6.1", "mean-of-means")
def scan_mean_of_means(params, x, y, accum_steps):
    mean = lambda p, xb, yb: jaxacc.sum_cross_entropy(p, xb, yb) / jaxacc.count_items(yb)  # noqa: E731
    return _divided(_scan(params, x, y, accum_steps, mean), accum_steps)


@mistake("6.1", "padding-counted")
def scan_padding_counted(params, x, y, accum_steps):
    return _divided(_scan(params, x, y, accum_steps, jaxacc.sum_cross_entropy), y.shape[0])


@mistake("6.1", "divided-by-micro-batches")
def scan_divided_by_micro_batches(params, x, y, accum_steps):
    return _divided(_scan(params, x, y, accum_steps, jaxacc.sum_cross_entropy), accum_steps)


@mistake("6.2", "mean-of-means")
def window_mean_of_means(params, micro_batches):
    mean = jax.value_and_grad(lambda p, xb, yb: jaxacc.sum_cross_entropy(p, xb, yb) / jaxacc.count_items(yb))
    total = None
    for xb, yb in micro_batches:
        out = mean(params, xb, yb)
        total = out if total is None else jax.tree_util.tree_map(jnp.add, total, out)
    return _divided(total, len(micro_batches))
