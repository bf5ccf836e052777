"""Hidden checks of exercises/08_pitfalls.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import copy

import torch

from gradacc.foundations.data import load_digits_tensors
from gradacc.foundations.graphs import SavedTensorMeter
from gradacc.foundations.models import make_digits_model
from gradacc.foundations.pitfalls import first_pass_gradient, info_nce_loss, recorded_forwards, two_views


def contrastive_case(n: int, hidden: int, dropout: float = 0.0):
    """A seeded 2-hidden-layer encoder (dropout after each hidden layer when ``dropout > 0``) and two views of ``n``
    digits (every row of the digits and of their shifted views is distinct, as ``first_pass_gradient`` needs)."""
    x, _ = load_digits_tensors()
    start = rng.randint(0, len(x) - n)
    views_a, views_b = two_views(x[start : start + n].clone())
    encoder = make_digits_model(seed=rng.randrange(2**31), hidden=hidden, depth=2, dropout=dropout)
    return encoder, views_a, views_b


def grad_summary(encoder) -> str:
    """Per parameter: the sum and the norm of its ``.grad`` (5 decimals), or ``None``."""
    return " ".join(
        "None" if p.grad is None else f"{float(p.grad.sum()):.5f}/{float(p.grad.norm()):.5f}"
        for p in encoder.parameters()
    )


def draw_8_2(rng) -> list[dict]:
    """Two contrastive batches of 24-64 pairs split into N >= 2 chunks, then one through an encoder with dropout
    0.1 or 0.2 (its first pass's masks must be replayed)."""
    return [
        {"n": rng.randint(24, 64), "accum_steps": rng.randint(2, 5), "temperature": rng.choice([0.05, 0.1, 0.2, 0.5]),
         "hidden": rng.choice([32, 64]), "dropout": dropout}
        for dropout in (0.0, 0.0, rng.choice([0.1, 0.2]))
    ]  # fmt: skip


def edges_8_2(cases: list[dict]) -> dict[str, bool]:
    return {
        "N >= 2 chunks (negatives only from the chunk; the cached gradients divided by the chunks)": all(
            c["accum_steps"] >= 2 for c in cases
        ),
        "an encoder with dropout (re-runs without the first pass's random numbers)": cases[-1]["dropout"] > 0,
    }


def first_pass_summary(case: dict) -> str:
    """With dropout: whether the student's loss and gradient are those of the first pass's masks (each sample's last
    forward without a graph before its re-run, so a probe or a sanity forward made first does not count; booleans, so
    that any order or chunking of the student's forwards prints the reference's line)."""
    encoder, views_a, views_b = contrastive_case(case["n"], case["hidden"], case["dropout"])
    student = copy.deepcopy(encoder)
    with torch.random.fork_rng(devices=[]), recorded_forwards(student) as calls:
        torch.manual_seed(rng.randrange(2**31))
        loss = quietly(grad_cache_backward, student, views_a, views_b, case["accum_steps"], case["temperature"])
    want_loss, want = first_pass_gradient(encoder, calls, views_a, views_b, case["temperature"])
    grads = [p.grad for p in student.parameters()]
    same = all(g is not None and float((g - w).abs().max()) <= 1e-5 for g, w in zip(grads, want, strict=True))
    return f"loss of the first pass: {abs(float(loss) - want_loss) <= 1e-5}, its gradient with its masks: {same}"


def draw_8_3(rng) -> dict:
    """A batch of 36-64 pairs in N = 4 or 5 chunks. The peak limit is 1.5 / N of the full batch's."""
    return {"n": rng.randint(36, 64), "accum_steps": rng.randint(4, 5), "temperature": rng.choice([0.1, 0.2])}


def edges_8_3(case: dict) -> dict[str, bool]:
    return {
        # recomputed per view keeps half the batch's activations (0.46x measured): above 1.5 / 4 = 0.375; the
        # embeddings with gradients and every chunk's graph built first keep all of them (about 1x)
        "N >= 4 (1.5 / N < 0.46)": case["accum_steps"] >= 4,
    }


EDGE_CASES = {"8.2": (draw_8_2, edges_8_2), "8.3": (draw_8_3, edges_8_3)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 8.1 is replayed in full (it is cheap)."""


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
*plain_cases, dropout_case = draw_8_2(rng)
for case in plain_cases:
    encoder, views_a, views_b = contrastive_case(case["n"], case["hidden"])
    loss = quietly(grad_cache_backward, encoder, views_a, views_b, case["accum_steps"], case["temperature"])
    print(f"batch {case['n']}, accum_steps={case['accum_steps']}, T={case['temperature']}: loss {float(loss):.5f}")
    print(f"grads {grad_summary(encoder)}")
print(f"batch {dropout_case['n']}, accum_steps={dropout_case['accum_steps']}, dropout {dropout_case['dropout']}:")
print(first_pass_summary(dropout_case))

# %% hidden 8.3
case = draw_8_3(rng)
n, accum_steps, temperature = case["n"], case["accum_steps"], case["temperature"]
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
