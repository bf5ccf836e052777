"""Finding what to grade: the reference notebooks and their hidden checks (``hidden/NN_topic.py``), and every file in a
submissions folder (one folder per student or flat ``<student>__NN_topic.ipynb`` files), read without trusting it.
"""

from __future__ import annotations

import json
import os
import re
import stat
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..course.notebooks import check_cells, generate_exercise
from .gradebook import GradingError, Reference, Row, _code, _short

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "hidden_from_args",
    "load_hidden",
    "load_references",
    "read_submission",
    "Found",
    "discover",
    "refusal",
    "refused_row",
]


MAX_NOTEBOOK_BYTES = 32 * 2**20


_IGNORED_NAMES = ("__MACOSX", "__pycache__", "Thumbs.db")


# --------------------------------------------------------------------------------------------------------- references
def hidden_from_args(args) -> Path | None:
    """The hidden-checks folder a grading sub-command's arguments name (``gradacc grade``, ``grade-bench``,
    ``export-assignments``): none with ``--no-hidden``; ``--hidden DIR``; else ``hidden/`` next to the folder of
    ``--reference`` when it exists.

    Raises:
        GradingError: ``--hidden`` names a folder that does not exist.
    """
    if args.no_hidden:
        return None
    if args.hidden:
        if not Path(args.hidden).is_dir():
            raise GradingError(f"hidden-checks folder {args.hidden} does not exist")
        return Path(args.hidden)
    reference = Path(args.reference)
    candidate = (reference if reference.is_dir() else reference.parent).resolve().parent / "hidden"
    return candidate if candidate.is_dir() else None


_HIDDEN_HEADER = re.compile(r"^# %% hidden[ \t]+(\S+)[ \t]*$", re.M)


def load_hidden(path: Path) -> tuple[str, dict[str, list[str]]]:
    """Read a hidden-checks file: ``(preamble, {check id: [code block, ...]})``.

    Format (``hidden/NN_topic.py``, a plain Python file ruff can lint): code before the first header is a preamble
    that runs before every block (imports, helpers); each ``# %% hidden X.Y`` line starts a block that belongs to
    check ``X.Y``. At grading time each block becomes a code cell right after the reference's check cell ``X.Y``; it
    runs in a copy of the notebook's namespace (it sees the student's functions; its own names never leak) with
    ``GRADACC_SEED`` (an int chosen per grading run) defined. A block must PRINT the student's results on inputs drawn
    from ``GRADACC_SEED`` (rounded to what is stable), not a verdict: the grader compares that text with what the
    reference solution prints for the same seed.

    Raises:
        GradingError: no ``# %% hidden X.Y`` header, or an empty block.
    """
    text = Path(path).read_text(encoding="utf-8")
    parts = _HIDDEN_HEADER.split(text)
    preamble, blocks = parts[0], {}
    for check, code in zip(parts[1::2], parts[2::2], strict=True):
        if not code.strip():
            raise GradingError(f"{path}: the block '# %% hidden {check}' is empty")
        blocks.setdefault(check, []).append(code.strip("\n") + "\n")
    if not blocks:
        raise GradingError(f"{path}: no '# %% hidden X.Y' block (each block starts with such a line)")
    return preamble, blocks


def load_references(
    reference: Path, hidden: Path | None = None, exercises: Sequence[str] | None = None
) -> dict[str, Reference]:
    """Load every ``reference/NN_topic.ipynb`` (or one notebook) and its hidden checks ``hidden/NN_topic.py``.

    Args:
        reference: the solutions folder, or one solution notebook.
        hidden: folder of hidden-check files (``None``: no hidden checks).
        exercises: names (``02_pytorch``) to grade; every reference is still loaded to recognize wrong exercises.

    Raises:
        GradingError: no notebook, an exercise name that is no reference, a check cell without its stored output,
            solution or check cells lacking ids, hidden checks for a check the reference does not have.
    """
    reference = Path(reference)
    paths = [reference] if reference.is_file() else sorted(reference.glob("*.ipynb"))
    if not paths:
        raise GradingError(f"no reference notebooks in {reference} (pass --reference solutions/)")
    refs: dict[str, Reference] = {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        try:
            checks, exercise = check_cells(nb), generate_exercise(nb)
        except ValueError as exc:
            raise GradingError(f"reference {path}: {exc}") from exc
        solution_ids = [
            c.get("id") for c in nb.cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])
        ]
        if not checks:
            continue  # a notebook without graded checks is no exercise
        ids = solution_ids + [c["id"] for c in checks]
        if None in ids or len(set(ids)) != len(ids):
            raise GradingError(f"reference {path}: every solution and check cell needs its own cell id, got {ids}")
        refs[path.stem] = Reference(path.stem, path, nb, exercise, checks, solution_ids)
    if exercises:
        unknown = sorted(set(exercises) - set(refs))
        if unknown:
            raise GradingError(f"no reference for {unknown}; references: {sorted(refs)}")
    for name, ref in refs.items():
        unrun = [c["id"] for c in ref.checks if not ref.notebook.cells[c["index"]].get("outputs")]
        if unrun and (not exercises or name in exercises):
            raise GradingError(
                f"reference {ref.path}: check cells {unrun} have no stored output (the expected 'Exercise X.Y: "
                f"correct' line): run `gradacc execute {ref.path}` first"
            )
    if hidden is not None:
        for name, ref in refs.items():
            path = Path(hidden) / f"{name}.py"
            if not path.exists():
                continue
            ref.hidden_preamble, ref.hidden = load_hidden(path)
            unknown = sorted(set(ref.hidden) - {c["check"] for c in ref.checks})
            if unknown:
                raise GradingError(
                    f"{path}: hidden checks for {unknown}, but {name} has checks {[c['check'] for c in ref.checks]}"
                )
    return refs


# -------------------------------------------------------------------------------------------------------- submissions
def read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, list[str | None], str]:
    """Parse a submitted file: ``(notebook or None, the cell ids as written in the file, problem)``.

    ``problem`` is empty when the file is a readable notebook; otherwise it says what is wrong (empty, too large,
    not UTF-8 JSON, not a notebook, not a regular file). The ids come from the raw JSON (nbformat invents ids where
    they are missing). The file is opened without following a symbolic link and without blocking on a pipe, and
    only read if it is a regular file (``discover`` refuses the others first; this holds if one was swapped in
    since).
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, [], f"the file cannot be opened ({exc.strerror}; a symbolic link is never followed)"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, [], "not a regular file (a pipe, a device or a folder): never read"
        size = info.st_size
        if size == 0:
            return None, [], "the file is empty (0 bytes)"
        if size > MAX_NOTEBOOK_BYTES:
            return None, [], f"the file is {size / 2**20:.1f} MiB, over the {MAX_NOTEBOOK_BYTES // 2**20} MiB limit"
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        text = data.decode("utf-8")
        raw = json.loads(text)
    except UnicodeDecodeError:
        return None, [], "the file is not UTF-8 text (a binary file?)"
    except ValueError as exc:
        return None, [], f"the file is not valid JSON ({_short(exc, 120)})"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list) or "nbformat" not in raw:
        return None, [], "the file is JSON but not a Jupyter notebook (no 'nbformat' and list of 'cells')"
    for i, cell in enumerate(raw["cells"]):
        if (
            not isinstance(cell, dict)
            or cell.get("cell_type") not in ("code", "markdown", "raw")
            or not isinstance(cell.get("source", ""), str | list)
        ):
            return None, [], f"cell {i} is not a notebook cell (needs a cell_type and a source)"
    ids = [c.get("id") if isinstance(c.get("id"), str) else None for c in raw["cells"]]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several types on malformed notebooks
        return None, [], f"nbformat cannot read it: {_short(exc, 160)}"
    return nb, ids, ""


# --------------------------------------------------------------------------------------------------------- discovery
@dataclass
class Found:
    """A file in the submissions folder: who sent it, which exercise its name says, and whether that is known."""

    student: str
    exercise: str
    path: Path
    recognized: bool
    note: str = ""
    real_student: bool = True
    refused: str = ""
    """why the file is never read (``refusal``), or empty: its row's status is then ``refused-file``"""


def _ignored(name: str) -> bool:
    return name.startswith(".") or name in _IGNORED_NAMES


_KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device"}  # fmt: skip


def refusal(path: Path, links_in_class: Counter | None = None) -> str:
    """Why the grader must not read ``path`` (empty when it may), from ``lstat`` (a link is never followed):

    * a symbolic link: it could point at another student's notebook, or at any file the instructor can read
      (``/etc/passwd``); git, and so GitHub Classroom, keeps symbolic links;
    * a special file (a named pipe, a socket, a device): reading it could block or read a device;
    * a hard link to a file outside the class: a regular file with more links (``st_nlink``) than
      ``links_in_class`` counts for its ``(st_dev, st_ino)`` in the submissions folder (``None``: not checked).
    """
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link (to {os.readlink(path)}): never followed; hand in the notebook itself"
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
        return f"{kind}, not a regular file: never read; hand in the notebook itself"
    if stat.S_ISREG(info.st_mode) and links_in_class is not None:
        inside = links_in_class.get((info.st_dev, info.st_ino), 0)
        if info.st_nlink > inside:
            return (
                f"a hard link to a file outside the class ({info.st_nlink} names, {inside} of them in the submissions "
                "folder): never read; hand in a copy of the notebook itself"
            )
    return ""


def _walk(top: Path) -> Iterable[Path]:
    """Every entry under the folder ``top`` that is not a folder (files, links, special files) plus every symbolic
    link to a folder, without following links, skipping ignored names, in sorted order."""
    for root, dirs, files in os.walk(top, followlinks=False):
        kept = sorted(d for d in dirs if not _ignored(d))
        dirs[:] = [d for d in kept if not os.path.islink(os.path.join(root, d))]
        linked = [d for d in kept if os.path.islink(os.path.join(root, d))]
        yield from (Path(root) / name for name in sorted(linked + [f for f in files if not _ignored(f)]))


def _links_in(folder: Path) -> Counter:
    """``(st_dev, st_ino)`` -> how many names the submissions folder holds for that regular file."""
    counts: Counter = Counter()
    for path in _walk(folder):
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            counts[(info.st_dev, info.st_ino)] += 1
    return counts


def _classify(student: str, path: Path, filename: str, names: set[str], refused: str = "") -> Found:
    if not filename.endswith(".ipynb"):
        return Found(student, Path(filename).stem, path, False, refused or "not a .ipynb file", refused=refused)
    stem = filename[: -len(".ipynb")]
    if stem in names:
        return Found(student, stem, path, True, refused, refused=refused)
    # JupyterLab's "-Copy1", a browser's " (1)", Canvas's "-1" on a resubmitted file
    cleaned = re.sub(r"(?i)(\s*[-_ ]\s*copy\d*|\s*\(\d+\)|-\d+)+$", "", stem).strip()
    if cleaned in names:
        note = f"file name {filename!r} read as {cleaned}.ipynb"
        return Found(student, cleaned, path, True, "; ".join(filter(None, [refused, note])), refused=refused)
    note = f"no exercise is called {stem!r} (expected {sorted(names)})"
    return Found(student, stem, path, False, "; ".join(filter(None, [refused, note])), refused=refused)


def discover(folder: Path, names: Iterable[str]) -> list[Found]:
    """Every submitted file: ``folder/<student>/**/NN_topic.ipynb`` or ``folder/<student>__NN_topic.ipynb``.

    Dot files and folders, ``__MACOSX`` and ``.ipynb_checkpoints`` are skipped; every other file is returned, and
    those whose name is no exercise (after dropping ``-Copy1`` / `` (1)`` / Canvas's ``-1`` suffixes) come back with
    ``recognized=False``. A file the grader must not read (``refusal``: a symbolic link, a special file, a hard link
    to a file outside the class) comes back with ``refused`` saying why; a link is never followed, a symbolic link to
    a folder included. A file at the top level not named ``<student>__...`` (a stray ``README.md``, a
    ``progress.json``) is no student's: it comes back with ``student=""``, its file name as ``exercise`` and
    ``real_student=False``, so that it invents no student and no exercise.

    Raises:
        GradingError: ``folder`` is not a folder.
    """
    folder, names = Path(folder), set(names)
    if not folder.is_dir():
        raise GradingError(f"submissions folder {folder} does not exist or is not a folder")
    links = _links_in(folder)
    found = []
    for entry in sorted(folder.iterdir()):
        if _ignored(entry.name):
            continue
        refused = refusal(entry, links)
        if not refused and entry.is_dir():
            for path in _walk(entry):
                found.append(_classify(entry.name, path, path.name, names, refusal(path, links)))
            continue
        student, sep, rest = entry.name.partition("__")
        if sep and student:
            found.append(_classify(student, entry, rest, names, refused))
        elif refused and entry.is_dir():  # a student folder that is a link: that student's, never entered
            found.append(Found(entry.name, entry.name, entry, False, refused, real_student=False, refused=refused))
        elif refused:  # a stray link or pipe at the top: no student's, listed
            found.append(Found("", entry.name, entry, False, refused, real_student=False, refused=refused))
        else:
            note = "files at the top level must be named <student>__NN_topic.ipynb"
            found.append(Found("", entry.name, entry, False, note, real_student=False))
    return found


def refused_row(found: Found, ref: Reference) -> Row:
    """The row of a submission the grader never reads (``Found.refused``: a symbolic link, a hard link to a file
    outside the class, a special file): ``refused-file``, 0 points, the reason as its message and its feedback (which
    leaves out a symbolic link's target)."""
    row = Row(found.student, ref.name, "refused-file", 0, ref.max_points, found.refused, str(found.path))
    row.checks = {str(c["check"]): 0 for c in ref.checks}
    # the student's feedback never names the link's target: it can be another student's folder or the instructor's path
    told = re.sub(r"^a symbolic link \(to .*\): never followed", "a symbolic link: never followed", found.refused)
    row.feedback.append(f"`{_code(told)}`")
    return row
