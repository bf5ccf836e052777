"""Colab for real: every lesson, solution and exercise on Colab's own Python and library versions (issues 12, 27).

The replica (``tests/colab_replica.py``) is an environment of Colab's Python (3.13) with exactly
``colab/requirements.txt`` (generated from Google's own list: torch 2.11, jax 0.7.2, ipywidgets 7.7.1, IPython 7.34,
transformers 5.15, accelerate 1.14, optax 0.2.8, ...), the course installed into it with the Colab setup cell's own
command. The notebooks then run there with the same checks as on the pinned environment
(test_notebooks.py): lessons to the end (tagged outputs compared), solutions pass every check, exercises fail exactly
at their checks (two of them: ``UNANSWERED_ON_COLAB``) and pass with the answers put back.
"""

from __future__ import annotations

from pathlib import Path

import cited_lines
import colab_replica
import pytest
from conftest import record_measurement
from test_notebooks import LESSONS, PEAK_LIMIT_MIB, by_solution, check_exercise, check_lesson, check_solution

pytestmark = [pytest.mark.notebook, pytest.mark.colab]

# Colab's kernels load the CUDA build of torch: importing torch, jax and transformers took 883 MiB resident on the
# replica against 407 MiB on the pinned CPU build (measured 2026-12-01), and every notebook carries those 476 MiB.
# Colab's smallest runtime has 12.7 GB of memory; Binder's 2 GB limit (PEAK_LIMIT_MIB) applies to the pinned build.
# The limit counts the kernel and the processes it starts (PSS): the kernel and each of the 2 ranks lessons 05, 07, 09
# and 11 start at once import the CUDA build (lesson 09 on the replica: 2,712 MiB, 2026-12-03).
COLAB_PEAK_LIMIT_MIB = PEAK_LIMIT_MIB + 3 * 512


@pytest.fixture(scope="session")
def colab_python() -> str:
    venv = colab_replica.build()
    seconds = colab_replica.install_course(venv)
    if seconds is not None:
        record_measurement(f"Colab replica: the setup cell's pip install of the course took {seconds:.1f} s")
    return str(venv / "bin" / "python")


@pytest.fixture(scope="session")
def colab_stacks_python(colab_python) -> str:
    """Lessons 10 and 11's environment on the replica: the overlay their setup cells' install makes
    (``stacks_overlay``)."""
    overlay = colab_replica.stacks_overlay(Path(colab_python).parents[1])
    seconds = colab_replica.install_course(overlay, colab_replica.STACKS_EXTRAS)
    if seconds is not None:
        record_measurement(
            f"Colab replica: lessons 10 and 11's setup-cell install (TRL, Lightning) took {seconds:.1f} s"
        )
    return str(overlay / "bin" / "python")


STACKS = {"10_stacks", "11_parallel", "12_per_window"}
"""Notebooks whose Colab setup cell installs the ``stacks`` extra: they run in the overlay."""


def _python(path: Path, request) -> str:
    return request.getfixturevalue("colab_stacks_python" if path.stem in STACKS else "colab_python")


def test_setup_cell_keeps_every_colab_version(colab_python):
    """Installing the course the Colab way upgrades or downgrades nothing Colab ships."""
    installed = colab_replica.installed_versions(Path(colab_python).parents[1])
    changed = {
        name: (pinned, installed.get(name))
        for name, pinned in colab_replica.pins().items()
        if installed.get(name) != pinned and installed.get(name, "").split("+")[0] != pinned
    }
    assert changed == {}, f"the setup cell changed Colab's versions (name: (Colab's, now)): {changed}"
    assert "gradacc" in installed and "nbval" in installed
    print(f"{len(colab_replica.pins())} Colab pins kept; gradacc {installed['gradacc']}, nbval {installed['nbval']}")


def test_every_line_cited_in_colabs_versions_holds_in_the_replica(colab_python):
    """The course's citations of Colab's versions (tests/cited_lines.json, ``"colab": true``: transformers 5.15,
    torch 2.11, accelerate 1.14, keras 3.13.2) say what the replica's installed files hold at those lines. Reads files
    only; the pinned versions' citations are checked by test_cited_lines.py."""
    site = colab_replica._site_packages(Path(colab_python).parents[1])
    found = cited_lines.check_colab(site)
    assert not found, "\n\n".join(found)
    print(
        f"{sum(bool(e.get('colab')) for e in cited_lines.load_table()['entries'])} lines cited in Colab's versions hold"
    )


def test_lesson_10s_setup_cell_keeps_colabs_own_libraries(colab_stacks_python):
    """Lesson 10's install (lesson 11's too: the same command) adds TRL and Lightning and upgrades only what they need
    newer: torch, transformers, accelerate, peft, keras and the rest of Colab's pins stay Colab's, as the kernel sees
    them (the overlay's copies come first on ``sys.path``)."""
    overlay = Path(colab_stacks_python).parents[1]
    seen = colab_replica.effective_versions(overlay, [*colab_replica.pins(), "trl", "pytorch-lightning"])
    upgraded = {name: (pin, seen[name]) for name, pin in colab_replica.pins().items() if seen[name] != pin}
    print(f"lesson 10 on the replica: trl {seen['trl']}, pytorch-lightning {seen['pytorch-lightning']}; "
          f"Colab's versions it replaces: {upgraded}")  # fmt: skip
    assert set(upgraded) <= colab_replica.STACKS_UPGRADES, upgraded
    assert seen["trl"].startswith("1.16.") and seen["pytorch-lightning"].startswith("2.6.")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_runs_on_colab(path: Path, request):
    check_lesson(path, _python(path, request), env="colab", peak_limit_mib=COLAB_PEAK_LIMIT_MIB)


@pytest.mark.parametrize("path", by_solution("colab"), ids=lambda p: p.name)
def test_solution_passes_its_checks_on_colab(path: Path, request):
    check_solution(path, _python(path, request), env="colab", peak_limit_mib=COLAB_PEAK_LIMIT_MIB)


UNANSWERED_ON_COLAB = {"01_theory", "07_distributed"}
"""Exercises whose unanswered release runs on the replica too. Its cells are the solution's but for the answer cells,
which raise ``NotImplementedError`` before any library call: what Colab's versions could change there is IPython 7.34's
error report (01) and a check that would start ranks (07); the solution runs of every exercise above cover the rest,
and every exercise's unanswered release runs on the pins (``tests/test_notebooks.py``). The other nine took 141 s of
test time on Colab's build (fresh-clone run of 2026-12-03) for no new path."""


@pytest.mark.parametrize(
    "path", [p for p in by_solution("colab") if p.values[0].stem in UNANSWERED_ON_COLAB], ids=lambda p: p.name
)
def test_exercise_fails_exactly_at_checks_on_colab(path: Path, request):
    check_exercise(path, _python(path, request), env="colab")
