"""The Binder configuration (binder/), validated by repo2docker itself and by running its scripts for real.

repo2docker turns binder/ into a Dockerfile before it needs a container engine: ``jupyter-repo2docker --no-build
--debug`` prints that Dockerfile without Docker or Podman, so the test installs repo2docker into a throwaway venv and
asserts on what it would build. The ``start`` script is executed; ``postBuild`` is executed in a throwaway venv that
overlays the course's .venv (its editable install and the JupyterLab settings land there, not in the .venv).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from throwaway import isolated_venv, overlay_venv

BINDER = ROOT / "binder"
REPO2DOCKER = "jupyter-repo2docker==2026.4.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# pinned in requirements.txt for tests/test_browser.py, tests/test_site.py, `make site` and tests/test_cluster.py's
# Kubernetes manifests, and copydetect for the instructor's `gradacc similarity`; Binder needs none of them
NOT_ON_BINDER = {"playwright", "jupyter-book", "kubernetes-validate", "copydetect"}


def _requirements(path) -> tuple[dict[str, str], list[str]]:
    pins, options = {}, []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{path.name}: {line} is not an exact pin"
        pins[req.name.lower()] = spec.version
    return pins, options


def test_binder_installs_the_pinned_requirements_with_the_cpu_torch():
    binder, options = _requirements(BINDER / "requirements.txt")
    root, _ = _requirements(ROOT / "requirements.txt")
    assert options == [f"--extra-index-url {CPU_INDEX}"]
    assert binder.pop("torch") == root.pop("torch") + "+cpu"  # the CPU wheel, not PyPI's CUDA build
    assert binder == {name: v for name, v in root.items() if name not in NOT_ON_BINDER}
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"  # the Python of `make lab` and CI
    # repo2docker reads binder/ only; an environment.yml there would make it ignore requirements.txt
    assert not (BINDER / "environment.yml").exists()


@pytest.fixture(scope="module")
def dockerfile() -> str:
    venv = isolated_venv("repo2docker", [REPO2DOCKER])
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "repo2docker", "--no-build", "--debug", "--user-id", "1000",
         "--user-name", "jovyan", str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_repo2docker_plans_the_image_from_binder(dockerfile: str):
    assert "Building conda environment for python=3.11" in dockerfile
    install = '${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"'
    assert install in dockerfile
    # installed before the repository is copied in: a content change does not reinstall the pins (layer cache)
    assert dockerfile.index(install) < dockerfile.index("COPY --chown=1000:1000 src/ ${REPO_DIR}/")
    assert "RUN ./binder/postBuild" in dockerfile
    assert 'ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in dockerfile
    assert "environment.yml" not in dockerfile  # the root's conda file is not what Binder uses
    assert "requirements.txt" not in dockerfile.replace("binder/requirements.txt", "")


def _commands(path) -> list[str]:
    return [
        line.strip() for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def test_scripts_are_executable_and_shaped_as_repo2docker_requires():
    for name in ("postBuild", "start"):
        mode = (BINDER / name).stat().st_mode
        assert mode & stat.S_IXUSR, f"binder/{name} must be executable (git keeps the bit)"
        assert (BINDER / name).read_text().startswith("#!/bin/bash\n")
    assert _commands(BINDER / "postBuild")[0] == "set -e"
    assert _commands(BINDER / "start")[-1] == 'exec "$@"'


def _start(*command: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_THREADS") and k != "MALLOC_ARENA_MAX"}
    return subprocess.run([str(BINDER / "start"), *command], env={**clean, **env}, capture_output=True, text=True)


def test_start_caps_threads_and_hands_over_to_the_server():
    proc = _start(
        sys.executable, "-c", "import torch, os; print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "2"]  # torch really runs 2 threads, whatever the host's core count
    env = dict(line.split("=", 1) for line in _start("env").stdout.splitlines() if "=" in line)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        assert env[name] == "2", name
    assert env["TOKENIZERS_PARALLELISM"] == "false" and env["MALLOC_ARENA_MAX"] == "2"
    assert _start("env", OMP_NUM_THREADS="1").stdout.count("OMP_NUM_THREADS=1") == 1  # a value already set wins
    assert _start("sh", "-c", "exit 7").returncode == 7  # exec: the server's exit status is the container's


def test_jupyterlab_overrides_match_its_settings_schema():
    import jsonschema

    overrides = json.loads((BINDER / "overrides.json").read_text())
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"  # the installed JupyterLab's own schemas
    for plugin, settings in overrides.items():
        package, name = plugin.split(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        jsonschema.validate(settings, schema)
        assert set(settings) <= set(schema["properties"])
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


@pytest.mark.slow
def test_postbuild_runs(tmp_path):
    """postBuild for real: installs the package (editable, no dependencies) and the settings, then imports it all."""
    venv = overlay_venv(tmp_path)
    prefix = tmp_path / "nb-prefix"
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "NB_PYTHON_PREFIX": str(prefix)}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # pip refuses to uninstall the .venv's gradacc ("outside environment"): the course's .venv keeps its install
    assert list(Path(sysconfig.get_paths()["purelib"]).glob("gradacc-*.dist-info"))
    assert re.search(r"^gradacc 0\.\d+\.\d+ torch 2\.13\.0\+cpu jax 0\.10\.\d+$", proc.stdout, re.M), proc.stdout
    settings = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert json.loads(settings.read_text()) == json.loads((BINDER / "overrides.json").read_text())
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert list(site.glob("__editable__*gradacc*")), "the course package was not installed into the new env"
    # set -e: a failing step stops the build (here: NB_PYTHON_PREFIX unset makes the settings step fail)
    env.pop("NB_PYTHON_PREFIX")
    failed = subprocess.run([str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert failed.returncode != 0 and "NB_PYTHON_PREFIX is set by repo2docker" in failed.stderr
    assert not re.search(r"^gradacc \S+ torch", failed.stdout, re.M)  # stopped before the import check
