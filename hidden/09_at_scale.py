"""Hidden checks of exercises/09_at_scale.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

from gradacc.course.checks.lesson09 import new_stats, run_micro_steps
from gradacc.foundations.data import load_digits_tensors
from gradacc.foundations.models import make_digits_model
from gradacc.parallel.compiled import count_graph_breaks


def plan(*case) -> str:
    """The student's ``sync_plan`` on ``case``: each mode with its peak (MiB, 9 significant digits) and seconds
    (6 significant digits), ``none fits``, the result's repr if it is not a dict of pairs, or the error."""
    try:
        got = quietly(sync_plan, *case)
        if not isinstance(got, dict):
            return repr(got)
        return "; ".join(f"{mode} {float(peak):.9g} MiB {float(seconds):.6g} s" for mode, (peak, seconds)
                         in sorted(got.items())) or "none fits"  # fmt: skip
    except Exception as exc:
        return type(exc).__name__


def sync_case(world_size: int, accum_steps: int, where: str) -> tuple:
    """Gradient bytes, a measured peak and a bandwidth drawn from ``rng``, and a budget placed ``where`` the two
    settings' peaks fall: "above" both, "between" them, "at" the boundary's peak exactly, or "below" both."""
    parameter_bytes = rng.randint(1, 64) * 2**27  # multiples of 128 MiB: every MiB value is exact
    peak_each = float(rng.randint(2_000, 60_000))
    extra = parameter_bytes * (world_size - 1) / world_size / 2**20 if accum_steps >= 2 else 0.0
    budget = {
        "above": peak_each + extra + rng.randint(1, 5000),
        # at least half the extra: with W >= 4 one shard (P / W = extra / (W - 1)) fits in it, the missing part not
        "between": peak_each + extra * rng.choice([0.5, 0.75]),
        "at": peak_each + extra,
        "below": peak_each - rng.randint(1, 1000),
    }[where]
    return parameter_bytes, world_size, accum_steps, peak_each, budget, float(rng.choice([12.5, 25, 50, 100, 400]))


def micro_batches(sizes, start):
    x, y = load_digits_tensors()
    bounds = [start + sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return [(x[a:b].clone(), y[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def draw_9_2(rng) -> dict:
    """A micro-batch to count graph breaks on, then a window of 2-5 unequal micro-batches, an infinite input in one
    of them that is not the last."""
    case = {"graph_seed": rng.randrange(2**31), "graph_rows": rng.randint(4, 32), "graph_start": rng.randint(0, 1700)}
    sizes = [rng.randint(3, 40) for _ in range(rng.randint(2, 5))]
    case.update(sizes=sizes, start=rng.randint(0, 1797 - sum(sizes)), bad=rng.randrange(len(sizes) - 1))
    case.update(model_seed=rng.randrange(2**31), hidden=rng.choice([16, 32, 64]), inf_at=rng.randrange(64))
    return case


def edges_9_2(case: dict) -> dict[str, bool]:
    return {  # .item(), backward inside, and a graph kept lose on the counted graph and the printed flags, always
        "2+ micro-batches (each divided by its own size, not the window's items)": len(case["sizes"]) >= 2,
        "the infinite input not in the last micro-batch (a NaN flag each micro-step overwrites)": case["bad"]
        < len(case["sizes"]) - 1,
    }


EDGE_CASES = {"9.2": (draw_9_2, edges_9_2)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 9.1 is replayed in full (it is cheap)."""


# %% hidden 9.1
for where in ("above", "between", "at", "below"):  # every seed: the budget in each place
    # between: W >= 4, where the missing part (W - 1) / W x P and one shard P / W differ (at W = 2 they are equal)
    case = sync_case(rng.choice([4, 8, 16, 64] if where == "between" else [2, 4, 8, 16, 64]),
                     rng.choice([2, 3, 4, 8, 16]), where)  # fmt: skip
    print(f"{where}: {case} -> {plan(*case)}")
case = sync_case(1, rng.choice([2, 4, 8]), "above")  # one rank: nothing to send
print(f"one rank: {case} -> {plan(*case)}")
case = sync_case(rng.choice([2, 4, 8]), 1, "at")  # N = 1: both settings are the same run
print(f"N = 1: {case} -> {plan(*case)}")

# %% hidden 9.2
case = draw_9_2(rng)
report = count_graph_breaks(micro_step, make_digits_model(seed=case["graph_seed"], hidden=32, depth=2),
                            micro_batches([case["graph_rows"]], case["graph_start"])[0], 64, new_stats())  # fmt: skip
print(f"graphs {report['graph_count']}, breaks {report['graph_break_count']}")
sizes, bad = case["sizes"], case["bad"]
batches = micro_batches(sizes, case["start"])
model = make_digits_model(seed=case["model_seed"], hidden=case["hidden"], depth=2)
stats, losses = run_micro_steps(micro_step, model, batches, backend=None)  # counted above: run it eagerly
loss_sum = stats["loss_sum"]
print(f"sizes {sizes}: loss_sum {float(loss_sum.detach()):.5f}, graph kept {loss_sum.requires_grad}, "
      f"nonfinite {bool(stats['nonfinite'])}, losses keep their graph {all(t.requires_grad for t in losses)}")  # fmt: skip
print(f"grads {weights(p.grad for p in model.parameters())}")
batches[bad][0][0, case["inf_at"]] = float("inf")
stats, _ = run_micro_steps(micro_step, make_digits_model(seed=0, hidden=16, depth=2), batches, backend=None)
print(f"an infinite input in micro-batch {bad + 1}: nonfinite {bool(stats['nonfinite'])}")
