"""Throwaway environments for tests that need a tool or a version the course's .venv must not get.

They live under ``build/test-cache/`` (gitignored; override with ``GRADACC_TEST_CACHE``), keyed by what they hold, so a
second test session reuses them; each is built in a temporary folder and renamed into place, so an interrupted build is
never mistaken for a finished one. Packages come from the configured package index (PyPI), as ``pip`` finds them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("GRADACC_TEST_CACHE", ROOT / "build" / "test-cache"))


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _run(args: list[str], what: str, timeout: float = 900) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def _build(name: str, key: str, make) -> Path:
    target = CACHE / f"{name}-{key}"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE))
    try:
        make(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another session finished first
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def pip_target(name: str, requirements: list[str]) -> Path:
    """A folder with exactly ``requirements`` installed (``pip install --target --no-deps``): put it first on
    ``PYTHONPATH`` to shadow the .venv's versions of those packages and keep everything else."""

    def make(tmp: Path) -> None:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-compile",
                "--target",
                str(tmp),
                *requirements,
            ],
            f"pip install --target {requirements}",
        )

    return _build(name, _key(sys.version, *requirements), make)


def isolated_venv(name: str, requirements: list[str]) -> Path:
    """A virtual environment of its own (not seeing the .venv's packages) with ``requirements`` installed; returns
    its folder (executables in ``bin/``)."""

    def make(tmp: Path) -> None:
        base = getattr(sys, "_base_executable", sys.executable)
        # Console scripts get tmp's absolute path in their shebang and break after the rename: run the tools as
        # `bin/python -m tool` (bin/python finds its pyvenv.cfg from where it is called, so it survives the rename).
        _run([base, "-m", "venv", str(tmp)], "python -m venv")
        _run([str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", *requirements], f"pip install {requirements}")

    return _build(name, _key(sys.version, *requirements), make)


def overlay_venv(tmp_path: Path) -> Path:
    """A fresh, empty venv in ``tmp_path`` that also sees the .venv's site-packages (after its own): what it installs
    shadows the .venv without changing it. Returns its folder."""
    base = getattr(sys, "_base_executable", sys.executable)
    venv = tmp_path / "overlay-venv"
    _run([base, "-m", "venv", "--without-pip", str(venv)], "python -m venv")
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "course-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv
