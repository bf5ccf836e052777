"""Gradient accumulation in JAX: plain pytrees, ``jax.grad``, ``jax.lax.scan`` and ``optax.MultiSteps`` (lesson 06).

Parameters are a plain pytree: a list with one ``{"w": [in, out], "b": [out]}`` dict per linear layer, float32 by
default, with ReLU between layers. That is the same function as ``gradacc.foundations.models.DigitsMLP`` (``depth``
hidden ``Linear -> ReLU`` blocks, no normalization), so ``params_from_torch`` gives a JAX model with the PyTorch model's
exact weights, and gradients can be compared across frameworks.

The accumulation rule is the course's (see ``gradacc.foundations.accumulation``): every micro-batch loss is a SUM over
its items, the summed gradients are added up across the window, and the total is divided ONCE by the number of items in
the whole window. Labels equal to ``IGNORE_INDEX`` (-100) are padding and count for nothing; that is how micro-batches
of different real sizes keep the static shapes ``jax.jit`` and ``jax.lax.scan`` need.

The computing functions are already ``jax.jit``-ed, with ``accum_steps`` and ``dropout_rate`` static (Python values
that fix the program: a new value compiles a new program); called inside another ``jit`` they are inlined. Bad values
raise ``ValueError`` when the function is traced. (Calling un-jitted JAX code op by op on the CPU compiles every
primitive separately: many times slower, and hundreds of MiB of compiled code.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..foundations.data import IGNORE_INDEX, check_accum_steps

__all__ = [
    "Params",
    "mlp_init",
    "params_from_torch",
    "grads_from_torch",
    "digits_arrays",
    "mlp_apply",
    "count_items",
    "sum_cross_entropy",
    "mean_cross_entropy",
    "split_micro_batches",
    "full_batch_grads",
    "accumulate_grads_loop",
    "accumulate_grads_scan",
    "max_abs_diff",
    "count_traced_ops",
    "multisteps",
    "make_micro_step",
    "make_train_step",
]

Params = list[dict[str, jax.Array]]
"""One ``{"w": [in, out], "b": [out]}`` dict per linear layer, input layer first."""


def mlp_init(key: jax.Array, sizes: Sequence[int], dtype: Any = jnp.float32) -> Params:
    """Random MLP parameters with PyTorch's default ``nn.Linear`` initialisation.

    Each weight and bias is drawn from ``U(-1/sqrt(in), 1/sqrt(in))`` (what ``nn.Linear.reset_parameters`` gives:
    Kaiming-uniform with ``a=sqrt(5)``), so activations have the same scale as in the PyTorch lessons; the values
    themselves differ (different random generators). Use ``params_from_torch`` for identical weights.

    Args:
        key: a ``jax.random`` key.
        sizes: layer widths including input and output, e.g. ``(64, 32, 10)`` for ``DigitsMLP(hidden=32)``;
            at least two entries, all >= 1.
        dtype: parameter dtype (float32 by default).

    Returns:
        ``len(sizes) - 1`` dicts ``{"w": [sizes[i], sizes[i+1]], "b": [sizes[i+1]]}``.

    Raises:
        ValueError: fewer than two sizes, or a size < 1.
    """
    sizes = list(sizes)
    if len(sizes) < 2 or any(not isinstance(s, int | np.integer) or s < 1 for s in sizes):
        raise ValueError(f"sizes must list >= 2 layer widths >= 1 (input, ..., output), got {sizes!r}")
    params: Params = []
    for layer_key, (fan_in, fan_out) in zip(
        jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:], strict=True), strict=True
    ):
        w_key, b_key = jax.random.split(layer_key)
        bound = 1.0 / float(np.sqrt(fan_in))
        params.append(
            {
                "w": jax.random.uniform(w_key, (fan_in, fan_out), dtype, -bound, bound),
                "b": jax.random.uniform(b_key, (fan_out,), dtype, -bound, bound),
            }
        )
    return params


def _linears(model: Any) -> list[Any]:
    from torch import nn

    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    others = [
        type(m).__name__
        for m in model.modules()
        if not isinstance(m, nn.Linear) and any(True for _ in m.parameters(recurse=False))
    ]
    if not linears or others or any(m.bias is None for m in linears):
        raise ValueError(
            "params_from_torch needs a model whose only parameters are nn.Linear layers applied in order with ReLU "
            f"between them (e.g. DigitsMLP(norm=None)); found {len(linears)} Linear layers and parameterised "
            f"{others or 'nothing else'} (every Linear needs a bias)"
        )
    return linears


def _to_jax(tensor: Any, name: str) -> jax.Array:
    if tensor is None:
        raise ValueError(f"{name} is None: run loss.backward() before grads_from_torch")
    return jnp.asarray(tensor.detach().cpu().numpy())


def params_from_torch(model: Any) -> Params:
    """The weights of a PyTorch MLP (``DigitsMLP``, or ``nn.Sequential`` of ``Linear``/``ReLU``) as JAX parameters.

    PyTorch stores ``weight`` as ``[out, in]`` and computes ``x @ weight.T + bias``; the JAX layout is ``w = weight.T``
    (``[in, out]``), so ``mlp_apply(params_from_torch(model), x)`` equals ``model(x)`` up to float rounding.
    The dtype is kept (a float64 model gives float64 arrays only when ``jax_enable_x64`` is on; else float32).

    Raises:
        ValueError: the model has no ``nn.Linear`` or has other parameterised modules (BatchNorm, LayerNorm, ...).
    """
    return [{"w": _to_jax(m.weight, "weight").T, "b": _to_jax(m.bias, "bias")} for m in _linears(model)]


def grads_from_torch(model: Any) -> Params:
    """The ``.grad`` of a PyTorch MLP's linear layers in the ``params_from_torch`` layout (``w = weight.grad.T``).

    Raises:
        ValueError: as ``params_from_torch``, or a gradient is missing (``backward()`` not run yet).
    """
    return [
        {"w": _to_jax(m.weight.grad, "weight.grad").T, "b": _to_jax(m.bias.grad, "bias.grad")} for m in _linears(model)
    ]


def digits_arrays(n_samples: int | None = None) -> tuple[jax.Array, jax.Array]:
    """The bundled handwritten digits (``gradacc.foundations.data.load_digits_tensors``) as JAX arrays.

    Returns:
        ``x`` float32 ``[n, 64]`` in 0..1 and ``y`` int32 ``[n]`` labels 0..9 (``n = 1797`` by default).

    Raises:
        ValueError: ``n_samples`` outside ``1..1797``.
    """
    from ..foundations.data import load_digits_tensors

    x, y = load_digits_tensors()
    if n_samples is not None:
        if not 1 <= n_samples <= len(x):
            raise ValueError(f"n_samples must be in 1..{len(x)}, got {n_samples!r}")
        x, y = x[:n_samples], y[:n_samples]
    return jnp.asarray(x.numpy()), jnp.asarray(y.numpy().astype(np.int32))


@partial(jax.jit, static_argnames="dropout_rate")
def mlp_apply(params: Params, x: jax.Array, *, dropout_rate: float = 0.0, key: jax.Array | None = None) -> jax.Array:
    """Logits ``[B, out]`` of the MLP on inputs ``x`` ``[B, in]``: ``Linear -> ReLU -> ... -> Linear``.

    Args:
        dropout_rate: probability of zeroing a hidden activation (inverted dropout: survivors scaled by
            ``1 / (1 - rate)``, as ``nn.Dropout``); applied only when ``key`` is given.
        key: a ``jax.random`` key for the dropout masks (one per hidden layer, split from it).

    Raises:
        ValueError: ``dropout_rate`` outside ``[0, 1)``.
    """
    if not 0.0 <= dropout_rate < 1.0:
        raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate!r}")
    use_dropout = key is not None and dropout_rate > 0.0
    keys = jax.random.split(key, max(len(params) - 1, 1)) if use_dropout else None
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i < len(params) - 1:
            h = jax.nn.relu(h)
            if use_dropout:
                keep = jax.random.bernoulli(keys[i], 1.0 - dropout_rate, h.shape)
                h = jnp.where(keep, h / (1.0 - dropout_rate), 0.0)
    return h


@jax.jit
def count_items(y: jax.Array) -> jax.Array:
    """Number of labels that count (not ``IGNORE_INDEX``), an int32 scalar: the items a micro-batch contributes."""
    return jnp.sum(y != IGNORE_INDEX, dtype=jnp.int32)


@partial(jax.jit, static_argnames="dropout_rate")
def sum_cross_entropy(
    params: Params, x: jax.Array, y: jax.Array, *, dropout_rate: float = 0.0, key: jax.Array | None = None
) -> jax.Array:
    """Summed (not averaged) cross-entropy over the labels of ``y`` that are not ``IGNORE_INDEX``.

    Args:
        x: inputs ``[B, in]`` (float).
        y: integer labels ``[B]``; ``IGNORE_INDEX`` marks padding rows (their loss and gradient are exactly 0).

    Returns:
        A scalar of the parameters' dtype. Uses ``optax.losses.softmax_cross_entropy_with_integer_labels``.
    """
    logits = mlp_apply(params, x, dropout_rate=dropout_rate, key=key)
    valid = y != IGNORE_INDEX
    losses = optax.losses.softmax_cross_entropy_with_integer_labels(logits, jnp.where(valid, y, 0))
    return jnp.sum(jnp.where(valid, losses, 0.0))


@partial(jax.jit, static_argnames="dropout_rate")
def mean_cross_entropy(
    params: Params, x: jax.Array, y: jax.Array, *, dropout_rate: float = 0.0, key: jax.Array | None = None
) -> jax.Array:
    """Mean cross-entropy per counted item: ``sum_cross_entropy / count_items`` (0 when no item counts)."""
    total = sum_cross_entropy(params, x, y, dropout_rate=dropout_rate, key=key)
    return total / jnp.maximum(count_items(y), 1).astype(total.dtype)


def split_micro_batches(x: jax.Array, y: jax.Array, accum_steps: int) -> tuple[jax.Array, jax.Array]:
    """Reshape one batch into ``accum_steps`` equal micro-batches: ``[B, ...] -> [N, B // N, ...]``.

    Micro-batch ``i`` holds rows ``i * B // N`` to ``(i + 1) * B // N - 1`` (the same order as a Python loop over
    slices, and as ``gradacc.foundations.data.split_micro_batches`` when ``B`` is divisible).

    Raises:
        ValueError: bad ``accum_steps``; ``x`` and ``y`` with different first dimensions; ``B`` not divisible by
            ``accum_steps`` (pad the batch with ``IGNORE_INDEX`` labels to a multiple of it).
    """
    check_accum_steps(accum_steps)
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and y must hold the same number of samples, got {x.shape[0]} inputs and {y.shape[0]} labels"
        )
    if x.shape[0] % accum_steps:
        raise ValueError(
            f"a batch of {x.shape[0]} samples is not divisible by accum_steps={accum_steps}; use a batch size that is "
            f"a multiple of {accum_steps}, or pad the batch with IGNORE_INDEX ({IGNORE_INDEX}) labels"
        )
    micro = x.shape[0] // accum_steps
    return x.reshape(accum_steps, micro, *x.shape[1:]), y.reshape(accum_steps, micro, *y.shape[1:])


@jax.jit
def full_batch_grads(params: Params, x: jax.Array, y: jax.Array) -> tuple[jax.Array, Params]:
    """``(loss, grads)`` of the mean cross-entropy over the whole batch: the target accumulation must reproduce."""
    return jax.value_and_grad(mean_cross_entropy)(params, x, y)


def _micro_key(key: jax.Array | None, i: int | jax.Array) -> jax.Array | None:
    return None if key is None else jax.random.fold_in(key, i)


@partial(jax.jit, static_argnames=("accum_steps", "dropout_rate"))
def accumulate_grads_loop(
    params: Params,
    x: jax.Array,
    y: jax.Array,
    accum_steps: int,
    *,
    dropout_rate: float = 0.0,
    key: jax.Array | None = None,
) -> tuple[jax.Array, Params]:
    """Accumulated ``(loss, grads)`` from ``accum_steps`` micro-batches with a Python loop and
    ``jax.tree_util.tree_map``.

    Each micro-step takes ``jax.value_and_grad`` of the micro-batch's SUMMED loss; the gradients are added leaf by
    leaf; the totals are divided once by the number of counted items in the window (``count_items(y)``). Under
    ``jax.jit`` the loop is unrolled: the compiled program holds ``accum_steps`` copies of the forward/backward pass.

    Args:
        params: the MLP parameters (see ``Params``).
        x: inputs ``[B, in]``; y: labels ``[B]`` (``IGNORE_INDEX`` for padding); ``B`` divisible by ``accum_steps``.
        accum_steps: N, the number of micro-batches (a Python int: static under jit).
        dropout_rate, key: dropout; micro-batch ``i`` uses ``jax.random.fold_in(key, i)``, so its mask does not
            depend on how the loop is written (loop or scan) and differs between micro-batches.

    Returns:
        ``(loss, grads)``: the mean loss per counted item (scalar) and a pytree shaped like ``params``.

    Raises:
        ValueError: see ``split_micro_batches``.
    """
    xs, ys = split_micro_batches(x, y, accum_steps)
    grad_fn = jax.value_and_grad(sum_cross_entropy)
    loss_sum = jnp.zeros((), dtype=params[0]["w"].dtype)
    grad_sum = jax.tree_util.tree_map(jnp.zeros_like, params)
    for i in range(accum_steps):
        loss, grads = grad_fn(params, xs[i], ys[i], dropout_rate=dropout_rate, key=_micro_key(key, i))
        loss_sum = loss_sum + loss
        grad_sum = jax.tree_util.tree_map(jnp.add, grad_sum, grads)
    items = jnp.maximum(count_items(y), 1).astype(loss_sum.dtype)
    return loss_sum / items, jax.tree_util.tree_map(lambda g: g / items, grad_sum)


@partial(jax.jit, static_argnames=("accum_steps", "dropout_rate"))
def accumulate_grads_scan(
    params: Params,
    x: jax.Array,
    y: jax.Array,
    accum_steps: int,
    *,
    dropout_rate: float = 0.0,
    key: jax.Array | None = None,
) -> tuple[jax.Array, Params]:
    """Accumulated ``(loss, grads)`` with ``jax.lax.scan`` over the micro-batches (same numbers as the loop).

    The carry is ``(summed loss, summed gradients)``, initialised with zeros of the parameters' shapes
    (``tree_map(jnp.zeros_like, params)``); the scan body is one micro-step, compiled once, so activations of only one
    micro-batch are live at a time and compiled memory FALLS as ``accum_steps`` grows (a Python loop unrolled inside
    jit does not fall). Arguments, return value and errors: as ``accumulate_grads_loop``.

    Source: ``jax.lax.scan`` docs; the optax "gradient accumulation" guide.
    """
    xs, ys = split_micro_batches(x, y, accum_steps)
    grad_fn = jax.value_and_grad(sum_cross_entropy)

    def micro_step(carry, batch):
        loss_sum, grad_sum = carry
        i, xb, yb = batch
        loss, grads = grad_fn(params, xb, yb, dropout_rate=dropout_rate, key=_micro_key(key, i))
        return (loss_sum + loss, jax.tree_util.tree_map(jnp.add, grad_sum, grads)), None

    init = (jnp.zeros((), dtype=params[0]["w"].dtype), jax.tree_util.tree_map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(micro_step, init, (jnp.arange(accum_steps), xs, ys))
    items = jnp.maximum(count_items(y), 1).astype(loss_sum.dtype)
    return loss_sum / items, jax.tree_util.tree_map(lambda g: g / items, grad_sum)


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest absolute element-wise difference between two pytrees of the same structure (a Python float).

    Raises:
        ValueError: the pytrees differ in structure or in a leaf's shape.
    """
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    if tree_a != tree_b:
        raise ValueError(f"pytrees differ in structure: {tree_a} vs {tree_b}")
    diffs = []
    for u, v in zip(leaves_a, leaves_b, strict=True):
        u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
        if u.shape != v.shape:
            raise ValueError(f"leaf shapes differ: {u.shape} vs {v.shape}")
        diffs.append(float(np.max(np.abs(u - v))) if u.size else 0.0)
    return max(diffs, default=0.0)


def count_traced_ops(fn: Callable, *args: Any, primitive: str = "dot_general", **kwargs: Any) -> int:
    """How many ``primitive`` operations the program traced from ``fn(*args, **kwargs)`` holds (an int).

    Traces with ``jax.make_jaxpr`` (nothing is compiled or run) and counts equations whose primitive is named
    ``primitive`` (default ``"dot_general``: matrix products), recursing into nested programs (``jit``-ed callees,
    the body of a ``scan`` or ``while``, branches of a ``cond``): a ``scan`` body counts ONCE however many times it
    runs, a Python loop counts once per iteration (it is unrolled). Keyword arguments are passed as static values.
    The count does not depend on the backend (CPU or GPU).
    """

    def count(jaxpr) -> int:
        total = 0
        for eqn in jaxpr.eqns:
            total += eqn.primitive.name == primitive
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple | list) else (value,):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        total += count(inner)
        return total

    closed = jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args)
    return count(closed.jaxpr)


def multisteps(
    optimizer: optax.GradientTransformation, accum_steps: int, *, use_grad_mean: bool = True
) -> optax.MultiSteps:
    """``optax.MultiSteps(optimizer, every_k_schedule=accum_steps)``: one call per micro-batch, an update every N-th.

    MultiSteps keeps ``acc_grads`` (a copy of the parameters' shapes) and returns zero updates on the first N-1 calls;
    on the N-th it passes the accumulated gradient to ``optimizer`` (whose state therefore advances once per window)
    and resets. With ``use_grad_mean=True`` (optax's default) it AVERAGES the N micro-batch gradients: correct for
    equal micro-batches, the mean-of-means bias when their item counts differ. With ``use_grad_mean=False`` it SUMS
    them: give it gradients of ``sum / window_items`` (see ``make_micro_step``) to get the exact window mean.

    Raises:
        ValueError: bad ``accum_steps`` (see ``gradacc.foundations.data.check_accum_steps``).

    Source: optax docs, ``optax.MultiSteps``.
    """
    check_accum_steps(accum_steps)
    return optax.MultiSteps(optimizer, every_k_schedule=accum_steps, use_grad_mean=use_grad_mean)


def _apply(
    optimizer: optax.GradientTransformation, grads: Params, opt_state: Any, params: Params
) -> tuple[Params, Any]:
    """One optimizer update: ``(new params, new optimizer state)``."""
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def _maybe_jit(step: Callable, *, jit: bool, donate: bool) -> Callable:
    """``step`` itself, or jitted with ``params`` and ``opt_state`` donated when ``donate``."""
    return jax.jit(step, donate_argnums=(0, 1) if donate else ()) if jit else step


def make_micro_step(
    optimizer: optax.GradientTransformation, *, donate: bool = False, jit: bool = True
) -> Callable[..., tuple[Params, Any, jax.Array]]:
    """A one-micro-batch training step ``step(params, opt_state, x, y, window_items=None) -> (params, opt_state,
    loss)``.

    The gradient is that of the micro-batch's mean loss (``window_items=None``: what ``MultiSteps`` users usually
    write) or of its summed loss divided by ``window_items`` (the number of counted items in the WHOLE window, an int
    scalar: use with ``multisteps(..., use_grad_mean=False)`` for the exact window mean). Then
    ``optimizer.update`` and ``optax.apply_updates``.

    Args:
        optimizer: any optax transformation, typically ``multisteps(opt, N)``.
        donate: donate ``params`` and ``opt_state`` (``donate_argnums=(0, 1)``): XLA may write the new ones into the
            old buffers, so they need no second copy. The old arrays are invalid after the call.
        jit: return the ``jax.jit``-ed step (default) or the plain function.

    Returns:
        The step; ``loss`` is the loss that was differentiated (a scalar).
    """

    def step(params, opt_state, x, y, window_items=None):
        if window_items is None:
            loss_fn = mean_cross_entropy
        else:

            def loss_fn(p, xb, yb):
                total = sum_cross_entropy(p, xb, yb)
                return total / jnp.asarray(window_items, total.dtype)

        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return (*_apply(optimizer, grads, opt_state, params), loss)

    return _maybe_jit(step, jit=jit, donate=donate)


def make_train_step(
    optimizer: optax.GradientTransformation,
    accum_steps: int,
    method: Literal["scan", "loop"] = "scan",
    *,
    donate: bool = False,
    jit: bool = True,
) -> Callable[..., tuple[Params, Any, jax.Array]]:
    """One optimizer step over a whole window: ``step(params, opt_state, x, y) -> (params, opt_state, loss)``.

    ``x`` ``[B, in]`` and ``y`` ``[B]`` hold the effective batch; it is accumulated over ``accum_steps`` micro-batches
    with ``accumulate_grads_scan`` (``method="scan"``) or ``accumulate_grads_loop`` (``"loop"``, unrolled under jit),
    then ``optimizer`` makes one update. ``donate`` and ``jit`` as in ``make_micro_step``.

    Raises:
        ValueError: bad ``accum_steps`` or ``method``.
    """
    check_accum_steps(accum_steps)
    accumulate = {"scan": accumulate_grads_scan, "loop": accumulate_grads_loop}.get(method)
    if accumulate is None:
        raise ValueError(f"method must be 'scan' or 'loop', got {method!r}")

    def step(params, opt_state, x, y):
        loss, grads = accumulate(params, x, y, accum_steps)
        return (*_apply(optimizer, grads, opt_state, params), loss)

    return _maybe_jit(step, jit=jit, donate=donate)
