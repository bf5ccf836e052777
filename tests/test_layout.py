"""The package's three rooms and their import rules (docs/maintainers.md; ``gradacc/__init__.py``).

Every import in ``src/gradacc`` (module level and inside functions, absolute and relative) is read with ``ast``:

* teaching modules (the top level, ``memory/`` and ``stacks/``) never import ``course``, ``grading`` or ``workers``;
* ``course`` never imports ``grading`` or ``workers``; ``grading`` never imports ``workers`` nor a teaching module;
* nothing imports ``workers`` (they run as processes of their own);
* every room may import ``gradacc.i18n`` (the learner's language: check messages, the grader's feedback);
* the module-level imports have no cycle, and no module is longer than about 500 lines (``MAX_LINES``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "src" / "gradacc"
MAX_LINES = 530  # "about 500": jaxacc and trainer are one lesson each, a little over


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, top_level_only: bool = False) -> set[str]:
    """The gradacc modules ``name`` imports (``from .x import y`` resolves to ``gradacc...x.y`` when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t == "gradacc" or t.startswith("gradacc.")}
    return found - {name}


SHARED = {"gradacc.i18n"}
"""Modules every room may import: the learner's language (``gradacc.i18n``), which the checks (``course``), the
grader's feedback (``grading``) and the lessons' own messages all use."""


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("course", "grading", "workers"):
        return parts[1]
    return "cli" if module == "gradacc.cli" else "teaching"


ALLOWED = {  # room -> rooms it may import
    "teaching": {"teaching"},
    "course": {"course", "teaching"},
    "grading": {"grading", "course"},
    "workers": {"teaching"},
    "cli": {"cli", "course", "grading", "teaching"},
}


def test_the_modules_are_found_in_all_rooms():
    rooms = {_room(m) for m in MODULES}
    assert rooms == {"teaching", "course", "grading", "workers", "cli"}
    assert "gradacc.memory.tracker" in MODULES and "gradacc.grading.score" in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_rooms(module: str):
    room = _room(module)
    imported = _imports(module, MODULES[module]) - SHARED - {"gradacc"}
    wrong = sorted(t for t in imported if _room(t) not in ALLOWED[room])
    assert wrong == [], f"{module} ({room}) may import {sorted(ALLOWED[room])} only, but imports {wrong}"


def test_no_module_imports_a_worker():
    importers = sorted(
        m for m in MODULES if _room(m) != "workers" and any(_room(t) == "workers" for t in _imports(m, MODULES[m]))
    )
    assert importers == []


def test_module_level_imports_have_no_cycle():
    graph = {
        m: {t for t in _imports(m, p, top_level_only=True) if t in MODULES and not MODULES[t].name == "__init__.py"}
        for m, p in MODULES.items()
    }
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> list[str] | None:
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                return stack + [m, t]
            if t not in state and (cycle := visit(t, stack + [m])):
                return cycle
        state[m] = 2
        return None

    cycles = [c for m in sorted(graph) if m not in state and (c := visit(m, []))]
    assert cycles == []


def test_no_module_is_much_longer_than_500_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_gradacc_import_names_a_module_that_exists(module: str):
    """Imports inside functions run only when called: a moved module's stale relative import shows up here first."""
    missing = sorted(t for t in _imports(module, MODULES[module]) if t not in MODULES)
    assert missing == [], f"{module} imports modules that do not exist: {missing}"
