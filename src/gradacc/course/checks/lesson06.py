"""Checks of the exercises of lesson 06 (JAX). Each prints one line, ``Exercise 6.N: correct`` or what is wrong.

The check functions print and return ``None`` (a check cell shows only its line). The learner's functions are tested
on inputs of the check's own (other layer sizes, other batch sizes, padding), not only on the notebook's, against
``gradacc.frameworks.jaxacc``'s reference: the full-batch gradient of the mean loss.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ...foundations.data import IGNORE_INDEX
from ...frameworks import jaxacc
from ...i18n import _
from . import close, run_check

__all__ = ["check_scan_accumulation", "check_unequal_window", "matmul_shapes", "TOLERANCE"]

TOLERANCE = 1e-5
"""Absolute tolerance on losses and gradient entries (float32; the correct answers agree to about 1e-8)."""


def _problem(seed: int, sizes: tuple[int, ...], rows: int, real: int):
    """MLP parameters and a batch of ``rows`` rows whose first ``real`` rows are real, the rest ``IGNORE_INDEX`` padding.

    Drawn with NumPy (PyTorch's ``nn.Linear`` bounds, standard-normal inputs): eager JAX would compile every random op.
    """
    rng = np.random.default_rng(seed)
    params = [
        {
            "w": jnp.asarray(rng.uniform(-1, 1, (n_in, n_out)) / np.sqrt(n_in), jnp.float32),
            "b": jnp.asarray(rng.uniform(-1, 1, n_out) / np.sqrt(n_in), jnp.float32),
        }
        for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True)
    ]
    x = jnp.asarray(rng.standard_normal((rows, sizes[0])), jnp.float32)
    labels = rng.integers(0, sizes[-1], rows)
    y = jnp.asarray(np.where(np.arange(rows) < real, labels, IGNORE_INDEX), jnp.int32)
    return params, x, y


def _compare(name: str, got: object, params, x_real, y_real) -> str | None:
    try:
        loss, grads = got  # type: ignore[misc]
    except (TypeError, ValueError):
        return _("{case}: return a pair (loss, grads), got {got}").format(case=name, got=type(got).__name__)
    want_loss, want_grads = jaxacc.full_batch_grads(params, x_real, y_real)
    if jax.tree_util.tree_structure(grads) != jax.tree_util.tree_structure(want_grads):
        return _("{case}: grads must have the parameters' structure {structure}").format(
            case=name, structure=jax.tree_util.tree_structure(want_grads)
        )
    hint = _("sum over micro-batches, then divide once by the number of real (non-IGNORE_INDEX) labels in the window")
    problem = close(_("the loss for {case}").format(case=name), loss, float(want_loss), TOLERANCE)
    if problem:
        return _("{problem}; the loss is the mean per real item: {hint}").format(problem=problem, hint=hint)
    diff = jaxacc.max_abs_diff(grads, want_grads)
    if not diff <= TOLERANCE:
        return _("{case}: max |grads - full-batch grads| = {diff} > {tol}; {hint}").format(
            case=name, diff=f"{diff:.3g}", tol=f"{TOLERANCE:g}", hint=hint
        )
    return None


def check_scan_accumulation(accumulate: Callable) -> None:
    """Exercise 6.1: ``accumulate(params, x, y, accum_steps) -> (loss, grads)`` with ``jax.lax.scan``.

    Must equal the full-batch mean loss and gradient over the REAL rows (labels not ``IGNORE_INDEX``), for several
    models, batch sizes and ``accum_steps`` (1, 4, 8), when jitted with ``accum_steps`` static, and its traced
    program must contain a ``scan`` (a Python loop is unrolled instead).
    """

    def body(accumulate=accumulate) -> str | None:
        cases = [
            (_("3 layers, N=4, 13 padding rows"), 1, (12, 20, 16, 5), 48, 35, 4),
            (_("2 layers, N=8, no padding"), 2, (64, 32, 10), 64, 64, 8),
        ]
        jitted = jax.jit(accumulate, static_argnums=3)
        for name, seed, sizes, rows, real, n in cases:
            params, x, y = _problem(seed, sizes, rows, real)
            problem = _compare(name, jitted(params, x, y, n), params, x[:real], y[:real])
            if problem:
                return problem
        params, x, y = _problem(3, (6, 8, 4), 32, 30)
        if jaxacc.count_traced_ops(lambda p, a, b: accumulate(p, a, b, 4), params, x, y, primitive="scan") == 0:
            return _(
                "the traced program has no scan: write the micro-step as the body of jax.lax.scan, not a Python loop"
            )
        return None

    run_check("6.1", body)


@contextlib.contextmanager
def matmul_shapes() -> Iterator[list[tuple[int, ...]]]:
    """Record the operand shapes of every matrix product (``jax.lax.dot_general_p``: ``@``, ``jnp.dot``, ``einsum``,
    forward and backward) that runs or is traced inside the ``with`` block, in JAX 0.7 and 0.10 alike.

    The block runs under ``jax.disable_jit()``: jitted functions run operation by operation, so every product binds
    the primitive and is seen, also one whose jitted function was traced before (its cached trace is not used).
    Clearing JAX's caches instead (``jax.clear_caches``) made every operation compile again on every call: 17 s per
    hidden-check seed of exercise 6.2 on a 2-core machine. A model that multiplies the whole window at once (the
    micro-batches concatenated) shows the window's total row count in some shape; an accumulating one shows only
    micro-batch sizes.
    """
    seen: list[tuple[int, ...]] = []
    primitive = jax.lax.dot_general_p
    bind = primitive.bind

    def spy(*args, **params):
        seen.extend(tuple(getattr(a, "shape", ())) for a in args[:2])
        return bind(*args, **params)

    primitive.bind = spy
    try:
        with jax.disable_jit():
            yield seen
    finally:
        primitive.bind = bind


def check_unequal_window(window_grads: Callable) -> None:
    """Exercise 6.2: ``window_grads(params, micro_batches) -> (loss, grads)`` for micro-batches of different sizes.

    ``micro_batches`` is a list of ``(x_i [n_i, in], y_i [n_i])``; the answer must equal the mean loss and gradient
    of the concatenated window (every SAMPLE weighs the same), not the mean of the micro-batch means, and must get
    there by accumulating: no matrix product may see the window's total row count (``matmul_shapes``).
    """

    def body(window_grads=window_grads) -> str | None:
        cases = [
            (_("micro-batches of sizes {sizes}").format(sizes="5, 40, 17"), 5, (12, 20, 5), (5, 40, 17)),
            (_("micro-batches of sizes {sizes}").format(sizes="40, 40, 5"), 6, (12, 20, 5), (40, 40, 5)),
        ]
        for name, seed, sizes, lengths in cases:
            params, x, y = _problem(seed, sizes, sum(lengths), sum(lengths))
            bounds = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
            micro_batches = [(x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            with matmul_shapes() as shapes:
                got = window_grads(params, micro_batches)
            problem = _compare(name, got, params, x, y)
            if problem:
                return problem
            if any(sum(lengths) in shape for shape in shapes):
                return _(
                    "{case}: the numbers are right, but a matrix product ran on all {rows} rows of the window at once "
                    "(the micro-batches concatenated): that is one big batch, not accumulation. Compute each "
                    "micro-batch's summed loss and gradient on its own rows and add them up"
                ).format(case=name, rows=sum(lengths))
        return None

    run_check("6.2", body)
