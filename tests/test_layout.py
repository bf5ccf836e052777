"""The package's rooms and their import rules (docs/maintainers.md; ``gradacc/__init__.py``).

Every import in ``src/gradacc`` (module level and inside functions, absolute and relative) is read with ``ast``:

* the top level holds the rooms, ``cli``, ``i18n`` and ``__init__`` only;
* a teaching room (``foundations``, ``memory``, ``frameworks``, ``parallel``, ``stacks``) imports only the rooms
  ``ALLOWED`` lists (never ``course``, ``grading`` or ``workers``); ``course`` never imports ``grading`` or
  ``workers``; ``grading`` imports only ``course``;
* nothing imports ``workers`` (they run as processes of their own), and every worker is launched by name from a room;
* no import, at module level or inside a function, closes a cycle, and no module is longer than about 500 lines
  (``MAX_LINES``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "src" / "gradacc"
MAX_LINES = 530  # "about 500"; no module needs to sit near it (issue 48: split by concern first, STYLE.md)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The gradacc modules ``name`` imports (``from .x import y`` resolves to ``gradacc...x.y`` when that is a
    module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
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


TEACHING = ("foundations", "memory", "frameworks", "parallel", "stacks")
ROOMS = (*TEACHING, "course", "grading", "workers")
TOP_LEVEL = {*ROOMS, "cli.py", "i18n.py", "__init__.py", "locale", "__pycache__"}


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ROOMS:
        return parts[1]
    return {"gradacc": "top", "gradacc.cli": "cli", "gradacc.i18n": "shared"}[module]


ALLOWED = {  # room -> rooms it may import ("top" is ``gradacc`` itself: its ``__version__``)
    "foundations": {"foundations", "shared"},
    "frameworks": {"frameworks", "foundations", "shared"},
    "parallel": {"parallel", "frameworks", "foundations", "shared"},
    "stacks": {"stacks", "frameworks", "foundations", "shared"},
    "memory": {"memory", "parallel", "frameworks", "foundations", "shared"},  # it measures the others (bench)
    "course": {"course", *TEACHING, "shared"},
    "grading": {"grading", "course", "shared", "top"},
    "workers": {*TEACHING, "shared"},
    "cli": {"cli", "course", "grading", "memory", "shared"},
    "shared": {"shared"},
    "top": set(),
}


def test_the_top_level_holds_the_rooms_and_the_shared_modules_only():
    assert {p.name for p in PACKAGE.iterdir()} <= TOP_LEVEL
    assert {_room(m) for m in MODULES} == set(ALLOWED)
    assert "gradacc.memory.tracker" in MODULES and "gradacc.grading.score" in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_rooms(module: str):
    room = _room(module)
    wrong = sorted(t for t in _imports(module, MODULES[module]) if _room(t) not in ALLOWED[room])
    assert wrong == [], f"{module} ({room}) may import {sorted(ALLOWED[room])} only, but imports {wrong}"


def test_no_module_imports_a_worker():
    importers = sorted(
        m for m in MODULES if _room(m) != "workers" and any(_room(t) == "workers" for t in _imports(m, MODULES[m]))
    )
    assert importers == []


def test_every_worker_is_launched_by_a_room():
    """Each program of ``workers/`` is started by its dotted name (``"gradacc.workers.NAME"``) from a module outside
    ``workers/`` (a launcher of a teaching room, or ``course/checks`` for exercise 7): none is left without one."""
    launchers = "\n".join(p.read_text(encoding="utf-8") for m, p in MODULES.items() if _room(m) != "workers")
    workers = sorted(m for m in MODULES if _room(m) == "workers" and m != "gradacc.workers")
    assert workers and [m for m in workers if f'"{m}"' not in launchers] == []


def test_no_import_closes_a_cycle():
    """Imports inside functions count too: they run later, but a cycle through them still means two modules that
    each need the other (issue 48: ``grading``'s autograders -> cli -> external -> autograders)."""
    graph = {m: {t for t in _imports(m, p) if t in MODULES} for m, p in MODULES.items()}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> list[str] | None:
        state[m] = 1
        for t in sorted(graph[m]):
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
