"""The student release (``gradacc release``, docs/instructors/hand-out.md): what it holds, read back by content, and
what the guide claims about the hidden checks when ``hidden/`` is public.

One release is built per module (about 1 s of CPU); installing it with pip and importing a check from it costs
about 3 s more.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from gradacc.cli import main
from gradacc.course.notebooks import BEGIN
from gradacc.course.release import answer_lines, build_release, hidden_lines, leaks
from gradacc.grading.discover import load_hidden
from gradacc.grading.merge import HIDDEN_PREAMBLE


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "class"
    assert main(["release", str(out), "--root", str(ROOT)]) == 0
    return out


def _texts(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_the_release_holds_the_exercises_of_both_editions_and_the_package(release):
    names = set(_texts(release))
    exercises = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("exercises/*.ipynb")}
    exercises |= {p.relative_to(ROOT).as_posix() for p in ROOT.glob("pt-BR/exercises/*.ipynb")}
    assert len(exercises) == 2 * len(list((ROOT / "solutions").glob("*.ipynb"))) and exercises <= names
    assert {p.relative_to(ROOT).as_posix() for p in ROOT.glob("lessons/*.ipynb")} <= names
    assert {
        "README.md",
        "README.pt-BR.md",
        "requirements.txt",
        "pyproject.toml",
        "Makefile",
        "src/gradacc/__init__.py",
    } <= names
    for name in exercises:  # copied as they are
        assert (release / name).read_bytes() == (ROOT / name).read_bytes()


def test_nothing_private_is_in_the_release(release):
    texts = _texts(release)
    assert not [n for n in texts if re.match(r"(pt-BR/)?(solutions|hidden|tests)/", n)]
    # no notebook or page holds a solution or hidden-test marker; in the package, only the modules that define them
    marked = sorted(n for n, t in texts.items() if "BEGIN SOLUTION" in t or "BEGIN HIDDEN TESTS" in t)
    assert marked == [
        "src/gradacc/course/notebooks.py",
        "src/gradacc/course/release.py",
        "src/gradacc/course/translation/units.py",
        "src/gradacc/grading/autograders.py",
    ]
    for name in marked:  # there as the marker's definition, never followed by an answer
        assert not re.search(rf"{BEGIN}\n\s*\S", texts[name])
    # no line of a hidden check's own code (its draws, its printed results) anywhere, the package included
    blocks = [b for p in sorted(ROOT.glob("hidden/*.py")) for bs in load_hidden(p)[1].values() for b in bs]
    assert len(blocks) >= 22
    distinctive = {
        line.strip() for b in blocks for line in b.splitlines() if "rng." in line and len(line.strip()) >= 24
    }
    assert len(distinctive) >= 40
    assert not [(n, line) for n, t in texts.items() for line in distinctive if line in t]
    # no answer line in an exercise, a page or a README (lessons and the package teach the same code: the guide says so)
    answers = answer_lines(ROOT)
    assert len(answers) >= 100
    checked = [n for n in texts if not n.startswith(("src/", "lessons/", "pt-BR/lessons/"))]
    assert len(checked) >= 30
    assert not [(n, line) for n in checked for line in answers if line in texts[n]]
    assert leaks(release, ROOT) == []


def test_a_leaking_release_is_refused_and_removed(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "src" / "gradacc").mkdir(parents=True)
    (course / "src" / "gradacc" / "__init__.py").write_text("")
    (course / "hidden").mkdir()
    (course / "hidden" / "01_theory.py").write_text("# %% hidden 1.1\nvalues = [rng.uniform(0, 1) for _ in range(3)]\n")
    (course / "exercises").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("values = [rng.uniform(0, 1) for _ in range(3)]")])
    nbformat.write(nb, course / "exercises" / "01_theory.ipynb")
    assert hidden_lines(course) == {"values = [rng.uniform(0, 1) for _ in range(3)]"}
    out = tmp_path / "out"
    assert main(["release", str(out), "--root", str(course)]) == 2
    assert "exercises/01_theory.ipynb: holds a hidden check's line" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match="not empty"):
        build_release(ROOT, tmp_path)
    # a dot file beside the exercises (a filled-in copy that a test leaves while it runs) is never taken
    (course / "exercises" / ".filled-01_theory.ipynb").write_text("{}")
    (course / "hidden" / "01_theory.py").write_text("")
    assert main(["release", str(out), "--root", str(course)]) == 0
    assert sorted(p.name for p in (out / "exercises").iterdir()) == ["01_theory.ipynb"]


def test_the_release_installs_and_its_checks_run(release, tmp_path):
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    subprocess.run([*pip, "--target", str(target), str(release)], check=True, capture_output=True, timeout=300)
    script = (
        "import gradacc, torch\n"
        "from gradacc.course.checks.lesson01 import check_combine_means\n"
        "print(gradacc.__file__)\n"
        "check_combine_means(lambda means, counts: sum(m * c for m, c in zip(means, counts)) / sum(counts))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(target / "gradacc" / "__init__.py"), "Exercise 1.1: correct"]
    assert list((target / "gradacc" / "locale").rglob("*.mo"))  # the pt-BR messages travel with it


def _hidden_prints(seed: int) -> dict[str, str]:
    """What exercise 1's hidden checks print for the reference solution on ``seed`` (as ``gradacc grade`` runs them)."""
    nb = nbformat.read(ROOT / "solutions" / "01_theory.ipynb", as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.get("id") == "theory-ex-03" or "solution" in cell.metadata.get("tags", []):
            exec(cell.source, namespace)
    preamble, blocks = load_hidden(ROOT / "hidden" / "01_theory.py")
    printed = {}
    for check, codes in blocks.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as the grader, which compares stdout only
            for code in codes:
                exec("\n\n".join([HIDDEN_PREAMBLE, preamble, code]), dict(namespace, GRADACC_SEED=seed))
        printed[check] = out.getvalue()
    return printed


def test_a_public_hidden_check_gives_no_answer_to_copy():
    """hand-out.md: knowing hidden/ tells what is checked, not what to print: the expected text changes with the
    seed each grading run draws, so a printed result learnt from one run (or from running hidden/ at home on another
    seed) is wrong in the next."""
    first, second = _hidden_prints(1), _hidden_prints(2)
    assert set(first) == {"1.1", "1.2"}
    for check in first:
        assert first[check] and second[check]
        assert set(first[check].splitlines()).isdisjoint(second[check].splitlines()), check
    assert _hidden_prints(1) == first  # the same seed, the same text: what makes --seed and --resume fair


def test_a_release_of_some_exercises_links_only_to_what_it_holds(tmp_path, capsys):
    """Issue 60 follow-up: no way to hand out only exercises 02 and 11; the release's README linked to solutions/
    (absent there) and its Makefile kept `make test` and other targets that need tests/."""
    out = tmp_path / "class"
    assert main(["release", str(out), "--root", str(ROOT), "--exercise", "02", "--exercise", "11_parallel"]) == 0
    assert "exercises 02_pytorch, 11_parallel (en, pt-BR)" in capsys.readouterr().out
    names = set(_texts(out))
    assert {n for n in names if "exercises/" in n} == {
        "exercises/02_pytorch.ipynb", "exercises/11_parallel.ipynb",
        "pt-BR/exercises/02_pytorch.ipynb", "pt-BR/exercises/11_parallel.ipynb"}  # fmt: skip
    for name, text in _texts(out).items():
        if not name.endswith(".md"):
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            target = target.split("#", 1)[0]
            if target and not re.match(r"[a-z]+:", target):
                assert ((out / name).parent / target).exists(), (name, target)  # every link leads somewhere
        assert "solutions/" not in re.sub(r"`[^`]*`", "", text) or name.startswith("docs"), name
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "> This is the student release of the course: the exercises 02_pytorch, 11_parallel" in readme
    assert "> Esta é a versão para os alunos" in (out / "README.pt-BR.md").read_text(encoding="utf-8")
    makefile = (out / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", makefile, re.M))
    assert targets == {"install", "lab", "lab-pt", "bench", "clean"} and "tests/" not in makefile
    done = subprocess.run(["make", "-C", str(out), "-n", "install"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "pip install" in done.stdout, done.stderr  # the Makefile still parses and runs
    assert main(["release", str(tmp_path / "x"), "--root", str(ROOT), "--exercise", "99"]) == 2
    assert "--exercise 99: no exercise is called that (the exercises: 01_theory" in capsys.readouterr().err
