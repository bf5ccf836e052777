"""Where a lesson runs: the runtime (Colab, Binder or a local machine), the device, library versions and resources.

Lesson 00 prints all of it; every lesson's setup cell picks its device with ``pick_device``.
Units: MiB (2**20 bytes).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Container, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..i18n import _
from ..memory import MIB

if TYPE_CHECKING:
    import torch

__all__ = [
    "BINDER_ENV_VARS",
    "COLAB_ENV_VARS",
    "LIBRARIES",
    "EXTRAS",
    "MAINTAINER_EXTRAS",
    "install_hint",
    "Runtime",
    "runtime",
    "binder_markers_sentence",
    "pick_device",
    "library_versions",
    "unmet_requirements",
    "memory_limit_mib",
    "describe_environment",
]

Runtime = Literal["colab", "binder", "local"]

COLAB_ENV_VARS: tuple[str, ...] = ("COLAB_RELEASE_TAG",)
"""Set in every Google Colab runtime (libraries such as ``google-cloud-bigquery`` detect Colab by it)."""

BINDER_ENV_VARS: tuple[str, ...] = (
    "BINDER_REQUEST",
    "BINDER_PERSISTENT_REQUEST",
    "BINDER_REPO_URL",
    "BINDER_REF_URL",
    "BINDER_LAUNCH_HOST",
    "BINDER_SERVICE_HOST",
)
"""Environment variables a BinderHub session carries.

The first five are set by BinderHub's spawner for every launched server (``BinderSpawnerMixin.get_env`` in
``binderhub/binderspawner_mixin.py``: ``repo_url`` -> ``BINDER_REPO_URL`` and ``binder_ref_url``,
``binder_launch_host``, ``binder_persistent_request``, ``binder_request`` upper-cased); ``BINDER_SERVICE_HOST`` is the
Kubernetes service variable of mybinder.org's ``binder`` service. ``JUPYTERHUB_*`` variables alone do not mean
Binder: every JupyterHub sets them.
"""

LIBRARIES: tuple[str, ...] = (
    "gradacc",
    "torch",
    "numpy",
    "scikit-learn",
    "matplotlib",
    "ipywidgets",
    "tqdm",
    "nbval",
    "jax",
    "optax",
    "transformers",
    "accelerate",
    "datasets",
    "tokenizers",
    "sentence-transformers",
    "trl",
    "peft",
    "pytorch-lightning",
    "keras",
    "opacus",
    "mlx",
    "mlx-lm",
)
"""The distributions lesson 00 reports: the core, then the ``libs`` and the ``stacks`` extras (``EXTRAS``)."""

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "libs": (
        "JAX, optax, Transformers, Accelerate, datasets, tokenizers, sentence-transformers",
        ("03", "04", "05", "06", "07", "08", "09", "10", "11", "12"),
    ),
    "stacks": ("TRL, PEFT, Lightning, Keras 3, Opacus, MLX, mlx-lm", ("10", "11", "12")),
}
"""The package's optional extras (``pyproject.toml``): extra -> (what it installs, the lessons that need it: their code,
the ``gradacc`` modules they import or the worker processes they start; ``tests/test_environment.py`` reads them)."""

MAINTAINER_EXTRAS: dict[str, str] = {
    "translate": "polib, Babel, markdown-it-py: `gradacc translate` (the pt-BR edition)",
    "grading": "copydetect: `gradacc similarity` (the instructor's copying report)",
}
"""The extras no lesson needs, which lesson 00 does not check: tools that build or grade the course."""


def runtime(environ: Mapping[str, str] | None = None, modules: Container[str] | None = None) -> Runtime:
    """Name the runtime a notebook kernel runs in: ``"colab"``, ``"binder"`` or ``"local"``.

    Colab: ``google.colab`` is imported in the kernel (Colab's kernels import it at start) or ``COLAB_RELEASE_TAG``
    is set. Binder: one of ``BINDER_ENV_VARS`` is set. Anything else (a laptop, a workstation, a JupyterHub that is
    not a BinderHub, CI) is ``"local"``.

    Args:
        environ: environment variables to inspect (default ``os.environ``).
        modules: names of imported modules (default ``sys.modules``).
    """
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "google.colab" in modules or any(environ.get(name) for name in COLAB_ENV_VARS):
        return "colab"
    if any(environ.get(name) for name in BINDER_ENV_VARS):
        return "binder"
    return "local"


def binder_markers_sentence(environ: Mapping[str, str] | None = None) -> str:
    """One sentence, in the learner's language, naming the ``BINDER_ENV_VARS`` set in ``environ`` (default
    ``os.environ``): what ``runtime`` reads to say ``"binder"``. Shown in lessons/00_setup.ipynb, section 1.

    Example:
        >>> binder_markers_sentence({})
        'No Binder variable is set (6 checked): this is not a Binder session.'
    """
    environ = os.environ if environ is None else environ
    present = [name for name in BINDER_ENV_VARS if environ.get(name)]
    if not present:
        return _("No Binder variable is set ({count} checked): this is not a Binder session.").format(
            count=len(BINDER_ENV_VARS)
        )
    return _("Binder variables set ({names}): this is a Binder session.").format(names=", ".join(present))


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def pick_device(prefer: str | None = None) -> torch.device:
    """The device lessons compute on: CUDA if available, then Apple's MPS, then the CPU.

    Args:
        prefer: ``"cuda"``, ``"mps"`` or ``"cpu"`` to force one (for example ``"cpu"`` to reproduce the stored outputs);
            ``None`` picks automatically.

    Returns:
        A ``torch.device``.

    Raises:
        ValueError: ``prefer`` names a device type that is unknown or not available here.
    """
    import torch

    available = {"cuda": torch.cuda.is_available(), "mps": _mps_available(), "cpu": True}
    if prefer is not None:
        if prefer not in available:
            raise ValueError(f"prefer must be one of {sorted(available)} or None, got {prefer!r}")
        if not available[prefer]:
            raise ValueError(f"device {prefer!r} is not available here; use prefer=None to pick automatically")
        return torch.device(prefer)
    return torch.device(next(name for name in ("cuda", "mps", "cpu") if available[name]))


def library_versions(names: Iterable[str] = LIBRARIES) -> dict[str, str | None]:
    """Installed version of each distribution (``importlib.metadata``), ``None`` where it is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def unmet_requirements(distribution: str = "gradacc", extras: Iterable[str] = ()) -> list[str]:
    """Requirements of ``distribution`` that the installed libraries do not satisfy (empty when all are met).

    Reads the declared ranges (``pyproject.toml``'s ``dependencies``, plus the optional ``extras`` such as ``"libs"``)
    from the installed metadata and compares them with the installed versions.

    Returns:
        One line per problem, e.g. ``"torch>=2.4: installed 2.1.0"`` or ``"jax>=0.4.30: not installed"``.

    Raises:
        ValueError: ``distribution`` is not installed.
    """
    from packaging.requirements import Requirement

    try:
        declared = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        raise ValueError(f"{distribution!r} is not installed; run `make lab` or `pip install -e .`") from None
    wanted = set(extras)
    problems = []
    for line in declared:
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": extra}) for extra in wanted | {""}):
            continue
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req.name}{req.specifier}: not installed")
            continue
        if not req.specifier.contains(installed, prereleases=True):
            problems.append(f"{req.name}{req.specifier}: installed {installed}")
    return problems


def install_hint(extra: str, where: Runtime | None = None) -> str:
    """How to install what the extra ``extra`` needs (``EXTRAS``) where the notebook runs (default: ``runtime()``).

    On Colab the first cell of each lesson installs the course with the extras it needs (lessons 10-12's:
    ``stacks``); on Binder the image holds every pin of ``binder/requirements.txt``, and pip in a terminal adds what is
    missing for the session; elsewhere ``make lab`` installs every pin of ``requirements.txt`` (the libraries of both
    extras), and pip the extra asked for (``stacks`` with ``libs``, which lessons 10-12 also need).

    Raises:
        ValueError: an unknown extra.
    """
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {list(EXTRAS)}, got {extra!r}")
    lessons, where = EXTRAS[extra][1], where or runtime()
    if where == "colab":
        first = "this lesson's first cell" if extra == "libs" else f"the first cell of lesson {' or '.join(lessons)}"
        return f"on Colab, {first} installs them: run it (`gradacc[libs{',stacks' if extra == 'stacks' else ''}]`)"
    extras = "libs" if extra == "libs" else "libs,stacks"
    if where == "binder":
        return (
            f"Binder's image should hold them (binder/requirements.txt): in a terminal, `pip install -e '.[{extras}]'`"
            " in the course's folder adds them for this session"
        )
    return (
        f"run `make lab` in the course's folder (it installs every pinned library), or "
        f"`.venv/bin/pip install -e '.[{extras}]'` there"
    )


def _cgroup_limit_bytes(root: Path) -> int | None:
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # cgroup v1 writes a huge number for "no limit"
            return int(text)
    return None


def memory_limit_mib(cgroup_root: str | os.PathLike = "/sys/fs/cgroup") -> float:
    """Memory this process may use, in MiB: the smallest of physical RAM, the cgroup limit and ``MEM_LIMIT``.

    Binder and JupyterHub cap a server's memory with a container (cgroup) limit and announce it in ``MEM_LIMIT``
    (bytes; set by JupyterHub's spawner when ``mem_limit`` is configured); a laptop has only its RAM.
    """
    import psutil

    limits = [psutil.virtual_memory().total]
    cgroup = _cgroup_limit_bytes(Path(cgroup_root))
    if cgroup:
        limits.append(cgroup)
    env_limit = os.environ.get("MEM_LIMIT", "")
    if env_limit.isdigit() and int(env_limit) > 0:
        limits.append(int(env_limit))
    return min(limits) / MIB


def describe_environment() -> dict[str, object]:
    """Everything lesson 00 reports, as plain values.

    Returns:
        ``{"runtime": "colab" | "binder" | "local", "python": "3.11.9", "platform": str, "device": "cuda" | "mps" |
        "cpu", "device_name": str, "cuda_available": bool, "mps_available": bool, "cpu_count": int,
        "torch_threads": int, "memory_limit_mib": float, "versions": {distribution: version or None}}``.
    """
    import torch

    device = pick_device()
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
    elif device.type == "mps":
        device_name = "Apple GPU (MPS)"
    else:
        device_name = platform.processor() or platform.machine()
    return {
        "runtime": runtime(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device.type,
        "device_name": device_name,
        "cuda_available": torch.cuda.is_available(),
        "mps_available": _mps_available(),
        "cpu_count": os.cpu_count() or 1,
        "torch_threads": torch.get_num_threads(),
        "memory_limit_mib": memory_limit_mib(),
        "versions": library_versions(),
    }
