"""Unit tests of gradacc.frameworks.jaxacc: the numbers lesson 06 relies on (JAX accumulation vs the full batch and vs
PyTorch)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

from gradacc.foundations.accumulation import sum_cross_entropy as torch_sum_cross_entropy
from gradacc.foundations.data import IGNORE_INDEX
from gradacc.foundations.models import make_digits_model
from gradacc.frameworks import jaxacc as J
from gradacc.memory import step_memory


@pytest.fixture(scope="module")
def batch():
    return J.digits_arrays(128)


@pytest.fixture(scope="module")
def params():
    return J.params_from_torch(make_digits_model(seed=0))


def test_digits_arrays_are_the_bundled_digits():
    x, y = J.digits_arrays()
    assert x.shape == (1797, 64) and x.dtype == jnp.float32 and y.dtype == jnp.int32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert np.bincount(np.asarray(y)).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    with pytest.raises(ValueError, match="n_samples must be in 1..1797, got 0"):
        J.digits_arrays(0)


def test_mlp_init_shapes_dtypes_and_pytorch_bounds():
    params = J.mlp_init(jax.random.key(0), (64, 32, 10))
    assert [(p["w"].shape, p["b"].shape) for p in params] == [((64, 32), (32,)), ((32, 10), (10,))]
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(params))
    assert float(jnp.abs(params[0]["w"]).max()) <= 1 / 8 and float(jnp.abs(params[0]["w"]).max()) > 0.12
    assert float(jnp.abs(params[1]["w"]).max()) <= 1 / np.sqrt(32)
    for bad in [(64,), (64, 0, 10), (64, 2.5, 10)]:
        with pytest.raises(ValueError, match="sizes must list"):
            J.mlp_init(jax.random.key(0), bad)


def test_params_from_torch_reproduce_the_torch_forward(batch):
    x, _ = batch
    model = make_digits_model(seed=0, hidden=48, depth=2)
    params = J.params_from_torch(model)
    assert [p["w"].shape for p in params] == [(64, 48), (48, 48), (48, 10)]
    want = model(torch.from_numpy(np.array(x))).detach().numpy()
    assert float(np.abs(np.asarray(J.mlp_apply(params, x)) - want).max()) < 1e-5


def test_params_from_torch_refuses_models_it_cannot_represent():
    with pytest.raises(ValueError, match="only parameters are nn.Linear"):
        J.params_from_torch(make_digits_model(seed=0, norm="layer"))
    with pytest.raises(ValueError, match="needs a bias"):
        J.params_from_torch(torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False)))
    with pytest.raises(ValueError, match="run loss.backward"):
        J.grads_from_torch(make_digits_model(seed=0))


@pytest.mark.parametrize("accum_steps", [1, 2, 4, 8, 16])
def test_loop_and_scan_equal_the_full_batch(params, batch, accum_steps):
    x, y = batch
    loss_full, grads_full = J.full_batch_grads(params, x, y)
    loss_loop, grads_loop = J.accumulate_grads_loop(params, x, y, accum_steps)
    scan = jax.jit(J.accumulate_grads_scan, static_argnames="accum_steps")
    loss_scan, grads_scan = scan(params, x, y, accum_steps=accum_steps)
    scale = max(float(jnp.abs(g).max()) for g in jax.tree_util.tree_leaves(grads_full))
    assert scale > 1e-2  # the gradients are not trivially small
    assert J.max_abs_diff(grads_loop, grads_full) < 1e-6
    assert J.max_abs_diff(grads_scan, grads_full) < 1e-6
    assert J.max_abs_diff(grads_loop, grads_scan) < 1e-7
    assert abs(float(loss_loop) - float(loss_full)) < 1e-6 and abs(float(loss_scan) - float(loss_full)) < 1e-6


def test_dividing_each_micro_batch_mean_by_a_wrong_count_is_detected(params, batch):
    # the test's own control: a wrong accumulation (forgetting to divide by N) is far from the full batch
    x, y = batch
    _, grads_full = J.full_batch_grads(params, x, y)
    _, grads_scan = J.accumulate_grads_scan(params, x, y, 4)
    wrong = jax.tree_util.tree_map(lambda g: 4 * g, grads_scan)
    assert J.max_abs_diff(wrong, grads_full) > 1e-2


@pytest.mark.parametrize("bad", [0, -2, 2.0, "4", True, None])
def test_accumulation_refuses_bad_accum_steps(params, batch, bad):
    x, y = batch
    for fn in (J.accumulate_grads_loop, J.accumulate_grads_scan):
        with pytest.raises(ValueError, match="accum_steps"):
            fn(params, x, y, bad)
    with pytest.raises(ValueError, match="accum_steps"):
        J.multisteps(optax.sgd(0.1), bad)


def test_accumulation_refuses_indivisible_and_mismatched_batches(params, batch):
    x, y = batch
    with pytest.raises(ValueError, match="a batch of 128 samples is not divisible by accum_steps=3"):
        J.accumulate_grads_scan(params, x, y, 3)
    with pytest.raises(ValueError, match="128 inputs and 127 labels"):
        J.accumulate_grads_loop(params, x, y[:127], 2)
    with pytest.raises(ValueError, match="method must be 'scan' or 'loop'"):
        J.make_train_step(optax.sgd(0.1), 2, "while")


def test_padding_rows_count_for_nothing(params, batch):
    x, y = batch
    x_pad = jnp.concatenate([x[:100], jnp.ones((28, 64))])
    y_pad = jnp.concatenate([y[:100], jnp.full((28,), IGNORE_INDEX, jnp.int32)])
    loss_real, grads_real = J.full_batch_grads(params, x[:100], y[:100])
    loss_pad, grads_pad = J.accumulate_grads_scan(params, x_pad, y_pad, 4)  # micro-batches of 32, 32, 32, 4 real
    assert int(J.count_items(y_pad)) == 100
    assert J.max_abs_diff(grads_pad, grads_real) < 1e-6
    assert abs(float(loss_pad) - float(loss_real)) < 1e-6


def test_jax_gradient_equals_pytorch_gradient(batch):
    x, y = batch
    model = make_digits_model(seed=0)
    params = J.params_from_torch(model)
    xt, yt = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y)).long()
    (torch_sum_cross_entropy(model, (xt, yt)) / len(yt)).backward()
    _, grads = J.accumulate_grads_scan(params, x, y, 4)
    assert J.max_abs_diff(grads, J.grads_from_torch(model)) < 1e-5


def test_fold_in_keys_make_dropout_reproducible_and_loop_equal_scan(params, batch):
    x, y = batch
    key = jax.random.key(7)
    _, grads_loop = J.accumulate_grads_loop(params, x, y, 4, dropout_rate=0.5, key=key)
    _, grads_scan = J.accumulate_grads_scan(params, x, y, 4, dropout_rate=0.5, key=key)
    _, grads_again = J.accumulate_grads_scan(params, x, y, 4, dropout_rate=0.5, key=key)
    _, grads_other = J.accumulate_grads_scan(params, x, y, 4, dropout_rate=0.5, key=jax.random.key(8))
    _, grads_plain = J.accumulate_grads_scan(params, x, y, 4)
    assert J.max_abs_diff(grads_loop, grads_scan) < 1e-6
    assert J.max_abs_diff(grads_scan, grads_again) == 0.0
    assert J.max_abs_diff(grads_scan, grads_other) > 1e-3
    assert J.max_abs_diff(grads_scan, grads_plain) > 1e-3
    with pytest.raises(ValueError, match="dropout_rate must be in"):
        J.mlp_apply(params, x, dropout_rate=1.0, key=key)


def _multisteps_run(params, x, y, inner, accum_steps, **kwargs):
    opt = J.multisteps(inner, accum_steps, **kwargs)
    step = J.make_micro_step(opt)
    state = opt.init(params)
    history = []
    for xb, yb in zip(*J.split_micro_batches(x, y, accum_steps), strict=True):
        params, state, _ = step(params, state, xb, yb)
        history.append(params)
    return history, state


def test_multisteps_moves_on_the_nth_call_and_equals_one_full_batch_sgd_step(params, batch):
    x, y = batch
    history, state = _multisteps_run(params, x, y, optax.sgd(0.5), 4)
    assert [J.max_abs_diff(p, params) for p in history[:3]] == [0.0, 0.0, 0.0]
    assert J.max_abs_diff(history[3], params) > 1e-3
    _, grads = J.full_batch_grads(params, x, y)
    want = optax.apply_updates(params, jax.tree_util.tree_map(lambda g: -0.5 * g, grads))
    assert J.max_abs_diff(history[3], want) < 1e-6
    assert int(state.gradient_step) == 1 and int(state.mini_step) == 0


def test_multisteps_adam_counts_once_per_window(params, batch):
    x, y = batch
    opt = J.multisteps(optax.adam(1e-3), 4)
    step = J.make_micro_step(opt)
    state = opt.init(params)
    for _ in range(3):  # three windows of four micro-steps
        for xb, yb in zip(*J.split_micro_batches(x, y, 4), strict=True):
            params, state, _ = step(params, state, xb, yb)
    assert int(state.inner_opt_state[0].count) == 3 and int(state.gradient_step) == 3


def test_multisteps_mean_of_means_bias_and_its_fix(params, batch):
    x, y = batch
    # 4 micro-batches of 32 rows holding 32, 32, 32 and 4 real samples: the last one is mostly padding
    x_pad = jnp.concatenate([x[:100], jnp.zeros((28, 64))])
    y_pad = jnp.concatenate([y[:100], jnp.full((28,), IGNORE_INDEX, jnp.int32)])
    _, grads = J.full_batch_grads(params, x[:100], y[:100])
    want = optax.apply_updates(params, jax.tree_util.tree_map(lambda g: -1.0 * g, grads))
    biased, _ = _multisteps_run(params, x_pad, y_pad, optax.sgd(1.0), 4)
    assert J.max_abs_diff(biased[-1], want) > 1e-3

    opt = J.multisteps(optax.sgd(1.0), 4, use_grad_mean=False)
    step, state, fixed = J.make_micro_step(opt), opt.init(params), params
    items = J.count_items(y_pad)
    for xb, yb in zip(*J.split_micro_batches(x_pad, y_pad, 4), strict=True):
        fixed, state, _ = step(fixed, state, xb, yb, items)
    assert J.max_abs_diff(fixed, want) < 1e-6


def test_train_step_scan_and_loop_make_the_same_update(params, batch):
    x, y = batch
    opt = optax.adam(1e-3)
    p_scan, s_scan, l_scan = J.make_train_step(opt, 4, "scan")(params, opt.init(params), x, y)
    p_loop, s_loop, l_loop = J.make_train_step(opt, 4, "loop")(params, opt.init(params), x, y)
    assert J.max_abs_diff(p_scan, p_loop) < 1e-6 and abs(float(l_scan) - float(l_loop)) < 1e-6
    assert J.max_abs_diff(p_scan, params) > 1e-4 and int(s_scan[0].count) == 1


def test_step_memory_scan_falls_with_accum_steps_and_donation_aliases_the_state():
    sizes = (64, 256, 256, 10)
    one = step_memory("scan", sizes, 1024, 1)
    eight = step_memory("scan", sizes, 1024, 8)
    assert eight["total_mib"] < 0.6 * one["total_mib"]
    assert one["params_mib"] == pytest.approx((64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10) * 4 / 2**20)
    assert one["opt_state_mib"] == pytest.approx(2 * one["params_mib"], rel=1e-3)  # Adam: mu and nu
    donated = step_memory("scan", sizes, 1024, 8, donate=True)
    assert donated["alias_mib"] == pytest.approx(one["params_mib"] + one["opt_state_mib"], rel=1e-3)
    assert eight["alias_mib"] == 0.0
    with pytest.raises(ValueError, match="effective_batch_size=1000 is not divisible by accum_steps=3"):
        step_memory("scan", sizes, 1000, 3)
    with pytest.raises(ValueError, match="method must be"):
        step_memory("pmap", sizes, 1024, 2)


def test_count_traced_ops_sees_the_unrolled_loop_and_one_scan_body(params, batch):
    x, y = batch
    loop = [J.count_traced_ops(J.accumulate_grads_loop, params, x, y, accum_steps=n) for n in (1, 4, 8)]
    scan = [J.count_traced_ops(J.accumulate_grads_scan, params, x, y, accum_steps=n) for n in (1, 4, 8)]
    assert loop == [5, 20, 40]  # forward 2 + backward 3 matrix products per micro-batch (no gradient for the input)
    assert scan == [5, 5, 5]
    assert J.count_traced_ops(J.accumulate_grads_scan, params, x, y, accum_steps=4, primitive="scan") == 1
    assert J.count_traced_ops(J.accumulate_grads_loop, params, x, y, accum_steps=4, primitive="scan") == 0
