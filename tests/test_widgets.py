"""The memory explorer: cached redraws, the 'fits / smallest N' sentence, measuring behind the button, 7.7-safe API."""

from __future__ import annotations

import ast
import html
import inspect
import re

import pytest

import gradacc.memory.explorer_state as explorer_state
import gradacc.memory.widgets as widgets
from gradacc.memory import StepConfig, measure_config, profile_config, timeline_config
from gradacc.memory.plots import figure_png, fits_summary, format_mib
from gradacc.memory.widgets import ACCUM_OPTIONS, MemoryExplorer

DEFAULT = StepConfig()


@pytest.fixture(scope="module")
def cached():
    """The lesson's default setup at N = 1 and 8, counted on fake tensors (the same numbers as real ones, see
    test_memory.py), and its predictor profile."""
    measured = [measure_config(DEFAULT, n, fake=True) for n in (1, 8)]
    return measured, profile_config(DEFAULT, fake=True)


@pytest.fixture
def explorer(cached, monkeypatch):
    measured, profile = cached
    ex = MemoryExplorer(DEFAULT, 8, measurements=measured, profile=profile, capacity=("a 30 MiB budget", 30.0))
    calls = []

    def forbidden(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a slider move must not measure")

    monkeypatch.setattr(explorer_state, "measure_config", forbidden)  # what Measure calls (ExplorerState.measure)
    monkeypatch.setattr(explorer_state, "profile_config", forbidden)
    ex.forbidden_calls = calls
    return ex


def test_controls_the_browser_test_relies_on(explorer):
    assert "accumulation steps" in explorer.accum_slider.description
    assert list(explorer.accum_slider.options) == list(ACCUM_OPTIONS) == [1, 2, 4, 8, 16, 32, 64]
    assert "gradacc-fits" in explorer.sentence._dom_classes
    assert "gradacc-figure" in explorer.figure._dom_classes
    assert explorer.figure in explorer.widget.children and explorer.sentence in explorer.widget.children
    assert explorer.png.startswith(b"\x89PNG")


def test_the_display_carries_the_widget_and_its_picture(explorer, monkeypatch):
    """ipywidgets 8: one display message with the widget view (JupyterLab renders it) and the explorer's picture as a
    PNG (what GitHub and the course's website show: issue 35); without ``_repr_mimebundle_`` (Colab's 7.7) the widget
    alone. The picture (issue 45) has the bars with their legend, and the sentence and the timeline at the selected N
    and at the smallest N that fits, each text inside it, and says where the widget runs live."""
    import base64

    import IPython.display

    from gradacc.memory.explorer_draw import texts_outside

    explorer.accum_slider.value = 1  # does not fit in 30 MiB; N = 4 does
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append((obj, kw)))
    explorer._ipython_display_()
    ((bundle, options),) = shown
    picture = explorer.static_view()
    assert options == {"raw": True} and base64.b64decode(bundle["image/png"]) == figure_png(picture)
    texts = " ".join(t.get_text().replace("\n", " ") for t in picture.findobj(lambda a: hasattr(a, "get_text")))
    for n, verdict in ((1, "does not fit"), (4, "fits")):
        explorer.accum_slider.value = n
        assert explorer.state()["sentence"] in texts and verdict in explorer.state()["sentence"]
    assert "run live in JupyterLab, Colab or Binder" in texts and "capacity" in texts and texts_outside(picture) == []
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.widget.model_id
    monkeypatch.setattr(type(explorer.widget), "_repr_mimebundle_", None)
    shown.clear()
    explorer._ipython_display_()
    assert shown == [(explorer.widget, {"raw": False})]


def test_slider_move_redraws_from_the_cache_and_changes_sentence_and_figure(explorer):
    state = explorer.state()
    assert state["accum_steps"] == 8 and state["source"] == "measured on fake tensors"
    assert state["peak_mib"] == pytest.approx(19.64, abs=0.01)
    assert state["fits"] is True and state["smallest_accum_steps"] == 4
    png, sentence, redraws = explorer.png, explorer.sentence.value, state["redraws"]

    explorer.accum_slider.value = 1
    state = explorer.state()
    assert state["redraws"] == redraws + 1 and explorer.forbidden_calls == []
    assert state["peak_mib"] == pytest.approx(58.51, abs=0.01)
    assert state["fits"] is False and state["smallest_accum_steps"] == 4
    assert state["sentence"] == (
        "N = 1 (micro-batch 4096): peak 58.5 MiB (measured on fake tensors), does not fit in a 30 MiB budget. "
        "Smallest N that fits: 4."
    )
    assert explorer.sentence.value != sentence and explorer.png != png

    explorer.accum_slider.value = 64  # not measured: the predictor's number
    state = explorer.state()
    assert state["source"] == "predicted" and state["fits"] is True
    assert state["peak_mib"] == pytest.approx(15.64, abs=0.01)  # the optimizer step's peak
    assert explorer.measure_runs == 0


def test_capacity_and_model_controls(explorer):
    explorer.capacity_dropdown.value = 1  # the first card preset: the T4 (15,360 MiB)
    state = explorer.state()
    assert state["capacity_mib"] == 15_360 - 253.75 and state["smallest_accum_steps"] == 1
    explorer.width_slider.value = 1024  # not measured yet: says so, does not measure
    state = explorer.state()
    assert state["source"] is None and state["peak_mib"] is None
    assert "nothing measured yet" in state["sentence"] and "Press Measure" in state["sentence"]
    assert explorer.forbidden_calls == []


def test_measure_button_measures_behind_a_progress_bar(cached):
    measured, profile = cached
    ex = MemoryExplorer(DEFAULT, 4, measurements=measured, profile=profile)
    # a model too large for this machine: probed and measured on fake tensors
    ex.width_slider.value = 4096
    ex.batch_slider.value = 65536
    results = ex.measure(accum_steps=(1, 4))
    assert [r.accum_steps for r in results] == [1, 4] and all(r.fake for r in results)
    assert ex.progress.value == ex.progress.max == 3
    state = ex.state()
    assert state["source"] == "measured on fake tensors" and state["width"] == 4096
    ex.accum_slider.value = 8
    assert ex.state()["source"] == "predicted"
    # a small one runs for real (the live-storage counter on CPU)
    ex.width_slider.value, ex.batch_slider.value = 128, 256
    real = ex.measure(accum_steps=(2,))
    assert not real[0].fake and real[0].method in ("storages", "cuda")
    ex.accum_slider.value = 2
    assert ex.state()["source"] == "measured"
    assert ex.state()["timeline_source"] == "measured" and ex.state()["timeline_teeth"] == 2  # recorded with it


def test_timeline_panel_follows_the_slider_from_cached_numbers(explorer, cached, tmp_path):
    """Issue 17: under the bars, the selected N's timeline: predicted (pale) from the profile where none was measured,
    the measured one where given; a slider move redraws it without measuring; both panels save as PNG files."""
    state = explorer.state()
    assert (state["timeline_source"], state["timeline_teeth"]) == ("predicted", 8)
    assert "gradacc-timeline" in explorer.timeline_figure._dom_classes
    assert explorer.timeline_figure in explorer.widget.children and explorer.timeline_png.startswith(b"\x89PNG")
    png = explorer.timeline_png
    explorer.accum_slider.value = 2
    state = explorer.state()
    assert (state["timeline_source"], state["timeline_teeth"]) == ("predicted", 2)
    assert explorer.timeline_png != png and explorer.forbidden_calls == []
    predicted = explorer.timeline()
    assert predicted.peak_mib == pytest.approx(state["peak_mib"] if state["source"] == "predicted" else 37.64, abs=0.01)
    paths = explorer.save_png(str(tmp_path))
    assert [p.split("/")[-1] for p in paths] == ["memory-explorer-N2.png", "memory-timeline-N2.png"]
    assert all(open(p, "rb").read(4) == b"\x89PNG" for p in paths)

    measured, profile = cached
    two = timeline_config(DEFAULT, 2, fake=True)
    ex = MemoryExplorer(DEFAULT, 2, measurements=measured, profile=profile, timelines=[two])
    assert ex.state()["timeline_source"] == "measured" and ex.timeline() is two
    with pytest.raises(ValueError, match="does not belong"):
        MemoryExplorer(DEFAULT, 2, timelines=[timeline_config(DEFAULT.with_(effective_batch_size=256), 2, fake=True)])


def test_fits_summary_values_and_errors():
    peaks = {1: 300.0, 2: 150.0, 4: 90.0, 8: 60.0}
    out = fits_summary(peaks, 2, 100.0, "a 100 MiB card", micro_batch_size=64, source="measured")
    assert out == {
        "fits": False,
        "smallest_accum_steps": 4,
        "text": "N = 2 (micro-batch 64): peak 150.0 MiB (measured), does not fit in a 100 MiB card. "
        "Smallest N that fits: 4.",
    }
    none = fits_summary(peaks, 8, 50.0, persistent_mib=55.0, micro_batch_size=8, source="predicted")
    assert none["smallest_accum_steps"] is None and none["fits"] is False
    assert none["text"].endswith("No N up to 8 fits: parameters, gradients and optimizer state alone need 55.0 MiB.")
    assert fits_summary(peaks, 8, 50.0, micro_batch_size=8, source="predicted")["text"].endswith("No N up to 8 fits.")
    assert format_mib(2048.0) == "2.0 GiB" and format_mib(19.64) == "19.6 MiB"
    with pytest.raises(ValueError, match="budget_mib must be a positive number of MiB, got -1"):
        fits_summary(peaks, 2, -1, micro_batch_size=64, source="measured")
    with pytest.raises(ValueError, match="accum_steps=3 has no peak"):
        fits_summary(peaks, 3, 100, micro_batch_size=64, source="measured")


def test_bad_explorer_arguments():
    with pytest.raises(ValueError, match=r"accum_steps=3 is not one of the explorer's options"):
        MemoryExplorer(DEFAULT, 3)
    with pytest.raises(ValueError, match=r"width=300 is not one of the explorer's options"):
        MemoryExplorer(DEFAULT.with_(width=300), 8)
    with pytest.raises(ValueError, match="offers optimizers 'sgd' and 'adam', got 'momentum'"):
        MemoryExplorer(DEFAULT.with_(optimizer="momentum"), 8)
    with pytest.raises(ValueError, match="budget_mib must be a positive number"):
        MemoryExplorer(DEFAULT, 8, capacity=("nothing", -5.0))


# The controls ipywidgets 7.7.1 (Colab) has; tooltips and Stack/TagsInput etc. are 8-only.
IPYWIDGETS_77 = {
    "SelectionSlider",
    "ToggleButtons",
    "Dropdown",
    "Button",
    "IntProgress",
    "HTML",
    "Output",
    "VBox",
    "HBox",
}


def test_widgets_use_only_what_ipywidgets_7_7_has():
    tree = ast.parse(inspect.getsource(widgets))
    used = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "w"
    }
    assert used and used <= IPYWIDGETS_77, used - IPYWIDGETS_77
    keywords = {kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords}
    assert "tooltip" not in keywords and "tooltips" not in keywords


def test_capacity_is_what_a_process_can_allocate(monkeypatch):
    """Presets: each card's nvidia-smi total minus the CUDA context; a GPU runtime: the free memory after the context
    plus what this process's caching allocator reserved (a stand-in CUDA here: the real call runs in
    tests/gpu_check.sh)."""
    import types

    import torch

    from gradacc.memory.capacity import CARD_TOTAL_MIB
    from gradacc.memory.widgets import CAPACITY_PRESETS, CUDA_CONTEXT_MIB, gpu_capacity

    assert CUDA_CONTEXT_MIB == 253.75  # pytorch/pytorch#86509's 287,047,680 bytes less its 20 MiB segment
    assert CARD_TOTAL_MIB["T4 (Colab's GPU)"] == 15_360 < 16 * 1024  # a "16 GB" card's real total
    assert [round(mib) for _, mib in CAPACITY_PRESETS] == [15106, 22774, 22780, 40706, 81666, 81305, 143517]
    assert CAPACITY_PRESETS[0][0] == "T4 (Colab's GPU)"  # the menu gives its one size: test_one_size_per_card
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (15 * 2**30, 16 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(name="Stand-in T4"))
    label, mib = gpu_capacity()
    assert mib == 16 * 1024.0  # 15 GiB free + 1 GiB this process already reserved
    assert label == "this GPU, Stand-in T4"  # its size is the capacity: free or reserved by this process


def test_the_data_parallel_choice_shows_one_ranks_predicted_memory(explorer, cached):
    """Issue 16: DDP / FSDP on W ranks turns the bars into one rank's prediction (``predict_parallel``); FSDP with
    the sync every micro-step needs the least, the boundary setting more, DDP the most; no measuring on the way."""
    from gradacc.memory import predict_parallel
    from gradacc.memory.parallel import largest_unit_bytes

    _, profile = cached
    alone = explorer.state()["peak_mib"]
    assert explorer.world_slider.disabled
    peaks = {}
    for mode in ("DDP", "FSDP, sync at the boundary", "FSDP, sync each micro-step"):
        explorer.parallel_dropdown.value = mode
        explorer.world_slider.value = 8
        state = explorer.state()
        assert state["parallel"] == mode and state["world_size"] == 8 and state["source"] == "predicted"
        assert state["micro_batch_size"] == DEFAULT.effective_batch_size // (8 * 8)
        assert "ONE rank" in explorer.title.value and not explorer.world_slider.disabled
        assert state["timeline_source"] is None  # the timeline panel is one process's
        peaks[mode] = state["peak_mib"]
    unit = largest_unit_bytes(DEFAULT.build_model())
    want = predict_parallel(profile, DEFAULT.effective_batch_size, 8, world_size=8, mode="FSDP, sync each micro-step",
                            largest_unit_bytes=unit).peak_mib  # fmt: skip
    assert peaks["FSDP, sync each micro-step"] == pytest.approx(want)
    print({m: round(v, 2) for m, v in peaks.items()}, "one process:", round(alone, 2))
    assert peaks["FSDP, sync each micro-step"] < peaks["FSDP, sync at the boundary"] < peaks["DDP"]
    explorer.batch_slider.value = 256
    explorer.accum_slider.value = 64  # 64 x 8 ranks does not divide 256 samples
    assert "does not divide" in explorer.state()["sentence"]
    explorer.parallel_dropdown.value = "none"
    assert explorer.world_slider.disabled and explorer.state()["world_size"] == 1
    assert explorer.forbidden_calls == []


def test_timeline_panels_share_one_y_axis_and_say_where_the_peak_comes_from(explorer):
    """Issue 30: the teeth of different N compare only on one y axis; where the bars' peak is measured and the
    timeline predicted, the timeline's title says both."""
    seen = []
    for n in ACCUM_OPTIONS:
        explorer.accum_slider.value = n
        state = explorer.state()
        seen.append((n, state["source"], state["timeline_source"], state["timeline_ymax"], state["timeline_title"]))
    assert len({ymax for *_, ymax, _ in seen}) == 1, seen
    mixed = [row for row in seen if row[1].startswith("measured") and row[2] == "predicted"]
    assert mixed, seen  # the fixture measured bars (on fake tensors) where no timeline was recorded
    for n, source, _, _, title in mixed:
        assert title.endswith(f"timeline predicted from the profile; the bar: {source}"), (n, title)
    assert all("the bar:" not in title for _, source, tl, _, title in seen if source == tl)


BIG = StepConfig(width=8192, depth=16, effective_batch_size=65536)  # lesson 03's large model (issue 45)


@pytest.fixture(scope="module")
def big_explorer(cached):
    """The lesson's explorer (default model, N = 2, a 32 MiB budget) after Measure on the large model at N = 1 and 4
    (fake tensors: too large to run here), then back on the default model."""
    measured, profile = cached
    ex = MemoryExplorer(DEFAULT, 2, measurements=measured, profile=profile, capacity=32.0)  # as lesson 03 opens it
    ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = 8192, 16, 65536
    before = {"png": ex.timeline_png, "state": ex.state()}
    ex.measure(accum_steps=(1, 4))
    after = {"status": ex.status.value, "state": ex.state()}
    return ex, before, after


def _panels(ex) -> tuple:
    """The bar chart and the timeline panel the explorer shows now, as matplotlib figures."""
    from gradacc.memory.explorer_draw import timeline_figure

    state, timeline = ex.state(), ex.timeline()
    figure = timeline_figure(timeline, ymax=state["timeline_ymax"], peak_source=state["source"], unit=state["unit"])
    return ex.panels.last_bars, figure


def test_every_text_fits_in_its_panel_at_every_n_and_one_unit_per_view(big_explorer):
    """Issue 45, items 1 and 4: no title, label or annotation runs off either panel at any N, on the lesson's model
    and on the large one; the large one's bars, timeline and sentence are all in GiB, each axis labelled."""
    from gradacc.memory.explorer_draw import texts_outside

    ex, _, _ = big_explorer
    # every N of the lesson's model; the large one's measured N and its largest (the title's longest numbers)
    for width, depth, batch, unit, ns in ((8192, 16, 65536, "GiB", (1, 4, 64)), (512, 4, 4096, "MiB", ACCUM_OPTIONS)):
        ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = width, depth, batch
        for n in ns:
            ex.accum_slider.value = n
            state = ex.state()
            bars, timeline = _panels(ex)
            assert texts_outside(bars) == [] and texts_outside(timeline) == [], (width, n, state["timeline_title"])
            assert state["unit"] == unit and bars.axes[0].get_ylabel() == f"peak memory ({unit})"
            assert timeline.axes[0].get_ylabel() == f"live memory ({unit})"
            assert timeline.axes[0].get_ylim()[1] < 100  # GiB drawn as GiB, not 60000 MiB
            numbers = re.findall(r"\d[\d,.]* (MiB|GiB)", state["sentence"])  # the capacity's name included
            assert numbers and set(numbers) == {unit}, state["sentence"]


def test_predicted_timelines_show_the_optimizer_step_and_the_peak_inside_the_frame(explorer, cached):
    """Issue 45, item 2: a predicted timeline has the optimizer.step() operations the profile recorded (about as many
    as a measured step has), its peak is predict_step's, and its peak marker lies inside the axes at every N."""
    from gradacc.memory import predict_step
    from gradacc.memory.explorer_draw import timeline_figure

    _, profile = cached
    measured = timeline_config(DEFAULT, 1, fake=True)
    measured_step = measured.operations - measured.event_index("optimizer step")
    for n in (4, 16, 32, 64):
        explorer.accum_slider.value = n
        timeline = explorer.timeline()
        step = timeline.operations - timeline.event_index("optimizer step")
        assert timeline.predicted and step == len(profile.timeline_step) + 1  # + zero_grad
        assert abs(step - measured_step) <= 0.05 * measured_step, (step, measured_step)  # as wide as the measured step
        assert timeline.peak_mib == pytest.approx(predict_step(profile, DEFAULT.effective_batch_size, n).peak_mib)
        ax = timeline_figure(timeline, ymax=explorer.state()["timeline_ymax"]).axes[0]
        x, _ = ax.transData.transform((timeline.peak_index, timeline.peak_mib))
        assert ax.bbox.x0 + 4 <= x <= ax.bbox.x1 - 4, (n, x, ax.bbox)  # the marker's half width is 3.5 px
    assert measured_step > 10  # Adam's step is tens of operations, not one point


def test_no_stale_text_or_figure_after_changing_the_model(big_explorer):
    """Issue 45, item 3: before Measure, a new model has no timeline (the panel empties) and no status line; after it,
    the status line describes that model, and back on the default model it is gone."""
    ex, before, after = big_explorer
    assert before["png"] == b"" and before["state"]["timeline_source"] is None and before["state"]["status"] == ""
    assert "nothing measured yet for mlp, width 8192, depth 16" in before["state"]["sentence"]
    assert after["status"].startswith("measured N = 1, 4 on fake tensors") and after["state"]["width"] == 8192
    ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = 512, 4, 4096
    state = ex.state()
    assert state["status"] == ex.status.value == "" and state["timeline_source"] == "predicted"
    ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = 8192, 16, 65536
    assert ex.status.value == after["status"]  # its own line comes back with it


def test_legend_names_the_capacity_line_and_png_files_go_to_an_ignored_folder(explorer, tmp_path, monkeypatch):
    """Issue 45, items 5 and 6: the dotted capacity line has a legend entry; Save PNGs writes into SAVE_FOLDER under
    the notebook's folder, which git ignores, and says where."""
    import subprocess

    from conftest import ROOT

    from gradacc.memory.widgets import SAVE_FOLDER

    assert "capacity" in explorer.legend.value
    monkeypatch.chdir(tmp_path)
    paths = explorer.save_png()
    assert [p.split("/")[-2:] for p in paths] == [[SAVE_FOLDER, "memory-explorer-N8.png"],
                                                  [SAVE_FOLDER, "memory-timeline-N8.png"]]  # fmt: skip
    assert explorer.status.value.startswith("saved memory-explorer-N8.png and memory-timeline-N8.png into ")
    assert str(tmp_path / SAVE_FOLDER) in explorer.status.value and ".gitignore" in explorer.status.value
    ignored = subprocess.run(["git", "check-ignore", "-q", f"lessons/{SAVE_FOLDER}/memory-explorer-N8.png"], cwd=ROOT)
    assert ignored.returncode == 0, "lessons/saved-figures/ is not ignored by git"


# -- issue 55, items 7-10, and its accessibility part; issue 54: the explorer in Portuguese ---------------------------


def _bars_drawn(fig) -> dict:
    """What the bar chart draws: each filled bar's alpha, and the peak dots (filled or hollow) by face colour."""
    ax = fig.axes[0]
    alphas = {round(p.get_alpha() or 1.0, 2) for p in ax.patches if p.get_fill()}
    dots = [line.get_markerfacecolor() for line in ax.get_lines() if line.get_marker() == "o"]
    return {"alphas": alphas, "dots": dots}


def test_data_parallel_is_drawn_as_predicted_and_the_timeline_says_why_it_is_gone(explorer):
    """Issue 55, item 7: under DDP or FSDP the bars are one rank's prediction: pale, with no measured dot, as the
    legend says (they were solid with filled dots); the timeline panel, which shows one process, is replaced by a
    sentence saying why and how to get it back (it vanished without a word)."""
    assert _bars_drawn(explorer.panels.last_bars)["dots"]  # one process: the fixture's measured N have dots
    for mode in ("DDP", "FSDP, sync each micro-step"):
        explorer.parallel_dropdown.value = mode
        drawn = _bars_drawn(explorer.panels.last_bars)
        assert drawn == {"alphas": {0.35}, "dots": []}, (mode, drawn)
    explorer.parallel_dropdown.value = "none"
    assert explorer.state()["timeline_note"] == "" and explorer.timeline_note.value == ""
    for mode in ("DDP", "FSDP, sync each micro-step"):
        explorer.parallel_dropdown.value = mode
        state = explorer.state()
        assert state["source"] == "predicted" and state["timeline_source"] is None and explorer.timeline_png == b""
        assert "No timeline with data parallelism" in state["timeline_note"] and "data parallel: none" in state[
            "timeline_note"]  # fmt: skip
        assert explorer.timeline_note.value == f"<i>{html.escape(state['timeline_note'])}</i>"
    explorer.parallel_dropdown.value = "none"
    assert explorer.state()["timeline_note"] == "" and explorer.timeline_png
    explorer.width_slider.value = 1024  # a model not measured yet: no timeline, and the panel says so
    assert explorer.state()["timeline_note"].startswith("No timeline yet for this model: press Measure")


def test_one_size_per_card_and_one_unit_per_view(big_explorer):
    """Issue 55, item 8: the A10G was "23,028 MiB (22.2 GiB usable)" inside a sentence in GiB, and the T4 had three
    sizes. Each menu entry now gives one size (a card's usable GiB, a budget its own), and the sentence names the card
    without a size of its own: every number of the view is in the view's unit."""
    ex, _, _ = big_explorer
    menu = [label for label, _ in ex.capacity_dropdown.options]
    assert menu[:3] == ["the budget, 32.0 MiB", "T4 (Colab's GPU), 14.8 GiB usable", "A10G, 22.2 GiB usable"]
    assert all(len(re.findall(r"\d[\d,.]* (?:MiB|GiB)", label)) == 1 for label in menu), menu
    ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = 8192, 16, 65536
    ex.capacity_dropdown.value = menu.index("A10G, 22.2 GiB usable")
    ex.accum_slider.value = 4
    sentence = ex.state()["sentence"]
    assert re.findall(r"\d[\d,.]* (MiB|GiB)", sentence) == ["GiB"], sentence
    assert "does not fit in A10G." in sentence or "fits in A10G." in sentence, sentence
    ex.width_slider.value, ex.depth_slider.value, ex.batch_slider.value = 512, 4, 4096  # a MiB view, a GiB card
    state = ex.state()
    assert set(re.findall(r"\d[\d,.]* (MiB|GiB)", state["sentence"])) == {"MiB"} and state["unit"] == "MiB"
    ex.capacity_dropdown.value = 0


def test_legend_items_do_not_wrap_and_the_optimizer_step_line_is_named(explorer):
    """Issue 55, item 9: each legend item is one unbreakable piece ("- - predicted" / "peak" wrapped inside one);
    the line at the start of optimizer.step() in the timeline panel is named in a legend of its own under the panel
    and drawn dash-dot (it was an unnamed dashed line, read as a predicted peak, the bars' dashes); "ranks" keeps a gap
    from its menu."""
    from gradacc.memory.explorer_draw import legend_items, timeline_figure, timeline_legend_items

    for widget, items in ((explorer.legend, legend_items()), (explorer.timeline_legend, timeline_legend_items())):
        spans = re.findall(r'<span class="gradacc-legend-item" style="white-space:nowrap[^"]*">', widget.value)
        assert len(spans) == len(items) and all(text in widget.value for _, text in items)
    assert len(legend_items()) == 11 and "optimizer.step() starts" in explorer.timeline_legend.value
    assert explorer.timeline_legend in explorer.widget.children
    timeline, state = explorer.timeline(), explorer.state()
    fig = timeline_figure(timeline, ymax=state["timeline_ymax"], peak_source=state["source"])
    (step,) = [line for line in fig.axes[0].get_lines() if line.get_label() == "optimizer.step() starts"]
    assert step.get_linestyle() == "-." and step.get_xdata()[0] == timeline.event_index("optimizer step")
    dashed = [line for line in explorer.panels.last_bars.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [line.get_label() for line in dashed] == ["predicted peak"]  # the bars' dashes are the prediction only
    picture = explorer.static_view()  # a page without a kernel: its legend names the timelines' lines too
    legend = [t.get_text() for t in picture.axes[0].get_legend().get_texts()]
    assert {"a micro-step starts", "optimizer.step() starts"} <= set(legend)
    assert explorer.world_slider.layout.margin == "0 0 0 24px"


def test_saved_pngs_explain_themselves(explorer, tmp_path):
    """Issue 55, item 10: Save PNGs wrote the bare panels (no title, no legend). Each file now has a heading (the
    model; for the bars the capacity and the sentence too) and a legend, every text inside the picture."""
    import matplotlib.image

    from gradacc.memory.explorer_draw import texts_outside

    explorer.accum_slider.value = 2
    paths = explorer.save_png(tmp_path)
    bars, timeline = explorer.saved_figures
    state = explorer.state()
    heading = bars.texts[0].get_text()
    assert "mlp, width 512, depth 4" in heading and "capacity: a 30 MiB budget, 30.0 MiB" in heading
    assert " ".join(state["sentence"].split()) in " ".join(heading.split())
    legend = [t.get_text() for t in bars.axes[0].get_legend().get_texts()]
    assert {"parameters", "optimizer state", "activations", "measured peak (fake tensors)", "predicted peak",
            "capacity", "pale bars: predicted"} <= set(legend), legend  # fmt: skip
    assert "mlp, width 512, depth 4" in timeline.texts[0].get_text()
    legend = [t.get_text() for t in timeline.axes[0].get_legend().get_texts()]
    assert {"parameters", "gradients", "a micro-step starts", "optimizer.step() starts"} <= set(legend), legend
    assert texts_outside(bars) == [] and texts_outside(timeline) == []
    assert [matplotlib.image.imread(p).shape[1] for p in paths] == [980, 980]  # wider than the 700 px panels


def _visible_texts(ex) -> dict[str, str]:
    """Every text the explorer shows a learner, by where: the controls' labels, options and tooltips, the HTML
    lines, the alternative texts, and the texts of both panels and of a saved figure."""
    texts = {}
    for name in ("accum_slider", "batch_slider", "width_slider", "depth_slider", "optimizer_buttons",
                 "precision_buttons", "parallel_dropdown", "world_slider", "capacity_dropdown", "measure_button",
                 "save_button", "progress"):  # fmt: skip
        control = getattr(ex, name)
        texts[f"{name}.description"] = control.description
        texts[f"{name}.tooltip"] = control.tooltip or ""
        if hasattr(control, "_options_labels") and "slider" not in name:
            texts.update({f"{name}.option{i}": o for i, o in enumerate(control._options_labels)})
    for name in ("sentence", "title", "legend", "timeline_note"):
        texts[name] = re.sub(r"<[^>]+>", " ", getattr(ex, name).value)
    state = ex.state()
    texts.update(figure_alt=state["figure_alt"], timeline_title=state["timeline_title"] or "")
    figures = {
        "bars": ex.panels.last_bars,
        **dict(zip(("saved bars", "saved timeline"), ex.saved_figures, strict=True)),
    }
    for where, fig in figures.items():
        for i, t in enumerate(fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible())):
            texts[f"{where} text {i}"] = t.get_text()
    return texts


# Words of the explorer that stay as they are in Portuguese: names, code, units
KEPT = {"N", "SGD", "Adam", "DDP", "FSDP", "MiB", "GiB", "mlp", "fp32", "bf16", "Colab", "T4", "A10G", "L4", "A100",
        "H100", "H200", "HBM3", "GB", "optimizer.step()", "PNG", "PNGs", "x", "ranks"}  # fmt: skip


def test_the_explorer_speaks_portuguese_in_the_pt_br_edition(cached, tmp_path):
    """Issue 54: in the pt-BR edition (``set_language("pt_BR")``, as its notebooks' setup cell does) every label,
    menu, tooltip, header, sentence, legend and figure text of the explorer is Portuguese: an English explorer and a
    Portuguese one side by side, each text compared; what stays the same is only names, numbers and code."""
    from gradacc import i18n

    measured, profile = cached
    shown = {}
    for lang in ("en", "pt_BR"):
        i18n.set_language(lang)
        try:
            ex = MemoryExplorer(DEFAULT, 1, measurements=measured, profile=profile, capacity=30.0)
            ex.save_png(tmp_path / lang)
            shown[lang] = _visible_texts(ex)
        finally:
            i18n.set_language(None)
    english, portuguese = shown["en"], shown["pt_BR"]
    assert english.keys() == portuguese.keys()
    words = re.compile(r"[A-Za-z][A-Za-z0-9.()']*")
    same = {k: v for k, v in english.items() if portuguese[k] == v and set(words.findall(v)) - KEPT}
    assert same == {}, same
    assert portuguese["accum_slider.description"] == "passos de acumulação"
    assert portuguese["sentence"].strip().startswith("N = 1 (microlote 4096): pico 58.5 MiB (medido em tensores")
    assert "não cabe" in portuguese["sentence"] and "Salvar PNGs" == portuguese["save_button.description"]
