"""Unit tests of gradacc.course.environment: runtime detection, device pick, versions, requirements, memory limit."""

from __future__ import annotations

import pytest
import torch

from gradacc.course.environment import (
    BINDER_ENV_VARS,
    describe_environment,
    library_versions,
    memory_limit_mib,
    pick_device,
    runtime,
    unmet_requirements,
)


def test_runtime_is_local_without_markers():
    assert runtime({}, set()) == "local"
    # every JupyterHub sets JUPYTERHUB_*: that alone is not Binder
    assert runtime({"JUPYTERHUB_API_URL": "http://hub:8081/hub/api", "JUPYTERHUB_USER": "ann"}, set()) == "local"


@pytest.mark.parametrize("name", BINDER_ENV_VARS)
def test_runtime_detects_binder_from_each_variable(name):
    assert runtime({name: "v2/gh/gradacc-course/gradient-accumulation/main"}, set()) == "binder"
    assert runtime({name: ""}, set()) == "local"  # an empty value is no marker


def test_runtime_detects_colab_by_module_or_variable():
    assert runtime({}, {"google.colab", "sys"}) == "colab"
    assert runtime({"COLAB_RELEASE_TAG": "release-colab_20250101-060000_RC00"}, set()) == "colab"
    # Colab wins over Binder markers (a Binder image run on Colab is Colab)
    assert runtime({"BINDER_REQUEST": "v2/gh/x/y/main"}, {"google.colab"}) == "colab"


def test_runtime_reads_the_real_process_by_default(monkeypatch):
    for name in BINDER_ENV_VARS + ("COLAB_RELEASE_TAG",):
        monkeypatch.delenv(name, raising=False)
    assert runtime() == "local"
    monkeypatch.setenv("BINDER_LAUNCH_HOST", "https://mybinder.org/")
    assert runtime() == "binder"


def test_pick_device_prefers_cuda_then_mps_then_cpu():
    device = pick_device()
    if torch.cuda.is_available():
        assert device.type == "cuda"
    elif torch.backends.mps.is_available():
        assert device.type == "mps"
    else:
        assert device == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")


def test_pick_device_refuses_unknown_or_missing_devices():
    with pytest.raises(ValueError, match="prefer must be one of"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda' is not available here"):
            pick_device("cuda")


def test_library_versions_match_the_installed_pins():
    versions = library_versions(["torch", "numpy", "gradacc", "surely-not-a-distribution-xyz"])
    assert versions["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert versions["gradacc"] == "0.1.0"
    assert versions["surely-not-a-distribution-xyz"] is None


def test_installed_libraries_meet_the_package_ranges():
    assert unmet_requirements() == []
    assert unmet_requirements(extras=["libs"]) == []
    with pytest.raises(ValueError, match="'surely-not-a-distribution-xyz' is not installed"):
        unmet_requirements("surely-not-a-distribution-xyz")


def test_memory_limit_takes_the_smallest_of_ram_cgroup_and_env(tmp_path, monkeypatch):
    import psutil

    ram_mib = psutil.virtual_memory().total / 2**20
    monkeypatch.delenv("MEM_LIMIT", raising=False)
    assert memory_limit_mib(tmp_path) == pytest.approx(ram_mib)
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    assert memory_limit_mib(tmp_path) == pytest.approx(ram_mib)
    (tmp_path / "memory.max").write_text(f"{2 * 2**30}\n")  # Binder's 2 GiB
    assert memory_limit_mib(tmp_path) == pytest.approx(min(2048.0, ram_mib))
    monkeypatch.setenv("MEM_LIMIT", str(1024 * 2**20))
    assert memory_limit_mib(tmp_path) == pytest.approx(min(1024.0, ram_mib))
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(str(2**63 - 4096))  # cgroup v1 "no limit"
    monkeypatch.delenv("MEM_LIMIT")
    assert memory_limit_mib(v1) == pytest.approx(ram_mib)


def test_describe_environment_reports_plain_values():
    info = describe_environment()
    assert info["runtime"] in ("colab", "binder", "local")
    assert info["device"] == pick_device().type
    assert info["cuda_available"] == torch.cuda.is_available()
    assert info["cpu_count"] >= 1 and info["torch_threads"] >= 1
    assert info["memory_limit_mib"] > 0
    assert info["versions"]["torch"] is not None
    assert info["python"].count(".") == 2
