"""Hidden checks of exercises/12_per_window.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.course.checks.lesson12 import MUON_LR, micro_batch_records
from gradacc.perwindow.optimizers import digit_windows, make_matrix_model

N_DIGITS = 1797  # samples in gradacc.foundations.data.load_digits_tensors()


def draw_records(rng, count: int) -> list[dict]:
    """``count`` micro-batches of DIFFERENT sizes (1-16 digits) from a drawn row, a linear layer from a drawn seed;
    the records in an order where the largest amax is not the last one (for ``count`` >= 2)."""
    sizes = rng.sample(range(1, 17), count)
    records, _ = micro_batch_records(rng.randrange(2**31), sizes, rng.randint(0, N_DIGITS - sum(sizes)))
    largest = max(range(count), key=lambda k: records[k]["amax"])
    if count >= 2 and largest == count - 1:
        records[0], records[-1] = records[-1], records[0]
    return records


def shown_record(got) -> str:
    """The student's record: items as an integer, amax to 9 significant digits, the gradient's sum and sum of
    absolute values to 9 significant digits (scientific notation: the grader's last-digit tolerance is relative)."""
    try:
        grad = torch.as_tensor(got["grad"], dtype=torch.float64)
        return (
            f"items {int(got['items'])}, amax {float(got['amax']):.8e}, "
            f"grad {float(grad.sum()):.8e}/{float(grad.abs().sum()):.8e} shape {tuple(grad.shape)}"
        )
    except Exception as exc:
        return type(exc).__name__


def draw_12_2(rng) -> dict:
    """2-3 windows of 2-4 micro-batches of different sizes (2-16 digits), then a short last window of fewer
    micro-batches, each smaller than the window's smallest; a drawn model and first digit."""
    count = rng.randint(2, 4)
    windows = [rng.sample(range(3, 17), count) for _ in range(rng.randint(2, 3))]
    smallest = min(min(w) for w in windows)
    short = [rng.randint(1, smallest - 1) for _ in range(rng.randint(1, count - 1))]
    sizes = [*windows, short]
    return {
        "sizes": sizes,
        "start": rng.randint(0, N_DIGITS - sum(map(sum, sizes))),
        "seed": rng.randrange(2**31),
        "hidden": rng.choice([16, 24, 32]),
    }


def edges_12_2(case: dict) -> dict[str, bool]:
    sizes = case["sizes"]
    full = sizes[:-1]
    return {
        "2+ windows of 2+ micro-batches (a step per micro-batch; a gradient never cleared)": len(full) >= 2
        and all(len(w) >= 2 for w in full),
        "micro-batches of different sizes in every full window (a mean of means)": all(len(set(w)) == len(w) for w in full),
        "a short last window: fewer and smaller micro-batches (divided by a full window's samples)": len(sizes[-1])
        < len(full[0])
        and sum(sizes[-1]) < min(sum(w) for w in full),
    }


EDGE_CASES = {"12.2": (draw_12_2, edges_12_2)}
"""Check -> (the block's draws, the edge cases every draw holds); tests/test_wrong_answers.py replays the draws of
1,000 seeds. 12.1 is replayed in full (it is cheap)."""


# %% hidden 12.1
for count in (rng.randint(2, 5), rng.randint(2, 5), 1):  # unequal micro-batches twice, then a window of one
    records = draw_records(rng, count)
    sizes = [r["items"] for r in records]
    try:
        got = quietly(combine_window, [dict(r) for r in records])
    except Exception as exc:
        got = exc
    print(f"micro-batches of {sizes} -> {shown_record(got)}")

# %% hidden 12.2
case = draw_12_2(rng)
model = make_matrix_model(seed=case["seed"], hidden=case["hidden"])
quietly(train_muon, model, torch.optim.Muon(model.parameters(), lr=MUON_LR), digit_windows(case["sizes"], case["start"]))
print(f"windows {case['sizes']}: {weights(model)}")
