"""Hidden checks of exercises/08_pitfalls.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import copy

import torch

from gradacc.data import load_digits_tensors
from gradacc.graphs import SavedTensorMeter
from gradacc.models import make_digits_model
from gradacc.pitfalls import info_nce_loss, two_views


def contrastive_case(n: int, hidden: int):
    """A seeded 2-hidden-layer encoder and two views of ``n`` digits."""
    x, _ = load_digits_tensors()
    start = rng.randint(0, len(x) - n)
    views_a, views_b = two_views(x[start : start + n].clone())
    encoder = make_digits_model(seed=rng.randrange(2**31), hidden=hidden, depth=2)
    return encoder, views_a, views_b


def grad_summary(encoder) -> str:
    """Per parameter: the sum and the norm of its ``.grad`` (5 decimals), or ``None``."""
    return " ".join(
        "None" if p.grad is None else f"{float(p.grad.sum()):.5f}/{float(p.grad.norm()):.5f}"
        for p in encoder.parameters()
    )


# %% hidden 8.1
for _ in range(3):
    features, momentum = rng.randint(2, 8), rng.choice([0.05, 0.1, 0.2, 0.3, 0.5])
    sizes = [rng.randint(2, 16) for _ in range(rng.randint(2, 5))]  # every seed: a window of 2+ micro-batches
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    start = torch.rand(features, generator=generator) + 0.5
    micro_batches = [torch.randn(n, features, generator=generator) * rng.uniform(0.5, 3) + 1 for n in sizes]
    got = torch.as_tensor(quietly(running_var_after, start, micro_batches, momentum), dtype=torch.float32)
    print(f"sizes {sizes}, momentum {momentum}:", " ".join(f"{float(v):.5f}" for v in got.flatten()))

# %% hidden 8.2
for _ in range(2):
    n, accum_steps = rng.randint(24, 64), rng.randint(2, 5)
    temperature = rng.choice([0.05, 0.1, 0.2, 0.5])
    encoder, views_a, views_b = contrastive_case(n, rng.choice([32, 64]))
    loss = quietly(grad_cache_backward, encoder, views_a, views_b, accum_steps, temperature)
    print(f"batch {n}, accum_steps={accum_steps}, T={temperature}: loss {float(loss):.5f}")
    print(f"grads {grad_summary(encoder)}")

# %% hidden 8.3
n, accum_steps = rng.randint(36, 64), rng.randint(3, 4)
temperature = rng.choice([0.1, 0.2])
encoder, views_a, views_b = contrastive_case(n, 256)
full = copy.deepcopy(encoder)
with SavedTensorMeter(exclude=[*full.parameters(), views_a, views_b]) as meter:
    info_nce_loss(full(views_a), full(views_b), temperature).backward()
full_peak = meter.peak_bytes
with SavedTensorMeter(exclude=[*encoder.parameters(), views_a, views_b]) as meter:
    loss = quietly(grad_cache_backward, encoder, views_a, views_b, accum_steps, temperature)
within = meter.peak_bytes <= 1.5 / accum_steps * full_peak
print(f"batch {n}, accum_steps={accum_steps}: loss {float(loss):.5f}, peak at most 1.5/N of the full batch's: {within}")
print(f"grads {grad_summary(encoder)}")
