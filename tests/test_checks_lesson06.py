"""The checks of lesson 06's exercises pass the reference answers and FAIL plausible wrong ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradacc.course.checks.lesson06 import check_scan_accumulation, check_unequal_window
from gradacc.frameworks import jaxacc

grad_fn = jax.value_and_grad(jaxacc.sum_cross_entropy)


def _scan(params, x, y, accum_steps, divide_by="items"):
    xs = x.reshape(accum_steps, -1, *x.shape[1:])
    ys = y.reshape(accum_steps, -1)

    def body(carry, batch):
        loss, grads = grad_fn(params, *batch)
        return (carry[0] + loss, jax.tree_util.tree_map(jnp.add, carry[1], grads)), None

    init = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss, grads), _ = jax.lax.scan(body, init, (xs, ys))
    n = jaxacc.count_items(y) if divide_by == "items" else x.shape[0]
    return loss / n, jax.tree_util.tree_map(lambda g: g / n, grads)


def scan_right(params, x, y, accum_steps):
    return _scan(params, x, y, accum_steps)


def scan_divides_by_rows(params, x, y, accum_steps):  # counts padding rows as items
    return _scan(params, x, y, accum_steps, divide_by="rows")


def scan_mean_of_means(params, x, y, accum_steps):  # what MultiSteps does by default
    xs, ys = x.reshape(accum_steps, -1, *x.shape[1:]), y.reshape(accum_steps, -1)

    def body(carry, batch):
        loss, grads = jax.value_and_grad(jaxacc.mean_cross_entropy)(params, *batch)
        return (carry[0] + loss, jax.tree_util.tree_map(jnp.add, carry[1], grads)), None

    init = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss, grads), _ = jax.lax.scan(body, init, (xs, ys))
    return loss / accum_steps, jax.tree_util.tree_map(lambda g: g / accum_steps, grads)


def python_loop(params, x, y, accum_steps):  # right numbers, but no scan
    return jaxacc.accumulate_grads_loop(params, x, y, accum_steps)


def grads_only(params, x, y, accum_steps):
    return scan_right(params, x, y, accum_steps)[1]


def not_answered(*args):
    raise NotImplementedError()


def window_right(params, micro_batches):
    loss_sum, grad_sum, items = 0.0, jax.tree_util.tree_map(jnp.zeros_like, params), 0
    for xb, yb in micro_batches:
        loss, grads = grad_fn(params, xb, yb)
        loss_sum, items = loss_sum + loss, items + jaxacc.count_items(yb)
        grad_sum = jax.tree_util.tree_map(jnp.add, grad_sum, grads)
    return loss_sum / items, jax.tree_util.tree_map(lambda g: g / items, grad_sum)


def window_mean_of_means(params, micro_batches):
    results = [jaxacc.full_batch_grads(params, xb, yb) for xb, yb in micro_batches]
    n = len(results)
    return sum(r[0] for r in results) / n, jax.tree_util.tree_map(lambda *g: sum(g) / n, *[r[1] for r in results])


def window_sum_over_micro_batches(params, micro_batches):  # sums, but divides by N instead of the items
    loss_sum, grad_sum = 0.0, jax.tree_util.tree_map(jnp.zeros_like, params)
    for xb, yb in micro_batches:
        loss, grads = grad_fn(params, xb, yb)
        loss_sum, grad_sum = loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)
    n = len(micro_batches)
    return loss_sum / n, jax.tree_util.tree_map(lambda g: g / n, grad_sum)


def window_concatenated(params, micro_batches):  # right numbers, one big batch: not accumulation (issue 13)
    x = jnp.concatenate([xb for xb, _ in micro_batches])
    y = jnp.concatenate([yb for _, yb in micro_batches])
    return jaxacc.full_batch_grads(params, x, y)


_jitted_full_batch = jax.jit(jaxacc.full_batch_grads)


def window_concatenated_numpy_jit(params, micro_batches):  # the same through NumPy and a cached jitted function
    x = np.concatenate([np.asarray(xb) for xb, _ in micro_batches])
    y = np.concatenate([np.asarray(yb) for _, yb in micro_batches])
    return _jitted_full_batch(params, x, y)


def _line(capsys, check, answer) -> tuple[bool, str]:
    assert check(answer) is None  # a check cell shows only the printed line
    line = capsys.readouterr().out.strip()
    return line.endswith(": correct"), line


def test_scan_check_passes_the_reference(capsys):
    assert _line(capsys, check_scan_accumulation, scan_right) == (True, "Exercise 6.1: correct")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (scan_divides_by_rows, "real (non-IGNORE_INDEX) labels"),
        (scan_mean_of_means, "real (non-IGNORE_INDEX) labels"),
        (python_loop, "no scan"),
        (grads_only, "return a pair"),
        (not_answered, "not answered yet"),
    ],
)
def test_scan_check_fails_wrong_answers(capsys, answer, says):
    ok, line = _line(capsys, check_scan_accumulation, answer)
    assert not ok and line.startswith("Exercise 6.1: incorrect - ") and says in line, line


def test_window_check_passes_the_reference(capsys):
    assert _line(capsys, check_unequal_window, window_right) == (True, "Exercise 6.2: correct")
    # twice: the jitted per-micro-batch function is cached by then, and still passes
    assert _line(capsys, check_unequal_window, window_right) == (True, "Exercise 6.2: correct")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (window_mean_of_means, "real (non-IGNORE_INDEX) labels"),
        (window_sum_over_micro_batches, "real (non-IGNORE_INDEX) labels"),
        (window_concatenated, "the micro-batches concatenated"),
        (window_concatenated_numpy_jit, "the micro-batches concatenated"),
        (not_answered, "not answered yet"),
    ],
)
def test_window_check_fails_wrong_answers(capsys, answer, says):
    for _ in range(2):  # a second run finds the learner's jitted functions cached: still caught
        ok, line = _line(capsys, check_unequal_window, answer)
        assert not ok and line.startswith("Exercise 6.2: incorrect - ") and says in line, line
