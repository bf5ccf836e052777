"""The checks of lesson 07 (``07_distributed``): token weighting across ranks, and a DDP epoch with ``no_sync``.

Exercise 7.1 asks for ``token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size)``: the loss each rank
back-propagates so that DDP's gradient AVERAGE over ranks equals the gradient of (sum of every token loss) / (every
token). Exercises 7.2 and 7.3 check one function, ``train_epoch_ddp(ddp_model, optimizer, batches, accum_steps)``:
one gradient all-reduce per window (7.2) and the weights of one process accumulating the same windows (7.3). Both run
the learner's function on 2 real ranks (``gradacc.workers.ddp_answer``, forked by ``gradacc.workers.ranks`` with the
rank variables torchrun would set, without its agent; a communication hook counts DDP's all-reduces), where
synchronization matters: in a one-process group there is nothing to sync, and code that skips ``no_sync()`` there
(Accelerate's guide does, for ``num_processes == 1``) is right. 7.3's ranks hold micro-batches of different sizes: in
one process a missing all-reduce of the sample count changes nothing, across ranks it does.
"""

from __future__ import annotations

import inspect
import json
import math
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import torch

from ...foundations.accumulation import max_abs_diff, train_accumulated
from ...foundations.launch import _worker_env, free_port, ranks_command, run_processes
from ...foundations.models import make_digits_model
from ...i18n import _
from ...parallel.distributed import rank_batches
from . import run_check

__all__ = [
    "check_token_weighted_loss",
    "check_allreduces_per_window",
    "check_epoch_weights",
    "epoch_on_ranks",
    "learner_spec",
    "one_process_weights",
    "windows_of",
]

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

    def body(token_weighted_loss=token_weighted_loss) -> str | None:
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
                    return _("token_weighted_loss should return a 0-d tensor, got {got}").format(
                        got=type(loss).__name__
                    )
                if not loss.requires_grad:
                    return _("the returned loss has no gradient: build it from loss_sum (do not call .item())")
                (grad,) = torch.autograd.grad(loss, wr)
                grads.append(grad)
            ddp_grad = torch.stack(grads).mean(0)  # what DDP's all-reduce leaves on every rank
            wt = w.clone().requires_grad_(True)
            reference = torch.cat([torch.nn.functional.softplus(f @ wt) for f in features]).sum() / total
            (want,) = torch.autograd.grad(reference, wt)
            diff = float((ddp_grad - want).abs().max())
            if diff > 1e-9:
                ratio = float(ddp_grad.norm() / want.norm())
                return _(
                    "with tokens per rank {counts} the averaged gradient differs from sum/{total} by {diff} (its norm "
                    "is {ratio}x the right one)"
                ).format(counts=list(counts), total=total, diff=f"{diff:.2e}", ratio=f"{ratio:.3f}")
        return None

    run_check("7.1", body)


# Two ranks, (accum_steps, micro-batch sizes per rank): windows of 5, 5, 2 micro-batches (the last micro-batch of
# rank 0 holds 2 samples); windows of 4, 4, 2; an epoch that is one short window of 3 micro-batches.
_ALLREDUCE_CASES = (
    {"accum_steps": 5, "seed": 1, "lr": 0.5, "sizes": [[8] * 11 + [2], [6] * 11 + [4]]},
    {"accum_steps": 4, "seed": 2, "lr": 0.5, "sizes": [[6] * 10, [5] * 9 + [1]]},
    {"accum_steps": 8, "seed": 3, "lr": 0.5, "sizes": [[10, 10, 10], [4, 4, 4]]},
)


def windows_of(case: dict) -> int:
    """The accumulation windows of one rank's epoch in ``case``: ceil(micro-batches / accum_steps)."""
    return math.ceil(len(case["sizes"][0]) / case["accum_steps"])


def _judge_on_ranks(train_epoch_ddp: Callable, cases, where: Callable, judge: Callable) -> str | None:
    """Run ``train_epoch_ddp`` on every case in one launch (``epoch_on_ranks``) and return the first problem: an
    unreadable source, the learner's own error, or ``judge(case, result)``'s message, prefixed by ``where(case)``.

    Raises:
        NotImplementedError: the learner's function still raises it (a check reports "not answered yet").
    """
    try:
        results = epoch_on_ranks(train_epoch_ddp, cases)
    except OSError:
        return _("define train_epoch_ddp in a notebook cell of its own: the check could not read its source")
    for case, result in zip(cases, results, strict=False):
        if "error" in result:
            if result["error"].startswith("NotImplementedError"):
                raise NotImplementedError()  # reported as "not answered yet"
            return _("{where}: your code raised {error}").format(where=where(case), error=result["error"])
        problem = judge(case, result)
        if problem:
            return where(case) + ": " + problem
    return None


def check_allreduces_per_window(train_epoch_ddp: Callable[..., object]) -> None:
    """Exercise 7.2: ``train_epoch_ddp`` all-reduces exactly once per accumulation window, the short last one too.

    Runs the function on 2 real ranks (``epoch_on_ranks``: a few seconds) on three epochs of its own
    (windows of 5, 5, 2; 4, 4, 2; a single short window of 3) and counts DDP's gradient all-reduces on rank 0
    (``AllReduceCounter``). Prints ``Exercise 7.2: correct`` or what went wrong; returns ``None``.
    """

    def judge(case: dict, result: dict) -> str | None:
        if result["allreduces"] == windows_of(case):
            return None
        return _(
            "{got} gradient all-reduces, expected {want} (one per window: the forward and backward pass of every "
            "micro-step inside no_sync() except the last of each window, the short last window too)"
        ).format(got=result["allreduces"], want=windows_of(case))

    def where(case: dict) -> str:
        return _("{count} micro-batches per rank on 2 ranks, accum_steps={accum_steps}").format(
            count=len(case["sizes"][0]), accum_steps=case["accum_steps"]
        )

    run_check(
        "7.2", lambda train_epoch_ddp=train_epoch_ddp: _judge_on_ranks(train_epoch_ddp, _ALLREDUCE_CASES, where, judge)
    )


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def learner_spec(fn: Callable) -> dict:
    """What ``gradacc.workers.ddp_answer`` needs to rebuild ``fn`` in another process: its source and, for every
    global name it uses, an import (modules, and functions or classes of importable modules), a constant, or the
    source of another function defined in the notebook (recursively).

    Raises:
        OSError: the source of ``fn`` (or of a notebook function it calls) cannot be found.
    """
    spec: dict = {"function": fn.__name__, "sources": [], "imports": {}, "constants": {}}
    todo, seen = [fn], set()
    while todo:
        current = todo.pop()
        if current.__name__ in seen:
            continue
        seen.add(current.__name__)
        spec["sources"].append(textwrap.dedent(inspect.getsource(current)))
        for name in sorted(_code_names(current.__code__)):
            if name not in current.__globals__:
                continue  # a builtin or an attribute name
            value = current.__globals__[name]
            if inspect.ismodule(value):
                spec["imports"][name] = [value.__name__, None]
            elif isinstance(value, (bool, int, float, str)) or value is None:
                spec["constants"][name] = value
            elif inspect.isfunction(value) and value.__module__ in ("__main__", current.__module__):
                todo.append(value)
            elif getattr(value, "__module__", None) and getattr(value, "__qualname__", None):
                spec["imports"][name] = [value.__module__, value.__qualname__]
    return spec


# Each rank's micro-batch sizes differ (8 vs 3 samples...), so the count of a window differs per rank: only an answer
# that all-reduces it gets one process's weights. Short last windows, and a rank whose last micro-batch holds 1 sample.
_RANK_CASES = (
    {"accum_steps": 4, "seed": 11, "lr": 0.5, "sizes": [[8, 8, 8, 8, 8, 2], [3, 3, 3, 3, 3, 1]]},
    {"accum_steps": 2, "seed": 12, "lr": 0.5, "sizes": [[2, 9, 5], [7, 1, 6]]},
)


def epoch_on_ranks(train_epoch_ddp: Callable, cases=_RANK_CASES, timeout: float = 240.0) -> list[dict]:
    """Run ``train_epoch_ddp`` on ``len(case["sizes"])`` real gloo ranks per case (``gradacc.workers.ddp_answer``,
    started by ``gradacc.workers.ranks`` with torchrun's variables) and return rank 0's results: per case
    ``{"weights": [tensors], "allreduces": int}``, ending with ``{"error": str}`` where a rank's code raised (the
    raising rank's own error, not its peers' lost connection).

    Raises:
        OSError: the function's source cannot be found (``learner_spec``).
        gradacc.foundations.launch.WorkerError: the ranks failed or ran past ``timeout`` seconds.
    """
    world_sizes = {len(case["sizes"]) for case in cases}
    if len(world_sizes) != 1:
        raise ValueError(f"every case needs the same number of ranks, got {sorted(world_sizes)}")
    spec = {**learner_spec(train_epoch_ddp), "cases": list(cases)}
    with tempfile.TemporaryDirectory(prefix="gradacc-check-ddp-") as tmp:
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        out = Path(tmp) / "result.pt"
        world = world_sizes.pop()
        args = [f"--spec={Path(tmp) / 'spec.json'}", f"--out={out}"]
        # the ranks share one import of the worker's modules, and of torch._dynamo, which DDP's constructor imports
        preload = ["gradacc.workers.ddp_answer", "torch._dynamo"]
        cmd = ranks_command("gradacc.workers.ddp_answer", args, nproc_per_node=world, port=free_port(), preload=preload)
        run_processes(cmd, timeout=timeout, env=_worker_env(world), what=f"your train_epoch_ddp on {world} ranks")
        ranks = [torch.load(f"{out}.{rank}", weights_only=True) for rank in range(world)]
    results = ranks[0]
    errors = [r[-1]["error"] for r in ranks if r and "error" in r[-1]]
    if errors:  # the raising rank's own error; its peers only lost their connection to it
        own = [e for e in errors if "Connection" not in e and "Read error" not in e] or errors
        results = [r for r in results if "error" not in r] + [{"error": own[0]}]
    return results


def one_process_weights(case: dict) -> list[torch.Tensor]:
    """The weights after one process accumulates the same windows as ``epoch_on_ranks``'s ranks: window ``w`` holds
    micro-batches ``w*N .. (w+1)*N - 1`` of every rank, one step on their summed loss over all of their samples
    (``gradacc.foundations.accumulation.train_accumulated``, one merged micro-batch per window)."""
    per_rank = [rank_batches(case["sizes"], rank) for rank in range(len(case["sizes"]))]
    n = case["accum_steps"]
    windows = []
    for start in range(0, len(per_rank[0]), n):
        window = [b for batches in per_rank for b in batches[start : start + n]]
        windows.append((torch.cat([b[0] for b in window]), torch.cat([b[1] for b in window])))
    model = make_digits_model(seed=case["seed"], hidden=16)
    train_accumulated(model, torch.optim.SGD(model.parameters(), lr=case["lr"]), windows, 1)
    return [p.detach() for p in model.parameters()]


def check_epoch_weights(train_epoch_ddp: Callable[..., object]) -> None:
    """Exercise 7.3: on 2 real ranks whose micro-batches differ in size, the weights after ``train_epoch_ddp`` equal
    one process accumulating the same windows (every sample of a window, both ranks', weighs the same).

    Runs the function in two gloo processes (``epoch_on_ranks``: a few seconds) on two epochs with short last
    windows; the reference is ``one_process_weights`` (SGD, lr 0.5). Tolerance 1e-6. Prints
    ``Exercise 7.3: correct`` or what went wrong; returns ``None``.
    """

    def judge(case: dict, result: dict) -> str | None:
        start = make_digits_model(seed=case["seed"], hidden=16).parameters()
        if max_abs_diff(result["weights"], start) == 0.0:
            return _("the weights did not change (call optimizer.step() once per window)")
        diff = max_abs_diff(result["weights"], one_process_weights(case))
        if diff <= 1e-6:
            return None
        return _(
            "the weights differ from one process accumulating the same windows by {diff}. Divide each micro-batch's "
            "summed loss by the samples of its window on ALL ranks (all-reduce the count) and multiply by the world "
            "size, as in 7.1; step after the short last window too"
        ).format(diff=f"{diff:.2e}")

    def where(case: dict) -> str:
        sizes = case["sizes"]
        return _("ranks with micro-batches of {first} and {second} samples, N={accum_steps}").format(
            first=sizes[0], second=sizes[1], accum_steps=case["accum_steps"]
        )

    run_check(
        "7.3", lambda train_epoch_ddp=train_epoch_ddp: _judge_on_ranks(train_epoch_ddp, _RANK_CASES, where, judge)
    )
