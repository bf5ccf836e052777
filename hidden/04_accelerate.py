"""Hidden checks of exercises/04_accelerate.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch
from accelerate import Accelerator

from gradacc.accelerate import reset_accelerate_state
from gradacc.data import digits_loader
from gradacc.models import make_digits_model

# %% hidden 4.1
for max_norm in (None, round(rng.uniform(0.01, 0.05), 3)):  # every seed: no clipping, then a threshold that clips
    accum_steps, micro_batch_size = rng.randint(2, 5), rng.choice([4, 8, 12])
    n_samples = micro_batch_size * accum_steps * rng.randint(2, 4)  # full windows only
    reset_accelerate_state()
    accelerator = Accelerator(gradient_accumulation_steps=accum_steps, cpu=True)
    model = make_digits_model(seed=rng.randrange(2**31), hidden=rng.choice([16, 24]))
    optimizer = torch.optim.SGD(model.parameters(), lr=rng.uniform(0.05, 0.3))
    loader = digits_loader(micro_batch_size, seed=rng.randrange(2**31), n_samples=n_samples)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    quietly(train_epoch, accelerator, model, optimizer, loader, max_norm)
    print(
        f"N={accum_steps} B={micro_batch_size} max_norm={max_norm}: weights {weights(accelerator.unwrap_model(model))}"
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
