"""``gradacc.memory.predict_parallel`` (issue 16): its rules on a profile, its errors, and its predictions against
one rank's peak measured by PyTorch's trackers on real gloo ranks, world sizes 1 and 2 (within 10 %)."""

from __future__ import annotations

import functools

import psutil
import pytest
import torch

from gradacc.foundations.data import load_digits_tensors
from gradacc.foundations.models import make_digits_model
from gradacc.memory import MIB, PARALLEL_MODES, predict_parallel, predict_step, profile_model
from gradacc.memory.bench import fsdp_rows
from gradacc.memory.bench_report import format_fsdp_table
from gradacc.parallel.sharded import run_fsdp_window

HIDDEN, DEPTH = 512, 4  # lesson 09's model
NAMES = dict(zip(("DDP", "sync each micro-step", "sync at the boundary"), PARALLEL_MODES[1:], strict=True))


@functools.cache
def _profile():
    model = make_digits_model(seed=0, hidden=HIDDEN, depth=DEPTH)
    x, y = load_digits_tensors()
    profile = profile_model(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), x, y)
    unit = max(sum(p.nbytes for p in m.parameters()) for m in model.modules() if isinstance(m, torch.nn.Linear))
    return profile, unit


def test_the_rules_shard_state_and_add_buffers():
    profile, unit = _profile()
    one = predict_step(profile, 64, 4).breakdown_mib  # one rank's share of 128 samples on 2 ranks
    grads = profile.gradient_bytes / MIB
    ddp = predict_parallel(profile, 128, 4, world_size=2, mode="DDP").breakdown_mib
    each = predict_parallel(profile, 128, 4, world_size=2, mode=PARALLEL_MODES[2], largest_unit_bytes=unit)
    boundary = predict_parallel(profile, 128, 4, world_size=2, mode=PARALLEL_MODES[3], largest_unit_bytes=unit)
    assert ddp["other"] == pytest.approx(one["other"] + grads) and ddp["parameters"] == one["parameters"]
    for key in ("parameters", "optimizer_state", "gradients"):
        assert each.breakdown_mib[key] == pytest.approx(one[key] / 2)
    assert boundary.breakdown_mib["gradients"] == pytest.approx(grads)
    assert each.breakdown_mib["other"] == pytest.approx(one["other"] + 3 * unit / MIB)
    assert boundary.peak_mib - each.peak_mib == pytest.approx(grads / 2)
    at_one = predict_parallel(profile, 128, 1, world_size=2, mode=PARALLEL_MODES[3], largest_unit_bytes=unit)
    assert at_one.peak_mib == predict_parallel(profile, 128, 1, world_size=2, mode=PARALLEL_MODES[2],
                                               largest_unit_bytes=unit).peak_mib  # fmt: skip
    assert predict_parallel(profile, 128, 4).peak_mib == predict_step(profile, 128, 4).peak_mib


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "ZeRO"}, "mode must be one of"),
        ({"mode": "none", "world_size": 2}, "world_size must be 1, got 2"),
        ({"mode": "DDP", "world_size": 0}, "world_size must be an int >= 1, got 0"),
        ({"mode": "DDP", "world_size": 3}, "not divisible by world_size 3"),
        ({"mode": "DDP", "largest_unit_bytes": -1}, "largest_unit_bytes must be >= 0"),
    ],
)
def test_bad_arguments_name_the_value_and_the_fix(kwargs, message):
    profile, _ = _profile()
    with pytest.raises(ValueError, match=message):
        predict_parallel(profile, 128, 4, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"world_size": 3}, "world_size must be 1 or 2"),
        (
            {"memory_steps": (3,)},
            "memory_steps holds 3, which with world_size 2 does not divide effective_batch_size 128",
        ),
        ({"memory_steps": (0,)}, "accum_steps must be >= 1, got 0"),
    ],
)
def test_bad_launch_arguments_fail_before_any_process_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_fsdp_window(**kwargs)
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [1, 2])
def test_predictions_are_within_10_percent_of_every_ranks_measured_peak(world_size):
    result = run_fsdp_window(accum_steps=2, micro_batch_size=8, hidden=HIDDEN, depth=DEPTH, world_size=world_size,
                             memory_steps=(1, 2, 8), effective_batch_size=128, timeout=300)  # fmt: skip
    profile, unit = _profile()
    errors = {}
    for mode, by_n in result["memory"].items():
        assert len(by_n["1"]) == world_size
        for n, ranks in by_n.items():
            want = predict_parallel(profile, 128, int(n), world_size=world_size, mode=NAMES[mode],
                                    largest_unit_bytes=unit).peak_mib  # fmt: skip
            errors[(mode, n)] = [round(want / r["peak_mib"] - 1, 4) for r in ranks]
    print(f"world size {world_size}: prediction / measured - 1 per rank: {errors}")
    assert max(abs(e) for rank_errors in errors.values() for e in rank_errors) < 0.10
    each, boundary = result["memory"]["sync each micro-step"]["8"][0], result["memory"]["sync at the boundary"]["8"][0]
    if world_size == 2:  # the boundary setting keeps unsharded gradients: more memory than the default
        assert boundary["breakdown_mib"].get("Unsharded Grad", 0) > 1.0 and boundary["peak_mib"] > each["peak_mib"]
    rows = {(r["impl"], r["accum_steps"]): r for r in fsdp_rows(result)}  # `gradacc bench --fsdp`'s rows
    assert {r["micro_batch_size"] for k, r in rows.items() if k[1] == 8} == {128 // world_size // 8}
    assert all(rows[("ddp", n)]["x_ddp"] == 1.0 for n in (1, 2, 8))
    if world_size == 2:  # sharding halves parameters, gradients and optimizer state: well under DDP
        assert all(rows[(impl, n)]["x_ddp"] < 0.9 for impl in ("fsdp_each", "fsdp_boundary") for n in (1, 2, 8))
    print(format_fsdp_table(fsdp_rows(result)))
    assert psutil.Process().children(recursive=True) == []
