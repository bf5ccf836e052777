"""Hidden checks of exercises/04_accelerate.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch
from accelerate import Accelerator

from gradacc.foundations.data import digits_loader
from gradacc.foundations.models import make_digits_model
from gradacc.frameworks.accelerate import reset_accelerate_state


def draw_4_1(rng) -> list[dict]:
    """Two epochs of full windows, N >= 2: one without clipping, one with a max_norm of 0.01-0.05."""
    cases = []
    for max_norm in (None, round(rng.uniform(0.01, 0.05), 3)):
        accum_steps, micro_batch_size = rng.randint(2, 5), rng.choice([4, 8, 12])
        cases.append({
            "max_norm": max_norm, "accum_steps": accum_steps, "micro_batch_size": micro_batch_size,
            "n_samples": micro_batch_size * accum_steps * rng.randint(2, 4),  # full windows only
            "model_seed": rng.randrange(2**31), "hidden": rng.choice([16, 24]), "lr": rng.uniform(0.05, 0.3),
            "loader_seed": rng.randrange(2**31),
        })  # fmt: skip
    return cases


def edges_4_1(cases: list[dict]) -> dict[str, bool]:
    return {
        "N >= 2 (the loss divided by N by hand as well; clipping every micro-step)": all(
            c["accum_steps"] >= 2 for c in cases
        ),
        # the digits MLP's gradient norm is far above 0.05 at these learning rates: the threshold clips
        "a case that clips (clipping every micro-step differs from once per window)": any(
            c["max_norm"] is not None and c["max_norm"] <= 0.05 for c in cases
        ),
    }


EDGE_CASES = {"4.1": (draw_4_1, edges_4_1)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 4.2 is replayed in full (it is cheap)."""


# %% hidden 4.1
for case in draw_4_1(rng):
    reset_accelerate_state()
    accelerator = Accelerator(gradient_accumulation_steps=case["accum_steps"], cpu=True)
    model = make_digits_model(seed=case["model_seed"], hidden=case["hidden"])
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"])
    loader = digits_loader(case["micro_batch_size"], seed=case["loader_seed"], n_samples=case["n_samples"])
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    quietly(train_epoch, accelerator, model, optimizer, loader, case["max_norm"])
    print(
        f"N={case['accum_steps']} B={case['micro_batch_size']} max_norm={case['max_norm']}: "
        f"weights {weights(accelerator.unwrap_model(model))}"
    )
    reset_accelerate_state()

# %% hidden 4.2
for case in ("a short last window", "whole windows", "one short window"):  # every seed has all three
    accum_steps = rng.randint(2, 9)
    n_batches = {
        "a short last window": accum_steps * rng.randint(1, 3) + rng.randint(1, accum_steps - 1),
        "whole windows": accum_steps * rng.randint(1, 3),
        "one short window": rng.randint(1, accum_steps - 1),
    }[case]
    scales = [float(quietly(window_loss_scale, i, n_batches, accum_steps)) for i in range(n_batches)]
    print(f"{n_batches} batches, N={accum_steps}:", " ".join(f"{s:.4f}" for s in scales))
