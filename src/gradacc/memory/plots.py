"""The memory figures and sentences the lessons and the memory explorer share: a stacked breakdown per N
(``plot_breakdown``), one step's timeline (``plot_timeline``), a figure as PNG bytes, MiB formatting, the "fits /
smallest N" sentence (``fits_summary``) and lesson 09's per-rank peaks (``plot_parallel_peaks``). The memory
explorer's own panels are drawn by ``gradacc.memory.explorer_draw``; lesson 10's and 11's diagrams live with their
lessons' helpers (``gradacc.stacks.plot_window_weights``, ``gradacc.parallel.parallel_stacks.plot_pipeline_window``).
Plain matplotlib (the Agg backend works everywhere, inline in every notebook front end).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..i18n import N_, _
from . import (
    CATEGORIES,
    StepMemory,
    StepTimeline,
)
from .parallel import setting_label

__all__ = [
    "COLORS",
    "category_label",
    "source_label",
    "format_mib",
    "fits_summary",
    "plot_breakdown",
    "plot_timeline",
    "unit_for",
    "figure_png",
    "PARALLEL_COLORS",
    "plot_parallel_peaks",
]


COLORS: dict[str, str] = {
    "parameters": "#4c72b0",
    "gradients": "#dd8452",
    "optimizer_state": "#8172b3",
    "activations": "#55a868",
    "temporaries": "#c44e52",
    "other": "#937860",
}
"""One colour per breakdown category (``gradacc.memory.CATEGORIES``)."""


CATEGORY_LABELS: dict[str, str] = {
    "parameters": N_("parameters"),
    "gradients": N_("gradients"),
    "optimizer_state": N_("optimizer state"),
    "activations": N_("activations"),
    "temporaries": N_("temporaries"),
    "other": N_("other"),
}
"""What a figure calls each category (translated where shown: ``category_label``)."""


SOURCE_LABELS: dict[str, str] = {
    "measured": N_("measured"),
    "measured on fake tensors": N_("measured on fake tensors"),
    "predicted": N_("predicted"),
}
"""``StepMemory.source`` values as a sentence says them (translated where shown: ``source_label``)."""


def category_label(category: str) -> str:
    """A category of ``CATEGORIES`` as a figure names it, in the learner's language (``"optimizer state"``)."""
    return _(CATEGORY_LABELS[category])


def source_label(source: str) -> str:
    """Where a peak comes from (``StepMemory.source``) in the learner's language; an unknown one as given."""
    return _(SOURCE_LABELS[source]) if source in SOURCE_LABELS else source


UNITS: dict[str, float] = {"MiB": 1.0, "GiB": 1024.0}
"""MiB per unit of the figures and sentences."""


def unit_for(max_mib: float) -> str:
    """The unit a view whose largest value is ``max_mib`` (MiB) is drawn in: ``"GiB"`` from 1 GiB on, else ``"MiB"``."""
    return "GiB" if max_mib >= 1024 else "MiB"


def format_mib(mib: float, unit: str | None = None) -> str:
    """``"19.6 MiB"`` below 1 GiB, ``"31.2 GiB"`` above; ``unit`` (``"MiB"`` or ``"GiB"``) forces one, so that every
    number of one view has the same unit.

    Raises:
        ValueError: an unknown ``unit``.
    """
    unit = unit or unit_for(mib)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {list(UNITS)}, got {unit!r}")
    return f"{mib / UNITS[unit]:,.1f} {unit}"


def fits_summary(
    peaks_mib: dict[int, float],
    accum_steps: int,
    capacity_mib: float,
    capacity_label: str = "",
    *,
    micro_batch_size: int,
    source: str,
    persistent_mib: float | None = None,
    unit: str | None = None,
) -> dict[str, Any]:
    """Whether the step at ``accum_steps`` fits in ``capacity_mib``, and the smallest N that does, as one sentence in
    the learner's language (``gradacc.i18n``: one catalog entry per ending, so that a stored line translates whole).

    Args:
        peaks_mib: N -> peak MiB (measured or predicted) for the N values on offer.
        accum_steps: the N selected (a key of ``peaks_mib``).
        capacity_mib: the device's memory (MiB), > 0.
        capacity_label: what the capacity is, printed as given (default: its size).
        micro_batch_size: the micro-batch at ``accum_steps`` (samples).
        source: where the peak comes from (``StepMemory.source``: ``"measured"``, ``"predicted"``, ...), quoted after
            it.
        persistent_mib: parameters + gradients + optimizer state, quoted when no N fits.
        unit: ``"MiB"`` or ``"GiB"`` for every number of the sentence (default: each number's own, ``format_mib``).

    Returns:
        ``{"fits": bool, "smallest_accum_steps": int | None, "text": str}``; the text is one sentence, e.g.
        ``"N = 8 (micro-batch 512): peak 19.6 MiB (measured), fits in a 32 MiB budget. Smallest N that fits: 4."``

    Raises:
        ValueError: ``accum_steps`` not in ``peaks_mib``, or a non-positive capacity.
    """
    from . import check_budget

    capacity = check_budget(capacity_mib)
    if accum_steps not in peaks_mib:
        raise ValueError(f"accum_steps={accum_steps} has no peak; known: {sorted(peaks_mib)}")
    peak = peaks_mib[accum_steps]
    fits = peak <= capacity
    smallest = next((n for n in sorted(peaks_mib) if peaks_mib[n] <= capacity), None)
    values = {
        "n": accum_steps,
        "micro": micro_batch_size,
        "peak": format_mib(peak, unit),
        "source": source_label(source),
        "verdict": _(N_("fits")) if fits else _(N_("does not fit")),
        "where": capacity_label or format_mib(capacity, unit),
        "smallest": smallest,
        "largest": max(peaks_mib),
    }
    if smallest is not None:
        template = _("N = {n} (micro-batch {micro}): peak {peak} ({source}), {verdict} in {where}. "
                     "Smallest N that fits: {smallest}.")  # fmt: skip
    elif persistent_mib is None:
        template = _("N = {n} (micro-batch {micro}): peak {peak} ({source}), {verdict} in {where}. "
                     "No N up to {largest} fits.")  # fmt: skip
    else:
        template = _("N = {n} (micro-batch {micro}): peak {peak} ({source}), {verdict} in {where}. "
                     "No N up to {largest} fits: parameters, gradients and optimizer state alone need {persistent}.")  # fmt: skip
        values["persistent"] = format_mib(persistent_mib, unit)
    return {"fits": fits, "smallest_accum_steps": smallest, "text": template.format(**values)}


def plot_breakdown(
    ax: Any,
    results: Sequence[StepMemory],
    *,
    predicted: Sequence[StepMemory] | None = None,
    selected: int | None = None,
    capacity_mib: float | None = None,
    capacity_label: str = "",
    title: str = "",
    legend: bool = True,
    unit: str | None = None,
) -> dict[str, Any]:
    """Draw a stacked bar of the breakdown per N on ``ax``, measured peaks as dots, predicted peaks as a line.

    Measured bars are solid, predicted ones (where nothing was measured) pale; the selected N is outlined.

    Args:
        results: one ``StepMemory`` per bar (measured, or predicted where nothing was measured: drawn paler);
            bars sit at equal spacing labelled with N.
        predicted: predicted ``StepMemory`` per N (same N values) for the dashed line.
        selected: the N to outline.
        capacity_mib: a horizontal capacity line (or a note when it is far above every bar).
        legend: draw the legend right of the axes (the explorer shows it as HTML instead: text is what makes a
            redraw slow).
        unit: ``"MiB"`` or ``"GiB"`` for the y axis (default: ``unit_for`` the tallest bar).

    Returns:
        ``{"ns": [N per bar], "tops": [bar heights in the plotted unit], "outline": the selection's Rectangle}``
        (the explorer moves the outline instead of redrawing everything when only N changes).
    """
    from matplotlib.ticker import MaxNLocator

    results = list(results)
    ns = [r.accum_steps for r in results]
    top = max([r.peak_mib for r in results] + [p.peak_mib for p in (predicted or [])] + [1e-9])
    unit = unit or unit_for(top)
    scale = UNITS[unit]
    xs = list(range(len(results)))
    # by where each number comes from (``StepMemory.source``): one rank's prediction under data parallelism
    # (``method`` "predicted, DDP, W=8") is as predicted as the one-process predictor's
    measured = [i for i, r in enumerate(results) if r.source != "predicted"]
    guessed = [i for i, r in enumerate(results) if r.source == "predicted"]
    bottoms = [0.0] * len(results)
    for c in CATEGORIES:  # one bar call per category and kind: a few artists, a fast redraw
        heights = [r.breakdown_mib[c] / scale for r in results]
        for index, kind in ((measured, "measured"), (guessed, "predicted")):
            if not index:
                continue
            ax.bar(
                index,
                [heights[i] for i in index],
                bottom=[bottoms[i] for i in index],
                color=COLORS[c],
                alpha=1.0 if kind == "measured" else 0.35,
                width=0.7,
                label=category_label(c) if (kind == "measured" or not measured) else None,
            )
        bottoms = [bt + h for bt, h in zip(bottoms, heights, strict=True)]
    i = ns.index(selected) if selected in ns else 0
    outline = ax.bar(i, bottoms[i], width=0.7, fill=False, edgecolor="black", linewidth=1.5)[0]
    outline.set_visible(selected in ns)
    for fake in (False, True):
        index = [i for i in measured if results[i].fake == fake]
        if index:
            ax.plot(
                index,
                [results[i].peak_mib / scale for i in index],
                "o",
                color="black",
                markerfacecolor="white" if fake else "black",
                markersize=5,
                label=_("measured peak (fake tensors)") if fake else _("measured peak"),
            )
    if predicted:
        ax.plot(xs, [p.peak_mib / scale for p in predicted], "--", color="black", lw=1, label=_("predicted peak"))
    if capacity_mib:
        if capacity_mib <= 1.6 * top:
            ax.axhline(capacity_mib / scale, color="crimson", lw=1.5, ls=":", label=_("capacity"))
        else:
            ax.text(
                0.99,
                0.97,
                _("capacity {card}: {ratio}x the tallest bar").format(
                    card=capacity_label or format_mib(capacity_mib, unit), ratio=f"{capacity_mib / top:,.0f}"
                ),
                transform=ax.transAxes,
                ha="right",
                va="top",
                fontsize=9,
                color="crimson",
            )
    ax.set_xticks(xs)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel(_("accumulation steps N"))
    ax.set_ylabel(_("peak memory ({unit})").format(unit=unit))
    ax.yaxis.set_major_locator(MaxNLocator(5))
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return {"ns": ns, "tops": bottoms, "outline": outline}


def figure_png(fig: Any, dpi: int = 100) -> bytes:
    """Render a matplotlib figure to PNG bytes (Agg, fast zlib level; no pyplot state is touched)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def plot_timeline(
    ax,
    timeline: StepTimeline,
    *,
    title: str | None = None,
    label_peak: bool = True,
    alpha: float = 1.0,
    unit: str = "MiB",
) -> None:
    """Draw one optimizer step's memory timeline on ``ax``: live memory per category stacked against the operation
    index (``COLORS``; ``alpha`` < 1 draws them pale, as the explorer does for predicted timelines), a dotted line at
    each micro-step's forward start and a dash-dot one where ``optimizer.step()`` starts (both labelled for a legend),
    and the peak marked with its value and the largest category alive at that moment. ``unit``: ``"MiB"`` or ``"GiB"``
    for the values (the caller labels the y axis). The x axis leaves 2 % of the operations free at each end, so that a peak on the
    first or last operation (``optimizer.step()``'s, at large N) stays inside the frame."""
    scale = UNITS[unit]
    x = range(timeline.operations)
    ax.stackplot(
        x,
        *([v / scale for v in timeline.mib[c]] for c in CATEGORIES),
        labels=[category_label(c) for c in CATEGORIES],
        colors=[COLORS[c] for c in CATEGORIES],
        linewidth=0,
        alpha=alpha,
    )
    starts = [index for index, kind, _step in timeline.events if kind == "forward"]
    for k, index in enumerate(starts if len(starts) <= 16 else []):  # more lines than that would hide the teeth
        ax.axvline(index, color="0.35", lw=0.8, ls=":", label=_("a micro-step starts") if k == 0 else None)
    step_at = timeline.event_index("optimizer step")
    # dash-dot: not the dashed line of the predicted peaks in the bar chart beside it
    ax.axvline(step_at, color="black", lw=1.2, ls="-.", label=_("optimizer.step() starts"))
    if timeline.allocator_mib:  # a CUDA device: what the caching allocator held after each operation
        ax.plot(x, [v / scale for v in timeline.allocator_mib], color="black", lw=1, label=_("CUDA allocator"))
    peak, at = timeline.peak_mib / scale, timeline.peak_index
    ax.plot([at], [peak], "v", color="black", ms=7)
    if label_peak:
        breakdown = timeline.at(at)
        largest = category_label(max(breakdown, key=breakdown.get))
        text = _("peak {peak}\nlargest: {category}").format(peak=format_mib(timeline.peak_mib, unit), category=largest)
        ax.annotate(text, (at, peak), xytext=(0, 7),
                    textcoords="offset points", ha="left" if at < 0.5 * timeline.operations else "right", va="bottom",
                    fontsize=9)  # fmt: skip
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.35 * peak))
    pad = max(1.0, 0.02 * timeline.operations)
    ax.set_xlim(-pad, timeline.operations - 1 + pad)
    ax.set_xlabel(_("operation"), fontsize=9)
    default = _("N = {n} (micro-batch {micro})").format(n=timeline.accum_steps, micro=timeline.micro_batch_size)
    ax.set_title(title or default, fontsize=10)


PARALLEL_COLORS: dict[str, str] = {
    "DDP": "#4c72b0",
    "FSDP, sync each micro-step": "#55a868",
    "FSDP, sync at the boundary": "#dd8452",
}
"""One colour per data-parallel setting of ``plot_parallel_peaks`` (``gradacc.memory.PARALLEL_MODES`` but "none")."""


def plot_parallel_peaks(
    ax, measured: dict[str, dict[int, float]], predicted: dict[str, dict[int, float]], *, world_size: int
) -> None:
    """One rank's peak memory (MiB) against accumulation steps N, one colour per setting (``PARALLEL_COLORS``):
    ``measured`` as dots joined by a line, ``predicted`` (``gradacc.memory.predict_parallel``) as a dashed line.
    Both map a setting to ``{N: MiB}``; N is drawn on a log2 axis."""
    for mode, color in PARALLEL_COLORS.items():
        for values, style, kind in ((measured, "o-", "measured"), (predicted, "--", "predicted")):
            if mode in values:
                ns = sorted(values[mode])
                # TRANSLATORS: a legend entry of lesson 09's figure; {setting} is "DDP" or "FSDP, sync ..."
                label = _("{setting}, measured").format(setting=setting_label(mode)) if kind == "measured" else None
                ax.plot(ns, [values[mode][n] for n in ns], style, color=color, lw=1.5, ms=6,
                        label=label, alpha=1.0 if kind == "measured" else 0.7)  # fmt: skip
    ns = sorted({n for values in (measured, predicted) for series in values.values() for n in series})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_ylim(0, 1.25 * max(v for values in (measured, predicted) for s in values.values() for v in s.values()))
    ax.set_xlabel(_("accumulation steps N (effective batch fixed)"), fontsize=9)
    ax.set_ylabel(_("peak MiB per rank (W = {world_size})").format(world_size=world_size), fontsize=9)
    ax.plot([], [], "--", color="0.4", label=_("dashed: predicted"))
    ax.legend(fontsize=9, loc="lower right", ncol=2)
