"""The install story: pins agree everywhere, the package metadata admits Colab's versions, the CLI is installed."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import colab_replica
import pytest
import tomllib
import yaml
from conftest import ROOT, make_lab_launch
from packaging.requirements import Requirement
from packaging.version import Version


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "-e", "-r", "--")):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{line}: tier-1 requirements are exact pins"
        pins[req.name.lower()] = spec.version
    return pins


def test_environment_yml_carries_the_same_pins_as_requirements():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _pins(pip_section) == req
    assert req["torch"] == "2.13.0"
    assert req["jax"].startswith("0.10.") and req["jaxlib"].startswith("0.10.")


def test_package_floors_are_tested_versions_and_admit_what_colab_ships():
    """Every range admits the pin (requirements.txt) and Colab's version (colab/requirements.txt, the replica), and its
    floor is the lower of the two: a version that one of the two test environments really runs."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    colab = colab_replica.pins()
    extras = meta["optional-dependencies"]
    for line in [*meta["dependencies"], *(r for rs in extras.values() for r in rs)]:  # every extra, grading included
        req = Requirement(line)
        name = req.name.lower()
        assert name in pins, f"{name} is a dependency but has no pin in requirements.txt"
        assert req.specifier.contains(Version(pins[name])), f"{line} excludes the pin {pins[name]}"
        tested = [Version(pins[name])]
        if name in colab:
            assert req.specifier.contains(Version(colab[name])), f"{line} excludes Colab's {colab[name]}"
            tested.append(Version(colab[name]))
        (floor,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert floor == min(tested), f"{line}: the floor should be {min(tested)}, the lowest version a test runs"
    assert meta["requires-python"] == ">=3.11" and colab_replica.PYTHON_VERSION == "3.13"


def _make_requirements():
    spec = importlib.util.spec_from_file_location("make_requirements", ROOT / "colab" / "make_requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_colab_requirements_are_generated_from_colabs_own_list():
    """colab/requirements.txt is exactly what colab/make_requirements.py makes from the vendored copies of Google's
    backend-info files; every pin is the version Colab's pip freeze lists, the Python is os-info's."""
    make = _make_requirements()
    freeze = (ROOT / "colab" / "pip-freeze.gpu.txt").read_text()
    os_info = (ROOT / "colab" / "os-info-gpu.txt").read_text()
    assert freeze.startswith("# Vendored verbatim from https://github.com/googlecolab/backend-info, file pip-freeze")
    assert (ROOT / "colab" / "requirements.txt").read_text() == make.render(freeze, os_info), (
        "colab/requirements.txt is stale: run python colab/make_requirements.py"
    )
    listed = make.freeze_versions(freeze)
    assert listed["torch"] == "2.11.0" and "torch==2.11.0+cu128" in freeze  # the local label is dropped
    assert colab_replica.pins() == {name: listed[name] for name in make.PACKAGES}
    assert colab_replica.colab_python_version() == make.python_version(os_info) == "3.13.15"
    # a package Colab stops shipping is an error that names it, not a silent gap
    without_optax = "\n".join(line for line in freeze.splitlines() if not line.lower().startswith("optax=="))
    with pytest.raises(ValueError, match=r"lists none of \['optax'\]"):
        make.render(without_optax, os_info)
    with pytest.raises(ValueError, match="no 'Python X.Y.Z' line"):
        make.render(freeze, "Ubuntu 22.04.5 LTS\n")


def test_cli_is_installed():
    out = subprocess.run([sys.executable, "-m", "gradacc.cli", "--help"], capture_output=True, text=True, check=True)
    assert "exercises" in out.stdout


def _make_dry_run(*args: str) -> subprocess.CompletedProcess:
    # a venv path that does not exist: make plans the whole install without touching the real .venv
    return subprocess.run(
        ["make", "-n", "lab", "VENV=build/no-such-venv/.venv", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_make_lab_and_lab_pt_print_the_lessons_url_and_keep_their_own_tabs(monkeypatch):
    """Issue 55, items 1 and 2. JupyterLab prints the URL of its ``default_url``: each target's is its lesson 00's
    ``/lab/tree/`` URL (the Launcher's ``/lab`` before; tests/test_browser.py opens the URL a real JupyterLab
    prints with these options). ``make lab-pt`` keeps its tabs in a workspaces folder of its own under build/, which
    JupyterLab reads from ``JUPYTERLAB_WORKSPACES_DIR``; ``make lab`` keeps the learner's own."""
    from jupyterlab.commands import get_workspaces_dir

    launches = {target: make_lab_launch(target) for target in ("lab", "lab-pt")}
    for target, lesson in (("lab", "lessons/00_setup.ipynb"), ("lab-pt", "pt-BR/lessons/00_setup.ipynb")):
        assert launches[target][1] == [f"--LabApp.default_url=/lab/tree/{lesson}"], launches[target]
        assert (ROOT / lesson).is_file(), lesson
    assert "JUPYTERLAB_WORKSPACES_DIR" not in launches["lab"][0]
    pt_workspaces = launches["lab-pt"][0]["JUPYTERLAB_WORKSPACES_DIR"]
    assert Path(pt_workspaces).parent == ROOT / "build", pt_workspaces
    monkeypatch.delenv("JUPYTERLAB_WORKSPACES_DIR", raising=False)
    english = get_workspaces_dir()
    monkeypatch.setenv("JUPYTERLAB_WORKSPACES_DIR", pt_workspaces)
    assert get_workspaces_dir() == pt_workspaces != english


def test_make_lab_torch_cpu_installs_the_cpu_build_first():
    """`make lab TORCH=cpu` installs the pinned torch from PyTorch's CPU index before the requirements (which then
    keep it: 2.13.0+cpu satisfies ==2.13.0); without TORCH no index is named; another value is refused."""
    pin = next(line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch=="))
    cpu = _make_dry_run("TORCH=cpu")
    assert cpu.returncode == 0, cpu.stderr
    lines = cpu.stdout.splitlines()
    (index_line,) = [i for i, line in enumerate(lines) if "--index-url https://download.pytorch.org/whl/cpu" in line]
    requirements_line = next(i for i, line in enumerate(lines) if "-r requirements.txt" in line)
    assert index_line < requirements_line and "grep '^torch==' requirements.txt" in lines[index_line]
    grep = subprocess.run(["bash", "-c", "grep '^torch==' requirements.txt"], cwd=ROOT, capture_output=True, text=True)
    assert grep.stdout.strip() == pin
    # only torch from that index (issue 45): its dependencies come from PyPI with the pins, and pip tries it once
    assert "--no-deps --retries 0" in lines[index_line] and "--index-url" not in lines[requirements_line]
    default = _make_dry_run()
    assert default.returncode == 0 and "--index-url" not in default.stdout
    wrong = _make_dry_run("TORCH=cuda")
    assert wrong.returncode != 0 and "TORCH=cuda is not supported" in wrong.stderr


def test_make_lab_torch_cpu_fails_fast_with_one_line_when_the_index_cannot_be_reached(tmp_path):
    """Issue 45: with PyTorch's CPU index unreachable (here a closed local port; pip's configuration files and its
    local wheel folders left out, so that nothing else can provide torch), `make install TORCH=cpu` stops after one
    try of that index with one line saying so, before installing anything else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    venv = tmp_path / ".venv"
    run = subprocess.run(
        ["make", "install", f"VENV={venv}", "TORCH=cpu", "TORCH_CPU_INDEX=http://127.0.0.1:9/whl/cpu"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode != 0
    # make's own last word: "make: ***" at the top, "make[1]: ***" when the suite itself runs under `make test`
    ours = [line for line in run.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert ours == [
        "error: torch could not be installed from PyTorch's CPU index http://127.0.0.1:9/whl/cpu (is it reachable from "
        f"here? pip's log: {venv}/torch-install.log); without TORCH=cpu pip takes PyPI's CUDA build instead"
    ], run.stderr
    log = (venv / "torch-install.log").read_text()
    assert "Retrying" not in log + run.stdout and "No matching distribution found for torch==" in log, log
    assert not list(venv.glob("lib/python*/site-packages/numpy"))  # nothing else was installed


def _fake_path(tmp_path: Path, pythons: dict[str, str | None]) -> str:
    """A PATH holding only the tools the Makefile calls and fake interpreters: ``{name: "X.Y"}``, or ``None`` for
    one that fails when run (a pyenv shim of a version that is not enabled)."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    for tool in ("cat", "sha256sum", "cut", "id"):
        (folder / tool).symlink_to(shutil.which(tool))
    for name, version in pythons.items():
        body = (
            f'case "$2" in *print*) echo {version};; esac\nexit 0'
            if version
            else "echo 'pyenv: not found' >&2\nexit 127"
        )
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return str(folder)


@pytest.mark.parametrize(
    ("pythons", "chosen", "note"),
    [
        ({"python3.11": "3.11", "python3": "3.12"}, "python3.11", False),  # a 3.11 beside the system's 3.12
        ({"python3.13": None, "python3": "3.12"}, "python3", True),  # Ubuntu 24.04 with a disabled pyenv shim
        ({"python3.13": "3.13", "python3": "3.12"}, "python3.13", True),  # Colab's version before the system's
    ],
)
def test_make_lab_chooses_a_supported_interpreter(tmp_path, pythons, chosen, note):
    path = _fake_path(tmp_path, pythons)
    run = subprocess.run(
        [shutil.which("make"), "-n", "lab", "VENV=build/no-such-venv/.venv"],
        cwd=ROOT, capture_output=True, text=True, env={"PATH": path},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert f"|| {path}/{chosen} -m venv build/no-such-venv/.venv" in run.stdout
    assert ("note: making .venv with Python" in run.stdout) == note
    if note:
        assert "the pins are tested on 3.11" in run.stdout and "TORCH=cpu" in run.stdout


@pytest.mark.parametrize("version", ["3.10", "3.14"])
def test_make_lab_refuses_an_untested_interpreter_at_once(tmp_path, version):
    path = _fake_path(tmp_path, {"python3": version})
    run = subprocess.run(
        [shutil.which("make"), "lab", "VENV=build/no-such-venv/.venv"],
        cwd=ROOT, capture_output=True, text=True, env={"PATH": path},
    )  # fmt: skip
    assert run.returncode != 0 and not (ROOT / "build" / "no-such-venv").exists()
    assert f"is Python {version}; the course needs 3.11 (tested), 3.12 or 3.13" in run.stderr
    assert "make lab PYTHON=/path/to/python3.11" in run.stderr
    none = subprocess.run([shutil.which("make"), "-n", "lab", "VENV=build/no-such-venv/.venv"], cwd=ROOT,
                          capture_output=True, text=True, env={"PATH": _fake_path(tmp_path / "empty", {})})  # fmt: skip
    assert none.returncode != 0 and "no Python found (tried python3.11, python3.13, python3.12, python3)" in none.stderr
