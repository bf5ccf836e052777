"""Hidden checks of exercises/02_pytorch.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.foundations.data import digits_loader, load_digits_tensors
from gradacc.foundations.models import make_digits_model

N_DIGITS = 1797  # samples in gradacc.foundations.data.load_digits_tensors()


def draw_2_1(rng) -> dict:
    """One window: 2-5 micro-batches of DISTINCT sizes (a mean of micro-batch means is wrong), a model, an SGD."""
    sizes = rng.sample(range(3, 41), rng.randint(2, 5))
    return {
        "sizes": sizes,
        "start": rng.randint(0, N_DIGITS - sum(sizes)),
        "seed": rng.randrange(2**31),
        "hidden": rng.choice([16, 24, 32]),
        "lr": rng.uniform(0.05, 0.5),
        "momentum": rng.choice([0.0, 0.9]),
    }


def edges_2_1(case: dict) -> dict[str, bool]:
    return {
        "2+ micro-batches (a step per micro-batch, dividing twice by their number)": len(case["sizes"]) >= 2,
        "micro-batches of different sizes (a mean of micro-batch means)": len(set(case["sizes"])) > 1,
    }


def draw_2_2(rng) -> dict:
    """An epoch whose short last window holds 2+ micro-batches, the last of them partial."""
    micro_batch_size, accum_steps = rng.randint(4, 20), rng.randint(3, 5)
    count = accum_steps * rng.randint(1, 3) + rng.randint(2, accum_steps - 1)  # micro-batches
    n_samples = micro_batch_size * (count - 1) + rng.randint(1, micro_batch_size - 1)
    return {
        "micro_batch_size": micro_batch_size,
        "accum_steps": accum_steps,
        "n_samples": n_samples,
        "loader_seed": rng.randrange(2**31),
        "model_seed": rng.randrange(2**31),
    }


def edges_2_2(case: dict) -> dict[str, bool]:
    b, n = case["micro_batch_size"], case["accum_steps"]
    sizes = [b] * (case["n_samples"] // b) + ([case["n_samples"] % b] if case["n_samples"] % b else [])
    short = sizes[len(sizes) - len(sizes) % n :]
    return {
        "a full window of N >= 2 (the scheduler or zero_grad on every micro-step)": n >= 2 and len(sizes) >= n,
        "a short last window (dropped, or divided by a full window's items)": len(sizes) % n != 0,
        "a partial micro-batch beside a full one in the short window (items = its micro-batches x the first one's "
        "size)": len(short) >= 2 and short[-1] < short[0],
    }


EDGE_CASES = {"2.1": (draw_2_1, edges_2_1), "2.2": (draw_2_2, edges_2_2)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds."""


# %% hidden 2.1
case = draw_2_1(rng)
x, y = load_digits_tensors()
bounds = [case["start"] + sum(case["sizes"][:i]) for i in range(len(case["sizes"]) + 1)]
micro_batches = [(x[a:b].clone(), y[a:b].clone()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
model = make_digits_model(seed=case["seed"], hidden=case["hidden"])
optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"], momentum=case["momentum"])
loss = quietly(accumulation_window, model, optimizer, micro_batches)
print(f"sizes {case['sizes']}: loss {float(loss):.5f} weights {weights(model)}")

# %% hidden 2.2
case = draw_2_2(rng)
batches = list(digits_loader(case["micro_batch_size"], seed=case["loader_seed"], n_samples=case["n_samples"]))
model = make_digits_model(seed=case["model_seed"], hidden=24)
optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1.0 + step))
losses = quietly(train_epoch, model, optimizer, scheduler, batches, case["accum_steps"])
print(f"{len(batches)} micro-batches, N={case['accum_steps']}: losses", " ".join(f"{float(v):.5f}" for v in losses))
print(f"lr {optimizer.param_groups[0]['lr']:.6f} weights {weights(model)}")
