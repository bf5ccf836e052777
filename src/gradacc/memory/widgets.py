"""The memory explorer: sliders for accumulation steps and the model, measured memory and the predictor, one figure.

Built from ipywidgets controls and a matplotlib figure rendered to PNG (Agg) inside an ``Output`` widget, so it works
the same in JupyterLab, Binder and Colab, on ipywidgets 8 and on Colab's 7.7 (only controls that 7.7 has:
``SelectionSlider``, ``ToggleButtons``, ``Dropdown``, ``Button``, ``IntProgress``, ``HTML``, ``Output``; no tooltips).

A slider move only reads cached numbers and redraws (one PNG, a few tens of milliseconds); new measurements run when
the learner presses **Measure**, behind a progress bar. See ``MemoryExplorer``: this module holds its controls;
what it knows and measures is ``gradacc.memory.explorer_state`` (its options ``ACCUM_OPTIONS`` ... come from there),
and its panels are drawn by ``gradacc.memory.explorer_draw``.
"""

from __future__ import annotations

import base64
import html
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..i18n import N_, _
from . import PARALLEL_MODES, MemoryProfile, StepConfig, StepMemory, StepTimeline
from .capacity import CAPACITY_PRESETS, CUDA_CONTEXT_MIB, card_label, gpu_capacity, usable_mib
from .explorer_access import ARIA_SCRIPT, TOOLTIPS, show_image
from .explorer_draw import (
    ExplorerPanels,
    bars_figure,
    legend_html,
    static_view_figure,
    timeline_figure,
    timeline_legend_items,
    timeline_title,
    timeline_ymax,
    view_unit,
)
from .explorer_state import (
    ACCUM_OPTIONS,
    BATCH_OPTIONS,
    DEPTH_OPTIONS,
    WIDTH_OPTIONS,
    WORLD_OPTIONS,
    ExplorerState,
    check_options,
    model_label,
)
from .plots import figure_png, format_mib

__all__ = [
    "ACCUM_OPTIONS",
    "BATCH_OPTIONS",
    "WIDTH_OPTIONS",
    "DEPTH_OPTIONS",
    "WORLD_OPTIONS",
    "CAPACITY_PRESETS",
    "CUDA_CONTEXT_MIB",
    "usable_mib",
    "gpu_capacity",
    "SAVE_FOLDER",
    "MemoryExplorer",
]


SAVE_FOLDER = "saved-figures"
"""Where **Save PNGs** writes, under the notebook's folder; the course's ``.gitignore`` leaves it out of git."""

PARALLEL_LABELS: dict[str, str] = {
    "none": N_("none"),
    "DDP": "DDP",
    "FSDP, sync each micro-step": N_("FSDP, sync each micro-step"),
    "FSDP, sync at the boundary": N_("FSDP, sync at the boundary"),
}
"""The data-parallel menu's words for ``gradacc.memory.PARALLEL_MODES`` (translated where shown)."""


class MemoryExplorer:
    """Sliders for accumulation steps (1..64), effective batch, MLP width and depth, optimizer (SGD / Adam) and
    precision (fp32 / pure bf16); a stacked bar of the peak's breakdown per N (measured where measured, predicted and
    paler elsewhere), measured peaks as dots and the predictor's curve; a capacity line (the real GPU on a GPU
    runtime, presets for common cards) and a sentence saying whether the selected N fits and the smallest N that does.
    A **data parallel** choice (none, DDP, FSDP with the gradient sync on every micro-step or at the boundary) and the
    number of ranks turn the bars into ONE RANK's predicted memory (``gradacc.memory.predict_parallel``, checked
    against real gloo ranks in lesson 09); the effective batch is then shared by the ranks.

    Moving a slider only redraws from cached numbers (``last_redraw_s`` records how long that took). **Measure**
    measures the current model: first a probe for the predictor (``gradacc.memory.profile_config`` on fake tensors),
    then one step per N. Steps small enough for this machine run for real (``method``: the CUDA allocator on a GPU,
    the memory tracker on CPU); larger ones run on fake tensors (the same operations and storage sizes, nothing
    computed), drawn as hollow dots. A progress bar shows how far it is.

    For scripts and browser tests, the state is plain attributes:

    * ``accum_slider``: the ``SelectionSlider`` whose description is ``"accumulation steps"``; ``batch_slider``,
      ``width_slider``, ``depth_slider``, ``optimizer_buttons``, ``precision_buttons``, ``capacity_dropdown``,
      ``parallel_dropdown``, ``world_slider``, ``measure_button``, ``save_button`` (both panels into PNG files in
      ``SAVE_FOLDER``: ``save_png``), ``progress``;
    * ``sentence``: an ``HTML`` widget with the CSS class ``gradacc-fits`` holding the "fits / smallest N" sentence;
      ``title`` (``gradacc-title``) names the model; ``status`` (``gradacc-status``) says what **Measure** did for the
      configuration shown (empty for another one);
    * ``figure``: the ``Output`` widget with the figure (CSS class ``gradacc-figure``); ``png`` its latest bytes;
      ``timeline_figure`` (``gradacc-timeline``) and ``timeline_png``: the same for the selected N's timeline;
    * ``state()``: a dict of what is shown; ``widget``: the whole ``VBox`` (displaying the explorer displays it);
      ``data``: the ``ExplorerState`` behind it (the cached numbers, ``measure``).

    Args:
        config: the starting model and batch (``arch`` and ``checkpoint`` stay fixed; the sliders set the rest). Its
            values must be among the slider options.
        accum_steps: the starting N.
        measurements: ``StepMemory`` results already measured for ``config`` (e.g. by the lesson), cached as is.
        profile: a ``MemoryProfile`` of ``config`` for the predicted curve (and the predicted, pale, timelines).
        timelines: ``StepTimeline`` s measured for ``config`` (``gradacc.memory.timeline_config``), one per N.
        capacity: a budget in MiB (named "the budget"), or ``(name, MiB)``, put first in the capacity menu; default:
            on a GPU runtime this GPU's free memory plus this process's reserved memory (``gpu_capacity``), else the
            first preset. The menu gives each entry one size (a card's usable GiB); the sentence names it.
        method: how **Measure** measures real steps (``gradacc.memory.METHODS``); default: ``"cuda"`` on a GPU,
            else ``"storages"`` (the live-storage counter: the tracker's numbers, checked by a test, at half its cost).
        real_limit_mib, real_limit_flops: steps whose predicted peak or estimated work (6 x parameters x effective
            batch) exceed these run on fake tensors. Defaults: 512 MiB and 5e10 on CPU; 80 % of the GPU and 1e15 there.

    Raises:
        ValueError: a ``config`` or ``accum_steps`` outside the slider options, a bad capacity.
    """

    def __init__(
        self,
        config: StepConfig | None = None,
        accum_steps: int = 8,
        *,
        measurements: Sequence[StepMemory] = (),
        profile: MemoryProfile | None = None,
        timelines: Sequence[StepTimeline] = (),
        capacity: float | tuple[str, float] | None = None,
        method: str | None = None,
        real_limit_mib: float | None = None,
        real_limit_flops: float | None = None,
    ) -> None:
        import ipywidgets as w

        config = config or StepConfig()
        check_options(config, accum_steps)
        self.base = config
        gpu = gpu_capacity()
        self.capacities: list[tuple[str, float]] = ([gpu] if gpu else []) + list(CAPACITY_PRESETS)
        """``(name, usable MiB)`` per entry of the capacity menu: the menu gives each its one size
        (``capacity_menu_label``), the sentence names it."""
        self._budget_index = 0 if capacity is not None else None
        if capacity is not None:
            from . import check_budget

            name, mib = (N_("the budget"), capacity) if isinstance(capacity, (int, float)) else capacity
            check_budget(mib)
            self.capacities.insert(0, (name, float(mib)))
        on_gpu = gpu is not None
        self.data = ExplorerState(
            method or ("cuda" if on_gpu else "storages"),
            real_limit_mib or (0.8 * gpu[1] if on_gpu else 512.0),
            real_limit_flops or (1e15 if on_gpu else 5e10),
        )
        self.panels = ExplorerPanels()
        self.add_timelines(config, timelines)
        self.add_measurements(config, measurements)
        if profile is not None:
            self.add_profile(config, profile)
        self.last_redraw_s = 0.0
        self.redraws = 0
        self.measure_runs = 0
        self.png = b""
        self.timeline_png = b""
        self.saved_figures: list[Any] = []
        self._state: dict[str, Any] = {}

        # Widths that show every label whole (ipywidgets cuts a long one with "...", and 7.7 has no tooltips): a
        # slider's track gets 40 px or more per position; the capacity menu is as wide as its longest card. Rows wrap
        # where the notebook is narrower than them, instead of squeezing the sliders.
        wide = {"description_width": "initial"}

        def slider(options: Sequence[int], value: int, description: str, px: int, **kw: Any) -> Any:
            return w.SelectionSlider(options=list(options), value=value, description=description, style=wide,
                                     continuous_update=False, layout={"width": f"{px}px", "flex": "0 0 auto"},
                                     **kw)  # fmt: skip

        self.accum_slider = slider(ACCUM_OPTIONS, accum_steps, _("accumulation steps"), 560)
        self.batch_slider = slider(BATCH_OPTIONS, config.effective_batch_size, _("effective batch"), 560)
        self.width_slider = slider(WIDTH_OPTIONS, config.width, _("width"), 480)
        self.depth_slider = slider(DEPTH_OPTIONS, config.depth, _("depth"), 360)
        self.optimizer_buttons = w.ToggleButtons(
            options=[("SGD", "sgd"), ("Adam", "adam")], value=config.optimizer, description=_("optimizer"), style=wide
        )
        self.precision_buttons = w.ToggleButtons(options=[("fp32", "fp32"), (_("pure bf16 (not AMP)"), "bf16")],
                                                 value=config.precision, description=_("precision"),
                                                 style={**wide, "button_width": "170px"})  # fmt: skip
        self.parallel_dropdown = w.Dropdown(options=[(_(PARALLEL_LABELS[m]), m) for m in PARALLEL_MODES],
                                            value="none", description=_("data parallel"), style=wide,
                                            layout={"width": "330px"})  # fmt: skip
        # a gap between the menu and "ranks" (issue 55): the label does not touch the menu when both share a row
        self.world_slider = slider(WORLD_OPTIONS, 2, _("ranks"), 400, disabled=True)
        self.world_slider.layout.margin = "0 0 0 24px"
        menu = [self.capacity_menu_label(i) for i in range(len(self.capacities))]
        self.capacity_dropdown = w.Dropdown(options=[(label, i) for i, label in enumerate(menu)],
                                            value=0, description=_("capacity"), style=wide,
                                            layout={"width": f"{110 + 8 * max(map(len, menu))}px"})  # fmt: skip
        self.measure_button = w.Button(description=_("Measure"), button_style="primary")
        self.progress = w.IntProgress(value=0, min=0, max=len(ACCUM_OPTIONS) + 1, description=_("progress"),
                                      style=wide)  # fmt: skip
        self.status = w.HTML(value="")
        self.status.add_class("gradacc-status")
        self.title = w.HTML(value="")
        self.title.add_class("gradacc-title")
        self.legend = w.HTML(value=legend_html())
        self.legend.add_class("gradacc-legend")
        self.sentence = w.HTML(value="")
        self.sentence.add_class("gradacc-fits")
        self.figure = w.Output()
        self.figure.add_class("gradacc-figure")
        self.timeline_note = w.HTML(value="")
        self.timeline_note.add_class("gradacc-timeline-note")
        self.timeline_figure = w.Output()
        self.timeline_figure.add_class("gradacc-timeline")
        self.timeline_legend = w.HTML(value=legend_html(timeline_legend_items()))
        self.timeline_legend.add_class("gradacc-timeline-legend")
        self.save_button = w.Button(description=_("Save PNGs"))
        for name, text in TOOLTIPS.items():  # ipywidgets 8: tooltip; 7.7 (Colab): description_tooltip
            control = getattr(self, name)
            setattr(control, "tooltip" if "tooltip" in control.keys else "description_tooltip", _(text))
        wrap = {"flex_flow": "row wrap"}
        self.widget = w.VBox(
            [
                w.HBox([self.accum_slider, self.batch_slider], layout=wrap),
                w.HBox([self.width_slider, self.depth_slider], layout=wrap),
                w.HBox([self.optimizer_buttons, self.precision_buttons], layout=wrap),
                w.HBox([self.parallel_dropdown, self.world_slider], layout=wrap),
                self.capacity_dropdown,
                w.HBox([self.measure_button, self.save_button, self.progress], layout=wrap),
                self.status,
                self.sentence,
                self.title,
                self.figure,
                self.legend,
                self.timeline_note,
                self.timeline_figure,
                self.timeline_legend,
            ]
        )
        self.widget.add_class("gradacc-memory-explorer")
        self._aria = w.Output(layout={"display": "none"})  # ARIA_SCRIPT, run where the explorer is shown
        with self._aria:
            from IPython.display import Javascript, display

            display(Javascript(ARIA_SCRIPT))
        self.widget.children = (*self.widget.children, self._aria)
        for control in (
            self.accum_slider,
            self.batch_slider,
            self.width_slider,
            self.depth_slider,
            self.optimizer_buttons,
            self.precision_buttons,
            self.parallel_dropdown,
            self.world_slider,
            self.capacity_dropdown,
        ):
            control.observe(lambda change: self.redraw(), names="value")
        self.measure_button.on_click(self._on_measure)
        self.save_button.on_click(lambda button: self.save_png())
        rows, _predicted = self._rows(config)
        for n in ACCUM_OPTIONS:  # every N's timeline drawn once now: a slider move then shows a cached PNG
            self._timeline_png(config, n, self.timeline(n), rows)
        self.redraw()

    # -- the cache (ExplorerState) -----------------------------------------------------------------------------
    def add_measurements(self, config: StepConfig, results: Sequence[StepMemory]) -> None:
        """Cache measured ``StepMemory`` results of ``config`` (one per N)."""
        self.data.add_measurements(config, results)

    def add_profile(self, config: StepConfig, profile: MemoryProfile) -> None:
        """Cache the predictor's ``MemoryProfile`` of ``config`` (any effective batch)."""
        self.data.add_profile(config, profile)

    def add_timelines(self, config: StepConfig, timelines: Sequence[StepTimeline]) -> None:
        """Cache measured ``StepTimeline`` s of ``config`` (one per N): the timeline panel shows them."""
        self.data.add_timelines(config, timelines)

    def timeline(self, accum_steps: int | None = None) -> StepTimeline | None:
        """The timeline at N = ``accum_steps`` (default: the selected N) of the selected configuration: measured if
        cached, else predicted from the profile (``None`` without one)."""
        return self.data.timeline(self.config, accum_steps or self.accum_slider.value)

    def save_png(self, folder: str | Path = SAVE_FOLDER) -> list[str]:
        """Write both panels as PNG files that explain themselves into ``folder`` (created if needed; default
        ``SAVE_FOLDER`` under the notebook's folder, which git ignores): ``memory-explorer-N8.png`` (the bars under a
        heading that names the model, the capacity and the sentence, with their legend) and
        ``memory-timeline-N8.png`` (the selected N's timeline under the model's name, with its legend), both in the
        view's unit. Returns their paths (the figures: ``saved_figures``); the status line names the folder and the
        files."""
        config, n, folder = self.config, self.accum_slider.value, Path(folder).resolve()
        state, mode = self.state(), self.parallel[0]
        rows, predicted = self._rows(config)
        model = self.title_text()
        label, capacity = self.capacity
        figures = []
        if rows:
            heading = "\n".join([model, _("capacity: {menu}").format(menu=self.capacity_menu_label()),
                                 *textwrap.wrap(state["sentence"], 120)])  # fmt: skip
            figures.append(("memory-explorer", bars_figure(heading, rows, predicted, selected=n, capacity_mib=capacity,
                                                           capacity_label=_(label), unit=state["unit"])))  # fmt: skip
        timeline = self.timeline() if mode == "none" else None
        if timeline is not None:
            figures.append(("memory-timeline", timeline_figure(timeline, ymax=state["timeline_ymax"],
                                                               peak_source=state["source"], unit=state["unit"],
                                                               heading=model)))  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, fig in figures:
            path = folder / f"{name}-N{n}.png"
            path.write_bytes(figure_png(fig))
            paths.append(str(path))
        self.saved_figures = [fig for _name, fig in figures]
        names = _(" and ").join(Path(p).name for p in paths)
        if folder.name == SAVE_FOLDER:
            text = _("saved {files} into {folder} (the course's .gitignore leaves this folder out of git)")
        else:
            text = _("saved {files} into {folder}")
        self.status.value = text.format(files=names, folder=folder)
        return paths

    def capacity_menu_label(self, index: int | None = None) -> str:
        """The capacity menu's entry ``index`` (default: the one chosen): its name and its one size, a card's usable
        GiB (``card_size``), a budget's own size (``"the budget, 32.0 MiB"``)."""
        name, mib = self.capacities[self.capacity_dropdown.value if index is None else index]
        if (self.capacity_dropdown.value if index is None else index) != self._budget_index:  # a card
            return card_label(name, mib)
        return f"{_(name)}, {format_mib(mib)}"

    def title_text(self) -> str:
        """The title over the bars: the model, and under data parallelism whose memory the bars show."""
        mode, world = self.parallel
        model = model_label(self.config)
        if mode == "none":
            return model
        return _("{model}; {mode} on {ranks} ranks: ONE rank's memory, predicted").format(
            model=model, mode=_(PARALLEL_LABELS[mode]), ranks=world
        )

    @property
    def config(self) -> StepConfig:
        """The configuration the controls select now."""
        return self.base.with_(
            width=self.width_slider.value,
            depth=self.depth_slider.value,
            optimizer=self.optimizer_buttons.value,
            precision=self.precision_buttons.value,
            effective_batch_size=self.batch_slider.value,
        )

    @property
    def capacity(self) -> tuple[str, float]:
        return self.capacities[self.capacity_dropdown.value]

    @property
    def parallel(self) -> tuple[str, int]:
        """``(data-parallel setting, world size)`` selected now (world size 1 without data parallelism)."""
        mode = self.parallel_dropdown.value
        return mode, 1 if mode == "none" else self.world_slider.value

    def _rows(self, config: StepConfig) -> tuple[list[StepMemory], list[StepMemory] | None]:
        return self.data.rows(config, *self.parallel)

    def _summary(self, config: StepConfig, n: int, rows: list[StepMemory]) -> dict[str, Any]:
        """``{"sentence", "fits", "smallest_accum_steps"}`` at N = ``n`` (``ExplorerState.summary``)."""
        return self.data.summary(config, n, rows, self.capacity, world_size=self.parallel[1])

    # -- drawing -------------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What the explorer shows now: the controls' values, the peak at the selected N and where it comes from
        (``"measured"``, ``"measured on fake tensors"``, ``"predicted"`` or ``None``), ``fits``,
        ``smallest_accum_steps``, the ``sentence`` text, the view's ``unit`` (``"MiB"`` or ``"GiB"``), the ``status``
        line, the timeline panel's ``timeline_*``, ``redraws`` and ``last_redraw_s``."""
        return dict(self._state)

    def redraw(self) -> None:
        """Recompute the sentence and the figure from cached numbers (never measures)."""

        start = time.perf_counter()
        config, n = self.config, self.accum_slider.value
        label, capacity = self.capacity
        mode, world = self.parallel
        self.world_slider.disabled = mode == "none"
        rows, predicted = self._rows(config)
        by_n = {r.accum_steps: r for r in rows}
        current = by_n.get(n)
        state: dict[str, Any] = {
            "accum_steps": n,
            "effective_batch_size": config.effective_batch_size,
            "micro_batch_size": config.effective_batch_size // (n * world),
            "width": config.width,
            "depth": config.depth,
            "optimizer": config.optimizer,
            "precision": config.precision,
            "parallel": mode,
            "world_size": world,
            "capacity_label": label,
            "capacity_mib": capacity,
            "peak_mib": current.peak_mib if current else None,
            "source": current.source if current else None,
            "unit": view_unit(rows),
            **self._summary(config, n, rows),  # sentence, fits, smallest_accum_steps
        }
        self.sentence.value = f"<span>{state['sentence']}</span>"
        self.title.value = f"<b>{html.escape(self.title_text())}</b>"
        self.status.value = state["status"] = self.data.notes.get(config, "")  # what Measure did for THIS configuration

        key = (config, label, capacity, tuple((r.accum_steps, r.method, r.fake, r.peak_mib) for r in rows))
        self.png = self.panels.bars_png(key, rows, predicted, selected=n, capacity_mib=capacity,
                                        capacity_label=_(label), unit=state["unit"])  # fmt: skip
        state["figure_alt"] = _("Bar chart: peak memory per accumulation step N, broken down by category. {sentence}"
                                ).format(sentence=state["sentence"])  # fmt: skip
        with self.figure:
            self.figure.clear_output(wait=True)
            show_image(self.png, state["figure_alt"])
        timeline = self.timeline() if mode == "none" else None  # timelines are of one process
        state["timeline_source"] = None if timeline is None else ("predicted" if timeline.predicted else "measured")
        state["timeline_teeth"] = None if timeline is None else timeline.teeth()
        state["timeline_ymax"] = timeline_ymax(rows)
        state["timeline_title"] = None if timeline is None else timeline_title(timeline, state["source"])
        if timeline is not None:
            state["timeline_note"] = ""
        elif mode != "none":
            state["timeline_note"] = _("No timeline with data parallelism: a timeline is one process's memory, "
                                       "operation by operation, and the bars now show one rank's prediction. Choose "
                                       "data parallel: none to see the timeline again.")  # fmt: skip
        else:
            state["timeline_note"] = _("No timeline yet for this model: press Measure (small models record one) or "
                                       "go back to a model already measured.")  # fmt: skip
        self.timeline_note.value = f"<i>{html.escape(state['timeline_note'])}</i>" if state["timeline_note"] else ""
        self.timeline_png = self._timeline_png(config, n, timeline, rows)
        with self.timeline_figure:
            # no timeline (a model not measured yet, data parallel): the panel empties at once instead of keeping
            # the previous model's timeline until the next image (what wait=True would do)
            self.timeline_figure.clear_output(wait=bool(self.timeline_png))
            if self.timeline_png:
                alt = _("Timeline: live memory after each operation of one optimizer step. {title}").format(
                    title=state["timeline_title"].replace("\n", ". ")
                )
                show_image(self.timeline_png, alt)
        self.redraws += 1
        self.last_redraw_s = time.perf_counter() - start
        state.update(redraws=self.redraws, last_redraw_s=self.last_redraw_s)
        self._state = state

    def static_view(self) -> Any:
        """The explorer as one picture (``explorer_draw.static_view_figure``), what a page without a kernel shows: the
        bars, and the sentence and timeline at the selected N and at one more N (the smallest N that fits, or N = 1
        when that is the selected one or none fits); ``None`` before anything is measured or with data parallelism."""
        config, n = self.config, self.accum_slider.value
        rows, predicted = self._rows(config)
        if not rows or self.parallel[0] != "none":
            return None
        other = self._summary(config, n, rows)["smallest_accum_steps"]
        other = other if other not in (None, n) else (1 if n != 1 else ACCUM_OPTIONS[1])
        views = {k: (self._summary(config, k, rows)["sentence"], self.timeline(k)) for k in (n, other)}
        label, capacity = self.capacity
        heading = _("{model}; capacity: {menu}").format(model=model_label(config), menu=self.capacity_menu_label())
        return static_view_figure(heading, rows, predicted, views, capacity_mib=capacity, capacity_label=_(label))

    def _timeline_png(self, config: StepConfig, n: int, timeline: StepTimeline | None, rows: list) -> bytes:
        """The timeline panel as PNG, drawn once per (configuration, N, y axis from ``rows``, source), then reused."""
        if timeline is None:
            return b""
        ymax, source = timeline_ymax(rows), next((r.source for r in rows if r.accum_steps == n), None)
        key = (config, n, timeline.predicted, timeline.peak_mib, ymax, source)
        return self.panels.timeline_png(key, timeline, ymax=ymax, peak_source=source, unit=view_unit(rows))

    # -- measuring ---------------------------------------------------------------------------------------------
    def measure(self, accum_steps: Sequence[int] | None = None) -> list[StepMemory]:
        """Measure the selected configuration behind the progress bar (``ExplorerState.measure``: the probe for the
        predictor, then one step per N in ``accum_steps``), cache the results and redraw; returns them. A failure is
        shown in the status line and raised."""

        def report(text: str, done: int, total: int) -> None:
            self.progress.max, self.progress.value = total, done
            if text:
                self.status.value = text

        self.progress.value = 0
        self.measure_button.disabled = True
        self.measure_runs += 1
        try:
            results = self.data.measure(self.config, accum_steps, report)
        except Exception:  # shown in the widget; the learner's kernel keeps running
            self.status.value = self.data.notes[self.config]
            raise
        finally:
            self.measure_button.disabled = False
        self.redraw()
        return results

    def _on_measure(self, button: Any) -> None:
        try:
            self.measure()
        except Exception:
            pass  # already shown in self.status

    def _ipython_display_(self) -> None:
        """The widget; on ipywidgets 8 with its picture (``static_view``) as ``image/png`` too, which a page without a
        kernel (GitHub, the course's website) shows, while JupyterLab's widget renderer outranks it (Colab's 7.7: the
        widget)."""
        from IPython.display import display

        bundle = (getattr(self.widget, "_repr_mimebundle_", None) or (lambda: None))()
        picture = self.static_view() if bundle else None
        png = {"image/png": base64.b64encode(figure_png(picture)).decode("ascii")} if picture else None
        display({**bundle, **png} if png else self.widget, raw=bool(png))
