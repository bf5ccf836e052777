"""gradacc's pytest plugin (entry point ``pytest11``) gives nbval's per-output wait the patience a busy machine needs."""

from __future__ import annotations

import subprocess
import sys

import nbformat

from gradacc.course.pytest_plugin import OUTPUT_TIMEOUT_S


def _output_timeouts(tmp_path, *args: str) -> list[str]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)"), nbformat.v4.new_code_cell("2")])
    nbformat.write(nb, tmp_path / "tiny.ipynb")
    (tmp_path / "conftest.py").write_text(
        "def pytest_collection_finish(session):\n"
        "    print('OUTPUT_TIMEOUTS', [item.output_timeout for item in session.items])\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
            "tiny.ipynb",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if line.startswith("OUTPUT_TIMEOUTS")]


def test_nbval_waits_a_minute_for_each_output_instead_of_5_seconds(tmp_path):
    assert OUTPUT_TIMEOUT_S == 60.0
    # the plugin is found through its entry point, as in a learner's `pytest --nbval exercises/...`
    assert _output_timeouts(tmp_path) == ["OUTPUT_TIMEOUTS [60.0, 60.0]"]
    # never longer than the cell's own limit
    assert _output_timeouts(tmp_path, "--nbval-cell-timeout=20") == ["OUTPUT_TIMEOUTS [20.0, 20.0]"]
    # without it, nbval 0.11's fixed 5 s (what the plugin exists for)
    assert _output_timeouts(tmp_path, "-p", "no:gradacc") == ["OUTPUT_TIMEOUTS [5, 5]"]
