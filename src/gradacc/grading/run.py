"""Running a merged notebook: ``pytest --nbval-lax`` in a separate process under the limits of ``Settings``, with
``gradacc.grading.plugin`` inside it, and the reference's own calibration runs that give the hidden checks' expected
text.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from ..course.nbval_run import NbvalRun, run_nbval
from .gradebook import GradingError, Reference, Settings
from .limits import RunLimits
from .merge import merge_submission
from .sandbox import Sandbox

__all__ = []


# ---------------------------------------------------------------------------------------------------------- running
def _run_merged(nb, name: str, settings: Settings, box: Sandbox, language: str = "en") -> tuple[NbvalRun, dict]:
    """Run a merged notebook under nbval with the grading plugin, in ``box``, its ``gradacc`` messages in
    ``language`` (``GRADACC_LANG``, whatever the grader's own environment holds); returns the run and what the plugin
    sent through the runner's report pipe (``_capture``)."""
    from ..i18n import ENV_VAR
    from .plugin import ENV

    threads = str(max(1, (os.cpu_count() or 1) // settings.workers))
    limits = box.limits.run() if box.limits is not None else contextlib.nullcontext()
    with (
        tempfile.TemporaryDirectory(prefix=f"gradacc-grade-{os.getpid()}-", ignore_cleanup_errors=True) as tmp,
        limits as tree,
    ):
        path = Path(tmp) / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        plugin = {
            "memory_bytes": settings.memory_mib * 2**20,
            "file_bytes": settings.file_mib * 2**20,
            "output_bytes": settings.max_output_kib * 2**10,
            "text_bytes": 4096,
            # unsandboxed, the runner dies with the grader by PR_SET_PDEATHSIG; in a sandbox bwrap's
            # --die-with-parent does it (and the runner's parent is the namespace's init, not the grader)
            "grader_pid": os.getpid() if box.kind == "none" else None,
            # the tree's processes where no cgroup counts them: RLIMIT_NPROC in the sandbox's user namespace
            "max_processes": tree.nproc if tree is not None else None,
        }
        env = {
            ENV: json.dumps(plugin),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only nbval and our plugin in the runner
            "PYTHONSAFEPATH": "1",  # the runner does not import from its working directory
            ENV_VAR: language,  # the check cells' lines in the submission's language (merge_submission expects them)
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
        }
        run = run_nbval(
            path,
            lax=True,
            timeout=settings.timeout,
            cell_timeout=settings.cell_timeout,
            env=env,
            extra_args=("-p", "gradacc.grading.plugin", "-p", "nbval.plugin", "--noconftest"),
            max_output_bytes=settings.max_output_kib * 2**10 + 2**16,
            wrap=lambda argv, env_: _wrap(box, tree, argv, env_, Path(tmp)),
            watch=tree.watch if tree is not None else None,
        )
        capture = _capture(run.reports)
        capture["events"] += tree.events() if tree is not None else []
        return run, capture


def _wrap(box: Sandbox, tree: RunLimits | None, argv: list[str], env: dict, workdir: Path) -> tuple[list, dict]:
    """The run's command: in ``box`` (``bwrap``; unsandboxed, the grader's environment plus ``env``), started inside
    the run's cgroups when ``tree`` has them."""
    argv, env = box.wrap(argv, env, workdir)
    return (tree.wrap(argv) if tree is not None else argv), env


def _capture(reports: list[dict]) -> dict:
    """What ``_score`` reads, from the plugin's records: ``cells`` (capture key -> its stdout, stderr and error),
    ``events`` (``kind``, ``cell``, ``detail``), ``started`` (each cell as it started) and ``planted`` (the names in
    ``plugin.PLANTED`` the notebook's code left in its working folder)."""
    capture = {"cells": {}, "events": [], "started": [], "planted": []}
    for record in reports:
        kind = record.get("kind")
        if kind == "started":
            capture["started"].append(record["cell"])
        elif kind == "captured":
            capture["cells"][record["cell"]] = {k: record[k] for k in ("stdout", "stderr", "error")}
        elif kind == "event":
            capture["events"].append({"kind": record["event"], "cell": record["cell"], "detail": record["detail"]})
        elif kind == "planted":
            capture["planted"] = record["names"]
    return capture


def _calibrate(ref: Reference, settings: Settings, seed: int, pool: ThreadPoolExecutor, box: Sandbox) -> None:
    """Run the reference's own answers twice; fill ``ref.expected`` with what each hidden check printed.

    Raises:
        GradingError: the reference fails a check, a hidden check raises or prints nothing, or the two runs print
            different text (round the printed values coarser).
    """
    answers = {c.id: c.source for c in ref.notebook.cells if c.get("id") in ref.solution_ids}
    merged, layout = merge_submission(ref, answers, seed)
    runs = [f.result() for f in [pool.submit(_run_merged, merged, ref.name, settings, box) for _ in range(2)]]
    outputs = []
    for run, capture in runs:
        failed = [
            k
            for k, i in layout.items()
            if not k.startswith("solution:") and run.cells.get(i, {}).get("outcome") != "passed"
        ]
        if run.returncode == -9 or failed:
            raise GradingError(
                f"the reference {ref.path} fails under the grader ({'timeout' if run.returncode == -9 else failed}); "
                f"events {capture.get('events')}; nbval said:\n{run.output[-3000:]}"
            )
        cells = capture.get("cells", {})
        for key in layout:
            if key.startswith("hidden:") and (cells.get(key, {}).get("error") or not cells.get(key, {}).get("stdout")):
                raise GradingError(
                    f"{ref.name}: hidden check {key} must print the student's results, got {cells.get(key)}"
                )
        outputs.append({k: cells[k]["stdout"] for k in layout if k.startswith("hidden:")})
    if outputs[0] != outputs[1]:
        differ = sorted(k for k in outputs[0] if outputs[0][k] != outputs[1].get(k))
        raise GradingError(f"{ref.name}: hidden checks {differ} print different text on two runs of the reference")
    ref.expected = outputs[0]
