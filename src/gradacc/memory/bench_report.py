"""A ``gradacc bench`` run read back: its rows' fields, the course's targets checked on them, the text tables, the plot,
and the full run shipped with the course (``load_reference``: ``bench_reference.json`` next to this module, written
by ``make bench-reference``; lesson 03 shows it and ``tests/test_bench.py`` re-measures its memory columns so it
cannot go stale). ``gradacc.memory.bench`` runs the benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..i18n import N_, _

__all__ = [
    "IMPLS",
    "ROW_FIELDS",
    "check_targets",
    "format_table",
    "format_fsdp_table",
    "plot_rows",
    "load_reference",
]

IMPLS: tuple[str, ...] = ("pytorch", "accelerate", "jax_scan", "jax_loop", "optax_multisteps")
ROW_FIELDS: tuple[str, ...] = (
    "impl",
    "accum_steps",
    "micro_batch_size",
    "peak_mib",
    "activations_mib",
    "seconds_per_effective_batch",
)
"""The fields of every row (``--json`` writes them; rows may carry more, e.g. ``method``)."""


def _get(rows: Sequence[dict], impl: str, n: int) -> dict | None:
    return next((r for r in rows if r["impl"] == impl and r["accum_steps"] == n), None)


def check_targets(rows: Sequence[dict]) -> list[dict]:
    """The course's targets, evaluated on ``rows`` (those whose N values were not run are reported as not checked).

    * PyTorch: activations at N = 8 <= 1.25 x (activations at N = 1) / 8;
    * PyTorch: peak at N = 8 <= 0.6 x peak at N = 1;
    * PyTorch: seconds per effective batch at N = 8 <= 1.3 x N = 1;
    * JAX lax.scan: memory at N = 16 <= 0.5 x N = 1.

    Returns:
        ``[{"target", "value", "limit", "met"}]``: ``value`` is the measured ratio, ``limit`` the largest allowed,
        ``met`` ``True``/``False``, or ``None`` when the rows lack the N values.
    """
    specs = [
        ("pytorch activations N=8 / (N=1 / 8)", "pytorch", 8, "activations_mib", 1.25, 8.0),
        ("pytorch peak N=8 / N=1", "pytorch", 8, "peak_mib", 0.6, 1.0),
        ("pytorch seconds per effective batch N=8 / N=1", "pytorch", 8, "seconds_per_effective_batch", 1.3, 1.0),
        ("jax_scan memory N=16 / N=1", "jax_scan", 16, "peak_mib", 0.5, 1.0),
    ]
    out = []
    for name, impl, n, key, limit, factor in specs:
        base, other = _get(rows, impl, 1), _get(rows, impl, n)
        if base is None or other is None or not base[key]:
            out.append({"target": name, "value": None, "limit": limit, "met": None})
            continue
        ratio = factor * other[key] / base[key]
        out.append({"target": name, "value": round(ratio, 4), "limit": limit, "met": bool(ratio <= limit)})
    return out


def format_table(rows: Sequence[dict]) -> str:
    """A text table of the rows with ratios against N = 1 of the same implementation; the headers in the learner's
    language (``gradacc.i18n``), each column as wide as its header needs."""
    peak, act, seconds = _(N_("peak MiB")), _(N_("act MiB")), _(N_("s/eff.batch"))
    impl = _(N_("impl"))  # the implementation's column
    wp, wa, ws = max(9, len(peak)), max(8, len(act)), max(11, len(seconds))
    head = (
        f"{impl:18s} {'N':>3s} {'micro':>6s} {peak:>{wp}s} {'x N=1':>6s} {act:>{wa}s} {'x N=1':>6s} "
        f"{seconds:>{ws}s} {'x N=1':>6s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        base = _get(rows, r["impl"], 1) or r

        def ratio(key: str, r=r, base=base) -> str:
            return f"{r[key] / base[key]:6.2f}" if base[key] else f"{'-':>6s}"

        lines.append(
            f"{r['impl']:18s} {r['accum_steps']:3d} {r['micro_batch_size']:6d} {r['peak_mib']:{wp}.1f} "
            f"{ratio('peak_mib')} {r['activations_mib']:{wa}.1f} {ratio('activations_mib')} "
            f"{r['seconds_per_effective_batch']:{ws}.4f} {ratio('seconds_per_effective_batch')}"
        )
    return "\n".join(lines)


_STYLES: dict[str, dict[str, Any]] = {
    "pytorch": {"marker": "o", "linestyle": "-", "linewidth": 3, "markersize": 8},
    "accelerate": {"marker": "o", "linestyle": "--", "linewidth": 1.5, "markersize": 5, "markerfacecolor": "white"},
    "jax_scan": {"marker": "s", "linestyle": "-", "linewidth": 1.5, "markersize": 5},
    "jax_loop": {"marker": "^", "linestyle": "-.", "linewidth": 1.5, "markersize": 6},
    "optax_multisteps": {"marker": "D", "linestyle": ":", "linewidth": 2, "markersize": 5},
}


def plot_rows(rows: Sequence[dict], path: str | Path | None = None, title: str = "") -> Any:
    """Peak memory and seconds per effective batch against N, one line per implementation.

    Returns the matplotlib ``Figure`` (no pyplot); with ``path``, also saves it there as PNG (dpi 100).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    mem_ax, time_ax = fig.subplots(1, 2)
    for impl in IMPLS:
        mine = sorted((r for r in rows if r["impl"] == impl), key=lambda r: r["accum_steps"])
        if not mine:
            continue
        ns = [r["accum_steps"] for r in mine]
        style = _STYLES[impl]  # pytorch and accelerate coincide in memory: a hollow marker and a dashed line show both
        mem_ax.plot(ns, [r["peak_mib"] for r in mine], label=impl, **style)
        time_ax.plot(ns, [r["seconds_per_effective_batch"] for r in mine], label=impl, **style)
    all_ns = sorted({r["accum_steps"] for r in rows})
    for ax, label in ((mem_ax, _("peak memory (MiB)")), (time_ax, _("seconds per effective batch"))):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_ns)
        ax.set_xticklabels([str(n) for n in all_ns])
        ax.minorticks_off()
        ax.set_xlabel(_("accumulation steps N"))
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    fig.legend(*mem_ax.get_legend_handles_labels(), loc="outside lower center", ncols=len(IMPLS), fontsize=9)
    if title:
        from .config import localized_label

        fig.suptitle(localized_label(title), fontsize=10)
    if path is not None:
        fig.savefig(path, format="png", dpi=100)
    return fig


def load_reference() -> dict[str, Any]:
    """The full benchmark run shipped with the course (``{"setup", "rows", "targets"}``, as ``run_benchmark``): one run
    of ``gradacc bench --json`` on the course's 2-core CPU machine, times included (those are that machine's); its
    ``setup["config"]`` in the learner's language (``config.localized_label``)."""
    from importlib import resources

    from .config import localized_label

    data = json.loads(resources.files("gradacc.memory").joinpath("bench_reference.json").read_text(encoding="utf-8"))
    data["setup"]["config"] = localized_label(data["setup"]["config"])
    return data


def format_fsdp_table(rows: Sequence[dict]) -> str:
    """A text table of ``fsdp_rows``: one rank's peak and its ratio against DDP at the same N."""
    head = f"{'impl (2 ranks)':18s} {'N':>3s} {'micro':>6s} {'peak MiB/rank':>13s} {'x DDP':>6s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['impl']:18s} {r['accum_steps']:3d} {r['micro_batch_size']:6d} {r['peak_mib']:13.2f} {r['x_ddp']:6.2f}"
        )
    return "\n".join(lines)
