"""Checks of lesson 03 (``03_memory``): activation memory of a micro-batch, the smallest N that fits a budget, a
live-storage counter written from scratch, where a step's peak sits for a given N, and the peak at another N read
off a measured timeline.

Each check runs the learner's code on inputs of its own (not the notebook's), compares with ``gradacc.memory``, prints
exactly one line (``Exercise 3.1: correct`` or ``Exercise 3.1: incorrect - <what is wrong>``) and returns ``None``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...foundations.models import make_digits_model
from ...i18n import _
from ...memory import (
    CATEGORIES,
    MIB,
    LiveStorageCounter,
    MemoryProfile,
    StepConfig,
    StepTimeline,
    predict_step,
    smallest_fitting_accum_steps,
    timeline_config,
)
from . import close, run_check

__all__ = [
    "check_micro_batch_activation_mib",
    "check_smallest_fitting_n",
    "check_peak_counter",
    "BREAKDOWN_KEYS",
    "reference_peak_at",
    "check_peak_at",
    "timeline_from_parts",
    "timeline_pair",
    "reference_peak_for_n",
    "check_peak_for_n",
]


def _raises_value_error(fn: Callable, *args) -> bool:
    try:
        fn(*args)
    except ValueError:
        return True
    except NotImplementedError:
        raise
    except Exception:
        return False
    return False


def check_micro_batch_activation_mib(micro_batch_activation_mib: Callable) -> None:
    """Exercise 3.1: ``micro_batch_activation_mib(activation_mib_per_sample, effective_batch_size, accum_steps)``.

    The activations one micro-batch keeps for its backward pass: per-sample MiB x (effective batch / N). An effective
    batch that N does not divide, or N < 1, must raise ``ValueError``.
    """

    def body(micro_batch_activation_mib=micro_batch_activation_mib) -> str | None:
        cases = [(0.0078125, 4096, 8, 4.0), (0.25, 96, 3, 8.0), (0.01, 100, 4, 0.25), (1.5, 64, 1, 96.0)]
        for per_sample, effective, n, want in cases:
            problem = close(
                f"micro_batch_activation_mib({per_sample}, {effective}, {n})",
                micro_batch_activation_mib(per_sample, effective, n),
                want,
                1e-9,
            )
            if problem:
                return problem
        for args in ((0.01, 100, 8), (0.01, 64, 0), (0.01, 64, -2)):
            if not _raises_value_error(micro_batch_activation_mib, *args):
                return _(
                    "micro_batch_activation_mib{args} should raise ValueError (the micro-batches cannot be equal)"
                ).format(args=args)
        return None

    run_check("3.1", body)


def check_smallest_fitting_n(smallest_fitting_n: Callable) -> None:
    """Exercise 3.2: ``smallest_fitting_n(persistent_mib, activation_mib_per_sample, effective_batch_size, budget_mib,
    candidates=(1, 2, 4, 8, 16, 32, 64))``.

    The smallest N among ``candidates`` that divides the effective batch and whose peak ``persistent + per-sample x
    effective / N`` is at most the budget; ``None`` if none does; ``ValueError`` for a budget <= 0. Compared with
    ``gradacc.memory.smallest_fitting_accum_steps`` on an analytic ``MemoryProfile`` with that persistent part.
    """

    def reference(persistent, per_sample, effective, budget, candidates=(1, 2, 4, 8, 16, 32, 64)):
        profile = MemoryProfile(
            n_params=1,
            parameter_bytes=round(persistent * MIB),
            gradient_bytes=0,
            optimizer_state_bytes=0,
            activation_bytes_per_sample=per_sample * MIB,
        )
        return smallest_fitting_accum_steps(profile, budget, candidates, effective_batch_size=effective)

    def body(smallest_fitting_n=smallest_fitting_n) -> str | None:
        cases = [
            ((100.0, 0.5, 1024, 400.0), {}),  # 100 + 512 / N <= 400 -> N = 2
            ((100.0, 0.5, 1024, 164.0), {}),  # exactly 100 + 64 at N = 8: fits (<=)
            ((100.0, 0.5, 1024, 163.9), {}),  # just below: N = 16
            ((300.0, 0.5, 1024, 250.0), {}),  # the persistent part alone is too big: None
            ((10.0, 1.0, 96, 30.0), {}),  # N = 8: 10 + 12 = 22
            ((10.0, 1.0, 96, 11.6), {}),  # only N = 64 would fit (11.5), but 96 % 64 != 0: None
            ((10.0, 1.0, 96, 30.0), {"candidates": (3, 6, 12)}),  # N = 6: 10 + 16 = 26
            ((10.0, 1.0, 96, 30.0), {"candidates": (12, 6, 3)}),  # unsorted: still N = 6 (12 fits too, but is larger)
            ((10.0, 1.0, 96, 11.0), {"candidates": (3, 6, 12)}),  # 10 + 8 > 11: None
            ((0.0, 2.0, 64, 200.0), {}),  # fits at N = 1
        ]
        for args, kwargs in cases:
            want = reference(*args, **kwargs)
            got = smallest_fitting_n(*args, **kwargs)
            if got != want or (got is not None and not isinstance(got, int)):
                call = f"smallest_fitting_n{args}" + (f", {kwargs}" if kwargs else "")
                return _("{call} returned {got}, expected {want}").format(call=call, got=repr(got), want=repr(want))
        for bad in (0.0, -5.0):
            if not _raises_value_error(smallest_fitting_n, 10.0, 1.0, 64, bad):
                return _("a budget of {budget} MiB should raise ValueError").format(budget=bad)
        return None

    run_check("3.2", body)


def _mlp_workload(seed: int) -> tuple[Callable[[], None], torch.nn.Module]:
    model = make_digits_model(seed=seed, hidden=96, depth=2)
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(48, 64, generator=generator)
    y = torch.randint(0, 10, (48,), generator=generator)

    def run() -> None:
        loss = F.cross_entropy(model(x), y, reduction="sum")
        loss.backward()
        del loss

    return run, model


def check_peak_counter(counter_class: type) -> None:
    """Exercise 3.3: a ``TorchDispatchMode`` subclass with ``current_bytes`` and ``peak_bytes``.

    It must count each new tensor storage once (views share their base's storage), subtract it when Python frees it,
    and keep the largest total. Checked on a few tensors and views, and on a forward+backward of a digits MLP whose
    peak must equal ``gradacc.memory.LiveStorageCounter``'s to the byte.
    """

    def body(counter_class=counter_class) -> str | None:
        counter = counter_class()
        with counter:
            a = torch.ones(1024)  # 4,096 bytes
            view = a[2:]  # a view: no new storage
            b = torch.ones(2048)  # 8,192 bytes
            after_alloc = counter.current_bytes
            del a, view, b
            c = torch.zeros(256)  # 1,024 bytes
        if after_alloc != 12288:
            return _("after ones(1024), a view of it and ones(2048), current_bytes = {got}, expected 12288").format(
                got=after_alloc
            )
        if counter.current_bytes != 1024:
            return _(
                "after freeing those and allocating zeros(256), current_bytes = {got}, expected 1024 (subtract a "
                "storage when it is freed: weakref.finalize on the storage)"
            ).format(got=counter.current_bytes)
        if counter.peak_bytes != 12288:
            return _("peak_bytes = {got}, expected 12288 (the largest current_bytes seen)").format(
                got=counter.peak_bytes
            )
        del c
        for seed in (3, 4):
            run, _model = _mlp_workload(seed)
            reference = LiveStorageCounter()
            with reference:
                run()
            _model.zero_grad(set_to_none=True)
            mine = counter_class()
            with mine:
                run()
            if mine.peak_bytes != reference.peak_bytes:
                return _("forward+backward of a 2-layer MLP (seed {seed}): peak_bytes = {got}, expected {want}").format(
                    seed=seed, got=mine.peak_bytes, want=reference.peak_bytes
                )
        return None

    run_check("3.3", body)


BREAKDOWN_KEYS = ("parameters", "gradients", "optimizer_state", "activations", "step_scratch")
"""The keys of exercise 3.4's breakdown (MiB, measured at N = 1; ``activations``: the whole effective batch's)."""


def reference_peak_at(breakdown: dict[str, float], accum_steps: int) -> tuple[float, str]:
    """Exercise 3.4's answer: ``(peak MiB, "backward" | "optimizer.step")`` at N = ``accum_steps``.

    The peak value is ``gradacc.memory.predict_step``'s on a ``MemoryProfile`` built from the breakdown (no timeline:
    one micro-batch's activations, ``activations / N``, are all alive at the end of its forward pass; the gradient
    buffer is counted during the backward pass for N >= 2 only). The phase is the moment whose total is larger.

    Raises:
        ValueError: ``accum_steps < 1``.
    """
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    b = breakdown
    profile = MemoryProfile(
        n_params=1,
        parameter_bytes=round(b["parameters"] * MIB),
        gradient_bytes=round(b["gradients"] * MIB),
        optimizer_state_bytes=round(b["optimizer_state"] * MIB),
        optimizer_step_bytes=b["step_scratch"] * MIB,
        activation_bytes_per_sample=b["activations"] * MIB / accum_steps,  # an "effective batch" of N samples
    )
    peak = predict_step(profile, accum_steps, accum_steps).peak_mib
    backward = b["parameters"] + b["optimizer_state"] + b["activations"] / accum_steps
    backward += b["gradients"] if accum_steps >= 2 else 0.0
    step = b["parameters"] + b["gradients"] + b["optimizer_state"] + b["step_scratch"]
    return peak, "backward" if backward > step else "optimizer.step"


def _peak_and_moment(where: str, got, want: tuple[float, str], tol: float, label: str, compared: str) -> str | None:
    """What is wrong with ``got``, an answer ``(peak_mib, label)`` to compare with ``want``, or ``None``.
    ``compared``: what the two moments are compared by, in the learner's language."""
    if not (isinstance(got, tuple) and len(got) == 2):
        return _("{call} returned {got}; return a tuple (peak_mib, {label})").format(
            call=where, got=repr(got), label=label
        )
    problem = close(_("the peak of {call}").format(call=where), got[0], want[0], tol)
    if problem is None and got[1] != want[1]:
        problem = _("{call} {label} = {got}, expected {want} (compare the two moments' {compared})").format(
            call=where, label=label, got=repr(got[1]), want=repr(want[1]), compared=compared
        )
    return problem


def check_peak_at(peak_at: Callable) -> None:
    """Exercise 3.4: ``peak_at(breakdown, accum_steps) -> (peak_mib, phase)``.

    From a breakdown measured at N = 1 (``BREAKDOWN_KEYS``, MiB), the peak of one optimizer step of N micro-steps and
    where it sits: ``"backward"`` (parameters + optimizer state + activations / N + the gradient buffer when N >= 2)
    or ``"optimizer.step"`` (parameters + gradients + optimizer state + step scratch). Cases: Adam (flat), an
    activation-bound step (falls with N until the optimizer step takes over) and SGD (RISES from N = 1 to 2: the
    buffer joins the backward pass); N < 1 raises ``ValueError``.
    """
    cases = [
        ({"parameters": 4, "gradients": 4, "optimizer_state": 8, "activations": 6, "step_scratch": 4}, (1, 4)),
        ({"parameters": 4, "gradients": 4, "optimizer_state": 8, "activations": 64, "step_scratch": 4}, (1, 2, 8, 32)),
        ({"parameters": 16, "gradients": 16, "optimizer_state": 0, "activations": 12, "step_scratch": 0}, (1, 2, 4)),
    ]

    def body(peak_at=peak_at) -> str | None:
        for breakdown, ns in cases:
            for n in ns:
                got, want = peak_at(dict(breakdown), n), reference_peak_at(breakdown, n)
                problem = _peak_and_moment(f"peak_at({breakdown}, {n})", got, want, 1e-9, "phase", _("totals"))
                if problem:
                    return problem
        if not _raises_value_error(peak_at, dict(cases[0][0]), 0):
            return _("peak_at(..., 0) should raise ValueError (N must be >= 1)")
        return None

    run_check("3.4", body)


def timeline_from_parts(
    accum_steps: int,
    micro_batch_size: int,
    *,
    parameters: float,
    gradients: float,
    optimizer_state: float,
    other: float,
    activations: float,
    temporaries: float,
    step_scratch: float,
    weight_gradient: float = 0.0,
    forward_scratch: float = 0.0,
) -> StepTimeline:
    """A ``StepTimeline`` shaped like a measured one, from its parts (MiB): each micro-step's forward pass first holds
    ``forward_scratch`` alone (a frozen model run under ``torch.no_grad()``, a distillation teacher or a DPO
    reference model: its activations are freed before the backward pass), then builds ``activations`` in four
    equal layers; its backward pass starts with ``temporaries`` on top (the highest point
    when the micro-batch is large), frees half of both, then holds ``weight_gradient`` (a parameter-sized
    temporary, a layer's weight gradient before it is added to the buffer: the same at every micro-batch size) next
    to a quarter of the activations, and frees everything; micro-step 1's backward pass writes the gradient buffer,
    full from then on; then ``optimizer.step()`` adds ``step_scratch`` and ``zero_grad`` frees the buffer. Build
    two timelines of one step at two N from per-sample parts: ``activations``, ``temporaries`` and
    ``forward_scratch`` times the micro-batch size, the rest unchanged."""
    mib: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    events: list[tuple[int, str, int]] = []
    held = {"parameters": parameters, "optimizer_state": optimizer_state, "other": other}

    def point(grads: float, acts: float = 0.0, temps: float = 0.0) -> None:
        values = {**held, "gradients": grads, "activations": acts, "temporaries": temps}
        for c in CATEGORIES:
            mib[c].append(float(values[c]))

    for k in range(1, accum_steps + 1):
        before = 0.0 if k == 1 else gradients
        events.append((len(mib["parameters"]), "forward", k))
        point(before, temps=forward_scratch)
        for layer in range(1, 5):
            point(before, activations * layer / 4)
        events.append((len(mib["parameters"]), "backward", k))
        point(before, activations, temporaries)
        point((before + gradients) / 2, activations / 2, temporaries / 2)
        point((before + gradients) / 2, activations / 4, weight_gradient)
        point(gradients)
    events.append((len(mib["parameters"]), "optimizer step", 0))
    point(gradients, temps=step_scratch)
    point(0.0)
    return StepTimeline(accum_steps=accum_steps, micro_batch_size=micro_batch_size, mib=mib, events=events)


def timeline_pair(
    effective: int, ns: tuple[int, int], acts: float, temps: float, forward: float = 0.0, **parts: float
) -> tuple[StepTimeline, StepTimeline]:
    """Two timelines (``timeline_from_parts``) of one step of ``effective`` samples at the two N of ``ns``, from its
    per-sample parts in MiB: ``acts`` (activations), ``temps`` (temporaries) and ``forward`` (the forward pass's
    scratch), scaled by each micro-batch's size; ``parts`` (parameters, gradients, ...) as they are. The pairs that
    exercise 3.5's visible and hidden checks give ``peak_for_n``."""
    return tuple(
        timeline_from_parts(
            n,
            effective // n,
            **parts,
            activations=acts * effective / n,
            temporaries=temps * effective / n,
            forward_scratch=forward * effective / n,
        )  # fmt: skip
        for n in ns
    )


def reference_peak_for_n(first: StepTimeline, second: StepTimeline, accum_steps: int) -> tuple[float, str]:
    """Exercise 3.5's answer: from two timelines of one step (same model, optimizer and effective batch B) measured
    at two N >= 2, ``(peak MiB, "micro-step" | "optimizer step")`` of the same step at N = ``accum_steps`` >= 2.

    After each operation of the last micro-step, its forward pass included (a frozen model run under
    ``torch.no_grad()`` can put the peak there), live memory is a line in the micro-batch size b,
    ``fixed + per_sample x b`` (as in ``gradacc.memory.profile_config``; exact on the CPU's storage count, close on
    a GPU, whose allocator rounds each tensor up): the two timelines give each operation's line, evaluated at
    b = B / N (N divides B); the largest is the micro-steps' peak. Scaling one timeline's highest point by N0 / N is
    not enough: part of the temporaries are parameter-sized (weight gradients), and the operation that holds the
    peak changes with b. The optimizer step's highest point does not depend on N. The peak is the larger (the
    checks draw no tie; this function says ``"optimizer step"`` on one).

    Raises:
        ValueError: ``accum_steps < 2``, a timeline measured at N < 2 (no full gradient buffer in the micro-steps),
            or two timelines at the same micro-batch size (no line through one point).
    """
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(
            f"N = {accum_steps} from timelines at N = {first.accum_steps} and {second.accum_steps}: all must be >= 2 "
            "(at N = 1 the gradient buffer is not full during the micro-step)"
        )

    def last_micro_step(timeline: StepTimeline) -> list[float]:
        """The total MiB after each operation of the last micro-step: the same operations at every N >= 2."""
        start = timeline.event_index("forward", timeline.accum_steps)
        return timeline.total[start : timeline.event_index("optimizer step")]

    b1, b2 = first.micro_batch_size, second.micro_batch_size
    if b1 == b2:
        raise ValueError(f"two timelines at the same micro-batch size {b1}: measure two different N")
    b = b1 * first.accum_steps / accum_steps
    lines = zip(last_micro_step(first), last_micro_step(second), strict=True)
    micro = max(p1 + (p2 - p1) / (b2 - b1) * (b - b1) for p1, p2 in lines)
    step = max(first.total[first.event_index("optimizer step") :])
    return (micro, "micro-step") if micro > step else (step, "optimizer step")


def check_peak_for_n(peak_for_n: Callable) -> None:
    """Exercise 3.5: ``peak_for_n(first, second, accum_steps) -> (peak_mib, moment)`` from two ``StepTimeline`` s of
    one step measured at two N >= 2: a real pair (an MLP measured here), an activation-bound pair with a
    parameter-sized weight-gradient temporary (``timeline_from_parts``; the operation at the peak changes with the
    micro-batch size), a pair whose peak is in the forward pass (a frozen teacher's activations) and a pair whose
    peak is in ``optimizer.step()``, each at an N above and below the two; N < 2 raises ``ValueError``."""
    parts = {"parameters": 4.0, "gradients": 4.0, "optimizer_state": 8.0, "other": 1.0}

    bound = timeline_pair(256, (4, 8), 1 / 8, 1 / 16, **parts, step_scratch=2.0, weight_gradient=3.0)
    flat = timeline_pair(256, (8, 16), 1 / 64, 1 / 64, **{**parts, "optimizer_state": 16.0}, step_scratch=12.0,
                weight_gradient=2.0)  # fmt: skip
    small = StepConfig(width=128, depth=2, effective_batch_size=512)
    real = tuple(timeline_config(small, n, device="cpu") for n in (4, 8))
    teacher = timeline_pair(256, (4, 16), 1 / 16, 1 / 32, 1 / 4, **parts, step_scratch=1.5, weight_gradient=1.0)
    cases = [(real, (2, 64)), (bound, (2, 16, 256)), (teacher, (2, 32)), (flat, (2, 32))]

    def body(peak_for_n=peak_for_n) -> str | None:
        for (first, second), ns in cases:
            for n in ns:
                got, want = peak_for_n(first, second, n), reference_peak_for_n(first, second, n)
                where = _("peak_for_n(timelines measured at N = {first} and {second}, {n})").format(
                    first=first.accum_steps, second=second.accum_steps, n=n
                )
                problem = _peak_and_moment(where, got, want, 1e-6, "moment", _("peaks"))
                if problem:
                    return problem
        for n in (1, 0):
            if not _raises_value_error(peak_for_n, *bound, n):
                return _("peak_for_n(first, second, {n}) should raise ValueError (N must be >= 2)").format(n=n)
        return None

    run_check("3.5", body)
