"""Hidden checks of exercises/06_jax.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import jax
import jax.numpy as jnp
import numpy as np

from gradacc.course.checks.lesson06 import matmul_shapes
from gradacc.foundations.data import IGNORE_INDEX
from gradacc.frameworks import jaxacc


def draw_problem(seed: int, sizes: tuple[int, ...], rows: int, real: int):
    """MLP parameters (``jaxacc.mlp_init``) and a batch as NumPy arrays (x float32 ``[rows, sizes[0]]``, y int32
    ``[rows]``) whose rows after ``real`` are padding (label IGNORE_INDEX).

    The batch is drawn with NumPy, not ``jax.random``: JAX compiles its generator for every new shape (0.5-1 s of CPU
    each on a 2-core machine, jax 0.10.2), and the rows differ from case to case. The blocks slice it with NumPy and
    hand the learner's function JAX arrays (``jnp.asarray``: a copy, nothing compiled).
    """
    params = jaxacc.mlp_init(jax.random.key(seed), sizes)  # compiled once per layer shape: two sizes are drawn
    generator = np.random.default_rng(seed)
    x = generator.standard_normal((rows, sizes[0]), dtype=np.float32)
    y = generator.integers(0, sizes[-1], rows, dtype=np.int32)
    return params, x, np.where(np.arange(rows) < real, y, np.int32(IGNORE_INDEX))


def show(name: str, result) -> None:
    """One line: the loss and, per gradient leaf, its sum and its sum of absolute values (5 decimals; summed by
    NumPy in float64, so no reduction is compiled per leaf shape)."""
    loss, grads = result
    leaves = [np.asarray(g, dtype=np.float64) for g in jax.tree_util.tree_leaves(grads)]
    sums = " ".join(f"{g.sum():.5f}/{np.abs(g).sum():.5f}" for g in leaves)
    print(f"{name}: loss {float(loss):.5f} grads {sums}")


def draw_6_1(rng) -> list[dict]:
    """Two windows whose last rows are padding, with real items != N (shapes from a few: XLA compiles once per
    shape; every value drawn from the seed)."""
    cases = []
    for _ in range(2):
        accum_steps = rng.choice([2, 4, 8])
        rows = accum_steps * rng.choice([2, 3])
        sizes = rng.choice([(5, 8, 3), (9, 12, 4)])
        real = rng.choice([r for r in range(rows // 2, rows) if r != accum_steps])
        cases.append(
            {"accum_steps": accum_steps, "rows": rows, "sizes": sizes, "real": real, "seed": rng.randrange(2**31)}
        )
    return cases


def edges_6_1(cases: list[dict]) -> dict[str, bool]:
    def real_per_micro_batch(c):
        m = c["rows"] // c["accum_steps"]
        return [min(max(c["real"] - i * m, 0), m) for i in range(c["accum_steps"])]

    return {
        "padding rows (the padding counted as items)": all(c["real"] < c["rows"] for c in cases),
        "real items != N (divided by accum_steps)": all(c["real"] != c["accum_steps"] for c in cases),
        "micro-batches with different real items (a mean of micro-batch means)": all(
            len(set(real_per_micro_batch(c))) > 1 for c in cases
        ),
    }


def draw_6_2(rng) -> dict:
    """2-4 micro-batches of distinct lengths whose sum is wider than any layer and than any one of them."""
    lengths = rng.sample([9, 13, 17, 22], rng.randint(2, 4))
    return {"lengths": lengths, "sizes": rng.choice([(5, 8, 3), (9, 12, 4)]), "seed": rng.randrange(2**31)}


def edges_6_2(case: dict) -> dict[str, bool]:
    lengths, total = case["lengths"], sum(case["lengths"])
    return {
        "2+ micro-batches of distinct lengths (a mean of micro-batch means)": len(set(lengths)) == len(lengths) >= 2,
        "the total differs from every layer width and every length (one matrix product on all rows is seen)": (
            total not in case["sizes"] and total not in lengths
        ),
    }


EDGE_CASES = {"6.1": (draw_6_1, edges_6_1), "6.2": (draw_6_2, edges_6_2)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. A Python loop instead of a scan (6.1) loses on the
traced program's primitives, whatever the draw."""


# %% hidden 6.1
for index, case in enumerate(draw_6_1(rng)):
    accum_steps = case["accum_steps"]
    params, x, y = draw_problem(case["seed"], case["sizes"], case["rows"], case["real"])
    x, y = jnp.asarray(x), jnp.asarray(y)
    show(f"scan case {index}", quietly(jax.jit(accumulate_scan, static_argnums=3), params, x, y, accum_steps))
scans = quietly(
    jaxacc.count_traced_ops, lambda p, a, b: accumulate_scan(p, a, b, accum_steps), params, x, y, primitive="scan"
)
print(f"a scan in the traced program: {scans > 0}")

# %% hidden 6.2
case = draw_6_2(rng)
lengths = case["lengths"]
params, x, y = draw_problem(case["seed"], case["sizes"], sum(lengths), sum(lengths))
bounds = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
micro_batches = [(jnp.asarray(x[a:b]), jnp.asarray(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
with matmul_shapes() as shapes:
    result = quietly(window_grads, params, micro_batches)
show(f"window {lengths}", result)
print(f"a matrix product on all {sum(lengths)} rows at once: {any(sum(lengths) in shape for shape in shapes)}")
