"""Colab: what a notebook does there, and the memory explorer on the ipywidgets Colab ships (7.7.1).

* Setup cells: run for real in an IPython shell, once with a ``google.colab`` module present and once without, with the
  ``%pip`` magic recorded instead of executed: on Colab the cell installs exactly the course package from the configured
  repository; elsewhere it does nothing at all.
* The memory explorer: Colab's kernel has ipywidgets 7.7.1, the course's .venv has 8.x. ipywidgets 7.7.1 (and
  ipython_genutils, which only 7.x imports) is installed into a throwaway folder (cached under build/test-cache/) that is
  put first on the kernel's ``PYTHONPATH``, so torch, matplotlib and the rest are not reinstalled; a real Jupyter kernel
  builds the explorer there, moves its accumulation-steps slider and the test asserts the figure and the sentence change.
  What this does not reproduce: Colab's own front end and its Python 3.13 / IPython 7.34 (the kernel here is the .venv's
  Python 3.11 and ipykernel); the package's ranges admitting Colab's versions are tested in test_packaging.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from colab_replica import ipywidgets_target
from conftest import ROOT, record_measurement
from packaging.requirements import Requirement

from gradacc.course.badges import BADGES_ID, read_repository
from gradacc.course.environment import EXTRAS
from gradacc.course.translation.units import strip_comments

NOTEBOOKS = sorted(
    p
    for folder in ("lessons", "solutions", "exercises", "pt-BR/lessons", "pt-BR/solutions", "pt-BR/exercises")
    for p in (ROOT / folder).glob("*.ipynb")
    if not p.name.startswith(".")
)
"""Every notebook a Colab badge opens: the English ones and the Brazilian Portuguese edition's (``pt-BR/``)."""
GUARD = 'if "google.colab" in sys.modules:'


def _setup_cell(nb) -> str:
    cells = [c.source for c in nb.cells if c.cell_type == "code" and GUARD in c.source]
    assert len(cells) == 1, f"expected one setup cell with `{GUARD}`, found {len(cells)}"
    return cells[0]


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def _run_setup(shell, source: str, on_colab: bool, pip_fails: bool = False):
    """Run a setup cell with pip recorded instead of run (``subprocess.run`` of ``python -m pip``); returns (the pip
    commands, the names the cell defined, the error it raised or None)."""
    calls: list[list[str]] = []
    real_run = subprocess.run

    def fake_run(args, *rest, **kwargs):
        if list(args[1:3]) != ["-m", "pip"]:
            return real_run(args, *rest, **kwargs)
        calls.append(list(args))
        stderr = "ERROR: Could not find a version that satisfies the requirement (network unreachable)\n"
        return subprocess.CompletedProcess(args, 1 if pip_fails else 0, "", stderr if pip_fails else "")

    saved = {name: sys.modules.get(name) for name in ("google", "google.colab")}
    if on_colab:
        google = sys.modules.get("google") or types.ModuleType("google")
        sys.modules["google"], sys.modules["google.colab"] = google, types.ModuleType("google.colab")
    subprocess.run = fake_run
    try:
        before = set(shell.user_ns)
        result = shell.run_cell(source, store_history=False)
        new_names = set(shell.user_ns) - before - {"_", "__", "___"}
    finally:
        subprocess.run = real_run
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    error = result.error_in_exec
    return calls, sorted(n for n in new_names if not n.startswith("_")), error


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_setup_cell_installs_the_course_on_colab_and_nothing_elsewhere(path: Path, shell, capsys):
    """The same install everywhere; a pt-BR notebook (its Colab badge opens ``pt-BR/...``) then sets the language in
    the first cell that imports gradacc, after the install: where the English notebook's imports run on Colab."""
    repo = read_repository(ROOT / "pyproject.toml")
    nb = nbformat.read(path, as_version=4)
    source = _setup_cell(nb)
    where = path.relative_to(ROOT).as_posix()
    badges = next(c.source for c in nb.cells if c.get("id") == BADGES_ID)
    assert f"colab.research.google.com/github/{repo.owner}/{repo.name}/blob/{repo.branch}/{where})" in badges
    language = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "set_language(" in c.source]
    if where.startswith("pt-BR/"):
        install = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and GUARD in c.source)
        first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "gradacc" in strip_comments(c.source)
                     and i != install)  # fmt: skip
        assert language == [first] and install < first, (install, language)
        assert nb.cells[first].source.startswith('from gradacc.i18n import set_language\n\nset_language("pt_BR")')
    else:
        assert language == []

    calls, _, error = _run_setup(shell, source, on_colab=True)
    assert error is None and len(calls) == 1, (calls, error)
    args = [a for a in calls[0][3:] if not a.startswith("-")]
    assert args[0] == "install" and len(args) == 2, calls[0]
    requirement = Requirement(args[1])
    # lessons 10-12 also install TRL, Lightning, Opacus and MLX, which Colab lacks (pyproject's `stacks` extra)
    extras = {"libs", "stacks"} if path.name[:2] in EXTRAS["stacks"][1] else {"libs"}
    assert requirement.name == "gradacc" and requirement.extras == extras
    assert requirement.url == f"git+{repo.url}", "run `gradacc badges`: it points the install line at the repository"
    said = "pacote do curso instalado; não é preciso reiniciar" if where.startswith("pt-BR/") else None  # issue 54
    assert capsys.readouterr().out == (said or "installed the course package; no restart needed") + "\n"

    calls, names, error = _run_setup(shell, source, on_colab=False)
    assert calls == [] and error is None, "the setup cell installs something outside Colab"
    assert "google" not in " ".join(names)


def test_a_failed_install_stops_the_setup_cell_with_one_line(shell):
    """Offline, or GitHub down: the cell raises at once with pip's last line, instead of printing pip's error and
    carrying on to an import that fails far away."""
    source = _setup_cell(nbformat.read(ROOT / "lessons" / "02_pytorch.ipynb", as_version=4))
    calls, _, error = _run_setup(shell, source, on_colab=True, pip_fails=True)
    assert len(calls) == 1 and isinstance(error, RuntimeError)
    assert str(error) == (
        "installing the course failed: ERROR: Could not find a version that satisfies the requirement (network "
        "unreachable)"
    )


def test_setup_cell_check_fails_a_cell_that_installs_everywhere(shell):
    """The check above really discriminates: an unguarded install is seen outside Colab."""
    cell = 'import subprocess, sys\nsubprocess.run([sys.executable, "-m", "pip", "install", "gradacc"])'
    calls, _, _ = _run_setup(shell, cell, on_colab=False)
    assert calls == [[sys.executable, "-m", "pip", "install", "gradacc"]]


BUILD = """
import json
from gradacc.memory import StepConfig, predict_step, profile_config
from gradacc.memory.widgets import MemoryExplorer

config = StepConfig(width=128, depth=2, effective_batch_size=256)
profile = profile_config(config, fake=True)
peak_1, peak_8 = (predict_step(profile, 256, n).peak_mib for n in (1, 8))
assert peak_8 < peak_1, (peak_1, peak_8)  # activations dominate this step: a smaller micro-batch needs less
# a "card" between the two: the step does not fit at N = 1 and fits at N = 8
explorer = MemoryExplorer(config, accum_steps=1, profile=profile, capacity=("a tiny card", (peak_1 + peak_8) / 2))
explorer
"""
MOVE = """
import base64

def shown_png():
    images = [o["data"]["image/png"] for o in explorer.figure.outputs if "image/png" in o.get("data", {})]
    return base64.b64decode(images[-1]) if images else None

first = {"state": explorer.state(), "png": explorer.png, "shown_is_png": shown_png() == explorer.png}
explorer.accum_slider.value = 8  # what moving the slider does: the front end sets the value, observers redraw
moved = {"state": explorer.state(), "png": explorer.png}
explorer.optimizer_buttons.value = "sgd"  # ToggleButtons, as 7.7.1 has them
sgd = explorer.state()
"""
# comm messages from the front end are handled between cells: the Output widget's synced outputs are read in a later one
REPORT = """
import ipywidgets
print(json.dumps({
    "ipywidgets": ipywidgets.__version__, "ipywidgets_file": ipywidgets.__file__,
    "slider": type(explorer.accum_slider).__name__, "description": explorer.accum_slider.description,
    "sentence_classes": explorer.sentence._dom_classes, "figure_classes": explorer.figure._dom_classes,
    "first": first["state"], "moved": moved["state"], "sgd": sgd,
    "png_changed": first["png"] != moved["png"], "first_shown": first["shown_is_png"],
    "latest_shown": shown_png() == explorer.png, "redraws": explorer.redraws,
}, default=str))
"""


def _timing(nb, started) -> str:
    """Where an nbclient run's time went: kernel start (until the first cell starts), then each cell (busy to reply),
    seconds, from the timestamps nbclient records in each cell's ``metadata.execution``."""
    marks = [cell.metadata["execution"] for cell in nb.cells]
    busy = [datetime.fromisoformat(m["iopub.status.busy"].replace("Z", "+00:00")) for m in marks]
    done = [datetime.fromisoformat(m["shell.execute_reply"].replace("Z", "+00:00")) for m in marks]
    cells = ", ".join(f"{(d - b).total_seconds():.1f}" for b, d in zip(busy, done, strict=True))
    return f"kernel up after {(busy[0] - started).total_seconds():.1f} s; cells {cells} s"


@pytest.mark.slow
def test_memory_explorer_on_colabs_ipywidgets(monkeypatch):
    """The explorer in a real kernel on ipywidgets 7.7.1: built, the accumulation-steps slider moved, figure and
    "fits / smallest N" sentence redrawn, and the new figure delivered through the Output widget to the client."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    made = time.perf_counter()
    target = ipywidgets_target()
    made = time.perf_counter() - made
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nb = new_notebook(cells=[new_code_cell(BUILD), new_code_cell(MOVE), new_code_cell(REPORT)])
    # nbclient plays the front end here: it keeps Output widgets' outputs and syncs them back to the kernel. Its
    # limits (kernel start 120 s, each cell 120 s; the cells took 3-21 s on a loaded machine) end a stuck run with
    # nbclient's own error inside pytest-timeout's 600 s, instead of a worker killed with its remaining tests.
    started = datetime.now(timezone.utc)
    NotebookClient(nb, kernel_name="python3", timeout=120, startup_timeout=120).execute()
    record_measurement(
        f"Colab's ipywidgets explorer test: its ipywidgets folder in {made:.1f} s; {_timing(nb, started)}"
    )
    view = nb.cells[0].outputs[-1]["data"]
    assert view["application/vnd.jupyter.widget-view+json"]["version_major"] == 2  # ipywidgets 7's protocol
    report = json.loads("".join(o["text"] for o in nb.cells[2].outputs if o.get("name") == "stdout"))
    assert report["ipywidgets"] == "7.7.1" and report["ipywidgets_file"].startswith(str(target))
    assert report["slider"] == "SelectionSlider" and report["description"] == "accumulation steps"
    assert "gradacc-fits" in report["sentence_classes"] and "gradacc-figure" in report["figure_classes"]

    first, moved, sgd = report["first"], report["moved"], report["sgd"]
    assert (first["accum_steps"], moved["accum_steps"]) == (1, 8)
    assert first["fits"] is False and moved["fits"] is True
    assert first["smallest_accum_steps"] == moved["smallest_accum_steps"] > 1
    assert first["sentence"].startswith("N = 1 (micro-batch 256): peak ") and "predicted" in first["sentence"]
    assert "does not fit in a tiny card" in first["sentence"]
    assert (
        moved["sentence"].startswith("N = 8 (micro-batch 32): peak ") and ", fits in a tiny card" in moved["sentence"]
    )
    assert f"Smallest N that fits: {moved['smallest_accum_steps']}." in moved["sentence"]
    assert moved["peak_mib"] < first["peak_mib"]
    assert sgd["optimizer"] == "sgd" and sgd["peak_mib"] != moved["peak_mib"]
    assert report["png_changed"] and report["redraws"] == 3
    assert report["first_shown"] and report["latest_shown"], "the Output widget did not deliver the figure"
