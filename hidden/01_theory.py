"""Hidden checks of exercises/01_theory.ipynb, run by `gradacc grade` (README: "Instructor's guide").

The preamble (this part) runs before every block; each `# %% hidden X.Y` block becomes a cell right after check cell
X.Y of the merged notebook and runs in a copy of the notebook's namespace, with GRADACC_SEED (a new int per grading
run) defined. A block PRINTS the student's results on inputs drawn from GRADACC_SEED, never a verdict: the grader
compares the text with what the reference solution prints for the same seed (numbers within one unit of the last
printed digit), so printing the expected line, patching gradacc.checks or silencing stdout cannot pass it.
"""
# ruff: noqa: F821 - GRADACC_SEED and the student's functions come from the notebook

import random

import torch

from gradacc.checks import quietly
from gradacc.data import IGNORE_INDEX

rng = random.Random(GRADACC_SEED)
gen = torch.Generator().manual_seed(rng.randrange(2**31))

# %% hidden 1.1
counts = rng.sample(range(1, 41), rng.randint(2, 6))  # distinct counts: an unweighted mean is wrong
means = [rng.uniform(-3, 3) for _ in counts]
print(f"numbers, counts {counts}: {float(quietly(combine_means, means, counts)):.6f}")
tensors = [torch.randn(3, 4, generator=gen) for _ in counts]
got = quietly(combine_means, tensors, counts)
print(f"tensors: shape {tuple(got.shape)} sum {float(got.sum()):.5f} abs {float(got.abs().sum()):.5f}")

# %% hidden 1.2
vocab = rng.randint(5, 30)
logits_list, labels_list = [], []
for _ in range(rng.randint(2, 4)):
    rows, steps = rng.randint(1, 4), rng.randint(2, 9)
    logits_list.append(torch.randn(rows, steps, vocab, generator=gen).requires_grad_())
    labels = torch.randint(0, vocab, (rows, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (rows,), generator=gen)
    labels[torch.arange(steps) >= lengths[:, None]] = IGNORE_INDEX  # padding after each sequence's length
    labels_list.append(labels)
losses = quietly(window_token_losses, logits_list, labels_list)
print("losses", " ".join(f"{float(loss):.5f}" for loss in losses))
grads = torch.autograd.grad(sum(losses), logits_list, allow_unused=True)
print("grads", " ".join("none" if g is None else f"{float(g.abs().sum()):.5f}" for g in grads))
