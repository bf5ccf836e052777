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


def _needs(lesson) -> set[str]:
    """Top-level modules a lesson needs: its code's imports, those of the ``gradacc`` modules it imports, and those of
    the ``gradacc.workers`` programs it starts (named in its code or in those modules)."""
    import ast
    import re

    import nbformat
    from conftest import ROOT

    def imported(source: str, package: str = "") -> set[str]:
        names = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = (package.rsplit(".", node.level - 1)[0] if node.level > 1 else package) if node.level else ""
                module = ".".join(part for part in (base, node.module) if part)
                names |= {module} | {f"{module}.{a.name}" for a in node.names}
        return names

    cells = nbformat.read(lesson, as_version=4).cells
    code = "\n".join(re.sub(r"^\s*[%!].*$", "", c.source, flags=re.M) for c in cells if c.cell_type == "code")
    names, sources = imported(code), [code]
    direct = set(names)
    for name in sorted(n for n in direct if n.startswith("gradacc")):
        path = ROOT / "src" / name.replace(".", "/")
        for file, package in ((path.with_suffix(".py"), name.rsplit(".", 1)[0]), (path / "__init__.py", name)):
            if file.is_file():
                sources.append(file.read_text())
                found = imported(sources[-1], package)
                names |= found
                if file.name == "__init__.py":  # a room's API (`from gradacc.memory import step_memory`): the module
                    wanted = {n.rsplit(".", 1)[1] for n in direct if n.startswith(f"{name}.")}  # that defines the name
                    for module in sorted({n.rsplit(".", 1)[0] for n in found if n.rpartition(".")[2] in wanted}):
                        program = (ROOT / "src" / module.replace(".", "/")).with_suffix(".py")
                        if module.startswith(f"{name}.") and program.is_file():
                            sources.append(program.read_text())
                            names |= imported(sources[-1], name)
    for worker in {w for s in sources for w in re.findall(r"gradacc\.workers\.(\w+)", s)}:
        program = ROOT / "src" / "gradacc" / "workers" / f"{worker}.py"
        if program.is_file():  # a docstring's "gradacc.workers.NAME" names none
            names |= imported(program.read_text(), "gradacc.workers")
    return {n.split(".")[0] for n in names}


def test_every_extra_is_checked_by_lesson_00_for_the_lessons_that_need_it():
    """Issue 45: lesson 00 checks the core and every extra of the package (``EXTRAS``), reports every library of
    them, names the lessons that need each one (their imports say which) and gives the fix that installs it."""
    from importlib import metadata

    import nbformat
    from conftest import ROOT
    from packaging.requirements import Requirement

    from gradacc.course.environment import EXTRAS, LIBRARIES, MAINTAINER_EXTRAS, install_hint

    declared = metadata.metadata("gradacc").get_all("Provides-Extra")
    assert sorted(EXTRAS) == sorted(set(declared) - set(MAINTAINER_EXTRAS)) and set(MAINTAINER_EXTRAS) <= set(declared)
    modules = {"libs": {"jax", "optax", "transformers", "accelerate", "datasets", "tokenizers",
                      "sentence_transformers"},
               "stacks": {"trl", "peft", "pytorch_lightning", "keras", "opacus", "mlx", "mlx_lm"}}  # fmt: skip
    for extra in EXTRAS:
        wanted = [Requirement(r) for r in metadata.requires("gradacc") if f'extra == "{extra}"' in r]
        assert {r.name for r in wanted} <= set(LIBRARIES), extra
        assert {r.name.replace("-", "_") for r in wanted} == modules[extra], extra
    lessons = sorted((ROOT / "lessons").glob("*.ipynb"))
    for extra, (_, numbers) in EXTRAS.items():
        needing = [p.name[:2] for p in lessons if _needs(p) & modules[extra]]
        assert needing == list(numbers), (extra, needing)
    setup = "\n".join(c.source for c in nbformat.read(ROOT / "lessons" / "00_setup.ipynb", as_version=4).cells)
    assert all(f'unmet_requirements(extras=["{extra}"])' in setup for extra in EXTRAS)
    assert "`.venv/bin/pip install -e '.[libs,stacks]'`" in install_hint("stacks", "local")
    assert "`pip install -e '.[libs]'`" in install_hint("libs", "binder")
    assert "make lab" not in install_hint("libs", "binder")  # Binder has no make lab, nor a .venv
    assert "make lab" in install_hint("libs", "local")
    assert "the first cell of lesson 10 or 11" in install_hint("stacks", "colab")
    with pytest.raises(ValueError, match="extra must be one of"):
        install_hint("all")


def test_lessons_00_and_03_say_their_findings_in_sentences_in_both_languages():
    """Issue 55: lesson 00 printed ``Binder markers present: []`` and lesson 03 ``smallest N that fits: None``; the
    package now says both in words, through the message catalog (``gradacc.po``)."""
    from gradacc.course.environment import binder_markers_sentence
    from gradacc.i18n import set_language
    from gradacc.memory import smallest_n_line

    try:
        for lang, none, some, fits, no_fit in [
            ("en", "No Binder variable is set (6 checked): this is not a Binder session.",
             "Binder variables set (BINDER_REQUEST, BINDER_REPO_URL): this is a Binder session.",
             "A10G: smallest N that fits: 8 (peak 19.53 GiB)", "T4: no N up to 64 fits (peak at N = 64: 15.81 GiB)"),
            ("pt_BR", "Nenhuma variável do Binder está definida (6 verificadas): esta não é uma sessão do Binder.",
             "Variáveis do Binder definidas (BINDER_REQUEST, BINDER_REPO_URL): esta é uma sessão do Binder.",
             "A10G: menor N que cabe: 8 (pico de 19.53 GiB)", "T4: nenhum N até 64 cabe (pico em N = 64: 15.81 GiB)"),
        ]:  # fmt: skip
            set_language(lang)
            assert binder_markers_sentence({"BINDER_REQUEST": ""}) == none  # an empty value is no marker
            assert binder_markers_sentence({"BINDER_REPO_URL": "u", "BINDER_REQUEST": "r"}) == some  # in their order
            assert smallest_n_line("A10G", 8, 19.53 * 1024) == fits
            assert smallest_n_line("T4", None, 15.81 * 1024) == no_fit
    finally:
        set_language(None)
