"""Hidden checks of exercises/07_distributed.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

import torch

from gradacc.course.checks import weights_fingerprint
from gradacc.course.checks.lesson07 import epoch_on_ranks


def draw_allreduce_case(rng) -> dict:
    """An epoch on 2 real ranks, N >= 2, with 2 or more windows and a short last one (every seed: an answer without
    ``no_sync`` all-reduces on every micro-step, one that syncs only on multiples of N never syncs the short window);
    the values drawn from ``rng``."""
    accum_steps = rng.randint(2, 6)
    micro_batches = accum_steps * rng.randint(1, 3) + rng.randint(1, accum_steps - 1)
    sizes = [[rng.randint(2, 12) for _ in range(micro_batches)] for _ in range(2)]
    return {"accum_steps": accum_steps, "seed": rng.randrange(2**31), "lr": rng.uniform(0.1, 0.8), "sizes": sizes}


def allreduce_line(case: dict, result: dict) -> str:
    """One line: the case's shape, then rank 0's count of gradient all-reduces, or the error's type."""
    where = f"{len(case['sizes'][0])} micro-batches per rank, accum_steps={case['accum_steps']}"
    if "error" in result:
        return f"{where}: raised {result['error'].split(':')[0]}"
    return f"{where}: {result['allreduces']} all-reduces"


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


def edges_7_2(case: dict) -> dict[str, bool]:
    n, count = case["accum_steps"], len(case["sizes"][0])
    return {
        "N >= 2 and 2+ windows (no no_sync: an all-reduce every micro-step)": n >= 2 and count > n,
        "a short last window (synced only on multiples of N)": count % n != 0,
    }


def edges_7_3(case: dict) -> dict[str, bool]:
    window_counts = {sum(sizes) for sizes in case["sizes"]}
    short_last = len(case["sizes"][0]) % case["accum_steps"] != 0
    return {
        "the ranks' window counts differ (the rank's own count; no all-reduce of the count)": len(window_counts) == 2,
        "a short last window (the world size forgotten shows on every window; this on a short one too)": short_last,
    }


EDGE_CASES = {"7.2": (draw_allreduce_case, edges_7_2), "7.3": (draw_rank_case, edges_7_3)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 7.1 is replayed in full (it is cheap)."""


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
cases = [draw_allreduce_case(rng) for _ in range(2)]  # on 2 real ranks: one launch for both
for case, result in zip(cases, epoch_on_ranks(train_epoch_ddp, cases), strict=False):
    print(allreduce_line(case, result))

# %% hidden 7.3
case = draw_rank_case(rng)
print(rank_result_line(case, epoch_on_ranks(train_epoch_ddp, [case])[0]))
