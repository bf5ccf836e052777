"""Throwaway environments for tests that need a tool or a version the course's .venv must not get.

They live under ``build/test-cache/`` (gitignored; override with ``GRADACC_TEST_CACHE``), keyed by what they hold, so a
second test session reuses them; each is built in a temporary folder and renamed into place, so an interrupted build is
never mistaken for a finished one. Packages come from the configured package index (PyPI), as ``pip`` finds them.
"""

from __future__ import annotations

import fcntl
import glob
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
    # One builder at a time (pytest-xdist workers ask together): the others wait here, then find the target.
    with open(CACHE / f".{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE))
        try:
            make(tmp)
            tmp.rename(target)
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
                # a stalled connection to the index is dropped after 20 s and retried, not waited on for the
                # environment's PIP_DEFAULT_TIMEOUT (180 s) per try: one run waited 300 s, another past pytest's 600
                "--timeout=20",
                "--retries=10",
                "--target",
                str(tmp),
                *requirements,
            ],
            f"pip install --target {requirements}",
        )

    return _build(name, _key(sys.version, *requirements), make)


def isolated_venv(name: str, requirements: list[str], python: str | None = None) -> Path:
    """A virtual environment of its own (not seeing the .venv's packages) with ``requirements`` installed; returns
    its folder (executables in ``bin/``). ``python``: the interpreter to build it from (default: the .venv's base)."""
    base = python or getattr(sys, "_base_executable", sys.executable)
    version = subprocess.run(
        [base, "-c", "import sys; print(sys.version)"], capture_output=True, text=True
    ).stdout.strip()

    def make(tmp: Path) -> None:
        # Console scripts get tmp's absolute path in their shebang and break after the rename: run the tools as
        # `bin/python -m tool` (bin/python finds its pyvenv.cfg from where it is called, so it survives the rename).
        _run([base, "-m", "venv", str(tmp)], "python -m venv")
        pip = [str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, *requirements], f"pip install {requirements}")

    return _build(name, _key(version, *requirements), make)


def tools_venv(name: str, requirements: list[str]) -> Path:
    """A cached virtual environment that sees the .venv's packages (the course's editable install included, after its
    own) with ``requirements`` installed by pip on top: tools the tests run that must not enter the .venv. Returns its
    folder; its console scripts (``bin/``) work after the rename into the cache (their shebangs name the final folder),
    so tools that call others by name (nbgrader runs ``alembic``) work with ``bin/`` first on ``PATH``. Keyed by the
    .venv's site-packages too: the cache is shared between checkouts."""
    base = getattr(sys, "_base_executable", sys.executable)
    purelib = sysconfig.get_paths()["purelib"]
    key = _key(sys.version, purelib, *requirements)

    def make(tmp: Path) -> None:
        _run([base, "-m", "venv", str(tmp)], "python -m venv")
        site = next((tmp / "lib").glob("python3*/site-packages"))
        # addsitedir, not a plain path: it also runs the .venv's own .pth files (the course's editable install)
        (site / "course-venv.pth").write_text(f"import site; site.addsitedir({purelib!r})\n")
        pip = [str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, "--timeout=20", "--retries=10", *requirements], f"pip install {requirements}")
        for script in (tmp / "bin").iterdir():
            text = script.read_bytes() if script.is_file() and not script.is_symlink() else b""
            if text.startswith(f"#!{tmp}/".encode()):
                script.write_bytes(text.replace(str(tmp).encode(), str(CACHE / f"{name}-{key}").encode(), 1))

    return _build(name, key, make)


def find_python(version: str) -> str:
    """A working ``python{version}`` interpreter: ``$GRADACC_PYTHON{version without dots}``, then ``python{version}``
    on ``PATH``, then pyenv's installed versions (``~/.pyenv/versions/{version}.*``), then ``/usr/bin`` and
    ``/usr/local/bin``. A pyenv shim that is on ``PATH`` but not enabled does not count (each candidate must run).

    Raises:
        RuntimeError: none found; the message says how to install one or point the variable at it.
    """
    variable = f"GRADACC_PYTHON{version.replace('.', '')}"
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [
        os.environ.get(variable),
        shutil.which(f"python{version}"),
        *sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
    ]
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run(
                [candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if found == version:
            return candidate
    raise RuntimeError(
        f"no working Python {version} found (looked at ${variable}, python{version} on PATH, "
        f"{pyenv_root}/versions/{version}.*, /usr/bin, /usr/local/bin): install one (`pyenv install {version}`) "
        f"or set {variable} to its path"
    )


def overlay_venv(tmp_path: Path) -> Path:
    """A fresh, empty venv in ``tmp_path`` that also sees the .venv's site-packages (after its own): what it installs
    shadows the .venv without changing it. Returns its folder."""
    base = getattr(sys, "_base_executable", sys.executable)
    venv = tmp_path / "overlay-venv"
    _run([base, "-m", "venv", "--without-pip", str(venv)], "python -m venv")
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "course-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv
