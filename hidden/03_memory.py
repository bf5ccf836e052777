"""Hidden checks of exercises/03_memory.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch
import torch.nn.functional as F

from gradacc.course.checks.lesson03 import timeline_pair
from gradacc.foundations.models import make_digits_model


def outcome(fn, *args, **kwargs) -> str:
    """The value (6 significant digits), ``None``, or the name of the exception raised."""
    try:
        value = quietly(fn, *args, **kwargs)
    except Exception as exc:  # the reference raises ValueError on bad input
        return type(exc).__name__
    return "None" if value is None else f"{float(value):.6g}"


def eighths(low, high):
    """A random multiple of 1/8 in [low, high]: exact in floating point, whatever the order of the additions."""
    return rng.randint(low * 8, high * 8) / 8


# %% hidden 3.1
for _ in range(4):
    n = rng.choice([1, 2, 3, 4, 6, 8, 16, 32])
    effective = n * rng.randint(1, 300)
    per_sample = rng.uniform(0.001, 2.0)
    print(f"{per_sample:.6f} x {effective} / {n}: {outcome(micro_batch_activation_mib, per_sample, effective, n)}")
effective = rng.choice([30, 50, 70, 90])
print(f"{effective} / 4: {outcome(micro_batch_activation_mib, 0.5, effective, 4)}")
bad = rng.choice([0, -1, -3])
print(f"N = {bad}: {outcome(micro_batch_activation_mib, 0.5, 64, bad)}")


# %% hidden 3.2
def show_case(persistent, per_sample, effective, budget, candidates):
    result = outcome(smallest_fitting_n, persistent, per_sample, effective, budget, candidates=candidates)
    print(f"{persistent:.3f} + {per_sample:.4f} x {effective} / N <= {budget:.3f}, N in {candidates}: {result}")


for case in range(3):  # random budgets: just above one N's peak (1e-6 MiB: rounding must not decide)
    effective, persistent, per_sample = rng.choice([96, 100, 128, 192, 1000, 4096]), rng.uniform(0, 200), rng.random()
    budget = persistent + per_sample * effective / rng.choice([1, 2, 3, 5, 8, 40, 100]) + 1e-6
    show_case(
        persistent, per_sample, effective, budget, [(1, 2, 4, 8, 16, 32, 64), (3, 5, 6, 10), (64, 16, 4, 1)][case]
    )
# every seed has the three edge cases; values in eighths of a MiB, exact in floating point in any order of operations
persistent, per_sample, n = rng.randint(0, 200), rng.randint(1, 16) / 8, rng.choice([2, 4, 8])
effective = 64 * rng.randint(1, 8)
show_case(persistent, per_sample, effective, persistent + per_sample * effective / n, (1, 2, 4, 8, 16))  # exact fit
budget = persistent + per_sample * effective / n + 1 / 8  # N = n fits, and so does every larger N listed first
show_case(persistent, per_sample, effective, budget, tuple(sorted((1, 2, 4, 8, 16, 32, 64), reverse=True)))
effective = rng.choice([36, 60, 100, 108])  # 8 does not divide it, 4 does: N = 8 fits, is not allowed, 16 neither
budget = persistent + per_sample * effective / 8 + 1 / 8
show_case(persistent, per_sample, effective, budget, (1, 2, 4, 8, 16))
bad = -float(rng.randint(0, 9))
print(f"budget {bad}: {outcome(smallest_fitting_n, 10.0, 1.0, 64, bad)}")

# %% hidden 3.3
sizes = [rng.randint(1, 5000) for _ in range(4)]
counter = PeakCounter()
with counter:
    kept = [torch.ones(size) for size in sizes]
    views = [t[1:] for t in kept[1:]]  # views share their base's storage
    del kept[0]  # freed: nothing else holds it
    extra = torch.zeros(rng.randint(1, 3000))
print(f"sizes {sizes}: current {counter.current_bytes} peak {counter.peak_bytes}")
del views, extra
hidden, depth, batch = rng.choice([16, 40, 72]), rng.randint(1, 3), rng.randint(2, 64)
model = make_digits_model(seed=rng.randrange(2**31), hidden=hidden, depth=depth)
x = torch.rand(batch, 64, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
y = torch.randint(0, 10, (batch,), generator=torch.Generator().manual_seed(rng.randrange(2**31)))
counter = PeakCounter()
with counter:
    F.cross_entropy(model(x), y).backward()
print(f"MLP hidden {hidden} depth {depth} batch {batch}: peak {counter.peak_bytes}")


# %% hidden 3.4
def show_peak(label, breakdown, ns):
    results = []
    for n in ns:
        try:
            peak, phase = quietly(peak_at, dict(breakdown), n)
            results.append(f"N={n}: {float(peak):.6g} {phase}")
        except Exception as exc:  # the reference raises ValueError for N < 1
            results.append(f"N={n}: {type(exc).__name__}")
    print(f"{label}: " + "; ".join(results))


# every seed: an SGD step (rises from N = 1 to 2), an Adam step with activations large enough to fall with N until
# the optimizer step takes over, and N < 1; values random, no ties between the two moments (checked)
params = eighths(4, 64)
acts = params * rng.choice([1, 1.5, 1.75]) - 1 / 8  # SGD: the peak rises from N = 1 to N = 2 (acts < 2 x params)
sgd = {"parameters": params, "gradients": params, "optimizer_state": 0.0, "activations": acts, "step_scratch": 0.0}
show_peak("SGD", sgd, (1, 2, rng.choice([4, 8])))
params = eighths(1, 32)
adam = {
    "parameters": params,
    "gradients": params,
    "optimizer_state": 2 * params,
    "activations": params * rng.choice([8, 12, 24]) + 1 / 8,
    "step_scratch": eighths(0, 4) + params / 2,
}
show_peak("Adam", adam, (1, rng.choice([2, 3]), rng.choice([4, 6, 8]), 64, rng.choice([0, -1, -4])))


# %% hidden 3.5
def show_timelines(label, first, second, ns):
    results = []
    for n in ns:
        try:
            peak, moment = quietly(peak_for_n, first, second, n)
            results.append(f"N={n}: {float(peak):.6g} {moment}")
        except Exception as exc:  # the reference raises ValueError for N < 2
            results.append(f"N={n}: {type(exc).__name__}")
    print(f"{label} (measured at N = {first.accum_steps} and {second.accum_steps}): " + "; ".join(results))


# every seed: an activation-bound step with a weight-gradient temporary of 1-3 MiB (W), to a smaller N and to N = B
# (micro-batches of 1). At both measured N the activations' operation holds the peak (per sample, 3/4 a + t >=
# 5/16 MiB, so at b >= 16 it beats W); at b = 1 the weight gradient's operation holds it (3/4 a + t <= 7/8 < W), 1/8
# MiB above optimizer.step(): a scaled breakdown, one line through the two highest points, or micro-step 1 (half a
# gradient buffer) reads another number. A flat step whose peak is in optimizer.step() at every N (by >= 1/8 MiB).
# And N < 2. Every value a dyadic fraction: no ties, and the lines are exact.
params = eighths(1, 32)
effective, n1 = rng.choice([256, 512, 1024]), rng.choice([2, 4, 8])
weight_gradient = 1 + eighths(0, 2)
bound = timeline_pair(
    effective, (n1, 2 * n1), rng.randint(16, 32) / 64, rng.randint(8, 32) / 64, parameters=params, gradients=params,
    optimizer_state=2 * params, other=eighths(0, 2), step_scratch=weight_gradient - 1 / 8,
    weight_gradient=weight_gradient,
)  # fmt: skip
show_timelines("activation-bound", *bound, (2 if n1 > 2 else 16, effective))
acts, temps = rng.randint(1, 8) / 256, rng.randint(1, 8) / 256
n_flat = rng.choice([4, 8])
flat = timeline_pair(
    256, (n_flat, 2 * n_flat), acts, temps, parameters=params, gradients=params, optimizer_state=2 * params,
    other=eighths(0, 2), step_scratch=(acts + temps) * 128 + 1 + eighths(1, 4), weight_gradient=eighths(0, 1),
)  # fmt: skip
show_timelines("flat", *flat, (2, rng.choice([16, 64]), rng.choice([1, 0, -2])))

# A step whose peak is in the forward pass (a frozen teacher's activations, per sample above the student's activations
# and temporaries together): from micro-batches of 16 on it beats both the backward pass (by >= 1/64 MiB per sample)
# and optimizer.step() (its scratch <= 25/8 MiB < 17/64 x 16); at micro-batches of 1 optimizer.step() holds it (its
# scratch >= 9/8 MiB, above the weight gradient's operation, <= 1 + 1/32 MiB).
acts, temps = rng.randint(1, 8) / 64, rng.randint(1, 8) / 64
effective, n1 = rng.choice([256, 512, 1024]), rng.choice([2, 4, 8])
teacher = timeline_pair(
    effective, (n1, 2 * n1), acts, temps, rng.randint(17, 32) / 64, parameters=params, gradients=params,
    optimizer_state=2 * params, other=eighths(0, 2), step_scratch=9 / 8 + eighths(0, 2), weight_gradient=eighths(0, 1),
)  # fmt: skip
show_timelines("forward-bound", *teacher, (2 if n1 > 2 else 16, effective // 32, effective))
