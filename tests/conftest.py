"""Shared fixtures, and an end-of-session report: every notebook run's wall time and kernel peak memory, and the
measurements tests record (e.g. the browser test's redraw time).

Records go to a JSON-lines file named by ``GRADACC_TEST_REPORT`` (set once by the controlling pytest process, inherited
by pytest-xdist workers), so the report is complete with ``-n 2`` too.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_REPORT_ENV = "GRADACC_TEST_REPORT"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def _append(record: dict) -> None:
    path = os.environ.get(_REPORT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def record_notebook_run(name: str, run) -> None:
    """Remember one ``gradacc.notebooks.NbvalRun`` for the end-of-session report."""
    _append({"notebook": name, "wall_s": run.wall_s, "peak_mib": run.peak_mib, "rc": run.returncode})


def record_measurement(line: str) -> None:
    """Remember one line (e.g. the browser test's redraw time) for the end-of-session report."""
    _append({"measurement": line})


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput") and _REPORT_ENV not in os.environ:  # the controlling process
        fd, path = tempfile.mkstemp(prefix="gradacc-test-report-", suffix=".jsonl")
        os.close(fd)
        os.environ[_REPORT_ENV] = path
        config._gradacc_report = path


def pytest_terminal_summary(terminalreporter, config) -> None:
    path = getattr(config, "_gradacc_report", None)
    if not path or not os.path.exists(path):
        return
    records = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    os.unlink(path)
    measurements = [r["measurement"] for r in records if "measurement" in r]
    runs = sorted((r for r in records if "notebook" in r), key=lambda r: r["notebook"])
    if measurements:
        terminalreporter.section("measurements")
        for line in measurements:
            terminalreporter.write_line(line)
    if runs:
        terminalreporter.section("notebook runs: wall time and kernel peak memory")
        terminalreporter.write_line(f"{'notebook':58s} {'wall s':>8s} {'peak MiB':>9s} {'rc':>4s}")
        for r in runs:
            terminalreporter.write_line(f"{r['notebook']:58s} {r['wall_s']:8.1f} {r['peak_mib']:9.0f} {r['rc']:4d}")
