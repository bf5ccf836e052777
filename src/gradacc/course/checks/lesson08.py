"""The checks of lesson 08 (``08_pitfalls``): BatchNorm's running variance, and GradCache for in-batch negatives.

Exercise 8.1 asks for ``running_var_after(running_var, micro_batches, momentum)``: BatchNorm's running variance after
one training-mode forward per micro-batch; the check compares it with a real ``nn.BatchNorm1d``. Exercises 8.2 and
8.3 check one function, ``grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature)``: the InfoNCE
gradient of the WHOLE batch (every other sample a negative) computed chunk by chunk (8.2), also through an encoder
with dropout, where each chunk's re-run must replay the random numbers of its first pass, with the saved activations
of about one chunk alive at a time (8.3).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ...foundations.data import load_digits_tensors
from ...foundations.graphs import SavedTensorMeter
from ...foundations.models import make_digits_model
from ...foundations.pitfalls import first_pass_gradient, info_nce_loss, recorded_forwards, two_views
from ...i18n import _
from . import run_check

__all__ = ["check_running_var", "check_grad_cache_gradient", "check_grad_cache_memory"]

# (features, micro-batch sizes, momentum, seed): unequal sizes, several momenta, a single micro-batch
_BN_CASES = ((5, (4, 9, 6), 0.1, 0), (3, (8, 8, 8, 8, 3), 0.3, 1), (7, (12,), 0.05, 2))


def _bn_case(features: int, sizes: Sequence[int], momentum: float, seed: int):
    generator = torch.Generator().manual_seed(seed)
    running_var = torch.rand(features, generator=generator) + 0.5
    micro_batches = [torch.randn(n, features, generator=generator) * 2 + 1 for n in sizes]
    bn = nn.BatchNorm1d(features, momentum=momentum)
    with torch.no_grad():
        bn.running_var.copy_(running_var)
        for batch in micro_batches:
            bn(batch)  # training mode: normalizes with the batch statistics, updates the running ones
    return running_var, micro_batches, bn.running_var.clone()


def check_running_var(running_var_after: Callable[..., torch.Tensor]) -> None:
    """Exercise 8.1: BatchNorm's running variance after one training-mode forward per micro-batch.

    ``running_var_after(running_var, micro_batches, momentum)`` gets the starting running variance ``[C]`` and a
    list of ``[n_i, C]`` micro-batches; the check compares its result with a real ``nn.BatchNorm1d(C,
    momentum=momentum)`` fed the same micro-batches (tolerance 1e-5), on cases of its own (unequal micro-batch
    sizes, several momenta). Prints ``Exercise 8.1: correct`` or what went wrong; returns ``None``.
    """

    def body(running_var_after=running_var_after) -> str | None:
        for features, sizes, momentum, seed in _BN_CASES:
            start, micro_batches, want = _bn_case(features, sizes, momentum, seed)
            got = running_var_after(start.clone(), [b.clone() for b in micro_batches], momentum)
            got = torch.as_tensor(got, dtype=torch.float32)
            if got.shape != want.shape:
                return _("expected a tensor of shape {want}, got {got}").format(
                    want=tuple(want.shape), got=tuple(got.shape)
                )
            diff = float((got - want).abs().max())
            if not diff <= 1e-5:
                return _(
                    "micro-batches of {sizes} samples, momentum {momentum}: differs from nn.BatchNorm1d's running_var "
                    "by {diff} (one update per micro-batch, with which variance?)"
                ).format(sizes=list(sizes), momentum=momentum, diff=f"{diff:.2e}")
        return None

    run_check("8.1", body)


# (samples, accum_steps, hidden, temperature, first sample, dropout): chunks of 16, of 10, unequal chunks (40 / 3),
# and an encoder with dropout 0.1 (as retrievers use), whose re-runs must replay the first pass's random numbers
_GC_CASES = (
    (48, 3, 64, 0.1, 0, 0.0),
    (40, 4, 32, 0.2, 500, 0.0),
    (40, 3, 64, 0.05, 900, 0.0),
    (48, 4, 64, 0.1, 1200, 0.1),
)
# wider encoders for the memory check, so that activations (not the [B, B] similarities) dominate
_GC_MEMORY_CASES = ((48, 3, 256, 0.1, 0), (40, 4, 256, 0.2, 500))


def _gc_setup(n: int, hidden: int, start: int, seed: int, dropout: float = 0.0):
    x = load_digits_tensors()[0]
    views_a, views_b = two_views(x[start : start + n])
    encoder = make_digits_model(seed=seed, hidden=hidden, depth=2, dropout=dropout)
    return encoder, views_a, views_b


def _full_batch(encoder: nn.Module, views_a, views_b, temperature: float):
    encoder = copy.deepcopy(encoder)
    params = list(encoder.parameters())
    with SavedTensorMeter(exclude=[*params, views_a, views_b]) as meter:
        loss = info_nce_loss(encoder(views_a), encoder(views_b), temperature)
        grads = torch.autograd.grad(loss, params)
    return float(loss.detach()), grads, meter.peak_bytes


def _learner(grad_cache_backward, encoder: nn.Module, views_a, views_b, accum_steps: int, temperature: float):
    encoder = copy.deepcopy(encoder)
    params = list(encoder.parameters())
    with SavedTensorMeter(exclude=[*params, views_a, views_b]) as meter:
        loss = grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature)
    grads = [p.grad for p in params]
    return loss, grads, meter.peak_bytes


def _learner_with_dropout(grad_cache_backward, encoder: nn.Module, views_a, views_b, accum_steps, temperature, seed):
    """The learner's loss and gradient through an encoder with dropout, and what they must be: the loss and gradient
    with the dropout masks of each sample's first pass (``first_pass_gradient``: its last forward without a graph
    before its first forward with one), whatever the order and the chunks of the learner's forwards."""
    learner = copy.deepcopy(encoder)
    with torch.random.fork_rng(devices=[]), recorded_forwards(learner) as calls:
        torch.manual_seed(seed)
        loss = grad_cache_backward(learner, views_a, views_b, accum_steps, temperature)
    want_loss, want = first_pass_gradient(copy.deepcopy(encoder), calls, views_a, views_b, temperature)
    return loss, [p.grad for p in learner.parameters()], want_loss, want, _reruns_repeat_first_pass(calls)


def _reruns_repeat_first_pass(calls) -> bool:
    """Whether every forward with a graph (a re-run) had the same input as a forward without one (a first-pass
    chunk): a re-run of a chunk cut from a bigger graph-free forward cannot replay that forward's masks."""
    graph_free = {(tuple(x.shape), x.numpy().tobytes()) for x, _state, grad_enabled in calls if not grad_enabled}
    return all((tuple(x.shape), x.numpy().tobytes()) in graph_free for x, _state, grad_enabled in calls if grad_enabled)


def check_grad_cache_gradient(grad_cache_backward: Callable[..., float]) -> None:
    """Exercise 8.2: ``grad_cache_backward`` leaves the FULL-batch InfoNCE gradient in ``.grad``, chunk by chunk.

    ``grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature)`` must return the full-batch loss (a
    float) and leave in each parameter's ``.grad`` the gradient of ``info_nce_loss(encoder(views_a),
    encoder(views_b), temperature)`` over the whole batch. Cases of its own: 2-hidden-layer encoders, chunks of
    equal and unequal sizes, and one encoder with dropout 0.1: there the loss must be the loss of the first pass's
    embeddings and the gradient its gradient with the first pass's dropout masks (each sample's last forward without a
    graph before its re-run, replayed by ``gradacc.foundations.pitfalls.first_pass_gradient``), which needs each chunk's re-run to replay the
    random numbers of its first-pass forward. Tolerance 1e-5 on the gradient (float32), 1e-5 on the loss. Prints
    ``Exercise 8.2: correct`` or what went wrong; returns ``None``.
    """

    def body(grad_cache_backward=grad_cache_backward) -> str | None:
        for seed, (n, accum_steps, hidden, temperature, start, dropout) in enumerate(_GC_CASES):
            encoder, views_a, views_b = _gc_setup(n, hidden, start, seed, dropout)
            if dropout:
                loss, grads, want_loss, want, same_chunks = _learner_with_dropout(
                    grad_cache_backward, encoder, views_a, views_b, accum_steps, temperature, seed
                )
                case = _("batch of {n}, accum_steps={accum_steps}, dropout {p}").format(
                    n=n, accum_steps=accum_steps, p=dropout
                )
            else:
                want_loss, want, _peak = _full_batch(encoder, views_a, views_b, temperature)
                loss, grads, _peak = _learner(grad_cache_backward, encoder, views_a, views_b, accum_steps, temperature)
                case = _("batch of {n}, accum_steps={accum_steps}").format(n=n, accum_steps=accum_steps)
            if any(g is None for g in grads):
                return _(
                    "{case}: some parameters have no .grad after grad_cache_backward (call backward on each chunk)"
                ).format(case=case)
            diff = max(float((g - w).abs().max()) for g, w in zip(grads, want, strict=True))
            if dropout and isinstance(loss, (float, int, torch.Tensor)) and abs(float(loss) - want_loss) > 1e-5:
                return _(
                    "{case}: returned loss {got}, not the loss of the embeddings your chunked first pass computed "
                    "({want}): return the InfoNCE loss of the first pass's embeddings, with dropout on"
                ).format(case=case, got=f"{float(loss):.6f}", want=f"{want_loss:.6f}")
            if dropout and diff > 1e-5 and not same_chunks:
                return _(
                    "{case}: the gradient differs by {diff} from the gradient of your loss with the dropout masks of "
                    "the first pass, and your re-runs are not the chunks of your first pass: a chunk cut from a bigger "
                    "forward cannot replay its masks (embed chunk by chunk without a graph, the same chunks as the "
                    "re-runs, keeping each chunk's random-number state)"
                ).format(case=case, diff=f"{diff:.2e}")
            if dropout and diff > 1e-5:
                return _(
                    "{case}: the gradient differs by {diff} from the gradient of your loss with the dropout masks of "
                    "the first pass (restore each chunk's random-number state before its re-run: lesson 08, section 3)"
                ).format(case=case, diff=f"{diff:.2e}")
            if diff > 1e-5:
                return _(
                    "{case}: the gradient differs from the full-batch InfoNCE gradient by {diff} (every sample needs "
                    "the other samples of the WHOLE batch as negatives)"
                ).format(case=case, diff=f"{diff:.2e}")
            try:
                loss = float(loss)
            except (TypeError, ValueError):
                return _("{case}: return the full-batch loss as a float, got {got}").format(case=case, got=repr(loss))
            if abs(loss - want_loss) > 1e-5:
                return _("{case}: returned loss {got}, the full-batch InfoNCE loss is {want}").format(
                    case=case, got=f"{loss:.6f}", want=f"{want_loss:.6f}"
                )
        return None

    run_check("8.2", body)


def check_grad_cache_memory(grad_cache_backward: Callable[..., float]) -> None:
    """Exercise 8.3: while ``grad_cache_backward`` runs, about one chunk's activations are saved at a time.

    Measures the peak bytes of tensors saved for backward (``gradacc.foundations.graphs.SavedTensorMeter``; parameters
    and inputs excluded) during the learner's call and during one full-batch forward/backward of the same encoder (two
    hidden layers of 256), for batches of 48 and 40 samples cut into 3 and 4 chunks. Passing needs a correct
    gradient (as in 8.2) and a peak of at most ``1.5 / accum_steps`` of the full-batch peak (one chunk's
    activations plus the small ``[B, D]`` embeddings and ``[B, B]`` similarities). Prints ``Exercise 8.3: correct``
    or what went wrong; returns ``None``.
    """

    def body(grad_cache_backward=grad_cache_backward) -> str | None:
        for seed, (n, accum_steps, hidden, temperature, start) in enumerate(_GC_MEMORY_CASES):
            encoder, views_a, views_b = _gc_setup(n, hidden, start, seed)
            _loss, want, full_peak = _full_batch(encoder, views_a, views_b, temperature)
            _loss, grads, peak = _learner(grad_cache_backward, encoder, views_a, views_b, accum_steps, temperature)
            case = _("batch of {n}, accum_steps={accum_steps}").format(n=n, accum_steps=accum_steps)
            if (
                any(g is None for g in grads)
                or max(float((g - w).abs().max()) for g, w in zip(grads, want, strict=True)) > 1e-5
            ):
                return _(
                    "{case}: the gradient is not the full-batch InfoNCE gradient yet (solve exercise 8.2 first)"
                ).format(case=case)
            limit = 1.5 / accum_steps
            if peak > limit * full_peak:
                return _(
                    "{case}: peak saved activations {peak} KiB = {ratio}x the full batch's {full} KiB; expected at "
                    "most {limit}x (embed without a graph first, then recompute one chunk at a time with a graph)"
                ).format(
                    case=case,
                    peak=f"{peak / 1024:.1f}",
                    ratio=f"{peak / full_peak:.2f}",
                    full=f"{full_peak / 1024:.1f}",
                    limit=f"{limit:.2f}",
                )
        return None

    run_check("8.3", body)
