"""The Colab replica: an environment with the Python and exactly the library versions Colab ships
(``colab/requirements.txt``, generated from Google's own list by ``colab/make_requirements.py``), and the course
installed into it the way the notebooks' Colab setup cell installs it.

``build()`` makes the environment once (cached under build/test-cache/, keyed by the Python version and the file's
pins). PyPI has only the CUDA build of torch 2.11 for Linux: the environment takes about 6 GB and 5-10 minutes to
install on the course machines; its CUDA libraries are never loaded on a CPU-only machine. conftest.py starts the
build in the background when a test session will need it, so it overlaps the other tests.
``install_course(venv)`` then runs ``pip install "gradacc[libs] @ file://<checkout>"`` (the setup cell's command, with
this checkout in place of the GitHub URL) whenever the course's source changed since the last install.

Lessons 10-12 need libraries Colab does not ship (lesson 10 TRL and Lightning, lesson 11 TRL, lesson 12 Opacus and
MLX): their setup cells install the course with the ``stacks`` extra, and pip then also upgrades what TRL needs newer (datasets, pyarrow, ...).
``stacks_overlay(venv)`` reproduces that without touching the replica the other lessons use: a small environment of
the same Python whose ``.pth`` file puts the replica's packages after its own, into which that setup-cell command
installs (once for both lessons; on Colab each lesson's runtime makes it); pip finds
the replica's packages there, installs only what is missing or too old ("Not uninstalling ... outside environment"),
and the overlay's copies come first on ``sys.path``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import time
from pathlib import Path

from throwaway import CACHE, _build, _key, _run, find_python, isolated_venv, pip_target

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "colab" / "requirements.txt"


def colab_python_version() -> str:
    """Colab's Python as ``X.Y.Z`` (the ``# python:`` line of ``colab/requirements.txt``)."""
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith("# python:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(f"{REQUIREMENTS} has no '# python: X.Y.Z' line: run python colab/make_requirements.py")


PYTHON_VERSION = ".".join(colab_python_version().split(".")[:2])  # the replica's interpreter: Colab's X.Y


def pins() -> dict[str, str]:
    """``{distribution name (lower case, '-' for '_'): version}`` from ``colab/requirements.txt``."""
    pinned = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pinned[name.strip().lower().replace("_", "-")] = version.strip()
    return pinned


COLAB_IPYWIDGETS = ["ipywidgets==7.7.1", "ipython_genutils==0.2.0"]  # 7.x imports ipython_genutils; 8.x does not


def ipywidgets_target() -> Path:
    """A folder holding only Colab's ipywidgets (tests/test_colab.py puts it first on a kernel's ``PYTHONPATH``).

    Two small wheels from pypi.org, a second or two, but pip waited 300 s or more for them in 3 of 5 fresh-clone runs
    (2026-12-02), once long after the replica was built: a stalled connection, hence ``pip_target``'s short timeout.
    conftest.py also makes this folder first in the replica's background thread, before its 6 GB download."""
    return pip_target("ipywidgets-7.7.1", COLAB_IPYWIDGETS)


def build() -> Path:
    """The replica's virtual environment (built on first use; see the module docstring). Returns its folder."""
    requirements = [f"{name}=={version}" for name, version in pins().items()]
    # pip compiles the bytecode at install (about 65 s of CPU for the replica's 18,000 modules): with the machine's
    # PYTHONDONTWRITEBYTECODE=1 no kernel would write it, and each would compile every module it imports, every time
    # (tried 2026-12-03: Colab's kernels took 935 s of CPU instead of 731)
    return isolated_venv("colab-replica", requirements, python=find_python(PYTHON_VERSION))


def _course_hash() -> str:
    digest = hashlib.sha256()
    files = [ROOT / "pyproject.toml", ROOT / "README.md", *sorted((ROOT / "src" / "gradacc").rglob("*"))]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def install_course(venv: Path, extras: str = "libs") -> float | None:
    """Install this checkout into ``venv`` as the Colab setup cell does (``gradacc[<extras>]``), unless this very
    source is installed already.

    Returns the install's wall time in seconds, or ``None`` when nothing needed installing. One installer at a time
    (pytest-xdist workers share the environment).

    Raises:
        RuntimeError: pip failed (its output in the message).
    """
    stamp = venv / (".course-installed" if extras == "libs" else f".course-installed-{extras.replace(',', '-')}")
    with open(CACHE / ".colab-course.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        source = _course_hash()
        if stamp.exists() and stamp.read_text() == source:
            return None
        start = time.perf_counter()
        proc = subprocess.run(
            # pip rebuilds and reinstalls a local project every time, and keeps every installed version that
            # satisfies the package's ranges, as on Colab. Without a cache: pip 24.2 keeps the wheel it built from a
            # checkout whose folder name looks like "name-version" (a worktree "wt-lesson10": wheel_builder.py's
            # _should_cache) and installed that stale wheel again after the source had changed
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-cache-dir",
            ]
            + [f"gradacc[{extras}] @ file://{ROOT}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"installing the course into the Colab replica failed:\n{proc.stdout}\n{proc.stderr}")
        stamp.write_text(source)
        return time.perf_counter() - start


STACKS_EXTRAS = "libs,stacks"
"""The extras lessons 10 and 11's Colab setup cells install (``pyproject.toml``: TRL and Lightning, which Colab
lacks)."""


def _site_packages(venv: Path) -> Path:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def stacks_overlay(replica: Path) -> Path:
    """The environment lessons 10 and 11 run in on the replica (module docstring): built once per replica (cached), a
    Python of the replica's version whose ``colab-replica.pth`` appends the replica's ``site-packages`` to
    ``sys.path``. Install the course into it with ``install_course(overlay, STACKS_EXTRAS)``. Returns its folder."""
    base = find_python(PYTHON_VERSION)
    replica_site = _site_packages(replica)

    def make(tmp: Path) -> None:
        _run([base, "-m", "venv", str(tmp)], "python -m venv")
        (_site_packages(tmp) / "colab-replica.pth").write_text(f"{replica_site}\n")

    return _build("colab-stacks", _key(replica.name, str(replica_site)), make)


STACKS_UPGRADES = {"datasets", "huggingface-hub"}
"""Colab's packages that lessons 10 and 11's install replaces on Colab too: TRL 1.16 needs datasets >= 4.7.0 (Colab
ships 4.0.0), and datasets 5 a newer huggingface-hub."""


def effective_versions(venv: Path, names: list[str]) -> dict[str, str]:
    """``{name: version}`` as ``venv``'s interpreter imports it (``importlib.metadata.version``: the first copy on
    ``sys.path``, the overlay's before the replica's); ``"missing"`` for a package it cannot find."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(n):\n"
        "    try:\n"
        "        return m.version(n)\n"
        "    except m.PackageNotFoundError:\n"
        "        return 'missing'\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code, *names], capture_output=True, text=True, check=True)
    return {name: version.split("+")[0] for name, version in json.loads(out.stdout).items()}


def installed_versions(venv: Path) -> dict[str, str]:
    """``{distribution name: version}`` of everything installed in ``venv`` (``importlib.metadata``, normalised)."""
    code = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


if __name__ == "__main__":
    # `make test` (the default PYTEST_ARGS) runs this while .venv installs: the replica's pip install (mostly one core)
    # overlaps .venv's (the other core). Standard library only, so any Python 3 runs it; the session's own build
    # (conftest.py) then waits for this one on the cache's file lock and finds the replica built.
    start = time.perf_counter()
    print(f"Colab replica: {build().name} ready after {time.perf_counter() - start:.0f} s", flush=True)
