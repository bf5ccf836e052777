"""What makes the memory explorer usable by everyone (issue 55): each control's tooltip, the names a screen reader
gives its sliders and button groups (``ARIA_SCRIPT``), and its panels shown with a text alternative (``show_image``).
``gradacc.memory.widgets.MemoryExplorer`` uses them; tests/test_browser.py reads the names back in a real browser and
drives the explorer with the keyboard only."""

from __future__ import annotations

import base64
import html

from ..i18n import N_

__all__ = ["TOOLTIPS", "ARIA_SCRIPT", "show_image"]


TOOLTIPS: dict[str, str] = {
    "accum_slider": N_("accumulation steps N: micro-batches per optimizer step (arrow keys move it)"),
    "batch_slider": N_("effective batch size in samples, shared by the N micro-batches (arrow keys move it)"),
    "width_slider": N_("the MLP's hidden width (arrow keys move it)"),
    "depth_slider": N_("the MLP's number of hidden layers (arrow keys move it)"),
    "optimizer_buttons": N_("the optimizer: SGD keeps no state, Adam two moments per parameter"),
    "precision_buttons": N_("fp32, or pure bf16: weights, gradients, optimizer state and activations in bfloat16"),
    "parallel_dropdown": N_("data parallelism: the bars become ONE rank's predicted memory"),
    "world_slider": N_("ranks sharing the effective batch (with data parallelism; arrow keys move it)"),
    "capacity_dropdown": N_("the memory the step must fit in: a card's usable memory or your budget"),
    "measure_button": N_("measure the model the sliders select: a probe for the predictor, then one step per N"),
    "save_button": N_("write both panels, with their titles and legends, as PNG files"),
}
"""Each control's tooltip (a ``title``, which a screen reader reads as its description), in the learner's language."""

ARIA_SCRIPT = """(() => {
  // ipywidgets 8.1 leaves a SelectionSlider's handle (role "slider") without an accessible name and with its index as
  // aria-valuetext ("3" for N = 8), and a ToggleButtons group without a name (jupyter-widgets/ipywidgets#2650). Inside
  // the memory explorer only: each handle is named by its visible label and says its value, each group is named by
  // its label and each button says whether it is pressed, the progress bar is one. Idempotent, and re-applied when
  // the explorer changes.
  if (window.__gradaccAria) { window.__gradaccAria(); return; }
  let ids = 0, queued = false;
  const set = (el, key, value) => { if (el.getAttribute(key) !== value) el.setAttribute(key, value); };
  const id = (label) => { if (!label.id) label.id = `gradacc-label-${ids++}`; return label.id; };
  const apply = () => {
    queued = false;
    for (const root of document.querySelectorAll(".gradacc-memory-explorer")) {
      // JupyterLab's command-mode shortcuts would take the keys a control needs (ArrowDown on a menu selects the next
      // cell, "d d" deletes it): Lumino leaves to an element marked so the keys pressed on it
      for (const control of root.querySelectorAll("select, button, .noUi-handle, .widget-readout"))
        set(control, "data-lm-suppress-shortcuts", "true");
      for (const box of root.querySelectorAll(".widget-slider")) {
        const label = box.querySelector(":scope > label"), handle = box.querySelector(".noUi-handle");
        const readout = box.querySelector(".widget-readout");
        if (!label || !handle) continue;
        set(handle, "aria-labelledby", id(label));
        set(handle, "aria-disabled", String(box.querySelector(".noUi-target[disabled]") !== null));
        if (readout) { set(handle, "aria-valuetext", readout.textContent); set(readout, "aria-labelledby", id(label)); }
      }
      for (const box of root.querySelectorAll(".widget-toggle-buttons")) {
        const label = box.querySelector(":scope > label"), group = box.querySelector(":scope > div");
        if (!label || !group) continue;
        set(group, "role", "group");
        set(group, "aria-labelledby", id(label));
        for (const b of group.querySelectorAll("button")) set(b, "aria-pressed", String(b.classList.contains("mod-active")));
      }
      for (const box of root.querySelectorAll(".widget-hprogress")) {
        const label = box.querySelector(":scope > label"), track = box.querySelector(".progress");
        const bar = box.querySelector(".progress-bar");
        if (!label || !track || !bar) continue;
        set(track, "role", "progressbar");
        set(track, "aria-labelledby", id(label));
        set(track, "aria-valuenow", String(Math.round(parseFloat(bar.style.width) || 0)));
        set(track, "aria-valuemin", "0");
        set(track, "aria-valuemax", "100");
      }
    }
  };
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(apply); } };
  window.__gradaccAria = apply;
  new MutationObserver(later).observe(document.body, {subtree: true, childList: true, characterData: true,
    attributes: true, attributeFilter: ["class", "style", "disabled", "aria-valuetext"]});
  apply();
})();"""
"""What names the explorer's sliders, button groups and progress bar for a screen reader, and keeps its controls' keys
from JupyterLab's command-mode shortcuts (Lumino's ``data-lm-suppress-shortcuts``: without it ArrowDown on a menu
selected the next cell), run once where the explorer is shown (an ``Output`` of its own, so that nothing is stored in
the notebook): ipywidgets 8.1.9 has no way to name them from Python (jupyter-widgets/ipywidgets#2650). The browser
test reads the names back and drives the explorer with the keyboard (tests/test_browser.py)."""


def show_image(png: bytes, alt: str) -> None:
    """Display a PNG with a text alternative (``alt``: what it shows, for a screen reader): one output holding an
    ``<img alt=...>`` as ``text/html``, which the front ends show, and the PNG itself as ``image/png`` (the same
    picture for a reader of the output's data; ``image/png`` alone has no place for an alternative text)."""
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is None:  # a script or a test: no front end to show it (display would print the whole bundle)
        return
    data = base64.b64encode(png).decode("ascii")
    tag = f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
    display({"text/html": tag, "image/png": data, "text/plain": alt}, raw=True)
