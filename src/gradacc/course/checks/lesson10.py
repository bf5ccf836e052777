"""The checks of lesson 10 (``10_stacks``): who divides the loss in each stack, and a Lightning loop fixed so that
every window's gradient is the full batch's.

Exercise 10.1 asks for ``loss_factors(library, accum_steps, item_counts, reduction)``: for ONE accumulation window
(``item_counts``: the items of each of its micro-batches; ``accum_steps`` of them for a full window, fewer for an
epoch's short last window: the check grades both), the factor to multiply each micro-batch's loss by before handing
it to the library, so that the window's update is the gradient of the mean item loss over the window; ``None`` where
the library never applies the window (``reference_loss_factors`` is the answer; ``library_scale`` says what each
library does). Exercise 10.2 asks for ``lightning_loss(module, batch, batch_idx)``, the loss a ``LightningModule``'s ``training_step`` returns with
``Trainer(accumulate_grad_batches=N)``; the check runs a real Lightning ``fit`` over micro-batches of unequal sizes
with a short last window (``lightning_window_grads``) and compares every window's gradient with one big batch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ...foundations.accumulation import full_batch_gradients
from ...foundations.data import load_digits_tensors
from ...foundations.models import make_digits_model
from ...i18n import _
from ...stacks import probe_batches, probe_loss_sum, probe_model, probe_weights, right_weights, windows
from . import run_check

__all__ = [
    "LIBRARIES",
    "library_scale",
    "reference_loss_factors",
    "check_loss_factors",
    "lightning_window_grads",
    "full_window_grads",
    "check_lightning_loss",
]

LIBRARIES = ("pytorch", "lightning", "accelerate", "trainer", "keras")
"""Exercise 10.1's libraries, with what each does to the loss your code hands it for micro-batch k:

* ``pytorch``: nothing (your own loop calls ``backward`` on it);
* ``lightning`` (``accumulate_grad_batches=N``) and ``accelerate`` (``gradient_accumulation_steps=N``): divide it by
  N, in every window, the short last one included (lesson 10, section 5; lesson 04);
* ``trainer`` (transformers ``Trainer`` with a loss that is not scaled for accumulation, no ``num_items_in_batch``
  passed): divides it by the number of micro-batches the window really holds (``current_gradient_accumulation_steps``);
* ``keras`` (``optimizer(gradient_accumulation_steps=N)``): adds the gradients and divides the sum by N at the update;
  never applies a short last window (lesson 10, section 6)."""


def library_scale(library: str, accum_steps: int, window_size: int) -> float | None:
    """What ``library`` multiplies your loss by in a window of ``window_size`` micro-batches (``None``: never
    applied). Raises ``ValueError`` for a library not in ``LIBRARIES``."""
    if library == "pytorch":
        return 1.0
    if library in ("lightning", "accelerate"):
        return 1.0 / accum_steps
    if library == "trainer":
        return 1.0 / window_size
    if library == "keras":
        return 1.0 / accum_steps if window_size == accum_steps else None
    raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")


def reference_loss_factors(
    library: str, accum_steps: int, item_counts: Sequence[int], reduction: str
) -> list[float] | None:
    """Exercise 10.1's answer: per micro-batch of the window, ``1 / (W x scale x r_k)`` with ``W`` the window's items,
    ``scale`` the library's (``library_scale``) and ``r_k = 1 / n_k`` for a ``"mean"`` loss (the micro-batch's mean over
    its ``n_k`` items), 1 for a ``"sum"``; ``None`` when the library never applies the window.

    Raises:
        ValueError: unknown library or reduction, or a window of more than ``accum_steps`` micro-batches.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if not 1 <= len(item_counts) <= accum_steps:
        raise ValueError(f"a window holds 1 to accum_steps={accum_steps} micro-batches, got {len(item_counts)}")
    scale = library_scale(library, accum_steps, len(item_counts))
    if scale is None:
        return None
    total = sum(item_counts)
    return [1.0 / (total * scale * (1.0 / n if reduction == "mean" else 1.0)) for n in item_counts]


# (library, accum_steps, item counts of one window, reduction): unequal micro-batches, short last windows, both
# reductions, every library
_FACTOR_CASES = (
    ("pytorch", 4, (6, 2, 5, 3), "mean"),
    ("pytorch", 3, (7, 1), "sum"),
    ("lightning", 4, (6, 2, 5, 3), "mean"),
    ("lightning", 4, (4, 1), "mean"),
    ("lightning", 2, (9, 3), "sum"),
    ("accelerate", 4, (3, 5, 8), "sum"),
    ("accelerate", 2, (10,), "mean"),
    ("trainer", 4, (6, 2, 5, 3), "mean"),
    ("trainer", 4, (4, 1), "mean"),
    ("trainer", 3, (2, 7), "sum"),
    ("keras", 4, (6, 2, 5, 3), "mean"),
    ("keras", 3, (5, 5, 2), "sum"),
    ("keras", 4, (4, 1), "mean"),
)


def _factors_error(got: object, want: list[float] | None, where: str) -> str | None:
    if want is None:
        if got is None:
            return None
        return _("{where}: this window is never applied (expected None), got {got}").format(where=where, got=repr(got))
    try:
        values = [float(v) for v in got]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return _("{where}: expected a list of {count} factors, got {got}").format(
            where=where, count=len(want), got=repr(got)
        )
    if len(values) != len(want):
        return _("{where}: expected {want} factors (one per micro-batch), got {got}").format(
            where=where, want=len(want), got=len(values)
        )
    for k, (v, w) in enumerate(zip(values, want, strict=True)):
        if not math.isclose(v, w, rel_tol=1e-6):
            return _("{where}: micro-batch {k}'s factor is {got}, expected {want} (who divides, and by what?)").format(
                where=where, k=k + 1, got=f"{v:.6g}", want=f"{w:.6g}"
            )
    return None


def _lightning_probe_error(loss_factors: Callable, accum_steps: int, item_counts: Sequence[int]) -> str | None:
    """The learner's ``lightning`` factors applied in a real Lightning fit of the weight probe: each micro-batch must
    get its items over its window's items."""
    from ...stacks import lit

    spans = windows(len(item_counts), accum_steps)
    factors = [
        f for span in spans for f in loss_factors("lightning", accum_steps, [item_counts[k] for k in span], "mean")
    ]

    def scaled_mean(module, batch, batch_idx):
        return probe_loss_sum(module.model, batch) / len(batch[1]) * factors[batch_idx]

    model = probe_model(len(item_counts))
    lit.fit(lit.make_module(model, scaled_mean, lr=1.0), probe_batches(item_counts), accum_steps)
    got, want = probe_weights(model), right_weights(item_counts, accum_steps)
    if max(abs(g - w) for g, w in zip(got, want, strict=True)) > 1e-6:
        return _(
            "with your lightning factors, a real Lightning fit (accumulate_grad_batches={accum_steps}, micro-batches of "
            "{counts} items) gave the micro-batches the weights {got}, expected {want}"
        ).format(
            accum_steps=accum_steps,
            counts=list(item_counts),
            got=[round(g, 4) for g in got],
            want=[round(w, 4) for w in want],
        )
    return None


def check_loss_factors(loss_factors: Callable) -> None:
    """Exercise 10.1: ``loss_factors(library, accum_steps, item_counts, reduction)`` against
    ``reference_loss_factors`` on cases of its own (relative 1e-6; ``None`` where expected), then its ``lightning``
    factors in a real Lightning fit of ``gradacc.stacks``' weight probe (6 micro-batches at N = 4: a full window and a
    short one). Prints ``Exercise 10.1: correct`` or what went wrong; returns ``None``.
    """

    def body(loss_factors=loss_factors) -> str | None:
        for library, n, counts, reduction in _FACTOR_CASES:
            where = _("{library}, accum_steps={n}, a window of {counts} items, {reduction} loss").format(
                library=library, n=n, counts=list(counts), reduction=repr(reduction)
            )
            error = _factors_error(
                loss_factors(library, n, list(counts), reduction),
                reference_loss_factors(library, n, counts, reduction),
                where,
            )
            if error:
                return error
        return _lightning_probe_error(loss_factors, 4, (6, 2, 5, 3, 4, 1))

    run_check("10.1", body)


def _micro_batches(sizes: Sequence[int], start: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = load_digits_tensors()
    bounds = [start + sum(sizes[:k]) for k in range(len(sizes) + 1)]
    return [(x[a:b].clone(), y[a:b].clone()) for a, b in zip(bounds, bounds[1:], strict=False)]


def lightning_window_grads(
    lightning_loss: Callable, sizes: Sequence[int], accum_steps: int, *, seed: int = 0, hidden: int = 32, start: int = 0
) -> list[list[torch.Tensor]]:
    """Exercise 10.2's run: a real Lightning ``fit`` (``gradacc.stacks.lit``) of ``make_digits_model(seed,
    hidden=hidden)`` over digits micro-batches of ``sizes`` samples (from digit ``start`` on), one epoch,
    ``accumulate_grad_batches=accum_steps``, ``training_step`` returning ``lightning_loss(module, batch, batch_idx)``,
    SGD at learning rate 0 (the weights stay put, so every window's gradient is taken at the same weights);
    ``module.item_counts`` = ``sizes``. Returns each window's accumulated gradient."""
    from ...stacks import lit

    model = make_digits_model(seed=seed, hidden=hidden)
    module = lit.make_module(model, lightning_loss, lr=0.0, item_counts=list(sizes))
    return lit.fit(module, _micro_batches(sizes, start), accum_steps).grads


def full_window_grads(
    sizes: Sequence[int], accum_steps: int, *, seed: int = 0, hidden: int = 32, start: int = 0
) -> list[list[torch.Tensor]]:
    """For each window of ``lightning_window_grads``' run, the gradient of the mean loss of its micro-batches taken
    as one big batch (``gradacc.foundations.accumulation.full_batch_gradients``)."""
    model = make_digits_model(seed=seed, hidden=hidden)
    batches = _micro_batches(sizes, start)
    grads = []
    for span in windows(len(sizes), accum_steps):
        whole = (torch.cat([batches[k][0] for k in span]), torch.cat([batches[k][1] for k in span]))
        grads.append(full_batch_gradients(model, whole))
    return grads


# (micro-batch sizes, accum_steps, model seed, first digit): unequal sizes and a short last window; an epoch shorter
# than N (Lightning steps at its end); equal sizes with a short last window
_LIGHTNING_CASES = (((8, 3, 6, 5, 7, 2), 4, 0, 0), ((5, 9, 4), 4, 1, 300), ((6, 6, 6, 6, 6), 2, 2, 700))


def check_lightning_loss(lightning_loss: Callable) -> None:
    """Exercise 10.2: with ``training_step`` returning ``lightning_loss(module, batch, batch_idx)``, every window of a
    real Lightning fit (``lightning_window_grads``) has the gradient of its micro-batches as one big batch
    (``full_window_grads``), to 1e-6: unequal micro-batches, a short last window, an epoch shorter than N. Prints
    ``Exercise 10.2: correct`` or what went wrong; returns ``None``.
    """

    def body(lightning_loss=lightning_loss) -> str | None:
        for sizes, n, seed, start in _LIGHTNING_CASES:
            got = lightning_window_grads(lightning_loss, sizes, n, seed=seed, start=start)
            want = full_window_grads(sizes, n, seed=seed, start=start)
            where = _("micro-batches of {sizes} digits, accumulate_grad_batches={n}").format(sizes=list(sizes), n=n)
            if len(got) != len(want):
                return _("{where}: {got} optimizer steps, expected {want}").format(
                    where=where, got=len(got), want=len(want)
                )
            for w, (g, ref) in enumerate(zip(got, want, strict=True)):
                diff = max(float((a - b).abs().max()) for a, b in zip(g, ref, strict=True))
                if not diff <= 1e-6:
                    norm = float(
                        torch.cat([a.flatten() for a in g]).norm() / torch.cat([b.flatten() for b in ref]).norm()
                    )
                    return _(
                        "{where}: window {w}'s gradient differs from one big batch's by {diff} (its norm is {ratio}x "
                        "the big batch's; what does Lightning divide by, and which items are in the window?)"
                    ).format(where=where, w=w + 1, diff=f"{diff:.2e}", ratio=f"{norm:.3f}")
        return None

    run_check("10.2", body)
