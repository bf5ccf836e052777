"""The checks of lesson 09 (``09_at_scale``): what FSDP2's two gradient sync settings cost in memory and
communication, and a compiled micro-step without graph breaks.

Exercise 9.1 asks for ``sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib,
bandwidth_gb_s)``: every sync setting that fits the budget with its peak memory and its collectives' seconds per
optimizer step, all-gathers included (``reference_sync_plan`` is the answer). Exercise 9.2 asks
for ``micro_step(model, batch, items, stats)``: forward and the summed loss / ``items``, returned for a
``backward()`` outside, with the loss (detached) summed into ``stats["loss_sum"]`` and a not-finite loss flagged in
``stats["nonfinite"]``, all without a graph break; the check counts graphs and breaks with
``gradacc.parallel.compiled.count_graph_breaks``, runs the compiled loop (``run_micro_steps``) and compares the gradient
with one big batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ...foundations.accumulation import sum_cross_entropy
from ...foundations.data import load_digits_tensors
from ...foundations.models import make_digits_model
from ...i18n import _
from ...parallel.compiled import count_graph_breaks
from . import run_check

__all__ = ["SYNC_MODES", "reference_sync_plan", "check_sync_plan", "new_stats", "run_micro_steps", "check_micro_step"]

SYNC_MODES = ("each", "boundary")
"""Exercise 9.1's names: FSDP2's default (reduce-scatter on every micro-step) and ``set_requires_gradient_sync(False)``
until the last micro-step."""


def reference_sync_plan(
    parameter_bytes: int,
    world_size: int,
    accum_steps: int,
    peak_each_mib: float,
    budget_mib: float,
    bandwidth_gb_s: float,
) -> dict[str, tuple[float, float]]:
    """Exercise 9.1's answer: ``{mode: (peak_mib, seconds)}`` for the modes of ``SYNC_MODES`` whose peak is ``<=``
    ``budget_mib`` (an empty dict when neither fits). It grades what each setting costs, not a preference between them.

    * Memory: sync at the boundary keeps, on every rank and for ``accum_steps >= 2``, the whole unsharded gradient
      instead of its shard: ``parameter_bytes x (world_size - 1) / world_size`` bytes more than ``peak_each_mib``
      (MiB = 2**20 bytes). With ``accum_steps = 1`` both settings are the same run.
    * Communication: a ring all-gather or reduce-scatter of a float32 parameter- or gradient-sized tensor moves
      ``parameter_bytes x (world_size - 1) / world_size`` bytes per rank (nccl-tests' "bus bandwidth" factor); at
      ``bandwidth_gb_s`` (10**9 bytes/s) it takes bytes / bandwidth seconds. Every micro-step all-gathers the
      parameters twice (forward, and again for backward: ``reshard_after_forward`` is True for every unit but the
      root, which holds no parameters here) in both settings; sync each micro-step adds one reduce-scatter per
      micro-step (``3 x accum_steps`` collectives per optimizer step), sync at the boundary one per optimizer step
      (``2 x accum_steps + 1``): lesson 09's measured counts (cell ``l09-counts``).
    """
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    costs = {
        "each": (peak_each_mib, 3 * accum_steps * one),
        "boundary": (peak_each_mib + (share / 2**20 if accum_steps >= 2 else 0.0), (2 * accum_steps + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# (parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s): both fit; only each fits
# because of the (W - 1) / W share (the whole gradient would not fit either way); budget exactly at the boundary
# peak; nothing fits; one rank (no communication); N = 1 (nothing kept); 8 ranks
_PLAN_CASES = (
    (4 * 10**9, 2, 4, 30_000.0, 40_000.0, 25.0),
    (4 * 2**30, 2, 8, 30_000.0, 31_000.0, 100.0),
    (2 * 2**30, 4, 4, 1000.0, 1000.0 + 1536.0, 50.0),
    (4 * 2**30, 2, 4, 30_000.0, 29_000.0, 25.0),
    (2**30, 1, 8, 500.0, 600.0, 10.0),
    (4 * 2**30, 8, 1, 9000.0, 9000.0, 200.0),
    (3 * 2**30, 8, 16, 5000.0, 7000.0, 50.0),
)


def _plan_error(got: object, want: dict[str, tuple[float, float]], where: str, bandwidth: float) -> str | None:
    """What is wrong with one ``sync_plan`` result against the reference's ``want``, or ``None``."""
    if not isinstance(got, dict) or not all(mode in SYNC_MODES for mode in got):
        return _("{where}: expected a dict {shape} with modes from {modes}, got {got}").format(
            where=where, shape="{mode: (peak_mib, seconds)}", modes=SYNC_MODES, got=repr(got)
        )
    if sorted(got) != sorted(want):
        return _("{where}: expected the settings {want} to fit, got {got} (which peaks fit the budget?)").format(
            where=where, want=sorted(want), got=sorted(got)
        )
    for mode, (peak, seconds) in want.items():
        cost = got[mode]
        try:
            got_peak, got_seconds = (float(value) for value in cost)
        except (TypeError, ValueError):
            return _("{where}: {mode} should map to two numbers (peak_mib, seconds), got {got}").format(
                where=where, mode=repr(mode), got=repr(cost)
            )
        if not math.isclose(got_peak, peak, rel_tol=1e-9):
            return _("{where}: {mode} peak {got} MiB, expected {want} (how much more does it keep?)").format(
                where=where, mode=repr(mode), got=f"{got_peak:.6g}", want=f"{peak:.6g}"
            )
        if not math.isclose(got_seconds, seconds, rel_tol=1e-6, abs_tol=1e-12):
            return _(
                "{where}, {bandwidth} GB/s: {mode} collective seconds per optimizer step = {got}, expected {want} "
                "(how many all-gathers and reduce-scatters, of how many bytes each?)"
            ).format(where=where, bandwidth=bandwidth, mode=repr(mode), got=f"{got_seconds:.6g}", want=f"{seconds:.6g}")
    return None


def check_sync_plan(sync_plan: Callable) -> None:
    """Exercise 9.1: ``sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib,
    bandwidth_gb_s) -> {mode: (peak_mib, seconds)}`` on cases of its own (see ``reference_sync_plan``): the modes that
    fit exactly, peaks to a relative 1e-9, seconds to a relative 1e-6. Prints ``Exercise 9.1: correct`` or what went
    wrong; returns ``None``.
    """

    def body(sync_plan=sync_plan) -> str | None:
        for case in _PLAN_CASES:
            p, w, n, peak, budget, bw = case
            where = _("{gib} GiB of gradients, {ranks} ranks, N = {n}, peak {peak} MiB, budget {budget} MiB").format(
                gib=f"{p / 2**30:.3g}", ranks=w, n=n, peak=peak, budget=budget
            )
            error = _plan_error(sync_plan(*case), reference_sync_plan(*case), where, bw)
            if error:
                return error
        return None

    run_check("9.1", body)


def new_stats() -> dict[str, torch.Tensor]:
    """Exercise 9.2's logging state for one optimizer step: ``{"loss_sum": 0-d float32 0.0, "nonfinite": 0-d bool
    False}``."""
    return {"loss_sum": torch.zeros(()), "nonfinite": torch.zeros((), dtype=torch.bool)}


def run_micro_steps(
    micro_step: Callable,
    model: torch.nn.Module,
    micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    *,
    backend: str | None = "eager",
) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """The loop exercise 9.2's ``micro_step`` is written for: ``torch.compile(micro_step, backend=backend)``, then for
    each micro-batch ``loss = compiled(model, batch, items, stats)`` and ``loss.backward()`` outside. Backend
    ``"eager"`` runs the graphs Dynamo captures as captured (nothing is generated: quick); ``None`` does not compile
    (the hidden check's numbers, once ``count_graph_breaks`` has counted the breaks). Dynamo's caches are reset
    before and after.

    Returns:
        ``(stats, the returned losses)``; the model's ``.grad`` holds the window's gradient.
    """
    items = sum(len(labels) for _inputs, labels in micro_batches)
    stats = new_stats()
    torch._dynamo.reset()
    try:
        step = micro_step if backend is None else torch.compile(micro_step, backend=backend)
        losses = []
        for batch in micro_batches:
            loss = step(model, batch, items, stats)
            loss.backward()
            losses.append(loss)
    finally:
        torch._dynamo.reset()
    return stats, losses


# (hidden, model seed, micro-batch sizes, first digit): unequal micro-batches, a single micro-batch
_STEP_CASES = ((32, 0, (8, 16, 5), 0), (64, 1, (12, 12, 12, 12), 300), (16, 2, (20,), 900))


def _window(sizes: Sequence[int], start: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = load_digits_tensors()
    bounds = [start + sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return [(x[a:b], y[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def _graph_problem(micro_step: Callable) -> str | None:
    batch = _window((16,), 0)[0]
    report = count_graph_breaks(micro_step, make_digits_model(seed=0, hidden=32, depth=2), batch, 64, new_stats())
    if report["graph_break_count"] or report["graph_count"] != 1:
        reasons = "; ".join(report["break_reasons"]) or _("no reason recorded")
        return _("torch.compile captured {graphs} graph(s) with {breaks} graph break(s): {reasons}").format(
            graphs=report["graph_count"], breaks=report["graph_break_count"], reasons=reasons
        )
    return None


def _step_problem(micro_step: Callable, hidden: int, seed: int, sizes: Sequence[int], start: int) -> str | None:
    micro_batches, where = _window(sizes, start), _("micro-batches of {sizes} digits").format(sizes=list(sizes))
    model = make_digits_model(seed=seed, hidden=hidden, depth=2)
    stats, losses = run_micro_steps(micro_step, model, micro_batches)
    if not all(isinstance(loss, torch.Tensor) and loss.requires_grad for loss in losses):
        return _("micro_step must return the loss tensor itself (with its graph), for loss.backward() outside")
    reference = make_digits_model(seed=seed, hidden=hidden, depth=2)
    whole = (torch.cat([b[0] for b in micro_batches]), torch.cat([b[1] for b in micro_batches]))
    want_loss = sum_cross_entropy(reference, whole) / sum(sizes)
    want_loss.backward()
    pairs = zip(model.parameters(), reference.parameters(), strict=True)
    diff = max(float((p.grad - q.grad).abs().max()) for p, q in pairs)
    if not diff <= 1e-6:
        return _("{where}: the gradient differs from one big batch's by {diff} (divide by which count?)").format(
            where=where, diff=f"{diff:.2e}"
        )
    loss_sum, want = stats.get("loss_sum"), float(want_loss.detach())
    if not isinstance(loss_sum, torch.Tensor) or loss_sum.requires_grad:
        return _('stats["loss_sum"] must stay a tensor without a graph (add loss.detach()), got {got}').format(
            got=repr(loss_sum)
        )
    if abs(float(loss_sum) - want) > 1e-5:
        return _('{where}: stats["loss_sum"] = {got}, expected the window loss {want}').format(
            where=where, got=f"{float(loss_sum):.6f}", want=f"{want:.6f}"
        )
    flag = stats.get("nonfinite")
    if not isinstance(flag, torch.Tensor) or bool(flag):
        return _('{where}: every loss is finite, yet stats["nonfinite"] = {got}').format(where=where, got=repr(flag))
    return None


def _nonfinite_problem(micro_step: Callable) -> str | None:
    micro_batches = _window((8, 8, 8), 100)
    inputs = micro_batches[1][0].clone()
    inputs[0, 0] = float("inf")  # one infinite pixel: that micro-batch's loss is NaN
    micro_batches[1] = (inputs, micro_batches[1][1])
    stats, _losses = run_micro_steps(micro_step, make_digits_model(seed=0, hidden=32, depth=2), micro_batches)
    if not (isinstance(stats.get("nonfinite"), torch.Tensor) and bool(stats["nonfinite"])):
        return _('the second micro-batch\'s loss is NaN (an infinite input), yet stats["nonfinite"] stayed False')
    return None


def check_micro_step(micro_step: Callable) -> None:
    """Exercise 9.2: ``micro_step(model, batch, items, stats) -> loss`` compiles to ONE graph with no break
    (``gradacc.parallel.compiled.count_graph_breaks``) and, run compiled in ``run_micro_steps``'s loop, leaves one big
    batch's gradient in ``.grad`` (1e-6), the window loss in ``stats["loss_sum"]`` (1e-5, without a graph) and
    ``stats["nonfinite"]`` True exactly when a loss is not finite, on cases of its own. Prints ``Exercise 9.2:
    correct`` or what went wrong; returns ``None``.
    """

    def body(micro_step=micro_step) -> str | None:
        problems = (_graph_problem(micro_step), *(_step_problem(micro_step, *case) for case in _STEP_CASES))
        return next((p for p in problems if p), None) or _nonfinite_problem(micro_step)

    run_check("9.2", body)
