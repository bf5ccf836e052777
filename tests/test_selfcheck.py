"""A learner's self-check (`pytest --nbval exercises/NN_topic.ipynb`, README "Checking an exercise") cannot be fooled by
the outputs a learner's SAVED notebook holds (issue 13): a wrong check raises ``CheckFailed`` when nbval runs it."""

from __future__ import annotations

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from gradacc.course.notebooks import check_cells, run_nbval

pytestmark = pytest.mark.notebook

# A plausible mistake: every micro-batch's MEAN loss divided by the number of micro-batches (a mean of means), which is
# wrong as soon as the micro-batches differ in size.
MEAN_OF_MEANS = """def accumulation_window(model, optimizer, micro_batches):
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total
"""


def test_a_saved_wrong_notebook_fails_its_self_check(tmp_path):
    exercise = nbformat.read(ROOT / "exercises" / "02_pytorch.ipynb", as_version=4)
    answers = {c.id: c.source for c in nbformat.read(ROOT / "solutions" / "02_pytorch.ipynb", as_version=4).cells}
    for cell in exercise.cells:
        if cell.get("id") == "ex-2-1-solution":
            cell.source = MEAN_OF_MEANS
        elif cell.get("id") == "ex-2-2-solution":
            cell.source = answers[cell.id]
    # The learner runs every cell in JupyterLab and saves: the file now stores the wrong check's output.
    NotebookClient(exercise, timeout=300, kernel_name="python3", allow_errors=True).execute()
    path = tmp_path / "02_pytorch.ipynb"
    nbformat.write(exercise, path)
    checks = {c["check"]: c for c in check_cells(exercise)}
    saved = "".join(o.get("text", "") for o in exercise.cells[checks["2.1"]["index"]].outputs)
    assert saved.startswith("Exercise 2.1: incorrect - "), saved
    errors = [o for o in exercise.cells[checks["2.1"]["index"]].outputs if o.output_type == "error"]
    assert [(e.ename, e.traceback) for e in errors] == [
        (
            "CheckFailed",
            ["CheckFailed: Exercise 2.1 is not correct yet (the line above says why); fix it and run this again"],
        )
    ]  # one line in JupyterLab, no traceback (IPython's _render_traceback_)

    run = run_nbval(path)  # the README's command: strict nbval on the learner's saved file
    assert run.returncode == 1
    assert run.failed_cells == [checks["2.1"]["code_index"]], run.output[-3000:]  # 2.2 is right and passes
