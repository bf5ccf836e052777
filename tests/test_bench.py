"""``gradacc bench``: the short mode's JSON (fields and values, not timings), the targets' arithmetic, the table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gradacc.memory import StepConfig
from gradacc.memory.bench import FULL, run_benchmark
from gradacc.memory.bench_report import IMPLS, ROW_FIELDS, check_targets, format_table, load_reference, plot_rows


@pytest.mark.slow
def test_short_benchmark_writes_every_row_and_field(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gradacc.cli",
            "bench",
            "--short",
            "--quiet",
            "--json",
            str(out),
            "--timeline",
            str(tmp_path / "timeline.json"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "pytorch" in proc.stdout and "x N=1" in proc.stdout and f"wrote {out}" in proc.stdout
    result = json.loads(out.read_text())
    assert result["setup"]["short"] is True and result["setup"]["effective_batch_size"] == 256
    rows = result["rows"]
    assert [(r["impl"], r["accum_steps"]) for r in rows] == [(i, n) for i in IMPLS for n in (1, 2)]
    for r in rows:
        assert set(ROW_FIELDS) <= set(r), r
        assert r["micro_batch_size"] * r["accum_steps"] == 256
        assert r["peak_mib"] > 0 and r["activations_mib"] >= 0 and isinstance(r["seconds_per_effective_batch"], float)
    by = {(r["impl"], r["accum_steps"]): r for r in rows}
    # PyTorch and Accelerate run the same model and batch: the same saved activations, halved at N = 2
    for impl in ("pytorch", "accelerate"):
        assert by[impl, 2]["activations_mib"] == pytest.approx(by[impl, 1]["activations_mib"] / 2, rel=0.05)
    assert by["accelerate", 1]["activations_mib"] == pytest.approx(by["pytorch", 1]["activations_mib"], rel=0.05)
    # parameters 3.15 MiB + Adam 6.3 MiB live in every step
    assert all(r["peak_mib"] > 9.4 for r in rows)
    assert [t["met"] for t in result["targets"]] == [None] * 4  # N = 8 and 16 are not in the short run
    # --timeline: one timeline per N, its peak the PyTorch row's (the same step, counted operation by operation)
    timelines = json.loads((tmp_path / "timeline.json").read_text())["timelines"]
    assert [t["accum_steps"] for t in timelines] == [1, 2]
    for t in timelines:
        assert len(t["mib"]["activations"]) == len(t["mib"]["gradients"]) > 0
        assert t["peak_mib"] == pytest.approx(by["pytorch", t["accum_steps"]]["peak_mib"], abs=0.01)


def _rows(overrides: dict | None = None):
    base = {
        ("pytorch", 1): (100.0, 64.0, 1.0),
        ("pytorch", 8): (40.0, 8.0, 1.1),
        ("jax_scan", 1): (90.0, 70.0, 0.5),
        ("jax_scan", 16): (20.0, 2.0, 0.5),
    }
    base.update(overrides or {})
    return [
        {
            "impl": i,
            "accum_steps": n,
            "micro_batch_size": 4096 // n,
            "peak_mib": p,
            "activations_mib": a,
            "seconds_per_effective_batch": s,
        }
        for (i, n), (p, a, s) in base.items()
    ]


def test_targets_pass_and_fail_on_the_numbers():
    ok = check_targets(_rows())
    assert [t["met"] for t in ok] == [True, True, True, True]
    assert [t["value"] for t in ok] == [1.0, 0.4, 1.1, pytest.approx(0.2222, abs=1e-4)]
    bad = check_targets(_rows({("pytorch", 8): (70.0, 12.0, 1.5), ("jax_scan", 16): (60.0, 2.0, 0.5)}))
    assert [t["met"] for t in bad] == [False, False, False, False]
    assert [t["value"] for t in bad] == [1.5, 0.7, 1.5, pytest.approx(0.6667, abs=1e-4)]
    missing = check_targets([r for r in _rows() if r["impl"] == "pytorch"])
    assert [t["met"] for t in missing] == [True, True, True, None]


def test_table_ratios_and_plot():
    table = format_table(_rows())
    line = next(ln for ln in table.splitlines() if ln.startswith("pytorch") and " 8 " in ln)
    assert "40.0" in line and "0.40" in line and "0.12" in line and "1.10" in line
    fig = plot_rows(_rows())
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 2


def test_bad_benchmark_arguments():
    with pytest.raises(ValueError, match=r"unknown implementation\(s\) \['tensorflow'\]"):
        run_benchmark(impls=("tensorflow",), progress=False)
    with pytest.raises(ValueError, match="effective_batch_size=256 is not divisible by accum_steps=3"):
        run_benchmark(StepConfig(effective_batch_size=256), (1, 3), impls=("pytorch",), progress=False)
    with pytest.raises(ValueError, match="the JAX rows support the fp32 Adam MLP"):
        run_benchmark(StepConfig(effective_batch_size=256, optimizer="sgd"), (1,), impls=("jax_scan",), progress=False)


@pytest.mark.slow
def test_the_reference_run_lesson_03_shows_is_current():
    """The shipped full run (``make bench-reference``) has every row, and its memory columns equal a fresh measurement
    on this machine's versions at N = 1 and 8 (memory is deterministic on CPU; times are that run's and not compared).
    A change to the model, the measurement or a library that moves the memory fails here: re-run the make target."""
    reference = load_reference()
    setup = reference["setup"]
    assert setup["config"] == FULL["config"].label() and setup["accum_steps"] == list(FULL["accum_steps"])
    assert [(r["impl"], r["accum_steps"]) for r in reference["rows"]] == [
        (i, n) for i in IMPLS for n in FULL["accum_steps"]
    ]
    fresh = run_benchmark(accum_steps=(1, 8), impls=("pytorch", "jax_scan"), repeats=1, progress=False)["rows"]
    by = {(r["impl"], r["accum_steps"]): r for r in reference["rows"]}
    for row in fresh:
        shipped = by[row["impl"], row["accum_steps"]]
        print(f"{row['impl']} N={row['accum_steps']}: peak {row['peak_mib']} MiB (shipped {shipped['peak_mib']})")
        assert row["peak_mib"] == pytest.approx(shipped["peak_mib"], abs=0.05)
        assert row["activations_mib"] == pytest.approx(shipped["activations_mib"], abs=0.05)
