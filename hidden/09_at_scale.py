"""Hidden checks of exercises/09_at_scale.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

from gradacc.compiled import count_graph_breaks
from gradacc.course.checks.lesson09 import new_stats, run_micro_steps
from gradacc.data import load_digits_tensors
from gradacc.models import make_digits_model


def plan(*case) -> str:
    """The student's ``sync_plan`` on ``case``: ``None``, ``mode seconds`` (6 significant digits) or the error."""
    try:
        got = quietly(sync_plan, *case)
    except Exception as exc:
        return type(exc).__name__
    if got is None:
        return "None"
    mode, seconds = got
    return f"{mode} {float(seconds):.6g}"


def sync_case(world_size: int, accum_steps: int, where: str) -> tuple:
    """Gradient bytes, a measured peak and a bandwidth drawn from ``rng``, and a budget placed ``where`` the two
    settings' peaks fall: "above" both, "between" them, "at" the boundary's peak exactly, or "below" both."""
    parameter_bytes = rng.randint(1, 64) * 2**27  # multiples of 128 MiB: every MiB value is exact
    peak_each = float(rng.randint(2_000, 60_000))
    extra = parameter_bytes * (world_size - 1) / world_size / 2**20 if accum_steps >= 2 else 0.0
    budget = {
        "above": peak_each + extra + rng.randint(1, 5000),
        "between": peak_each + extra * rng.choice([0.25, 0.5, 0.75]),
        "at": peak_each + extra,
        "below": peak_each - rng.randint(1, 1000),
    }[where]
    return parameter_bytes, world_size, accum_steps, peak_each, budget, float(rng.choice([12.5, 25, 50, 100, 400]))


def micro_batches(sizes, start):
    x, y = load_digits_tensors()
    bounds = [start + sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return [(x[a:b].clone(), y[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


# %% hidden 9.1
for where in ("above", "between", "at", "below"):  # every seed: the budget in each place
    case = sync_case(rng.choice([2, 4, 8, 16, 64]), rng.choice([2, 3, 4, 8, 16]), where)
    print(f"{where}: {case} -> {plan(*case)}")
case = sync_case(1, rng.choice([2, 4, 8]), "above")  # one rank: nothing to send
print(f"one rank: {case} -> {plan(*case)}")
case = sync_case(rng.choice([2, 4, 8]), 1, "at")  # N = 1: both settings are the same run
print(f"N = 1: {case} -> {plan(*case)}")

# %% hidden 9.2
report = count_graph_breaks(micro_step, make_digits_model(seed=rng.randrange(2**31), hidden=32, depth=2),
                            micro_batches([rng.randint(4, 32)], rng.randint(0, 1700))[0], 64, new_stats())  # fmt: skip
print(f"graphs {report['graph_count']}, breaks {report['graph_break_count']}")
sizes = [rng.randint(3, 40) for _ in range(rng.randint(2, 5))]  # every seed: unequal micro-batches
batches = micro_batches(sizes, rng.randint(0, 1797 - sum(sizes)))
bad = rng.randrange(len(sizes) - 1)  # not the last: a flag the last micro-step overwrites must lose
model = make_digits_model(seed=rng.randrange(2**31), hidden=rng.choice([16, 32, 64]), depth=2)
stats, losses = run_micro_steps(micro_step, model, batches, backend=None)  # counted above: run it eagerly
loss_sum = stats["loss_sum"]
print(f"sizes {sizes}: loss_sum {float(loss_sum.detach()):.5f}, graph kept {loss_sum.requires_grad}, "
      f"nonfinite {bool(stats['nonfinite'])}, losses keep their graph {all(t.requires_grad for t in losses)}")  # fmt: skip
print(f"grads {weights(p.grad for p in model.parameters())}")
batches[bad][0][0, rng.randrange(64)] = float("inf")
stats, _ = run_micro_steps(micro_step, make_digits_model(seed=0, hidden=16, depth=2), batches, backend=None)
print(f"an infinite input in micro-batch {bad + 1}: nonfinite {bool(stats['nonfinite'])}")
