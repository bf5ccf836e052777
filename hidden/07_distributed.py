"""Hidden checks of exercises/07_distributed.ipynb, run by `gradacc grade` (README: "Hidden checks").

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch
from torch.nn.parallel import DistributedDataParallel

from gradacc.course.checks import weights_fingerprint
from gradacc.course.checks.lesson07 import epoch_on_ranks
from gradacc.data import load_digits_tensors
from gradacc.distributed import AllReduceCounter, single_process_group
from gradacc.models import make_digits_model


def ddp_epoch(accum_steps: int):
    """The learner's ``train_epoch_ddp`` on a seeded epoch, inside a process group: (batches, all-reduces, model)."""
    x, y = load_digits_tensors()
    micro = rng.randint(3, 12)
    count = accum_steps * rng.randint(1, 4) + rng.randint(1, accum_steps - 1)  # every seed: a short last window
    n_samples = micro * (count - 1) + rng.randint(1, micro)
    start = rng.randint(0, len(x) - n_samples)
    x, y = x[start : start + n_samples].clone(), y[start : start + n_samples].clone()
    batches = list(zip(x.split(micro), y.split(micro), strict=True))
    model = make_digits_model(seed=rng.randrange(2**31), hidden=rng.choice([8, 16, 24]))
    lr = rng.uniform(0.1, 0.8)
    ddp = DistributedDataParallel(model)  # inside single_process_group(), as in the visible checks
    counter = AllReduceCounter()
    ddp.register_comm_hook(state=None, hook=counter.hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    quietly(train_epoch_ddp, ddp, optimizer, batches, accum_steps)
    return batches, counter.calls, ddp.module


def draw_rank_case(rng) -> dict:
    """An epoch on 2 real ranks whose micro-batches differ in size (a window's count differs per rank: every seed has
    that edge case), ending with a short window; the values drawn from ``rng``."""
    accum_steps = rng.randint(2, 4)
    micro_batches = accum_steps * rng.randint(1, 2) + rng.randint(1, accum_steps - 1)  # the last window is short
    small, large = rng.randint(1, 4), rng.randint(6, 12)
    sizes = [
        [rng.randint(1, small) for _ in range(micro_batches)],
        [rng.randint(large, 2 * large) for _ in range(micro_batches)],
    ]
    return {"accum_steps": accum_steps, "seed": rng.randrange(2**31), "lr": rng.uniform(0.2, 0.8), "sizes": sizes}


def rank_result_line(case: dict, result: dict) -> str:
    """One line: the case, then the weights' per-tensor sums and absolute sums (4 decimals), or the error's type."""
    where = f"ranks with micro-batches of {case['sizes']}, accum_steps={case['accum_steps']}"
    if "error" in result:
        return f"{where}: raised {result['error'].split(':')[0]}"
    return f"{where}: weights {weights_fingerprint(result['weights'])}"


# %% hidden 7.1
for _ in range(3):
    counts = rng.sample(range(1, 41), rng.randint(2, 5))  # every seed: ranks with different token counts
    world, total = len(counts), sum(counts)
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    w = torch.randn(5, generator=generator, dtype=torch.float64)
    grads = []
    for count in counts:
        feats = torch.randn(count, 5, generator=generator, dtype=torch.float64)
        wr = w.clone().requires_grad_(True)
        loss = quietly(token_weighted_loss, torch.nn.functional.softplus(feats @ wr).sum(), count, total, world)
        (grad,) = torch.autograd.grad(loss, wr)
        grads.append(grad)
    averaged = torch.stack(grads).mean(0)  # what DDP's all-reduce leaves on every rank
    print(f"tokens {counts}: averaged gradient", " ".join(f"{float(g):.6f}" for g in averaged))

# %% hidden 7.2
with single_process_group():
    runs = [(accum_steps, *ddp_epoch(accum_steps)) for accum_steps in (rng.randint(2, 6), rng.randint(2, 6))]
for accum_steps, batches, calls, _ in runs:
    print(f"{len(batches)} micro-batches, accum_steps={accum_steps}: {calls} all-reduces")

# %% hidden 7.3
case = draw_rank_case(rng)
print(rank_result_line(case, epoch_on_ranks(train_epoch_ddp, [case])[0]))
