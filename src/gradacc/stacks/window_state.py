"""State carried through the gradient tree, accumulated over a window by ``jax.lax.scan`` with a rule per leaf.

Taught in lessons/12_per_window.ipynb, section 6 (optional).

FP8 training with *delayed scaling* keeps, per tensor, a history of the absolute maxima (amax) it saw; the next step's
scale comes from it. In JAX stacks the amax rides in the gradient tree: a custom-gradient leaf whose "gradient" is
the new amax (marin/levanter's ``OverwriteWithGradient``). Accumulation that treats every leaf as a gradient then
averages the amax over the micro-batches, or keeps the last micro-batch's (marin-community/marin#7659, fixed by PR
#8360, "FP8 takes the maximum amax histories", and #8365): the window's amax is the MAXIMUM over its micro-batches,
which equals the full batch's amax exactly, whatever the micro-batch sizes.

This module is a model of that mechanism on the digits: a linear layer ``[B, 64] @ [64, 10]``, whose output amax is
the state, on micro-batches padded to one shape with a 0/1 row mask (``lax.scan`` needs equal shapes), so unequal
micro-batches and a short last window are the same code. No FP8 arithmetic is done (no FP8 hardware needed).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["RULES", "combine", "micro_step", "padded_window", "accumulate_window", "full_batch"]

RULES: dict[str, dict[str, str]] = {
    "right": {"grad": "sum", "items": "sum", "amax": "max"},
    "mean": {"grad": "sum", "items": "sum", "amax": "mean"},
    "last": {"grad": "sum", "items": "sum", "amax": "last"},
}
"""How each leaf of the carried tree combines across micro-batches: ``"right"`` (marin PR #8360: the maximum), and
the two mistakes of marin#7659: the amax averaged like a gradient (``"mean"``) or overwritten (``"last"``)."""


def combine(carry: dict, new: dict, rule: dict[str, str]) -> dict:
    """Combine the carried tree with one micro-batch's tree, leaf by leaf: ``"sum"``, ``"max"``, ``"last"`` or
    ``"mean"`` (a running sum, divided by the micro-batch count at the end of ``accumulate_window``).

    Raises:
        KeyError: a leaf with no rule; ValueError: an unknown rule.
    """
    out = {}
    for name, value in new.items():
        how = rule[name]
        if how in ("sum", "mean"):
            out[name] = carry[name] + value
        elif how == "max":
            out[name] = jnp.maximum(carry[name], value)
        elif how == "last":
            out[name] = value
        else:
            raise ValueError(f"unknown rule {how!r} for leaf {name!r}; use sum, max, last or mean")
    return out


def micro_step(w: jax.Array, x: jax.Array, y: jax.Array, mask: jax.Array) -> dict:
    """One micro-batch: ``{"grad": d(summed cross-entropy of the real rows)/dw [64, 10], "items": real rows (float),
    "amax": max |x @ w| over the real rows (float)}``. ``mask`` is 1.0 for a real row, 0.0 for padding."""

    def summed_loss(w):
        logits = x @ w
        losses = -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1)[:, 0]
        return jnp.sum(losses * mask)

    amax = jnp.max(jnp.abs(x @ w) * mask[:, None])
    return {"grad": jax.grad(summed_loss)(w), "items": jnp.sum(mask), "amax": amax}


def padded_window(
    x: np.ndarray, y: np.ndarray, sizes: Sequence[int], start: int = 0, shape: tuple[int, int] | None = None
) -> tuple:
    """The micro-batches of ``sizes`` consecutive rows from ``start``, stacked and padded with masked rows:
    ``(xs [N, M, 64] float32, ys [N, M] int32, masks [N, M] float32)``. ``shape = (N, M)`` defaults to
    ``(len(sizes), max(sizes))``; a larger one adds empty micro-batches (all rows masked) so that every window of a
    run, the short last one included, has one shape and compiles once.

    Raises:
        ValueError: ``sizes`` do not fit in ``shape``.
    """
    count, width = shape or (len(sizes), max(sizes))
    if len(sizes) > count or max(sizes) > width:
        raise ValueError(f"micro-batches of {list(sizes)} samples do not fit in shape {(count, width)}")
    xs = np.zeros((count, width, x.shape[1]), np.float32)
    ys = np.zeros((count, width), np.int32)
    masks = np.zeros((count, width), np.float32)
    row = start
    for k, n in enumerate(sizes):
        xs[k, :n], ys[k, :n], masks[k, :n] = x[row : row + n], y[row : row + n], 1.0
        row += n
    return jnp.asarray(xs), jnp.asarray(ys), jnp.asarray(masks)


@functools.partial(jax.jit, static_argnames="rule")
def accumulate_window(w: jax.Array, xs: jax.Array, ys: jax.Array, masks: jax.Array, rule: str = "right") -> dict:
    """The window by ``jax.lax.scan`` over its micro-batches, each leaf combined by ``RULES[rule]`` (compiled once
    per shape and rule). An empty micro-batch (all rows masked) leaves the carry unchanged; the ``"mean"`` mistake
    divides by the micro-batches that hold a sample.

    Returns ``{"grad": mean gradient over the window's items [64, 10], "amax": the window's amax, "items": n}``.
    """
    leaves = RULES[rule]
    init = {"grad": jnp.zeros_like(w), "items": jnp.zeros(()), "amax": jnp.zeros(())}

    def body(carry, batch):
        new = combine(carry, micro_step(w, *batch), leaves)
        empty = jnp.sum(batch[2]) == 0  # a padding micro-batch: the carry goes through unchanged
        return jax.tree.map(lambda n, c: jnp.where(empty, c, n), new, carry), None

    total, _ = jax.lax.scan(body, init, (xs, ys, masks))
    real = jnp.sum(jnp.max(masks, axis=1))  # micro-batches that hold a sample
    amax = total["amax"] / real if leaves["amax"] == "mean" else total["amax"]
    return {"grad": total["grad"] / total["items"], "amax": amax, "items": total["items"]}


def full_batch(w: jax.Array, x: np.ndarray, y: np.ndarray) -> dict:
    """The reference: the whole window as one batch, ``{"grad": mean gradient, "amax": max |x @ w|, "items": n}``."""
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.int32)
    out = micro_step(w, x, y, jnp.ones(len(y), jnp.float32))
    return {"grad": out["grad"] / out["items"], "amax": out["amax"], "items": out["items"]}
