"""The course's exercises for the autograders classrooms already run: ``gradacc export-assignments --format nbgrader``
writes an nbgrader course directory, ``--format otter`` Otter-Grader's assign format (Gradescope), both from
``solutions/`` and ``hidden/`` with the same points, visible checks and hidden checks as ``gradacc grade``.

How a check maps (README, instructor's guide: "nbgrader" and "Otter-Grader"):

* an answer cell (tagged ``solution``) is an nbgrader solution cell / an Otter solution (its ``### BEGIN SOLUTION``
  region becomes ``# BEGIN SOLUTION`` for Otter, which replaces it with ``...``);
* check X.Y is one nbgrader autograded test cell worth its points / one Otter question ``exercise_X_Y`` worth its points,
  all or nothing: the visible check is the cell's visible part / a public test that expects the ``Exercise X.Y:
  correct`` line;
* each hidden check is the cell's ``### BEGIN HIDDEN TESTS`` region / a ``hidden: true`` test: a call of
  ``gradacc.grading.hiddentest.hidden_check`` that carries the hidden blocks and the reference's answer cells as text and
  compares the student's results with the reference's on a fresh seed inside the grading kernel. The student's
  notebook (nbgrader's release, Otter's student notebook) holds neither;
* setup and prose cells are locked (nbgrader) or outside the questions (Otter).

Neither system compares printed text by itself (a test passes when it raises nothing; Otter's doctest compares the
visible check's line), which is why the hidden test computes its own expected text.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat

from .discover import hidden_from_args, load_references
from .gradebook import GradingError, Reference

__all__ = ["FORMATS", "export_assignments", "hidden_test_source", "otter_question", "add_cli"]

FORMATS = ("nbgrader", "otter")
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
NOT_FOR_GRADING = (
    "jupyterlab",
    "jupyterlab-language-pack-pt-br",
    "ruff",
    "pytest-xdist",
    "pytest-timeout",
    "pyyaml",
    "kubernetes-validate",
    "playwright",
    "jupyter-book",
    "copydetect",
    "polib",
    "babel",
    "markdown-it-py",
)
"""Pins of requirements.txt that Otter's grading image leaves out: the tools of learners (JupyterLab), maintainers
(lint, tests, site, translations) and instructors (the copying report, the cluster manifests), not of a graded
notebook. Otter's image brings its own kernel (its default requirements: ``overwrite_requirements`` is false)."""
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


# ---------------------------------------------------------------------------------------------------------- helpers
def _literal(text: str) -> str:
    """A Python literal for ``text``, triple-quoted (readable in the notebook) when that spells it exactly."""
    for quote in ("'''", '"""', "r'''", 'r"""'):
        candidate = f"{quote}{text}{quote[-3:]}"
        try:
            if ast.literal_eval(candidate) == text:
                return candidate
        except (SyntaxError, ValueError):
            continue
    return repr(text)


def _without_markers(source: str) -> str:
    """An answer cell without its ``### BEGIN/END SOLUTION`` comment lines (nbgrader refuses them in a test cell)."""
    return "\n".join(line for line in source.split("\n") if not _MARKER.match(line))


def otter_question(check: str) -> str:
    """Otter's question name for check ``2.1``: ``exercise_2_1`` (also the test file's name)."""
    return "exercise_" + check.replace(".", "_")


def _plan(ref: Reference) -> list[tuple[dict, list[int]]]:
    """Each check with the indices of the answer cells that come after the previous check cell (none for a check of
    an answer already checked, 7.3 of 7.2's)."""
    plan, pending = [], []
    for index, cell in enumerate(ref.notebook.cells):
        if cell.get("id") in ref.solution_ids:
            pending.append(index)
        check = next((c for c in ref.checks if c["index"] == index), None)
        if check is not None:
            plan.append((check, pending))
            pending = []
    return plan


def hidden_test_source(ref: Reference, check: str, blocks: Sequence[str] | None = None) -> str:
    """The code of check ``check``'s hidden test (empty when it has no hidden blocks): one ``hidden_check`` call with
    its hidden blocks (or ``blocks``), the hidden file's preamble and the reference's answer cells up to the check, as
    literals.

    Raises:
        GradingError: the hidden code spells an nbgrader delimiter (``BEGIN SOLUTION``, ``HIDDEN TESTS``), which would
            break the export.
    """
    blocks = ref.hidden.get(check, []) if blocks is None else blocks
    if not blocks:
        return ""
    index = next(c["index"] for c in ref.checks if c["check"] == check)
    answers = [
        _without_markers(cell.source) for cell in ref.notebook.cells[:index] if cell.get("id") in ref.solution_ids
    ]
    for text in [*blocks, ref.hidden_preamble, *answers]:
        for delimiter in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            if delimiter in text:
                raise GradingError(f"{ref.name}: the hidden check of {check} contains {delimiter!r}: rename it")
    lines = [
        "from gradacc.grading.hiddentest import hidden_check",
        "",
        "hidden_check(",
        "    globals(),",
        f"    {check!r},",
        "    [",
        *[f"        {_literal(block)}," for block in blocks],
        "    ],",
        f"    preamble={_literal(ref.hidden_preamble.strip())},",
        "    reference=[",
        *[f"        {_literal(answer)}," for answer in answers],
        "    ],",
        ")",
    ]
    return "\n".join(lines)


def _copy(cell) -> nbformat.NotebookNode:
    """A copy of ``cell`` without outputs."""
    new = copy.deepcopy(cell)
    if new.cell_type == "code":
        new.outputs, new.execution_count = [], None
    return new


# ----------------------------------------------------------------------------------------------------------- nbgrader
def _nbgrader_meta(grade_id: str, *, solution: bool = False, points: float | None = None) -> dict:
    meta = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    return meta


def nbgrader_notebook(ref: Reference) -> nbformat.NotebookNode:
    """nbgrader's source version of one exercise: answer cells as solution cells, each check cell an autograded test
    cell with its points and its hidden checks between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``,
    every other cell locked. Cell ids, tags and the ``gradacc`` metadata are kept (``gradacc grade`` grades an
    nbgrader submission too); outputs are cleared."""
    checks = {c["index"]: c for c in ref.checks}
    cells = []
    for index, cell in enumerate(ref.notebook.cells):
        new = _copy(cell)
        grade_id = cell.get("id") or f"cell-{index}"
        if cell.get("id") in ref.solution_ids:
            new.metadata["nbgrader"] = _nbgrader_meta(grade_id, solution=True)
        elif index in checks:
            check = checks[index]
            new.metadata["nbgrader"] = _nbgrader_meta(grade_id, points=check["points"])
            hidden = hidden_test_source(ref, str(check["check"]))
            if hidden:
                new.source = f"{cell.source.rstrip()}\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS"
        else:
            new.metadata["nbgrader"] = _nbgrader_meta(grade_id)
        cells.append(new)
    return nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(ref.notebook.metadata))


NBGRADER_CONFIG = '''"""nbgrader configuration of the course's exercises, written by `gradacc export-assignments --format nbgrader`.

    nbgrader generate_assignment NN_topic     # the release: no solutions, no hidden tests
    nbgrader autograde NN_topic               # submitted/<student>/NN_topic/NN_topic.ipynb -> gradebook.db
"""

c = get_config()  # noqa: F821 - nbgrader defines it
c.CourseDirectory.course_id = "gradacc"
# A check runs 2 processes under torchrun (7.2, 7.3) or compiles (9.2); its hidden test runs the reference too.
c.Execute.timeout = {timeout}
'''


# -------------------------------------------------------------------------------------------------------------- otter
def _raw(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_raw_cell(text)


def _points(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(float(value), 6)


def otter_notebook(ref: Reference, *, requirements: str = "requirements.txt") -> nbformat.NotebookNode:
    """Otter's assign format of one exercise: the assignment config, then per check a question ``exercise_X_Y``
    (points = the check's, all or nothing) holding its answer cells as solutions (``# BEGIN SOLUTION`` ...), the
    visible check as a public test whose expected output is the ``correct`` line, and each hidden block as a test
    with ``hidden: true``; the points split evenly over the question's tests."""
    config = "\n".join(
        [
            "# ASSIGNMENT CONFIG",
            f"name: {ref.name}",
            f"requirements: {requirements}",
            "python_version: '3.11'",
            "export_cell: false",
            "show_question_points: false",
            "generate:",
            "  pdf: false",
            "  show_hidden: false",
            "  show_stdout: false",
            "tests:",
            "  files: false",
            "  ok_format: true",
        ]
    )
    starts: dict[int, tuple[dict, list[int]]] = {}
    previous = -1
    for check, answers in _plan(ref):
        first = answers[0] if answers else check["index"]
        if first - 1 > previous and ref.notebook.cells[first - 1].cell_type == "markdown":
            first -= 1  # the prose right before the answer is the question's prompt
        starts[first], previous = (check, answers), check["index"]
    cells = [_raw(config)]
    index = 0
    while index < len(ref.notebook.cells):
        if index not in starts:
            cells.append(copy.deepcopy(ref.notebook.cells[index]))
            index += 1
            continue
        check, answers = starts[index]
        cid, points = str(check["check"]), check["points"]
        hidden = ref.hidden.get(cid, [])
        each = _points(points / (1 + len(hidden)))
        cells.append(
            _raw(f"# BEGIN QUESTION\nname: {otter_question(cid)}\npoints: {_points(points)}\nall_or_nothing: true")
        )
        for i in range(index, check["index"]):
            cell = ref.notebook.cells[i]
            if i in answers:
                answer = _copy(cell)
                answer.source = re.sub(r"^(\s*)### (BEGIN|END) SOLUTION", r"\1# \2 SOLUTION", cell.source, flags=re.M)
                cells += [_raw("# BEGIN SOLUTION"), answer, _raw("# END SOLUTION")]
            else:
                cells.append(copy.deepcopy(cell))
        visible = copy.deepcopy(ref.notebook.cells[check["index"]])
        visible.source = f'""" # BEGIN TEST CONFIG\npoints: {each}\n""" # END TEST CONFIG\n{visible.source.strip()}'
        tests = [visible]
        for number in range(len(hidden)):
            one = _copy(ref.notebook.cells[check["index"]])
            code = hidden_test_source(ref, cid, [hidden[number]])
            one.source = f'""" # BEGIN TEST CONFIG\nhidden: true\npoints: {each}\n""" # END TEST CONFIG\n{code}'
            one.id = f"{check['id']}-hidden-{number}"
            tests.append(one)
        cells += [_raw("# BEGIN TESTS"), *tests, _raw("# END TESTS"), _raw("# END QUESTION")]
        index = check["index"] + 1
    return nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(ref.notebook.metadata))


def otter_requirements(course_requirements: Path, repository: str, ref: str) -> str:
    """The requirements.txt of Otter's grading image: the course's own pins with the CPU build of torch (Gradescope's
    autograder machines have no GPU; PyPI's Linux torch is the CUDA build, several GB) and the course package at
    ``ref`` from GitHub's archive (no git needed in the image).

    Raises:
        GradingError: ``course_requirements`` does not exist or pins no torch.
    """
    if not Path(course_requirements).is_file():
        raise GradingError(f"{course_requirements} does not exist: pass the course's requirements.txt (--requirements)")
    pins = [line.strip() for line in Path(course_requirements).read_text(encoding="utf-8").splitlines()]
    pins = [line for line in pins if line and not line.startswith("#") and _pinned_name(line) not in NOT_FOR_GRADING]
    torch = [line for line in pins if re.match(r"torch\s*==", line)]
    if not torch:
        raise GradingError(f"{course_requirements} pins no torch (torch==X.Y.Z): the grading image needs one")
    version = torch[0].split("==", 1)[1].split("+")[0].strip()
    lines = [
        "# Otter's grading image (Gradescope): the course's pinned requirements that a graded notebook needs, torch's",
        "# CPU build, and the course.",
        f"--extra-index-url {CPU_TORCH_INDEX}",
        f"torch=={version}+cpu",
        *[line for line in pins if line not in torch],
        f"gradacc[libs] @ {repository.rstrip('/')}/archive/{ref}.zip",
    ]
    return "\n".join(lines) + "\n"


def _pinned_name(line: str) -> str:
    """``"Jupyter_Book==1.0"`` -> ``"jupyter-book"`` (PEP 503's normalised name)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s=<>!~;\[@]", line, maxsplit=1)[0]).lower()


def check_course_ref(reference: Path, ref: str | None, repository: str = "") -> str:
    """Where the Otter image will install the course from must exist: ``ref`` must name a commit of the git clone that
    holds ``reference`` (the solutions folder). Returns ``""`` when it does, else a warning: no ``ref`` (the image
    then installs ``main``, which moves with every push), or it cannot be checked (no git, no clone).

    Raises:
        GradingError: the clone has no tag, branch or commit ``ref``.
    """
    import shutil
    import subprocess

    repository = repository or "the course repository"
    if not ref:
        return (
            f"no --course-ref: the grading image installs the course from {repository}'s archive of main, which "
            "moves with every commit pushed there, so a later image may grade with another version than the one "
            "you handed out. Pass --course-ref with the term's tag, pushed to that repository (or a commit hash)"
        )
    folder = Path(reference).resolve()
    folder = folder if folder.is_dir() else folder.parent
    git = shutil.which("git")
    if git is None:
        return f"--course-ref {ref} not checked: git is not installed"
    inside = subprocess.run([git, "-C", str(folder), "rev-parse", "--is-inside-work-tree"], capture_output=True)
    if inside.returncode != 0:
        return f"--course-ref {ref} not checked: {folder} is not in a git clone"
    for name in (ref, f"origin/{ref}"):
        found = subprocess.run([git, "-C", str(folder), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"])
        if found.returncode == 0:
            return ""
    raise GradingError(
        f"--course-ref {ref}: the git clone that holds the solutions folder {folder} has no tag, branch or commit "
        f"{ref!r} (git tag lists the tags). The grading image installs the course from {repository}'s archive of "
        f"{ref}: tag the commit you hand out (git tag {ref}) and push the tag to that repository (git push REMOTE "
        f"{ref}, where git remote -v shows which REMOTE is {repository}), or pass an existing one (a commit hash)"
    )


# ------------------------------------------------------------------------------------------------------------ export
def export_assignments(
    reference: Path,
    out: Path,
    fmt: str,
    *,
    hidden: Path | None = None,
    exercises: Sequence[str] | None = None,
    course_requirements: Path | None = None,
    repository: str | None = None,
    course_ref: str = "main",
    cell_timeout: int = 600,
) -> list[Path]:
    """Write every exercise of ``reference`` (or those in ``exercises``) for ``fmt`` (``nbgrader`` or ``otter``) into
    ``out``; returns the notebooks written.

    nbgrader: ``out/nbgrader_config.py`` and ``out/source/NN_topic/NN_topic.ipynb`` (a course directory:
    ``nbgrader generate_assignment NN_topic`` there). Otter: ``out/NN_topic/NN_topic.ipynb`` with
    ``out/NN_topic/requirements.txt`` (``otter assign NN_topic.ipynb dist`` there).

    Raises:
        GradingError: an unknown format or exercise, no reference, a hidden check that cannot be exported.
    """
    if fmt not in FORMATS:
        raise GradingError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    refs = load_references(Path(reference), hidden, exercises)
    selected = [refs[name] for name in (exercises or refs)]
    out = Path(out)
    written = []
    if fmt == "nbgrader":
        out.mkdir(parents=True, exist_ok=True)
        (out / "nbgrader_config.py").write_text(NBGRADER_CONFIG.format(timeout=cell_timeout), encoding="utf-8")
        for ref in selected:
            path = out / "source" / ref.name / f"{ref.name}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nbgrader_notebook(ref), path)
            written.append(path)
        return written
    from .classroom import COURSE_REPOSITORY

    folder = Path(reference) if Path(reference).is_dir() else Path(reference).parent
    requirements = otter_requirements(
        course_requirements or folder.resolve().parent / "requirements.txt", repository or COURSE_REPOSITORY, course_ref
    )
    for ref in selected:
        path = out / ref.name / f"{ref.name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "requirements.txt").write_text(requirements, encoding="utf-8")
        nbformat.write(otter_notebook(ref), path)
        written.append(path)
    return written


# --------------------------------------------------------------------------------------------------------------- CLI
def _cmd_export(args: argparse.Namespace) -> int:
    try:
        from .classroom import COURSE_REPOSITORY

        repository = args.course_repository or COURSE_REPOSITORY
        warning = check_course_ref(Path(args.reference), args.course_ref, repository) if args.format == "otter" else ""
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
        written = export_assignments(
            Path(args.reference),
            Path(args.out),
            args.format,
            hidden=hidden_from_args(args),
            exercises=args.exercise,
            course_requirements=Path(args.requirements) if args.requirements else None,
            repository=args.course_repository,
            course_ref=args.course_ref or "main",
        )
    except (GradingError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)  # a Path: no "//" from an --out that ends with "/"
    print(f"wrote {len(written)} {args.format} notebooks into {out}")
    name = written[0].stem if len(written) == 1 else "NN_topic"
    # nbgrader and otter of this environment (the course's .venv), which must be on PATH: nbgrader runs alembic by name
    script = Path(sys.executable).parent / "activate"
    activate = f"source {script} && " if script.is_file() else ""  # none: gradacc runs outside a virtual environment
    if args.format == "nbgrader":
        print(f"next: {activate}cd {out} && nbgrader generate_assignment {name}")
    else:
        print(f"next: {activate}cd {out / name} && otter assign {name}.ipynb dist")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "export-assignments",
        help="write every exercise as an nbgrader course directory or Otter-Grader (Gradescope) assign notebooks",
        description="Export the exercises of --reference with their points, visible and hidden checks for nbgrader "
        "(a course directory) or Otter-Grader (assign-format notebooks, one question per check).",
    )
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--exercise", action="append", help="only this exercise (NN_topic; repeatable)")
    p.add_argument("--reference", default="solutions", help="solutions folder (default solutions)")
    p.add_argument("--hidden", help="hidden-checks folder (default: hidden/ next to the reference folder)")
    p.add_argument("--no-hidden", action="store_true", help="export the visible checks only")
    p.add_argument(
        "--requirements", help="Otter: the course's pinned requirements (default: requirements.txt above --reference)"
    )
    p.add_argument("--course-repository", help="Otter: the course repository the grading image installs from")
    p.add_argument(
        "--course-ref",
        help="Otter: its tag, branch or commit, pushed to --course-repository (default main, with a warning: main moves)",
    )
    p.set_defaults(func=_cmd_export)
