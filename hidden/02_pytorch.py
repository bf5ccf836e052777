"""Hidden checks of exercises/02_pytorch.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.data import digits_loader, load_digits_tensors
from gradacc.models import make_digits_model

# %% hidden 2.1
x, y = load_digits_tensors()
sizes = rng.sample(range(3, 41), rng.randint(2, 5))  # distinct sizes: a mean of means is wrong
start = rng.randint(0, len(x) - sum(sizes))
bounds = [start + sum(sizes[:i]) for i in range(len(sizes) + 1)]
micro_batches = [(x[a:b].clone(), y[a:b].clone()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
model = make_digits_model(seed=rng.randrange(2**31), hidden=rng.choice([16, 24, 32]))
optimizer = torch.optim.SGD(model.parameters(), lr=rng.uniform(0.05, 0.5), momentum=rng.choice([0.0, 0.9]))
loss = quietly(accumulation_window, model, optimizer, micro_batches)
print(f"sizes {sizes}: loss {float(loss):.5f} weights {weights(model)}")

# %% hidden 2.2
# every seed: a short last window, ending with a partial micro-batch (the values vary, the edge case never does)
micro_batch_size, accum_steps = rng.randint(4, 20), rng.randint(2, 5)
count = accum_steps * rng.randint(1, 3) + rng.randint(1, accum_steps - 1)  # micro-batches
n_samples = micro_batch_size * (count - 1) + rng.randint(1, micro_batch_size - 1)
batches = list(digits_loader(micro_batch_size, seed=rng.randrange(2**31), n_samples=n_samples))
model = make_digits_model(seed=rng.randrange(2**31), hidden=24)
optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1.0 + step))
losses = quietly(train_epoch, model, optimizer, scheduler, batches, accum_steps)
print(f"{len(batches)} micro-batches, N={accum_steps}: losses", " ".join(f"{float(v):.5f}" for v in losses))
print(f"lr {optimizer.param_groups[0]['lr']:.6f} weights {weights(model)}")
