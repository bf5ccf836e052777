"""The student release: ``gradacc release OUT`` copies what a class is handed, and nothing of the answers.

In it: the exercises of both editions (``exercises/``, ``pt-BR/exercises/``), the lessons (``--no-lessons`` leaves them
out), the package (``src/gradacc``, which the check cells import), ``pyproject.toml``, ``requirements.txt``,
``environment.yml``, the ``Makefile`` (``make lab``, with ``binder/overrides.json``, JupyterLab's settings), both
READMEs and the learner's pages of ``docs/``. Never in it: ``solutions/`` and ``pt-BR/solutions/`` (the answers),
``hidden/`` (the hidden checks), ``tests/`` (the wrong-answer corpus among them), the instructor's and maintainer's
guides and ``locale/``.

``--exercise NN`` (repeatable; ``02`` or ``02_pytorch``) hands out only those exercises, in both editions (the
lessons stay whole: each builds on the ones before). The copy is made for the release: its READMEs and pages link only
to what it holds (a link to a file it lacks keeps its text, and the sentence that sends students to ``solutions/`` is
dropped), and its ``Makefile`` keeps only the targets that work without the course's tests, solutions, catalogs and
site (``install``, ``lab``, ``lab-pt``, ``bench``, ``clean``: ``RELEASE_TARGETS``).

After copying, every file is read back: the release is refused (and removed) when a notebook or page holds a
``### BEGIN SOLUTION`` marker, or any file holds a line of an answer (a line between the markers of a solution that
its exercise does not hold) or of a hidden check (``leaks``).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import nbformat

from ..i18n import N_, translate
from .notebooks import BEGIN, END

__all__ = ["RELEASED", "LESSONS", "RELEASE_TARGETS", "answer_lines", "hidden_lines", "leaks", "select_exercises",
           "release_makefile", "release_links", "release_note", "RELEASE_NOTE", "build_release"]  # fmt: skip

RELEASED = (
    "README.md",
    "README.pt-BR.md",
    "pyproject.toml",
    "requirements.txt",
    "environment.yml",
    "Makefile",
    "binder/overrides.json",
    "exercises/*.ipynb",
    "pt-BR/exercises/*.ipynb",
    "docs/index.md",
    "docs/troubleshooting.md",
    "pt-BR/docs/index.md",
    "pt-BR/docs/troubleshooting.md",
)
"""The course's files in a release (globs from the course root), besides the package and the lessons."""
LESSONS = ("lessons/*.ipynb", "pt-BR/lessons/*.ipynb")
PACKAGE = "src/gradacc"
RELEASE_TARGETS = ("install", "lab", "lab-pt", "bench", "clean")
"""The ``make`` targets a release keeps: the others need what it lacks (``tests/``, ``solutions/``, ``locale/``,
the site's sources)."""
_SKIPPED = ("__pycache__", ".pyc", ".egg-info", ".ipynb_checkpoints")
MIN_LINE = 24
"""An answer or hidden-check line shorter than this many characters (stripped) is too common to be evidence."""


def _answer_region(source: str) -> list[str]:
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip().startswith(END):
            inside = False
        elif line.strip().startswith(BEGIN):
            inside = True
        elif inside:
            lines.append(line.strip())
    return lines


def answer_lines(root: Path) -> set[str]:
    """The lines of every answer (between the markers of ``solutions/`` and ``pt-BR/solutions/``), stripped, at
    least ``MIN_LINE`` characters long and in no exercise (an exercise's own code is public, and so is a line that
    another exercise gives: ``for batch in micro_batches:`` is 11.1's answer and 9.1's given code)."""
    found: set[str] = set()
    for solution in sorted(root.glob("solutions/*.ipynb")) + sorted(root.glob("pt-BR/solutions/*.ipynb")):
        for cell in nbformat.read(solution, as_version=4).cells:
            if cell.cell_type == "code":
                found |= {line for line in _answer_region(cell.source) if len(line) >= MIN_LINE}
    public = [p.read_text(encoding="utf-8") for p in sorted(root.glob("exercises/*.ipynb"))]
    public += [p.read_text(encoding="utf-8") for p in sorted(root.glob("pt-BR/exercises/*.ipynb"))]
    return {line for line in found if not any(line in text for text in public)}


def hidden_lines(root: Path) -> set[str]:
    """The lines of ``hidden/*.py`` that draw a hidden check's inputs (they use ``rng`` or ``GRADACC_SEED``),
    stripped, at least ``MIN_LINE`` long: the code that makes a hidden check other than the visible one."""
    found: set[str] = set()
    for path in sorted(root.glob("hidden/*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if len(line) >= MIN_LINE and not line.startswith("#") and re.search(r"\brng\b|GRADACC_SEED", line):
                found.add(line)
    return found


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(s in str(p) for s in _SKIPPED))


def leaks(release: Path, root: Path) -> list[str]:
    """What in ``release`` gives an answer away: ``"PATH: why"`` for a file in a solutions, hidden or tests folder, a
    solution marker in a notebook or page, a line of a hidden check's draws (``hidden_lines``) in any file, or an
    answer line (``answer_lines``) in a file other than a lesson or the package's code (which teach and check the
    same code by design: docs/instructors/hand-out.md)."""
    release, root = Path(release), Path(root)
    answers, hidden = answer_lines(root), hidden_lines(root)
    found = []
    for path in _files(release):
        parts = path.relative_to(release).parts
        name = "/".join(parts)
        if {"solutions", "hidden", "tests"} & set(parts[:-1]):
            found.append(f"{name}: in a folder of answers, hidden checks or tests")
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix in (".ipynb", ".md") and ("BEGIN SOLUTION" in text or "BEGIN HIDDEN TESTS" in text):
            found.append(f"{name}: holds a solution marker")
        found += [f"{name}: holds a hidden check's line {line!r}" for line in sorted(hidden) if line in text]
        if "lessons" not in parts and parts[0] != "src":
            found += [f"{name}: holds an answer line {line!r}" for line in sorted(answers) if line in text]
    return found


def select_exercises(root: Path, wanted: list[str] | None) -> set[str] | None:
    """The exercise names (``NN_topic``) of ``exercises/`` that ``wanted`` (``02`` or ``02_pytorch`` each) names, or
    ``None`` (every one) when ``wanted`` is empty.

    Raises:
        ValueError: a name that fits no exercise (the message lists them).
    """
    if not wanted:
        return None
    names = sorted(p.stem for p in Path(root).glob("exercises/*.ipynb") if not p.name.startswith("."))
    chosen = set()
    for want in wanted:
        fits = [n for n in names if n == want or n.split("_", 1)[0] == want.zfill(2)]
        if not fits:
            raise ValueError(f"--exercise {want}: no exercise is called that (the exercises: {', '.join(names)})")
        chosen.update(fits)
    return chosen


def release_makefile(text: str) -> str:
    """The course's ``Makefile`` for a release: only the rules of ``RELEASE_TARGETS`` (each paragraph, comments
    included, that defines another target is dropped) and the ``.PHONY`` and ``INSTALL_GOALS`` lists cut to them."""
    kept = []
    for block in text.split("\n\n"):
        targets = re.findall(r"^([a-z][\w-]*)\s*:(?!=)", block, re.M)
        if any(t not in RELEASE_TARGETS for t in targets):
            continue
        kept.append(block)
    text = "\n\n".join(kept)

    def cut(match: re.Match) -> str:
        return match.group(1) + " ".join(n for n in match.group(2).split() if n in RELEASE_TARGETS)

    text = re.sub(r"^(\.PHONY: )(.*)$", cut, text, flags=re.M)
    return re.sub(r"^(INSTALL_GOALS := )(.*)$", cut, text, flags=re.M)


RELEASE_NOTE = N_(
    "This is the student release of the course: the exercises {exercises}, without their answers. Here `make lab`, "
    "`make lab TORCH=cpu`, `make lab-pt`, `make install` and `make clean` work; `make test` and the other commands "
    "that this page names need the course's own repository (its tests, solutions and translation catalogs)."
)
"""The line a release's READMEs open with (after the title), in each README's language."""


def release_note(text: str, lang: str, exercises: list[str]) -> str:
    """``text`` (a README) with ``RELEASE_NOTE`` in ``lang`` as a quote after its first line (the title)."""
    title, _, rest = text.partition("\n")
    note = translate(RELEASE_NOTE, lang).format(exercises=", ".join(exercises))
    return f"{title}\n\n> {note}\n{rest}"


_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
_SOLUTIONS_ASIDE = re.compile(r"\s*\([^()]*\[[^\]]*\]\((?:\.\./)*(?:pt-BR/)?solutions/[^)]*\)\)")
"""``(answers in [solutions/](solutions/))``, in either edition: the release has no answers to point to."""


def release_links(text: str, page: Path, release: Path) -> str:
    """``text`` (a Markdown page at ``page`` of the release ``release``) without links to files the release lacks:
    the aside that points to ``solutions/`` and a parenthesis that is only such a link (``([how](locale/README.md))``)
    are dropped, any other such link keeps its text. Web links and anchors stay."""
    text = _SOLUTIONS_ASIDE.sub("", text)

    def missing(target: str) -> bool:
        target = target.split("#", 1)[0]
        return bool(target) and not re.match(r"[a-z]+:", target) and not (page.parent / target).exists()

    text = re.sub(  # "([how](locale/README.md))" says nothing without its link
        r"\s*\(" + _LINK.pattern + r"\)", lambda m: "" if missing(m.group(2)) else m.group(0), text
    )
    return _LINK.sub(lambda m: m.group(1) if missing(m.group(2)) else m.group(0), text)


def build_release(root: Path, out: Path, *, lessons: bool = True, exercises: list[str] | None = None) -> list[Path]:
    """Copy the release of the course at ``root`` into ``out`` (which must not exist or be empty); return the files.
    ``exercises`` (``02`` or ``02_pytorch`` each; ``None``: all) chooses the exercises handed out.

    Raises:
        ValueError: ``out`` is not empty, lies inside the course's answer folders, ``root`` is no course (no
            ``exercises/`` or ``src/gradacc``), an exercise that does not exist, or the copy leaks an answer
            (``leaks``; ``out`` is then removed).
    """
    root, out = Path(root).resolve(), Path(out).resolve()
    if not (root / "exercises").is_dir() or not (root / PACKAGE).is_dir():
        raise ValueError(f"{root} is not the course (no exercises/ or {PACKAGE}/): run this in the course's clone")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: give a new folder")
    if out == root or root in out.parents and out.relative_to(root).parts[0] in ("solutions", "hidden", "exercises"):
        raise ValueError(f"{out}: write the release outside the course's own folders")
    chosen = select_exercises(root, exercises)
    patterns = RELEASED + (LESSONS if lessons else ())
    # never a dot file: tests/test_notebooks.py leaves exercises/.filled-NN_topic.ipynb (the answers filled in) while it runs
    sources = [p for pattern in patterns for p in sorted(root.glob(pattern)) if not p.name.startswith(".")]
    if chosen is not None:
        sources = [p for p in sources if p.parent.name != "exercises" or p.stem in chosen]
    sources += _files(root / PACKAGE)
    written = []
    for source in sources:
        target = out / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    makefile = out / "Makefile"
    if makefile.exists():
        makefile.write_text(release_makefile(makefile.read_text(encoding="utf-8")), encoding="utf-8")
    handed = sorted({p.stem for p in written if p.parent.name == "exercises"})
    for page in (p for p in written if p.suffix == ".md"):
        text = release_links(page.read_text(encoding="utf-8"), page, out)
        if page.parent == out and page.name.startswith("README"):
            text = release_note(text, "pt_BR" if "pt-BR" in page.name else "en", handed)
        page.write_text(text, encoding="utf-8")
    problems = leaks(out, root)
    if problems:
        shutil.rmtree(out)
        raise ValueError("the release would give answers away, so it was not written:\n  " + "\n  ".join(problems))
    return written


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "release",
        help="write the student release (exercises, lessons, the package; no solutions, no hidden checks) into OUT",
        description="Copy what students get into OUT: the exercises of both editions, the lessons, the package "
        "gradacc, its requirements and the READMEs. Never solutions/, hidden/ or tests/; every file is checked for "
        "answer and hidden-check lines before the release is kept.",
    )
    p.add_argument("out", help="folder to write (new or empty)")
    p.add_argument("--root", default=".", help="the course's clone (default: here)")
    p.add_argument("--no-lessons", action="store_true", help="leave the lessons out")
    p.add_argument(
        "--exercise",
        action="append",
        metavar="NN",
        help="hand out only this exercise (02 or 02_pytorch; repeatable; default: every one), in both editions",
    )
    p.set_defaults(func=_cmd_release)


def _cmd_release(args) -> int:
    try:
        written = build_release(Path(args.root), Path(args.out), lessons=not args.no_lessons, exercises=args.exercise)
    except (OSError, ValueError) as error:
        print(f"gradacc release: {error}", file=sys.stderr)
        return 2
    handed = sorted({p.stem for p in written if p.parent.name == "exercises"})
    print(
        f"wrote {len(written)} files to {args.out}: exercises {', '.join(handed)} (en, pt-BR), "
        f"{'lessons, ' if not args.no_lessons else ''}the package; no solutions, no hidden checks (checked)"
    )
    print(f"next: publish {args.out} to the class (a repository of your own, a zip); students run `make lab` in it")
    return 0
