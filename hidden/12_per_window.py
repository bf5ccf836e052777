"""Hidden checks of exercises/12_per_window.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.course.checks.lesson12 import MUON_LR, micro_batch_amaxes, micro_batch_records
from gradacc.stacks.window_optimizers import digit_windows, make_matrix_model

N_DIGITS = 1797  # samples in gradacc.foundations.data.load_digits_tensors()


def draw_12_1(rng) -> list[tuple[int, list[int], int]]:
    """Three windows as (linear layer's seed, micro-batch sizes, first digit): two of 3-5 micro-batches of DIFFERENT
    sizes (1-16 digits), then one of a single micro-batch."""
    cases = []
    for count in (rng.randint(3, 5), rng.randint(3, 5), 1):
        sizes = rng.sample(range(1, 17), count)
        cases.append((rng.randrange(2**31), sizes, rng.randint(0, N_DIGITS - sum(sizes))))
    return cases


def middle_order(amaxes: list[float]) -> list[int]:
    """The order the block shows the micro-batches in: the largest amax swapped into the middle position when it is
    first or last (3+ micro-batches), so that neither the first, the last nor the larger of the two is the window's."""
    order = list(range(len(amaxes)))
    largest = max(order, key=lambda k: amaxes[k])
    if len(order) >= 3 and largest in (0, len(order) - 1):
        middle = len(order) // 2
        order[largest], order[middle] = order[middle], order[largest]
    return order


def edges_12_1(cases: list) -> dict[str, bool]:
    def middle_largest(seed: int, sizes: list[int], start: int) -> bool:
        """The shown order's largest amax is neither first nor last, and above both by more than the 1e-6 relative
        the grader tolerates (so a first, a last or a max(first, last) amax prints another number)."""
        amaxes = micro_batch_amaxes(seed, sizes, start)
        shown = [amaxes[k] for k in middle_order(amaxes)]
        return max(shown[1:-1]) > max(shown[0], shown[-1]) * (1 + 1e-5)

    return {
        "2 windows of 3+ micro-batches of different sizes (a mean of means; the amax's mean)": all(
            len(sizes) >= 3 and len(set(sizes)) == len(sizes) for _, sizes, _ in cases[:2]
        ),
        "the largest amax inside both windows, above the first and last (the first, last or max(first, last) amax)": all(
            middle_largest(*case) for case in cases[:2]
        ),
        "a window of one micro-batch": len(cases[2][1]) == 1,
    }


def ordered_records(seed: int, sizes: list[int], start: int) -> list[dict]:
    """The records of ``micro_batch_records``, in ``middle_order``: the largest amax in the middle (3+ records)."""
    records, _ = micro_batch_records(seed, sizes, start)
    return [records[k] for k in middle_order([r["amax"] for r in records])]


def shown_record(got) -> str:
    """The student's record: items as an integer; amax, the gradient's sum of absolute values, its L2 norm and its
    dot product with a fixed ramp, to 7 significant digits (scientific notation: the grader's last-digit tolerance is
    relative, and a float32 amax or gradient is still right). Not the gradient's plain sum: a softmax gradient's
    sums to 0 up to rounding."""
    try:
        grad = torch.as_tensor(got["grad"], dtype=torch.float64)
        ramp = torch.linspace(-1.0, 2.0, grad.numel(), dtype=torch.float64).reshape(grad.shape)
        return (
            f"items {int(got['items'])}, amax {float(got['amax']):.6e}, grad {float(grad.abs().sum()):.6e}/"
            f"{float(grad.norm()):.6e}/{float((grad * ramp).sum()):.6e} shape {tuple(grad.shape)}"
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
        "micro-batches of different sizes in every full window (a mean of means)": all(
            len(set(w)) == len(w) for w in full
        ),
        "a short last window: fewer and smaller micro-batches (divided by a full window's samples)": len(sizes[-1])
        < len(full[0])
        and sum(sizes[-1]) < min(sum(w) for w in full),
    }


EDGE_CASES = {"12.1": (draw_12_1, edges_12_1), "12.2": (draw_12_2, edges_12_2)}
"""Check -> (the block's draws, the edge cases every draw holds); tests/test_wrong_answers.py replays the draws of
1,000 seeds (each block runs autograd on digits: a full replay of 1,000 seeds per answer would take minutes)."""


# %% hidden 12.1
for seed, sizes, start in draw_12_1(rng):  # unequal micro-batches twice, then a window of one
    records = ordered_records(seed, sizes, start)
    sizes = [r["items"] for r in records]
    try:
        got = quietly(combine_window, [dict(r) for r in records])
    except Exception as exc:
        got = exc
    print(f"micro-batches of {sizes} -> {shown_record(got)}")

# %% hidden 12.2
case = draw_12_2(rng)
model = make_matrix_model(seed=case["seed"], hidden=case["hidden"])
forwards = []
model[0].register_forward_pre_hook(lambda _module, args: forwards.append(len(args[0])))  # model.forward(x) too
quietly(
    train_muon, model, torch.optim.Muon(model.parameters(), lr=MUON_LR), digit_windows(case["sizes"], case["start"])
)
print(f"windows {case['sizes']}: {weights(model)}; forward passes on {sorted(forwards)} samples")
