"""The checks of lesson 07 (``07_distributed``): token weighting across ranks, and a DDP epoch with ``no_sync``.

Exercise 7.1 asks for ``token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size)``: the loss each rank
back-propagates so that DDP's gradient AVERAGE over ranks equals the gradient of (sum of every token loss) / (every
token). Exercises 7.2 and 7.3 check one function, ``train_epoch_ddp(ddp_model, optimizer, batches, accum_steps)``:
one all-reduce per window (7.2) and the weights of one process accumulating the same windows (7.3). They run a real
``DistributedDataParallel`` model in a one-process gloo group inside the kernel
(``gradacc.distributed.single_process_group``), with a communication hook that counts the all-reduces.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from ...accumulation import max_abs_diff, train_accumulated
from ...data import load_digits_tensors
from ...distributed import AllReduceCounter, single_process_group
from ...models import make_digits_model
from . import run_check

__all__ = ["check_token_weighted_loss", "check_allreduces_per_window", "check_epoch_weights"]

# token counts per rank; several world sizes, ranks with very different counts, one rank with a single token
_TOKEN_CASES = ((5, 15), (3, 11, 6), (1, 30, 2, 7))


def _rank_losses(counts: tuple[int, ...], seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A parameter vector and, per rank, its tokens' features: token loss = softplus(feature . w) (a real graph)."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(6, generator=generator, dtype=torch.float64)
    features = [torch.randn(c, 6, generator=generator, dtype=torch.float64) for c in counts]
    return w, features


def check_token_weighted_loss(token_weighted_loss: Callable[..., torch.Tensor]) -> None:
    """Exercise 7.1: per-rank loss whose DDP-averaged gradient is (sum of all token losses) / (all tokens).

    For each case the check builds, per rank, the summed loss of that rank's tokens (a differentiable 0-d tensor),
    calls ``token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size)``, differentiates each result,
    AVERAGES the ranks' gradients as DDP does, and compares with the gradient of the global token mean (float64,
    tolerance 1e-9). Prints ``Exercise 7.1: correct`` or what went wrong; returns ``None``.
    """

    def body() -> str | None:
        for seed, counts in enumerate(_TOKEN_CASES):
            world, total = len(counts), sum(counts)
            w, features = _rank_losses(counts, seed)
            grads = []
            all_losses = []
            for rank, feats in enumerate(features):
                wr = w.clone().requires_grad_(True)
                token_losses = torch.nn.functional.softplus(feats @ wr)
                all_losses.append(torch.nn.functional.softplus(feats @ w))
                loss = token_weighted_loss(token_losses.sum(), counts[rank], total, world)
                if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                    return f"token_weighted_loss should return a 0-d tensor, got {type(loss).__name__}"
                if not loss.requires_grad:
                    return "the returned loss has no gradient: build it from loss_sum (do not call .item())"
                (grad,) = torch.autograd.grad(loss, wr)
                grads.append(grad)
            ddp_grad = torch.stack(grads).mean(0)  # what DDP's all-reduce leaves on every rank
            wt = w.clone().requires_grad_(True)
            reference = torch.cat([torch.nn.functional.softplus(f @ wt) for f in features]).sum() / total
            (want,) = torch.autograd.grad(reference, wt)
            diff = float((ddp_grad - want).abs().max())
            if diff > 1e-9:
                ratio = float(ddp_grad.norm() / want.norm())
                return (
                    f"with tokens per rank {list(counts)} the averaged gradient differs from sum/{total} by {diff:.2e} "
                    f"(its norm is {ratio:.3f}x the right one)"
                )
        return None

    run_check("7.1", body)


def _epoch_case(accum_steps: int, n_samples: int, micro_batch_size: int, seed: int):
    x, y = load_digits_tensors()
    start = 100 * seed
    x, y = x[start : start + n_samples], y[start : start + n_samples]
    batches = list(zip(x.split(micro_batch_size), y.split(micro_batch_size), strict=True))
    model = make_digits_model(seed=seed, hidden=16)
    return model, batches


# (accum_steps, samples, micro_batch_size, seed): windows of 5, 5, 2 micro-batches (the last micro-batch holds 2
# samples), then 4, 4, 2 micro-batches, then an epoch that is one short window of 3.
_EPOCH_CASES = ((5, 90, 8, 1), (4, 60, 6, 2), (8, 30, 10, 3))


def _run_epochs(train_epoch_ddp: Callable[..., object]) -> list[dict]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    runs = []
    with single_process_group():
        for accum_steps, n_samples, micro, seed in _EPOCH_CASES:
            model, batches = _epoch_case(accum_steps, n_samples, micro, seed)
            reference = copy.deepcopy(model)
            ddp = DDP(model)
            counter = AllReduceCounter()
            ddp.register_comm_hook(state=None, hook=counter.hook)
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.5)
            train_epoch_ddp(ddp, optimizer, batches, accum_steps)
            ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
            history = train_accumulated(reference, ref_optimizer, batches, accum_steps)
            runs.append(
                {
                    "case": f"{len(batches)} micro-batches of up to {micro} samples, accum_steps={accum_steps}",
                    "windows": len(history),
                    "calls": counter.calls,
                    "diff": max_abs_diff(ddp.module.parameters(), reference.parameters()),
                    "moved": max_abs_diff(
                        ddp.module.parameters(), make_digits_model(seed=seed, hidden=16).parameters()
                    ),
                }
            )
    return runs


def check_allreduces_per_window(train_epoch_ddp: Callable[..., object]) -> None:
    """Exercise 7.2: ``train_epoch_ddp`` all-reduces exactly once per accumulation window, the short last one too.

    Runs the function on a DDP model in a one-process group on three epochs of its own (windows of 5, 5, 2; 4, 4, 2;
    and a single short window) and counts the gradient all-reduces with ``AllReduceCounter``. Prints
    ``Exercise 7.2: correct`` or what went wrong; returns ``None``.
    """

    def body() -> str | None:
        for run in _run_epochs(train_epoch_ddp):
            if run["calls"] != run["windows"]:
                return (
                    f"{run['case']}: {run['calls']} gradient all-reduces, expected {run['windows']} (one per window: "
                    "no_sync() on every micro-step except the last of each window, including the short last window)"
                )
        return None

    run_check("7.2", body)


def check_epoch_weights(train_epoch_ddp: Callable[..., object]) -> None:
    """Exercise 7.3: after ``train_epoch_ddp`` the weights equal one process accumulating the same windows.

    The reference is ``gradacc.accumulation.train_accumulated`` (SGD, lr 0.5): every window, the short last one
    included, makes one optimizer step with its summed loss divided by its number of samples. Tolerance 1e-6.
    Prints ``Exercise 7.3: correct`` or what went wrong; returns ``None``.
    """

    def body() -> str | None:
        for run in _run_epochs(train_epoch_ddp):
            if run["moved"] == 0.0:
                return f"{run['case']}: the weights did not change (call optimizer.step() once per window)"
            if run["diff"] > 1e-6:
                return (
                    f"{run['case']}: the weights differ from one process accumulating the same windows by "
                    f"{run['diff']:.2e} (divide each micro-batch's summed loss by the samples in its WINDOW, and step "
                    "after the short last window too)"
                )
        return None

    run_check("7.3", body)
