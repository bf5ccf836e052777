"""``torch.compile`` and accumulation (lesson 09): what breaks the graph, and proof that compiling changes nothing.

* ``naive_micro_step``: one micro-step as often written, with three constructs that each break a Dynamo graph.
* ``count_graph_breaks``: the graphs Dynamo compiles for one call of a function, and every graph break, in order.
* ``count_recompiles``: the graphs Dynamo compiles over many calls (recompilations), and whether it gave up.
* ``compare_eager_compiled``: one optimizer step of accumulation on the digits, eagerly and with a compiled
  forward + loss (``gradacc.foundations.accumulation.sum_cross_entropy``); the weights of both, their difference and
  timings.

Measured on torch 2.13 (CPU), default Dynamo settings:

* ``naive_micro_step``: 2 graphs, 3 breaks (torch 2.11: 4, one more, "Attempted to call function marked as
  skipped", at the same ``log.append(loss.item())``): ``if not torch.isfinite(loss)`` ("generic_jump TensorVariable()", a
  data-dependent branch), ``loss.backward()`` ("Unsupported Tensor.backward() call") and ``loss.item()``
  ("Unsupported Tensor.item() call with capture_scalar_outputs=False"); ``print(tensor)`` breaks too ("Failed to
  trace builtin operator"). A branch on a Python int (``if k == accum_steps - 1``) does not break: Dynamo guards
  on it and compiles again when the guard fails; ``count_recompiles`` counts how often (an int argument: 3 graphs
  over 20 values; an int on an ``nn.Module``: one per value up to ``recompile_limit``, 8, then eager).
* ``sum_cross_entropy`` (forward + loss only; ``backward``, logging and ``optimizer.step()`` stay outside): 1 graph,
  0 breaks. ``running += loss.detach()`` inside the compiled function does not break either.

Why not ``torch._dynamo.explain``: it reports ``graph_break_count = graph_count - 1`` and lists only the breaks that
end a graph holding operations. A break followed by no tensor work compiles no new graph, so ``loss.backward();
log.append(loss.item())`` gives "1 graph, 0 breaks" there although both lines break (the ``.item()`` break is not
listed at all). ``count_graph_breaks`` counts the reasons Dynamo records for every break instead.
With ``torch._dynamo.config.capture_scalar_outputs = True``, ``.item()`` is traced and stops breaking.
The reason texts come from Dynamo's graph-break registry and may be worded differently in other torch versions
(2.11, Colab's, was not run here). Data-dependent branches and ``.item()`` are documented breaks (PyTorch docs,
torch.compile programming model, "Common Graph Breaks"); 2.13's ``backward`` reason hints at an opt-in flag
(``torch._dynamo.config.trace_autograd_ops``, off by default) that older versions may lack.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import torch
from torch import nn

from ..foundations.accumulation import Batch, accumulation_step, sum_cross_entropy
from ..foundations.data import load_digits_tensors
from ..foundations.models import make_digits_model

__all__ = [
    "TOLERANCE",
    "GraphBreakReport",
    "CompiledComparison",
    "naive_micro_step",
    "count_graph_breaks",
    "RecompileReport",
    "count_recompiles",
    "compare_eager_compiled",
    "CxxCompilerMissing",
    "inductor_compiler",
]

TOLERANCE = 1e-5
"""Largest accepted ``max |w_eager - w_compiled|`` after one optimizer step. Inductor fuses and reorders float32
operations (sums in another order, fused multiply-adds), so results differ by rounding only: float32 has a relative
precision of 2**-24 ~ 6e-8, weights here are below 1 in magnitude, so differences are ~1e-7; 1e-5 leaves margin."""


class GraphBreakReport(TypedDict):
    """What ``count_graph_breaks`` returns."""

    graph_count: int
    graph_break_count: int
    break_reasons: list[str]


@dataclass
class RecompileReport(TypedDict):
    """What ``count_recompiles`` returns."""

    graph_count: int  # graphs Dynamo compiled over all the calls
    gave_up: list[str]  # first line of each warning that Dynamo stopped compiling the function (``recompile_limit``)


@dataclass
class CompiledComparison:
    """What ``compare_eager_compiled`` returns. Weights are detached CPU tensors keyed by parameter name.

    Times are seconds (``time.perf_counter``), for printing only: they depend on the machine and its load.
    """

    eager_weights: dict[str, torch.Tensor]
    compiled_weights: dict[str, torch.Tensor]
    max_abs_diff: float  # max |w_eager - w_compiled| over all weights after the first optimizer step
    weight_change: float  # max |w_after - w_initial| of the eager model: how far one step moved the weights
    eager_loss: float  # mean loss per sample over the window, eager
    compiled_loss: float  # the same, compiled
    compile_s: float  # first compiled optimizer step: tracing + compiling forward and backward, plus one run
    eager_step_s: float  # mean over the timed optimizer steps after the first
    compiled_step_s: float  # the same, compiled


def naive_micro_step(model: nn.Module, batch: Batch, items: int, log: list[float]) -> torch.Tensor:
    """One micro-step as often written: forward, loss, a NaN guard, ``backward`` and a Python-float log.

    Correct when run eagerly; under ``torch.compile`` each of three lines breaks the graph (see the module docstring).

    Args:
        batch: ``(inputs [B, 64] float32, labels [B] int64)``.
        items: samples in the whole accumulation window (the loss is a sum over ``batch`` divided by it).
        log: receives ``loss.item()``, a Python float (one device read per micro-step on a GPU).

    Returns:
        The scaled loss, a detached 0-d tensor. Adds this micro-batch's gradient to the ``.grad`` of ``model``.

    Raises:
        FloatingPointError: the loss is not finite.
    """
    loss = sum_cross_entropy(model, batch) / items
    if not torch.isfinite(loss):  # break: data-dependent branch (Python needs the tensor's value)
        raise FloatingPointError("non-finite loss: lower the learning rate or check the data")
    loss.backward()  # break: Dynamo does not trace Tensor.backward (AOTAutograd compiles the backward instead)
    log.append(loss.item())  # break: Tensor.item (unless capture_scalar_outputs)
    return loss.detach()


def _short_reason(reason: str, line: str | None) -> str:
    """First line of a Dynamo reason, without file paths or line numbers, plus the source line that broke."""
    head = reason.strip().splitlines()[0] if reason.strip() else "unknown"
    head = re.sub(r'(File )?"?(/|[A-Za-z]:\\)\S+"?(, line \d+|:\d+)?', "<file>", head)
    code = re.sub(r"\s+#.*$", "", line or "").strip()  # drop a trailing comment
    return f"{head} at: {code}" if code else head


def _recording_backend(graphs: list) -> Callable[..., Any]:
    """A ``torch.compile`` backend that appends each graph it is given to ``graphs`` and runs it as captured."""

    def record(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        graphs.append(gm)
        return gm.forward

    return record


def count_graph_breaks(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> GraphBreakReport:
    """Call ``fn(*args, **kwargs)`` once under ``torch.compile`` and count its graphs and graph breaks.

    The graphs are recorded by a custom backend that runs them as captured (no Inductor, so this is fast); ``fn``
    really runs, with its side effects (a ``backward`` inside it adds to ``.grad``). Dynamo's caches are reset before
    and after (``torch._dynamo.reset``), so results do not depend on earlier calls.

    Returns:
        ``{"graph_count": graphs compiled, "graph_break_count": breaks, "break_reasons": one string per break, in
        the order they happened: Dynamo's first line of the reason, paths stripped, then "at: <source line>"}``.
        ``graph_break_count`` counts every break, also one after which no new graph starts (the difference from
        ``torch._dynamo.explain``; see the module docstring).

    Raises:
        TypeError: ``fn`` is not callable.

    Source: ``torch._dynamo.utils.graph_break_reasons``, the list Dynamo appends a ``GraphCompileReason`` to at
    every break (torch 2.0 to 2.13); without it, the "graph_break" entries of ``torch._dynamo.utils.counters``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable (a function or module), got {type(fn).__name__}")
    import torch._dynamo.utils as dynamo_utils

    graphs: list[torch.fx.GraphModule] = []
    record = _recording_backend(graphs)

    torch._dynamo.reset()
    before = Counter(dynamo_utils.counters["graph_break"])
    quiet = logging.getLogger("torch._dynamo")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # Dynamo logs a warning per break; the reasons are returned instead
    try:
        with warnings.catch_warnings():  # and torch 2.11 also warns about builtins it cannot trace
            warnings.simplefilter("ignore", UserWarning)
            torch.compile(fn, backend=record)(*args, **kwargs)
        recorded = getattr(dynamo_utils, "graph_break_reasons", None)
        if recorded is not None:
            reasons = [_short_reason(r.reason, r.user_stack[-1].line if r.user_stack else None) for r in recorded]
        else:
            counted = Counter(dynamo_utils.counters["graph_break"]) - before
            reasons = [_short_reason(text, None) for text, n in counted.items() for _ in range(n)]
    finally:
        quiet.setLevel(level)
        torch._dynamo.reset()
    return {"graph_count": len(graphs), "graph_break_count": len(reasons), "break_reasons": reasons}


def count_recompiles(fn: Callable[..., Any], drive: Callable[[Callable[..., Any]], Any]) -> RecompileReport:
    """Compile ``fn`` once with a backend that records each graph, let ``drive(compiled)`` call it as often as it
    likes, and count the graphs Dynamo compiled: 1 plus one per recompilation (a failed guard).

    Dynamo's "hit config.recompile_limit" warning (after ``torch._dynamo.config.recompile_limit`` graphs of one frame,
    8 in torch 2.11 and 2.13, it runs the function eagerly from then on) is returned in ``gave_up`` instead of being
    logged. Dynamo's caches are reset before and after. Measured on torch 2.13: an int argument ``k`` over 20 values
    gives 3 graphs (the first value, then ``k`` made dynamic by ``automatic_dynamic_shapes``, then the other side of
    a branch on it); an int attribute of an ``nn.Module`` gives one graph per value until the limit.
    On Python 3.13.0 (CPython's dict-version bug, python/cpython#125608) torch 2.11 adds no guard for the attribute:
    1 graph, and the compiled module keeps returning the first value's result (lesson 09 shows it).

    Raises:
        TypeError: ``fn`` or ``drive`` is not callable.

    Source (torch 2.13): the warning, ``torch/_dynamo/convert_frame.py:1994-2005``; ``recompile_limit = 8``,
    ``torch/_dynamo/config.py:121``; module ints are static unless ``allow_unspec_int_on_nn_module`` (line 402).
    """
    if not callable(fn) or not callable(drive):
        raise TypeError(f"fn and drive must be callables, got {type(fn).__name__} and {type(drive).__name__}")
    graphs: list[torch.fx.GraphModule] = []
    record = _recording_backend(graphs)
    gave_up: list[str] = []

    def keep(entry: logging.LogRecord) -> bool:
        message = entry.getMessage()
        if "recompile_limit" not in message:
            return True
        gave_up.append(message.splitlines()[0])
        return False  # returned, not printed as Dynamo's ten-line log

    log = logging.getLogger("torch._dynamo.convert_frame")
    torch._dynamo.reset()
    log.addFilter(keep)
    try:
        drive(torch.compile(fn, backend=record))
    finally:
        log.removeFilter(keep)
        torch._dynamo.reset()
    return {"graph_count": len(graphs), "gave_up": gave_up}


def _window(accum_steps: int, micro_batch_size: int) -> list[Batch]:
    x, y = load_digits_tensors()
    if accum_steps * micro_batch_size > len(x):
        raise ValueError(
            f"accum_steps x micro_batch_size must be <= {len(x)} digits, got {accum_steps} x {micro_batch_size}; "
            "use fewer or smaller micro-batches"
        )
    return [
        (x[i * micro_batch_size : (i + 1) * micro_batch_size], y[i * micro_batch_size : (i + 1) * micro_batch_size])
        for i in range(accum_steps)
    ]


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters()}


class CxxCompilerMissing(RuntimeError):
    """Inductor (``torch.compile``'s default backend) generates C++ and needs a C++ compiler; none was found."""


def inductor_compiler() -> str:
    """The C++ compiler Inductor will call (``torch._inductor.cpp_builder.get_cpp_compiler``: ``$CXX`` or the first of
    ``torch._inductor.config.cpp.cxx`` that runs, usually ``g++``).

    Raises:
        CxxCompilerMissing: there is none (Inductor's own ``InvalidCxxCompiler`` would come with a long traceback,
            at the first compiled call); the message says what to install and which backend needs no compiler.
    """
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        return get_cpp_compiler()
    except InvalidCxxCompiler:
        raise CxxCompilerMissing(
            "Inductor needs a C++ compiler and found none (it looked for g++ and clang++): install one (Debian/Ubuntu: "
            "apt-get install g++), or compile with backend='aot_eager', which needs none"
        ) from None


def compare_eager_compiled(
    accum_steps: int = 4,
    micro_batch_size: int = 32,
    *,
    lr: float = 0.1,
    timed_steps: int = 3,
    backend: str = "inductor",
) -> CompiledComparison:
    """One optimizer step of accumulation, eagerly and with ``torch.compile(sum_cross_entropy)``, from equal weights.

    Both runs use ``make_digits_model(seed=0, hidden=64, depth=2)`` (float32, CPU), plain SGD and the first
    ``accum_steps x micro_batch_size`` digits split in order, through
    ``gradacc.foundations.accumulation.accumulation_step``: only forward + loss is compiled; ``backward`` (whose graph
    AOTAutograd compiles too), the on-device loss sum and ``optimizer.step()`` stay outside. Weights are compared after
    the first optimizer step; then ``timed_steps`` more steps on the same window time each loop. Dynamo's caches are
    reset before and after.

    Args:
        accum_steps: micro-batches per optimizer step (N), >= 1.
        micro_batch_size: samples per micro-batch, >= 1 (``accum_steps x micro_batch_size <= 1797``).
        lr: SGD learning rate, > 0.
        timed_steps: optimizer steps timed after the first, >= 1.
        backend: a ``torch.compile`` backend (``torch.compiler.list_backends(exclude_tags=())``).

    Raises:
        ValueError: an argument out of range or an unknown backend.
        CxxCompilerMissing: ``backend="inductor"`` and no C++ compiler (``inductor_compiler``), before any compiling.
    """
    for name, value in (
        ("accum_steps", accum_steps),
        ("micro_batch_size", micro_batch_size),
        ("timed_steps", timed_steps),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    backends = torch.compiler.list_backends(exclude_tags=())
    if backend not in backends:
        raise ValueError(f"backend must be one of {backends}, got {backend!r}")
    if backend == "inductor":
        inductor_compiler()
    window = _window(accum_steps, micro_batch_size)

    def run(loss_fn: Callable[[nn.Module, Batch], torch.Tensor]) -> tuple[dict[str, torch.Tensor], float, float, float]:
        model = make_digits_model(seed=0, hidden=64, depth=2)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        start = time.perf_counter()
        loss = accumulation_step(model, optimizer, window, loss_fn)["loss"]
        first_s = time.perf_counter() - start
        weights = _weights(model)
        start = time.perf_counter()
        for _ in range(timed_steps):
            accumulation_step(model, optimizer, window, loss_fn)
        return weights, float(loss), first_s, (time.perf_counter() - start) / timed_steps

    torch._dynamo.reset()
    try:
        eager_weights, eager_loss, _, eager_step_s = run(sum_cross_entropy)
        compiled = torch.compile(sum_cross_entropy, backend=backend)
        compiled_weights, compiled_loss, compile_s, compiled_step_s = run(compiled)
    finally:
        torch._dynamo.reset()
    initial = _weights(make_digits_model(seed=0, hidden=64, depth=2))
    return CompiledComparison(
        eager_weights=eager_weights,
        compiled_weights=compiled_weights,
        max_abs_diff=max(float((eager_weights[k] - compiled_weights[k]).abs().max()) for k in eager_weights),
        weight_change=max(float((eager_weights[k] - initial[k]).abs().max()) for k in eager_weights),
        eager_loss=eager_loss,
        compiled_loss=compiled_loss,
        compile_s=compile_s,
        eager_step_s=eager_step_s,
        compiled_step_s=compiled_step_s,
    )
