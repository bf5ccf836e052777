"""The memory explorer's drawing: its two panels as PNG bytes and its legend; ``gradacc.memory.widgets.MemoryExplorer``
holds the controls, the cached numbers and the state, and calls this module to draw them.

One view, one unit: the bars, the timeline and the sentence of one configuration are all in MiB or all in GiB
(``gradacc.memory.plots.unit_for`` of the tallest bar), and every axis says which. Every text of a panel lies inside its
figure at every N and model (``texts_outside``, which the tests call). Figures are drawn once per state and reused: a
slider move that only changes N moves the bar chart's outline instead of drawing it again.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Sequence
from typing import Any

from ..i18n import _
from . import CATEGORIES, StepMemory, StepTimeline
from .plots import COLORS, UNITS, category_label, figure_png, plot_breakdown, plot_timeline, source_label, unit_for

__all__ = ["legend_items", "timeline_legend_items", "legend_html", "view_unit", "timeline_ymax", "timeline_title", "timeline_figure",
           "static_view_figure", "bars_figure", "texts_outside", "ExplorerPanels"]  # fmt: skip


_PALE = "#c0cee5"
"""The parameters' colour as a pale bar draws it (alpha 0.35 on white), solid: the same swatch on a dark theme."""


def legend_items() -> list[tuple[str, str]]:
    """The legend under the bars, item by item: ``(mark, text)``, the mark as HTML (a swatch, a dot, a line), the
    text in the learner's language: one swatch per category, the peak markers, the predicted line, the capacity line
    and the pale bars."""
    swatch = '<span style="display:inline-block;width:10px;height:10px;background:{};vertical-align:middle"></span>'
    items = [(swatch.format(COLORS[c]), category_label(c)) for c in CATEGORIES]
    items += [
        ("&#9679;", _("measured peak")),
        ("&#9675;", _("measured on fake tensors")),
        ("- -", _("predicted peak")),
        ('<span style="color:crimson;font-weight:bold">&middot;&middot;&middot;&middot;</span>', _("capacity")),
        (
            swatch.format(_PALE),
            _("pale bars: predicted"),
        ),
    ]
    return items


def timeline_legend_items() -> list[tuple[str, str]]:
    """The timeline panel's lines and marker, item by item as ``legend_items``: where a micro-step starts (dotted),
    where ``optimizer.step()`` starts (dash-dot: not the predicted peaks' dashes), the peak (a triangle)."""
    return [
        ("&#8942;", _("a micro-step starts")),
        ("&#8722;&#183;&#8722;", _("optimizer.step() starts")),
        ("&#9660;", _("peak")),
    ]


def legend_html(items: list[tuple[str, str]] | None = None) -> str:
    """A legend as HTML (text drawn by matplotlib is what makes a redraw slow): ``items`` (default: the bars'
    ``legend_items``), each kept on one line (``white-space: nowrap``): a narrow notebook wraps between items, never
    inside one."""
    item = '<span class="gradacc-legend-item" style="white-space:nowrap;margin-right:14px">{} {}</span> '
    items = legend_items() if items is None else items
    return '<div style="font-size:12px;line-height:1.7">' + "".join(item.format(*i) for i in items) + "</div>"


def view_unit(rows: Sequence[StepMemory]) -> str:
    """The unit of one view (bars, timeline, sentence): ``unit_for`` the tallest of ``rows``' peaks (MiB if none)."""
    return unit_for(max((r.peak_mib for r in rows), default=0.0))


def timeline_ymax(rows: Sequence[StepMemory]) -> float | None:
    """One y axis (MiB) for the timelines of every N of a configuration: the tallest of ``rows``' peaks, plus room for
    the peak's label; ``None`` without rows."""
    return round(1.35 * max(r.peak_mib for r in rows), 2) if rows else None


def timeline_title(timeline: StepTimeline, peak_source: str | None = None) -> str:
    """The timeline panel's title, two lines: N and the micro-batch; then where the timeline comes from and, when the
    bar chart's peak at this N comes from elsewhere (``peak_source``: "measured" while the timeline is predicted),
    that too."""
    own = "predicted" if timeline.predicted else "measured"
    first = _("one optimizer step, N = {n} (micro-batch {micro})").format(
        n=timeline.accum_steps, micro=timeline.micro_batch_size
    )
    second = _("timeline predicted from the profile") if timeline.predicted else _("timeline measured")
    if peak_source not in (None, own):
        second = _("{timeline}; the bar: {source}").format(timeline=second, source=source_label(peak_source))
    return f"{first}\n{second}"


def _new_figure(figsize: tuple[float, float], *, top: float = 0.95, bottom: float = 0.16) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=100)
    fig.subplots_adjust(left=0.11, right=0.97, bottom=bottom, top=top)  # fixed margins: no second layout pass
    return fig, fig.add_subplot()


def timeline_figure(
    timeline: StepTimeline,
    *,
    ymax: float | None = None,
    peak_source: str | None = None,
    unit: str = "MiB",
    heading: str = "",
) -> Any:
    """One timeline as the explorer's panel (a 7 x 3 in matplotlib ``Figure``): ``plot_timeline`` titled by
    ``timeline_title``, pale when predicted, in ``unit``, its ``optimizer.step()`` line named; ``ymax`` (MiB) fixes the
    y axis, so that the panels of different N compare. With ``heading`` (the model, for a saved file) the figure is
    one that explains itself: the heading above, a legend of the categories and lines on the right (9.8 in wide)."""
    if heading:
        fig, ax = _new_figure((9.8, 3.4), top=0.74, bottom=0.14)
        fig.subplots_adjust(right=0.7, left=0.08)
        fig.suptitle(heading, fontsize=10)
    else:
        fig, ax = _new_figure((7.0, 3.0), top=0.83, bottom=0.15)
    plot_timeline(ax, timeline, title=timeline_title(timeline, peak_source), alpha=0.45 if timeline.predicted else 1.0,
                  unit=unit)  # fmt: skip
    if ymax is not None:
        ax.set_ylim(0, max(ymax, 1.35 * timeline.peak_mib) / UNITS[unit])
    ax.set_ylabel(_("live memory ({unit})").format(unit=unit), fontsize=9)
    if heading:
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def bars_figure(
    heading: str,
    rows: Sequence[StepMemory],
    predicted: Sequence[StepMemory] | None,
    *,
    selected: int,
    capacity_mib: float,
    capacity_label: str,
    unit: str,
) -> Any:
    """The bar chart as a figure that explains itself (what **Save PNGs** writes): ``heading`` above (the model, the
    capacity, the sentence), the bars with the selected N outlined, and the legend on the right. 9.8 in wide."""
    fig, ax = _new_figure((9.8, 3.9), top=0.78, bottom=0.13)
    fig.subplots_adjust(left=0.08, right=0.7)
    fig.suptitle(heading, fontsize=10)
    plot_breakdown(ax, rows, predicted=predicted, selected=selected, capacity_mib=capacity_mib,
                   capacity_label=capacity_label, unit=unit)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    if any(r.source == "predicted" for r in rows) and any(r.source != "predicted" for r in rows):
        from matplotlib.patches import Patch

        handles.append(Patch(facecolor=_PALE))
        labels.append(_("pale bars: predicted"))
    ax.legend(handles, labels, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def static_view_figure(
    title: str,
    rows: Sequence[StepMemory],
    predicted: Sequence[StepMemory] | None,
    views: dict[int, tuple[str, StepTimeline | None]],
    *,
    capacity_mib: float,
    capacity_label: str,
) -> Any:
    """The explorer as a picture, for a page without a kernel (GitHub, the course's website): the model (``title``),
    the bars of every N with a legend, and for each N of ``views`` (N -> its "fits / smallest N" sentence and its
    timeline) the sentence and the timeline panel. A ``Figure`` 8.4 in wide."""
    from matplotlib.figure import Figure

    unit = view_unit(rows)
    fig = Figure(figsize=(8.4, 3.9 + 2.5 * len(views)), dpi=100)
    grid = fig.add_gridspec(1 + len(views), 1, height_ratios=[1.5] + [1.0] * len(views), hspace=0.65,
                            left=0.09, right=0.7, top=0.93, bottom=0.06)  # fmt: skip
    fig.suptitle(_("{model}\nthe memory explorer as it opens (its sliders run live in JupyterLab, Colab or Binder)")
                 .format(model=title), fontsize=10)  # fmt: skip
    bars = fig.add_subplot(grid[0])
    plot_breakdown(bars, rows, predicted=predicted, capacity_mib=capacity_mib, capacity_label=capacity_label,
                   unit=unit, legend=False)  # fmt: skip
    from matplotlib.lines import Line2D

    handles, labels = bars.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.35", lw=0.8, ls=":"), Line2D([], [], color="black", lw=1.2, ls="-.")]
    labels += [_("a micro-step starts"), _("optimizer.step() starts")]  # the timelines' lines, below
    bars.legend(handles, labels, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ymax = timeline_ymax(rows)
    for i, (_n, (sentence, timeline)) in enumerate(sorted(views.items()), start=1):
        ax = fig.add_subplot(grid[i])
        verdict = "\n".join(textwrap.wrap(sentence, 100))
        if timeline is not None:
            plot_timeline(ax, timeline, title=verdict, alpha=0.45 if timeline.predicted else 1.0, unit=unit)
            ax.set_ylim(0, max(ymax, 1.35 * timeline.peak_mib) / UNITS[unit])
            ax.set_ylabel(_("live memory ({unit})").format(unit=unit), fontsize=9)
            ax.title.set_horizontalalignment("left")
            ax.title.set_x(0.0)
        else:
            ax.set_axis_off()
            ax.set_title(verdict, fontsize=10, loc="left")
    return fig


def texts_outside(fig: Any) -> list[str]:
    """The texts of ``fig`` that reach outside the figure (titles, axis labels, the tick labels drawn, annotations,
    legends), each with how far (pixels): empty when every text fits."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    texts = list(fig.texts)
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += ax.get_legend().get_texts() if ax.get_legend() else []
        for axis in (ax.xaxis, ax.yaxis):  # only the ticks inside the view are drawn
            low, high = sorted(axis.get_view_interval())
            texts += [t.label1 for t in axis.get_major_ticks() if low <= t.get_loc() <= high]
    found = []
    for text in texts:
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        over = max(-box.x0, -box.y0, box.x1 - fig.bbox.width, box.y1 - fig.bbox.height)
        if over > 0.5:
            found.append(f"{text.get_text()!r} by {over:.0f} px")
    return found


class ExplorerPanels:
    """The explorer's two panels as PNG bytes, each drawn once per state and then reused.

    ``bars_png(key, ...)`` draws the breakdown per N; when only the selected N changed since the last call with the
    same ``key`` it moves the outline and keeps every other artist (creating them is half a redraw's time).
    ``timeline_png(key, ...)`` draws the timeline panel once per ``key`` (the caller's configuration, N, and what the
    drawing depends on). ``last_bars`` and ``last_timeline`` keep the figures last drawn (for tests).
    """

    def __init__(self) -> None:
        self._chart: tuple[Hashable, Any, dict] | None = None
        self._timelines: dict[Hashable, bytes] = {}
        self.last_bars: Any = None
        self.last_timeline: Any = None

    def bars_png(
        self,
        key: Hashable,
        rows: Sequence[StepMemory],
        predicted: Sequence[StepMemory] | None,
        *,
        selected: int,
        capacity_mib: float,
        capacity_label: str,
        unit: str,
    ) -> bytes:
        """The bar chart of ``rows`` (one per N) with ``selected`` outlined, or a "press Measure" panel without rows."""
        if rows and self._chart is not None and self._chart[0] == key and selected in self._chart[2]["ns"]:
            fig, info = self._chart[1], self._chart[2]
            i = info["ns"].index(selected)
            info["outline"].set_x(i - 0.35)
            info["outline"].set_height(info["tops"][i])
        else:
            fig, ax = _new_figure((7.0, 3.0))
            if rows:
                info = plot_breakdown(ax, rows, predicted=predicted, selected=selected, capacity_mib=capacity_mib,
                                      capacity_label=capacity_label, legend=False, unit=unit)  # fmt: skip
                self._chart = (key, fig, info)
            else:
                ax.text(0.5, 0.5, _("nothing measured yet: press Measure"), ha="center", va="center",
                        transform=ax.transAxes, fontsize=10)  # fmt: skip
                ax.set_axis_off()
                self._chart = None
        self.last_bars = fig
        return figure_png(fig)

    def timeline_png(
        self,
        key: Hashable,
        timeline: StepTimeline,
        *,
        ymax: float | None,
        peak_source: str | None,
        unit: str,
    ) -> bytes:
        """The timeline panel (``timeline_figure``) as PNG, drawn once per ``key``."""
        if key not in self._timelines:
            self.last_timeline = timeline_figure(timeline, ymax=ymax, peak_source=peak_source, unit=unit)
            self._timelines[key] = figure_png(self.last_timeline)
        return self._timelines[key]
