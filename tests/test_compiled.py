"""gradacc.parallel.compiled (lesson 09): graph breaks of a naive micro-step, none in the fixed one, and equal
weights."""

from __future__ import annotations

import re

import pytest
import torch

from gradacc.foundations.accumulation import sum_cross_entropy
from gradacc.foundations.data import load_digits_tensors
from gradacc.foundations.models import make_digits_model
from gradacc.parallel.compiled import (
    TOLERANCE,
    compare_eager_compiled,
    count_graph_breaks,
    count_recompiles,
    naive_micro_step,
)


@pytest.fixture
def model_and_batch() -> tuple[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    x, y = load_digits_tensors()
    return make_digits_model(seed=0, hidden=64, depth=2), (x[:32], y[:32])


def test_naive_micro_step_breaks_three_times(model_and_batch):
    model, batch = model_and_batch
    log: list[float] = []
    report = count_graph_breaks(naive_micro_step, model, batch, 128, log)
    reasons = report["break_reasons"]
    print(report)
    assert report["graph_count"] == 2
    assert report["graph_break_count"] == len(reasons) == 3
    assert "generic_jump" in reasons[0] and "torch.isfinite(loss)" in reasons[0]
    assert "Tensor.backward()" in reasons[1] and reasons[1].endswith("at: loss.backward()")
    assert "Tensor.item()" in reasons[2] and reasons[2].endswith("at: log.append(loss.item())")
    # the function really ran: one logged float, and gradients on every parameter
    assert len(log) == 1 and isinstance(log[0], float)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_fixed_micro_step_is_one_graph(model_and_batch):
    model, batch = model_and_batch
    report = count_graph_breaks(sum_cross_entropy, model, batch)
    assert report == {"graph_count": 1, "graph_break_count": 0, "break_reasons": []}


def test_reasons_are_deterministic_and_path_free(model_and_batch):
    model, batch = model_and_batch
    first = count_graph_breaks(naive_micro_step, model, batch, 128, [])["break_reasons"]
    second = count_graph_breaks(naive_micro_step, model, batch, 128, [])["break_reasons"]
    assert first == second
    for reason in first:
        assert "\n" not in reason and "#" not in reason
        assert not re.search(r"\.py|line \d+|/", reason), reason


def test_explain_misses_a_break_without_a_following_graph(model_and_batch):
    """The module docstring's claim: explain says 0 breaks where two lines break (no tensor work after them)."""
    model, batch = model_and_batch

    def backward_then_item(model, batch, log):
        loss = sum_cross_entropy(model, batch)
        loss.backward()
        log.append(loss.item())

    explained = torch._dynamo.explain(backward_then_item)(model, batch, [])
    assert (explained.graph_count, explained.graph_break_count, len(explained.break_reasons)) == (1, 0, 1)
    report = count_graph_breaks(backward_then_item, model, batch, [])
    assert (report["graph_count"], report["graph_break_count"]) == (1, 2)


def test_capture_scalar_outputs_removes_the_item_break(model_and_batch):
    model, batch = model_and_batch
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        reasons = count_graph_breaks(naive_micro_step, model, batch, 128, [])["break_reasons"]
    assert len(reasons) == 2
    assert not any("item()" in r for r in reasons)


def test_an_int_argument_becomes_dynamic_but_an_int_on_a_module_recompiles_up_to_the_limit():
    """Lesson 09's claim (issue 31): 20 values of an int argument compile 3 graphs; 20 values of an int attribute
    compile ``recompile_limit`` graphs, then Dynamo warns once and runs the rest eagerly (still the right values)."""
    x = torch.arange(4.0)

    def scaled(t, k):
        return t * 2 if k == 19 else t + k

    def by_argument(compiled):
        assert all(torch.equal(compiled(x, k), scaled(x, k)) for k in range(20))

    class Offset(torch.nn.Module):
        k = 0

        def forward(self, t):
            return t + self.k

    module = Offset()

    def on_the_module(compiled):
        for k in range(20):
            module.k = k
            assert torch.equal(compiled(x), x + k)

    limit = torch._dynamo.config.recompile_limit
    argument, attribute = count_recompiles(scaled, by_argument), count_recompiles(module, on_the_module)
    print(f"int argument: {argument}; int on a module: {attribute}; recompile_limit {limit}")
    assert argument == {"graph_count": 3, "gave_up": []}
    assert attribute["graph_count"] == limit == 8
    assert len(attribute["gave_up"]) == 1 and "recompile_limit (8)" in attribute["gave_up"][0]


def test_count_graph_breaks_rejects_a_non_callable():
    with pytest.raises(TypeError, match="fn must be a callable"):
        count_graph_breaks(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"accum_steps": 0}, "accum_steps must be an int >= 1, got 0"),
        ({"accum_steps": True}, "accum_steps must be an int >= 1, got True"),
        ({"micro_batch_size": 2.5}, "micro_batch_size must be an int >= 1, got 2.5"),
        ({"timed_steps": 0}, "timed_steps must be an int >= 1, got 0"),
        ({"lr": 0.0}, "lr must be > 0, got 0.0"),
        ({"lr": float("nan")}, "lr must be > 0, got nan"),
        ({"backend": "nope"}, "backend must be one of .* got 'nope'"),
        ({"accum_steps": 100, "micro_batch_size": 32}, "must be <= 1797 digits, got 100 x 32"),
    ],
)
def test_compare_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compare_eager_compiled(**kwargs)


def _check_comparison(backend: str) -> None:
    result = compare_eager_compiled(accum_steps=4, micro_batch_size=32, backend=backend, timed_steps=2)
    print(
        f"{backend}: max |w_eager - w_compiled| = {result.max_abs_diff:.1e}, weight change = {result.weight_change:.1e}, "
        f"compile {result.compile_s:.1f} s, step eager {result.eager_step_s * 1e3:.1f} ms, "
        f"compiled {result.compiled_step_s * 1e3:.1f} ms"
    )
    assert result.max_abs_diff < TOLERANCE
    assert result.weight_change > 100 * TOLERANCE  # the step moved the weights far more than the two runs differ
    assert result.compiled_loss == pytest.approx(result.eager_loss, rel=1e-6)
    assert result.eager_weights.keys() == result.compiled_weights.keys()
    assert [w.shape for w in result.eager_weights.values()] == [
        p.shape for p in make_digits_model(seed=0, hidden=64, depth=2).parameters()
    ]


def test_compare_with_aot_eager_matches():
    """AOTAutograd without Inductor: fast, exercises the same loop."""
    _check_comparison("aot_eager")


@pytest.mark.slow
def test_compare_with_inductor_matches():
    """Inductor generates and compiles C++ (about 30 s on 2 busy cores)."""
    _check_comparison("inductor")


def test_no_cxx_compiler_is_one_clear_error_before_any_compiling(monkeypatch):
    """Without g++ Inductor fails at the first compiled call with a long InvalidCxxCompiler traceback; the course
    says it in one line first, naming the fix, and aot_eager still runs (lesson 09 falls back to it)."""
    import torch._inductor.config as inductor_config
    from torch._inductor import cpp_builder

    from gradacc.parallel.compiled import CxxCompilerMissing, inductor_compiler

    assert inductor_compiler().endswith(("g++", "clang++"))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(inductor_config.cpp, "cxx", ("no-such-c++-compiler",))
    cpp_builder.cpp_compiler_search.cache_clear()  # Inductor caches the search
    try:
        with pytest.raises(CxxCompilerMissing, match=r"^Inductor needs a C\+\+ compiler and found none .+aot_eager"):
            compare_eager_compiled(accum_steps=2, micro_batch_size=4)
        assert compare_eager_compiled(accum_steps=2, micro_batch_size=4, backend="aot_eager").max_abs_diff < TOLERANCE
    finally:
        cpp_builder.cpp_compiler_search.cache_clear()
