"""``gradacc bench``: memory and time of one optimizer step against accumulation steps, five implementations.

At a fixed effective batch, for each N: the peak memory (MiB), the activation memory (MiB) and the seconds per
effective batch (one optimizer step of N micro-steps) of

1. ``pytorch``: the plain PyTorch loop (``gradacc.memory.measure_step``; memory from the CUDA allocator on a GPU, from
   PyTorch's memory tracker on CPU);
2. ``accelerate``: Hugging Face Accelerate, ``Accelerator(gradient_accumulation_steps=N)`` and ``accumulate()``;
3. ``jax_scan``: JAX, ``jax.lax.scan`` over the micro-batches inside one jitted step (``gradacc.frameworks.jaxacc``);
4. ``jax_loop``: JAX, a Python loop over the micro-batches inside the jitted step (unrolled by the compiler);
5. ``optax_multisteps``: ``optax.MultiSteps``, one jitted call per micro-batch.

JAX memory is XLA's compiled memory analysis (argument + output - alias + temp,
``gradacc.memory.jax_memory_analysis``); its "activations" are XLA's temporary buffers, a lower bound: XLA also uses
the output buffers (the new parameters and optimizer state) as scratch, so at small micro-batches the temporaries can
be 0 while activations still exist. All five use the lesson's default setup (``gradacc.memory.StepConfig()``): the
digits MLP 64-512-512-512-512-10, Adam, fp32, effective batch 4096 real digits drawn with replacement.

It prints a table with ratios against N = 1, checks the course's targets (reported, not asserted), writes the rows to
``--json PATH``, the plot to ``--plot PATH`` and the PyTorch step's memory timeline per N (``gradacc.memory.timeline``)
to ``--timeline PATH``. ``--short`` runs a reduced version for CI. On a CPU it uses one
PyTorch thread, as lesson 03 does (``--threads``).

``--fsdp`` adds lesson 09's rows: one rank's peak memory on 2 gloo ranks (``gradacc.parallel.sharded.run_fsdp_window``,
PyTorch's FSDP2 memory tracker) for DDP and FSDP2 with the gradient sync on every micro-step or at the boundary,
N = 1..8, each with its ratio against DDP at the same N (``fsdp_rows``).

This module runs the benchmark; ``gradacc.memory.bench_report`` reads a run back (the targets, the tables, the plot,
and ``load_reference()``: the full run lesson 03 shows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from . import (
    StepConfig,
    StepMemory,
    check_divisible,
    jax_memory_analysis,
    measure_config,
    measure_run,
    timeline_config,
)
from .bench_report import IMPLS, check_targets, format_fsdp_table, format_table, plot_rows

__all__ = [
    "FULL",
    "SHORT",
    "run_benchmark",
    "FSDP_SETUP",
    "fsdp_rows",
    "add_cli",
]

FULL: dict[str, Any] = {"config": StepConfig(), "accum_steps": (1, 2, 4, 8, 16), "repeats": 3}
"""The full benchmark: the lesson's default setup, N = 1..16, the median of 3 timed steps."""
SHORT: dict[str, Any] = {"config": StepConfig(effective_batch_size=256), "accum_steps": (1, 2), "repeats": 1}
"""``--short`` (CI): effective batch 256, N = 1 and 2, one timed step (JAX compilation dominates its time)."""


def _median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))


def _row(impl: str, accum_steps: int, micro: int, peak: float, act: float, seconds: float, **extra: Any) -> dict:
    return {
        "impl": impl,
        "accum_steps": accum_steps,
        "micro_batch_size": micro,
        "peak_mib": round(float(peak), 3),
        "activations_mib": round(float(act), 3),
        "seconds_per_effective_batch": round(float(seconds), 5),
        **extra,
    }


def _pytorch_row(config: StepConfig, n: int, repeats: int) -> dict:
    result = measure_config(config, n, repeats=repeats)
    return _row("pytorch", n, result.micro_batch_size, result.peak_mib, result.activations_mib,
                result.seconds_per_step, method=result.method)  # fmt: skip


def _accelerate_row(config: StepConfig, n: int, repeats: int) -> dict:
    from accelerate import Accelerator

    from ..frameworks.accelerate import reset_accelerate_state

    micro = check_divisible(config.effective_batch_size, n)
    reset_accelerate_state()  # Accelerate's state is process-wide: a fresh one for every N
    accelerator = Accelerator(gradient_accumulation_steps=n)
    model, optimizer = config.build(accelerator.device)
    x, y = config.batch(accelerator.device)
    model, optimizer = accelerator.prepare(model, optimizer)
    batches = [(x[i * micro : (i + 1) * micro], y[i * micro : (i + 1) * micro]) for i in range(n)]

    def window(before_forward: Callable[[], None] = lambda: None, after_forward: Callable[[], None] = lambda: None):
        for xb, yb in batches:
            with accelerator.accumulate(model):
                before_forward()
                loss = F.cross_entropy(model(xb), yb)  # accelerator.backward divides by N
                after_forward()
                accelerator.backward(loss)
                optimizer.step()  # a no-op until the N-th micro-batch
                optimizer.zero_grad()

    def timed() -> None:
        window()
        if accelerator.device.type == "cuda":
            torch.cuda.synchronize()

    window()  # creates Adam's state
    result: StepMemory = measure_run(window, model, optimizer, x, y, accum_steps=n, micro_batch_size=micro)
    seconds = _median_seconds(timed, repeats)
    reset_accelerate_state()
    return _row("accelerate", n, micro, result.peak_mib, result.activations_mib, seconds, method=result.method)


def _jax_setup(config: StepConfig):
    import jax.numpy as jnp
    import numpy as np

    from ..frameworks.jaxacc import params_from_torch

    if config.arch != "mlp" or config.precision != "fp32" or config.optimizer != "adam" or config.checkpoint:
        raise ValueError(f"the JAX rows support the fp32 Adam MLP without checkpointing, got {config.label()}")
    params = params_from_torch(config.build_model())  # the same initial weights as the PyTorch rows
    x, y = config.batch()
    return params, jnp.asarray(x.numpy()), jnp.asarray(y.numpy().astype(np.int32))


def _jax_rows(config: StepConfig, n: int, repeats: int, impls: Sequence[str]) -> list[dict]:
    import jax
    import optax

    from ..frameworks.jaxacc import make_micro_step, make_train_step, multisteps

    micro = check_divisible(config.effective_batch_size, n)
    params, x, y = _jax_setup(config)
    rows = []
    for impl in impls:
        if impl in ("jax_scan", "jax_loop"):
            optimizer = optax.adam(1e-3)
            step = make_train_step(optimizer, n, "scan" if impl == "jax_scan" else "loop")
            opt_state = optimizer.init(params)
            compiled = step.lower(params, opt_state, x, y).compile()
            memory = jax_memory_analysis(compiled)

            def run(compiled=compiled, opt_state=opt_state):
                jax.block_until_ready(compiled(params, opt_state, x, y))

        else:  # optax.MultiSteps: one call per micro-batch; the memory is that of one call
            optimizer = multisteps(optax.adam(1e-3), n)
            step = make_micro_step(optimizer)
            opt_state = optimizer.init(params)
            xs, ys = x.reshape(n, micro, -1), y.reshape(n, micro)
            compiled = step.lower(params, opt_state, xs[0], ys[0]).compile()
            memory = jax_memory_analysis(compiled)

            def run(compiled=compiled, opt_state=opt_state, xs=xs, ys=ys):
                p, s = params, opt_state
                for i in range(n):
                    p, s, _ = compiled(p, s, xs[i], ys[i])
                jax.block_until_ready(p)

        run()  # warm-up
        seconds = _median_seconds(run, repeats)
        rows.append(_row(impl, n, micro, memory["total_mib"], memory["temp_mib"], seconds, method="xla"))
    return rows


def run_benchmark(
    config: StepConfig | None = None,
    accum_steps: Sequence[int] | None = None,
    *,
    impls: Sequence[str] = IMPLS,
    repeats: int | None = None,
    short: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the benchmark; returns ``{"setup": {...}, "rows": [...], "targets": [...]}`` (plain JSON types).

    Args:
        config, accum_steps, repeats: default to ``FULL`` (or ``SHORT`` with ``short=True``).
        impls: a subset of ``IMPLS``.
        progress: a ``tqdm`` bar on stderr.

    Raises:
        ValueError: an unknown implementation, or an effective batch not divisible by some N.
    """
    preset = SHORT if short else FULL
    config = config or preset["config"]
    accum_steps = tuple(accum_steps or preset["accum_steps"])
    repeats = repeats or preset["repeats"]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise ValueError(f"unknown implementation(s) {unknown}; use some of {list(IMPLS)}")
    for n in accum_steps:
        check_divisible(config.effective_batch_size, n)
    jax_impls = [i for i in impls if i in ("jax_scan", "jax_loop", "optax_multisteps")]
    tasks: list[tuple[str, int]] = [(i, n) for i in impls if i in ("pytorch", "accelerate") for n in accum_steps]
    tasks += [("jax", n) for n in accum_steps] if jax_impls else []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks), desc="gradacc bench", unit="run", file=sys.stderr)
    rows: list[dict] = []
    load_before = _load_average()
    start = time.perf_counter()
    for impl, n in tasks:
        if bar is not None:
            bar.set_postfix_str(f"{impl} N={n}")
        if impl == "pytorch":
            rows.append(_pytorch_row(config, n, repeats))
        elif impl == "accelerate":
            rows.append(_accelerate_row(config, n, repeats))
        else:
            rows.extend(_jax_rows(config, n, repeats, jax_impls))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    order = {impl: i for i, impl in enumerate(IMPLS)}
    rows.sort(key=lambda r: (order[r["impl"]], r["accum_steps"]))
    setup = {
        "config": config.label(),
        "arch": config.arch,
        "width": config.width,
        "depth": config.depth,
        "optimizer": config.optimizer,
        "precision": config.precision,
        "effective_batch_size": config.effective_batch_size,
        "accum_steps": list(accum_steps),
        "repeats": repeats,
        "short": short,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu",
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": _load_average(),
        "torch": torch.__version__,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    return {"setup": setup, "rows": rows, "targets": check_targets(rows)}


FSDP_SETUP: dict[str, Any] = {"hidden": 512, "depth": 4, "effective_batch_size": 128, "accum_steps": (1, 2, 4, 8)}
"""``--fsdp``: lesson 09's model (the digits MLP, 4 hidden layers of 512, SGD with momentum) on 2 ranks."""


def fsdp_rows(result: dict[str, Any] | None = None, *, progress: bool = False) -> list[dict]:
    """One row per (setting, N): ``{"impl": "ddp" | "fsdp_each" | "fsdp_boundary", "accum_steps", "micro_batch_size"
    (per rank), "peak_mib" (the larger of the 2 ranks' peaks), "x_ddp" (peak / DDP's peak at the same N)}``.

    ``result`` is a ``run_fsdp_window`` result with ``"memory"``; without one, ``FSDP_SETUP`` is launched (2 gloo
    processes, about half a minute).

    Raises:
        WorkerError: the launch failed.
    """
    if result is None:
        from ..parallel.sharded import run_fsdp_window

        s = FSDP_SETUP
        result = run_fsdp_window(hidden=s["hidden"], depth=s["depth"], memory_steps=s["accum_steps"],
                                 effective_batch_size=s["effective_batch_size"], progress=progress, timeout=600)  # fmt: skip
    names = {"DDP": "ddp", "sync each micro-step": "fsdp_each", "sync at the boundary": "fsdp_boundary"}
    world = result["world_size"]
    peaks = {(names[m], int(n)): max(r["peak_mib"] for r in ranks) for m, by_n in result["memory"].items()
             for n, ranks in by_n.items()}  # fmt: skip
    per_rank = result["effective_batch_size"] // world
    return [
        {
            "impl": impl,
            "accum_steps": n,
            "micro_batch_size": per_rank // n,
            "peak_mib": peak,
            "x_ddp": peak / peaks[("ddp", n)],
        }  # fmt: skip
        for (impl, n), peak in sorted(
            peaks.items(), key=lambda item: (list(names.values()).index(item[0][0]), item[0][1])
        )
    ]


def _load_average() -> float | None:
    """The 1-minute load average (other processes competing for the CPU inflate every time measured here)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cmd_bench(args: argparse.Namespace) -> int:
    impls = tuple(args.impls.split(",")) if args.impls else IMPLS
    threads = args.threads if args.threads is not None else (0 if torch.cuda.is_available() else 1)
    if threads < 0:
        raise SystemExit(f"--threads must be >= 0, got {threads}")
    if threads:
        torch.set_num_threads(threads)
    result = run_benchmark(impls=impls, short=args.short, repeats=args.repeats, progress=not args.quiet)
    setup = result["setup"]
    print(
        f"setup: {setup['config']} on {setup['device']} ({setup['cpu_threads']} PyTorch threads, load average "
        f"{setup['load_average_before']} -> {setup['load_average_after']}), {setup['wall_s']} s"
    )
    print(format_table(result["rows"]))
    print()
    for t in result["targets"]:
        state = {True: "met", False: "MISSED", None: "not checked (N not run)"}[t["met"]]
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        print(f"target {t['target']}: {value} (limit {t['limit']}) {state}")
    if args.fsdp:
        result["fsdp_rows"] = fsdp_rows(progress=not args.quiet)
        print()
        print(format_fsdp_table(result["fsdp_rows"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if args.plot:
        plot_rows(result["rows"], args.plot, title=result["setup"]["config"])
        print(f"wrote {args.plot}")
    if args.timeline:
        preset = SHORT if args.short else FULL
        timelines = [timeline_config(preset["config"], n).as_dict() for n in preset["accum_steps"]]
        payload = {"config": preset["config"].label(), "timelines": timelines}
        Path(args.timeline).write_text(json.dumps(payload) + "\n", encoding="utf-8")
        peaks = ", ".join(f"N={t['accum_steps']} {t['peak_mib']:.2f} MiB" for t in timelines)
        print(f"wrote {args.timeline}: the PyTorch step's memory timeline per N ({peaks})")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="memory and time against accumulation steps: PyTorch, Accelerate, JAX scan / loop, optax.MultiSteps",
    )
    p.add_argument("--json", metavar="PATH", help="write the setup, rows and targets as JSON")
    p.add_argument("--plot", metavar="PATH", help="save the plot as PNG")
    p.add_argument(
        "--timeline",
        metavar="PATH",
        help="also write the PyTorch step's memory timeline per N as JSON (gradacc.memory.StepTimeline.as_dict)",
    )
    p.add_argument("--short", action="store_true", help="a reduced run for CI (effective batch 256, N = 1 and 2)")
    p.add_argument("--fsdp", action="store_true", help="also lesson 09's DDP / FSDP2 rows on 2 gloo ranks (N = 1..8)")
    p.add_argument("--impls", help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--repeats", type=int, default=None, help="timed steps per row (median)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="PyTorch CPU threads (torch.set_num_threads); default 1 on CPU, as lesson 03 (on a busy machine more "
        "threads spin-wait for each other: measured 2.2x slower at N = 1); 0 keeps PyTorch's default",
    )
    p.set_defaults(func=_cmd_bench)
