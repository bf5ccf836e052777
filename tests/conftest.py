"""Shared fixtures, and a report of every notebook run's wall time and kernel peak memory at the end of the session."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_RUNS: list[tuple[str, float, float, int]] = []


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def record_notebook_run(name: str, run) -> None:
    """Remember one ``gradacc.notebooks.NbvalRun`` for the end-of-session report."""
    NOTEBOOK_RUNS.append((name, run.wall_s, run.peak_mib, run.returncode))


def pytest_terminal_summary(terminalreporter) -> None:
    if not NOTEBOOK_RUNS:
        return
    terminalreporter.section("notebook runs: wall time and kernel peak memory")
    terminalreporter.write_line(f"{'notebook':58s} {'wall s':>8s} {'peak MiB':>9s} {'rc':>4s}")
    for name, wall, peak, rc in sorted(NOTEBOOK_RUNS):
        terminalreporter.write_line(f"{name:58s} {wall:8.1f} {peak:9.0f} {rc:4d}")
