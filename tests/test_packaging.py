"""The install story: pins agree everywhere, the package metadata admits Colab's versions, the CLI is installed."""

from __future__ import annotations

import re
import subprocess
import sys

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


def test_package_ranges_admit_the_pins_and_what_colab_ships():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    colab = {"torch": "2.11.0", "jax": "0.7.2", "ipywidgets": "7.7.1", "numpy": "2.0.2", "matplotlib": "3.10.0"}
    for line in meta["dependencies"] + meta["optional-dependencies"]["libs"]:
        req = Requirement(line)
        name = req.name.lower()
        assert name in pins, f"{name} is a dependency but has no pin in requirements.txt"
        assert req.specifier.contains(Version(pins[name])), f"{line} excludes the pin {pins[name]}"
        if name in colab:
            assert req.specifier.contains(Version(colab[name])), f"{line} excludes Colab's {colab[name]}"
    assert re.match(r">=3\.1[01]$", meta["requires-python"])


def test_cli_is_installed():
    out = subprocess.run([sys.executable, "-m", "gradacc.cli", "--help"], capture_output=True, text=True, check=True)
    assert "exercises" in out.stdout
