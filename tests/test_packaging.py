"""The install story: pins agree everywhere, the package metadata admits Colab's versions, the CLI is installed."""

from __future__ import annotations

import subprocess
import sys

import colab_replica
import tomllib
import yaml
from conftest import ROOT
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
    for line in meta["dependencies"] + meta["optional-dependencies"]["libs"]:
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
    assert meta["requires-python"] == ">=3.11" and colab_replica.PYTHON_VERSION == "3.12"


def test_cli_is_installed():
    out = subprocess.run([sys.executable, "-m", "gradacc.cli", "--help"], capture_output=True, text=True, check=True)
    assert "exercises" in out.stdout


def _make_dry_run(*args: str) -> subprocess.CompletedProcess:
    # a venv path that does not exist: make plans the whole install without touching the real .venv
    return subprocess.run(
        ["make", "-n", "lab", "VENV=build/no-such-venv/.venv", *args], cwd=ROOT, capture_output=True, text=True
    )


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
    default = _make_dry_run()
    assert default.returncode == 0 and "--index-url" not in default.stdout
    wrong = _make_dry_run("TORCH=cuda")
    assert wrong.returncode != 0 and "TORCH=cuda is not supported" in wrong.stderr
