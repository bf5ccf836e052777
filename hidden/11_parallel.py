"""Hidden checks of exercises/11_parallel.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.course.checks.lesson11 import BF16_LR, PACKED_DOCUMENTS, PACKED_SEQ_LENGTH, bf16_windows
from gradacc.foundations.models import make_digits_model
from gradacc.parallel.parallel_stacks import trl_packed_micro_batches, trl_padded_micro_batches

N_DIGITS = 1797  # samples in gradacc.foundations.data.load_digits_tensors()


def shown_int(value) -> str:
    """An integer as the visible check compares it: ``64``, ``np.int64(64)`` and ``64.0`` alike print ``64``; a bool
    or anything else prints its repr."""
    try:
        if not isinstance(value, bool) and value == int(value):
            return str(int(value))
    except (TypeError, ValueError, OverflowError):
        pass
    return repr(value)


def plan(*case) -> str:
    """The student's ``window_plan`` on ``case``: the effective batch, the factor (10 significant digits, in
    scientific notation so that the grader's last-digit tolerance stays relative) or None, or the error's type."""
    try:
        got = quietly(window_plan, *case)
        factor = got["loss_factor"]
        shown = "None" if factor is None else f"{float(factor):.9e}"
        return f"effective {shown_int(got['effective_batch_size'])}, factor {shown}"
    except Exception as exc:
        return type(exc).__name__


def counted(batches, shifts_labels: bool) -> str:
    """The student's ``count_items`` on ``batches``: each count as an integer, or the error's type."""
    try:
        return str([shown_int(n) for n in quietly(count_items, batches, shifts_labels)])
    except Exception as exc:
        return type(exc).__name__


def draw_packed(rng) -> tuple[tuple[int, ...], int, list]:
    """TRL-packed micro-batches (rows of one length, 1 or 2 packs each, in a drawn order) of drawn documents."""
    documents, packs = rng.choice(PACKED_DOCUMENTS), rng.choice([1, 2])
    batches = trl_packed_micro_batches(documents, PACKED_SEQ_LENGTH, packs_per_micro_batch=packs)
    rng.shuffle(batches)
    return documents, packs, batches


PADDED_CHOICES = (
    (5, 3, 7, 2, 4, 6),
    (1, 12, 9, 9, 2),
    (8, 8, 3, 11, 6, 1, 10),
    (4, 4, 4, 4),
    (2, 11, 7, 5, 12, 3, 9, 6),
)
"""Document lengths for TRL's padded collator: a few sets, so that each (set, rows) is collated once per process."""


def draw_padded(rng) -> tuple[tuple[int, ...], int, list]:
    """4-8 documents of 1-12 tokens that TRL's collator pads without packing, 2-3 rows per micro-batch, in a drawn
    order (a causal LM: every row's first label is a token, which the loss does not predict)."""
    documents, rows = rng.choice(PADDED_CHOICES), rng.choice([2, 3])
    batches = trl_padded_micro_batches(documents, rows)
    rng.shuffle(batches)
    return documents, rows, batches


def draw_sequences(rng) -> list[dict]:
    """2-4 micro-batches of 1-3 digit sequences of 6 "tokens" (0-9), each padded with -100 after its first 1-6: a model
    that reads each token on its own (lesson 11's MLP), so no shift; every row starts with a real label."""
    batches = []
    for _ in range(rng.randint(2, 4)):
        lengths = [rng.randint(1, 6) for _ in range(rng.randint(1, 3))]
        labels = [[rng.randrange(10) if t < n else -100 for t in range(6)] for n in lengths]
        batches.append({"labels": torch.tensor(labels)})
    return batches


def draw_samples(rng) -> list[dict]:
    """2-5 micro-batches of 1-16 sample labels (0-9); the last one padded with 1-4 rows labelled -100."""
    sizes = [rng.randint(1, 16) for _ in range(rng.randint(2, 5))]
    batches = [{"labels": torch.tensor([rng.randrange(10) for _ in range(n)])} for n in sizes]
    batches[-1]["labels"] = torch.cat([batches[-1]["labels"], torch.full((rng.randint(1, 4),), -100)])
    return batches


def draw_11_2(rng) -> dict:
    """2-3 windows of 1-3 micro-batches of 3-24 digits; the first window holds 2-3 micro-batches of different sizes."""
    first = rng.sample(range(3, 25), rng.randint(2, 3))
    sizes = [first] + [[rng.randint(3, 24) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 2))]
    return {
        "sizes": sizes,
        "start": rng.randint(0, N_DIGITS - sum(map(sum, sizes))),
        "seed": rng.randrange(2**31),
        "hidden": rng.choice([16, 24, 32]),
    }


def edges_11_2(case: dict) -> dict[str, bool]:
    sizes = case["sizes"]
    return {
        "2+ windows (one autocast context around the loop: stale weights from the second window on)": len(sizes) >= 2,
        "a window of 2+ micro-batches (an optimizer step per micro-batch)": any(len(w) >= 2 for w in sizes),
        "micro-batches of different sizes in one window (each divided by its own size)": any(
            len(set(w)) > 1 for w in sizes
        ),
    }


EDGE_CASES = {"11.2": (draw_11_2, edges_11_2)}
"""Check -> (the block's draws, the edge cases every draw holds); tests/test_wrong_answers.py replays the draws of
1,000 seeds. 11.1 is replayed in full (it is cheap)."""


# %% hidden 11.1
documents, packs, batches = draw_packed(rng)  # every seed: a causal LM's TRL-packed rows of one length
print(f"TRL packs of {documents}, {packs} per micro-batch -> {counted(batches, True)}")
documents, rows, batches = draw_padded(rng)  # a causal LM's rows that TRL's collator padded: the shift counts
print(f"TRL-padded documents {documents}, {rows} rows per micro-batch -> {counted(batches, True)}")
print(f"samples -> {counted(draw_samples(rng), False)}")  # 1-D labels: no shift
print(f"digit sequences -> {counted(draw_sequences(rng), False)}")  # 2-D labels of a model that does not shift
b, w = rng.randint(2, 32), rng.choice([2, 4, 8])  # M = A = 1 on 2+ ranks with different items: DDP's mean of means
case = (b, 1, 1, w, "mean", rng.random() < 0.5, rng.randint(w + 1, 64 * b * w), False)
print(f"{case} -> {plan(*case)}")
for reduction in ("mean", "sum"):  # M = 1: scale_grads divides by 1, so A >= 2 step() calls keep a constant
    b, a, w = rng.randint(2, 32), rng.randint(2, 4), rng.choice([1, 2, 4, 8])
    equal = rng.random() < 0.5
    items = b * a * w * rng.randint(2, 64) if equal else rng.randint(b * a * w + 1, 64 * b * a * w)
    case = (b, 1, a, w, reduction, True, items, equal)
    print(f"{case} -> {plan(*case)}")
for reduction in ("mean", "sum"):  # every seed: both reductions, the library's division on (A = 1, A >= 2) and off
    for scale_grads, step_calls in ((True, 1), (True, rng.randint(2, 4)), (False, rng.randint(2, 4))):
        b, m, w = rng.randint(2, 32), rng.choice([2, 4, 8, 16]), rng.choice([2, 4, 8, 64])
        case = (b, m, step_calls, w, reduction, scale_grads, b * m * step_calls * w, True)  # one item per sample
        print(f"{case} -> {plan(*case)}")
    # padded tokens (a different count per micro-batch), then micro-batches with the same number of items (2-512 per
    # sample)
    for scale_grads, step_calls, equal in ((True, 1, False), (False, rng.randint(1, 4), True)):
        b, m, w = rng.randint(2, 32), rng.choice([2, 4, 8, 16]), rng.choice([2, 4, 8, 64])
        effective = b * m * step_calls * w
        items = effective * rng.randint(2, 512) if equal else rng.randint(effective + 1, 512 * effective)
        case = (b, m, step_calls, w, reduction, scale_grads, items, equal)
        print(f"{case} -> {plan(*case)}")
b, m = rng.randint(2, 32), rng.choice([2, 4, 8])
case = (b, m, 1, 1, rng.choice(["mean", "sum"]), False, b * m, True)  # one rank, one call
print(f"{case} -> {plan(*case)}")

# %% hidden 11.2
case = draw_11_2(rng)
model = make_digits_model(seed=case["seed"], hidden=case["hidden"])
quietly(train_bf16, model, torch.optim.SGD(model.parameters(), lr=BF16_LR), bf16_windows(case["sizes"], case["start"]))
print(f"windows {case['sizes']}: {weights(model)}")
