"""Hidden checks of exercises/01_theory.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.foundations.data import IGNORE_INDEX

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
# every seed: padding in every micro-batch, and micro-batches of different token counts (a mean of means is wrong)
tokens = []
while len(set(tokens)) < 2:
    logits_list, labels_list = [], []
    for _ in range(rng.randint(2, 4)):
        rows, steps = rng.randint(1, 4), rng.randint(2, 9)
        logits_list.append(torch.randn(rows, steps, vocab, generator=gen).requires_grad_())
        labels = torch.randint(0, vocab, (rows, steps), generator=gen)
        lengths = torch.randint(1, steps, (rows,), generator=gen)  # shorter than the row: at least one pad
        labels[torch.arange(steps) >= lengths[:, None]] = IGNORE_INDEX  # padding after each sequence's length
        labels_list.append(labels)
    tokens = [int((labels != IGNORE_INDEX).sum()) for labels in labels_list]
losses = quietly(window_token_losses, logits_list, labels_list)
print("losses", " ".join(f"{float(loss):.5f}" for loss in losses))
grads = torch.autograd.grad(sum(losses), logits_list, allow_unused=True)
print("grads", " ".join("none" if g is None else f"{float(g.abs().sum()):.5f}" for g in grads))
