"""Hidden checks of exercises/06_jax.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import jax
import jax.numpy as jnp

from gradacc import jaxacc
from gradacc.course.checks.lesson06 import matmul_shapes
from gradacc.data import IGNORE_INDEX


def draw_problem(seed: int, sizes: tuple[int, ...], rows: int, real: int):
    """MLP parameters and a batch whose rows after ``real`` are padding (label IGNORE_INDEX)."""
    k_params, k_x, k_y = jax.random.split(jax.random.key(seed), 3)
    params = jaxacc.mlp_init(k_params, sizes)
    x = jax.random.normal(k_x, (rows, sizes[0]))
    y = jax.random.randint(k_y, (rows,), 0, sizes[-1], dtype=jnp.int32)
    return params, x, jnp.where(jnp.arange(rows) < real, y, IGNORE_INDEX)


def show(name: str, result) -> None:
    """One line: the loss and, per gradient leaf, its sum and its sum of absolute values (5 decimals)."""
    loss, grads = result
    leaves = jax.tree_util.tree_leaves(grads)
    sums = " ".join(f"{float(jnp.sum(g)):.5f}/{float(jnp.sum(jnp.abs(g))):.5f}" for g in leaves)
    print(f"{name}: loss {float(loss):.5f} grads {sums}")


# %% hidden 6.1
for case in range(2):  # shapes from a few (XLA compiles once per shape); every value drawn from the seed
    accum_steps = rng.choice([2, 4, 8])
    rows = accum_steps * rng.choice([2, 3])
    sizes = rng.choice([(5, 8, 3), (9, 12, 4)])
    params, x, y = draw_problem(rng.randrange(2**31), sizes, rows, rng.randint(rows // 2, rows - 1))  # padding
    show(f"scan case {case}", quietly(jax.jit(accumulate_scan, static_argnums=3), params, x, y, accum_steps))
scans = quietly(
    jaxacc.count_traced_ops, lambda p, a, b: accumulate_scan(p, a, b, accum_steps), params, x, y, primitive="scan"
)
print(f"a scan in the traced program: {scans > 0}")

# %% hidden 6.2
# distinct sizes (a mean of means is wrong) that add up to more rows than any layer is wide (22+ > 12); shapes from a
# few (XLA compiles once per shape), every value drawn from the seed
lengths = rng.sample([9, 13, 17, 22], rng.randint(2, 4))
sizes = rng.choice([(5, 8, 3), (9, 12, 4)])
params, x, y = draw_problem(rng.randrange(2**31), sizes, sum(lengths), sum(lengths))
bounds = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
micro_batches = [(x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
with matmul_shapes() as shapes:
    result = quietly(window_grads, params, micro_batches)
show(f"window {lengths}", result)
print(f"a matrix product on all {sum(lengths)} rows at once: {any(sum(lengths) in shape for shape in shapes)}")
