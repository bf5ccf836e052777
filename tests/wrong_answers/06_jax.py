"""Plausible wrong answers to exercises/06_jax.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; jax, jnp, jaxacc and IGNORE_INDEX come from the import cell


# %% 6.1 the mean of the micro-batch means (each divided by its own real items)
# misconception: mean-of-means
def accumulate_scan(params, x, y, accum_steps):
    xs = x.reshape(accum_steps, -1, *x.shape[1:])
    ys = y.reshape(accum_steps, -1)
    grad_fn = jax.value_and_grad(lambda p, xb, yb: jaxacc.sum_cross_entropy(p, xb, yb) / jaxacc.count_items(yb))

    def micro_step(carry, batch):
        loss_sum, grad_sum = carry
        loss, grads = grad_fn(params, *batch)
        return (loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)), None

    carry = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(micro_step, carry, (xs, ys))
    return loss_sum / accum_steps, jax.tree_util.tree_map(lambda g: g / accum_steps, grad_sum)


# %% 6.1 the padding rows counted as items
# misconception: padding-counted
def accumulate_scan(params, x, y, accum_steps):
    xs = x.reshape(accum_steps, -1, *x.shape[1:])
    ys = y.reshape(accum_steps, -1)
    grad_fn = jax.value_and_grad(jaxacc.sum_cross_entropy)

    def micro_step(carry, batch):
        loss_sum, grad_sum = carry
        loss, grads = grad_fn(params, *batch)
        return (loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)), None

    carry = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(micro_step, carry, (xs, ys))
    n_items = y.shape[0]
    return loss_sum / n_items, jax.tree_util.tree_map(lambda g: g / n_items, grad_sum)


# %% 6.1 a Python loop over the micro-batches (unrolled N times when jitted; no scan)
def accumulate_scan(params, x, y, accum_steps):
    grad_fn = jax.value_and_grad(jaxacc.sum_cross_entropy)
    loss_sum, grad_sum = jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params)
    for xb, yb in zip(jnp.split(x, accum_steps), jnp.split(y, accum_steps), strict=True):
        loss, grads = grad_fn(params, xb, yb)
        loss_sum = loss_sum + loss
        grad_sum = jax.tree_util.tree_map(jnp.add, grad_sum, grads)
    n_items = jaxacc.count_items(y)
    return loss_sum / n_items, jax.tree_util.tree_map(lambda g: g / n_items, grad_sum)


# %% 6.2 the micro-batches concatenated: one full-batch gradient, no accumulation
def window_grads(params, micro_batches):
    x = jnp.concatenate([xb for xb, _ in micro_batches])
    y = jnp.concatenate([yb for _, yb in micro_batches])
    loss, grads = jax.value_and_grad(jaxacc.sum_cross_entropy)(params, x, y)
    n_items = jaxacc.count_items(y)
    return loss / n_items, jax.tree_util.tree_map(lambda g: g / n_items, grads)


# %% 6.2 the mean of the micro-batch means
# misconception: mean-of-means
def window_grads(params, micro_batches):
    grad_fn = jax.value_and_grad(lambda p, xb, yb: jaxacc.sum_cross_entropy(p, xb, yb) / jaxacc.count_items(yb))
    loss_sum, grad_sum = 0.0, jax.tree_util.tree_map(jnp.zeros_like, params)
    for xb, yb in micro_batches:
        loss, grads = grad_fn(params, xb, yb)
        loss_sum = loss_sum + loss
        grad_sum = jax.tree_util.tree_map(jnp.add, grad_sum, grads)
    n = len(micro_batches)
    return loss_sum / n, jax.tree_util.tree_map(lambda g: g / n, grad_sum)


# %% 6.1 the window's summed loss divided by accum_steps instead of its real items
# misconception: divided-by-micro-batches
def accumulate_scan(params, x, y, accum_steps):
    xs = x.reshape(accum_steps, -1, *x.shape[1:])
    ys = y.reshape(accum_steps, -1)
    grad_fn = jax.value_and_grad(jaxacc.sum_cross_entropy)

    def micro_step(carry, batch):
        loss_sum, grad_sum = carry
        loss, grads = grad_fn(params, *batch)
        return (loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)), None

    carry = (jnp.zeros(()), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(micro_step, carry, (xs, ys))
    return loss_sum / accum_steps, jax.tree_util.tree_map(lambda g: g / accum_steps, grad_sum)
