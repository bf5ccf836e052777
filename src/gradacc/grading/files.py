"""Files the grader writes for the instructor: private (``0600`` files, ``0700`` folders: on a server where students
have accounts, nobody else can read a grade) and, for CSV, safe to open in a spreadsheet.

Every CSV file the grading package writes (the gradebook, the LMS exports and their unmatched lists, the class view
of progress) goes through ``write_csv``: each cell passes ``csv_safe``, which keeps a spreadsheet from reading a
student's text (a folder name, an exception message) as a formula. The rule is OWASP's "CSV Injection" page
(https://owasp.org/www-community/attacks/CSV_Injection): a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return gets a leading ``'``, so the spreadsheet shows it as text; a plain number (``-3``, ``+1.5``)
stays a number.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

__all__ = ["FORMULA_STARTS", "PRIVATE_FILE_MODE", "PRIVATE_FOLDER_MODE", "csv_safe", "csv_text", "open_private",
           "private_folder", "write_csv", "write_private_text", "course_commit", "course_version"]  # fmt: skip

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet evaluate a cell (OWASP's CSV-injection list)."""
PRIVATE_FILE_MODE = 0o600
"""Gradebooks, journals, feedback files, exports: read and written by the instructor only."""
PRIVATE_FOLDER_MODE = 0o700
"""The feedback folder, a shard's folder: entered by the instructor only."""
_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?")


def csv_safe(value: object) -> str:
    """``value`` as text a spreadsheet shows as it is: ``'=1+2`` for ``=1+2``, ``'@SUM(A1)`` for ``@SUM(A1)``, and
    ``"-3"`` unchanged (a number). ``None`` is an empty cell.

    Example:
        >>> [csv_safe(v) for v in ("=1+2", "-3", "\\tx", "alice", None)]
        ["'=1+2", '-3', "'\\tx", 'alice', '']
    """
    text = "" if value is None else str(value)
    if text[:1] in FORMULA_STARTS and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_text(cell: str) -> str:
    """The text ``csv_safe`` was given, from the cell it wrote: ``"'=1+2"`` -> ``"=1+2"``; any other cell unchanged.
    For the terminal and for matching names; a CSV file written again gets ``csv_safe`` again.

    Example:
        >>> [csv_text(c) for c in ("'=1+2", "'-3", "'quoted", "alice")]
        ['=1+2', "'-3", "'quoted", 'alice']
    """
    if cell[:1] == "'" and csv_safe(cell[1:]) == cell:
        return cell[1:]
    return cell


def private_folder(path: Path | str) -> Path:
    """Create ``path`` (and its parents) if needed and make it ``0700`` (the instructor's only); return it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_FOLDER_MODE)
    return path


def open_private(path: Path | str, mode: str = "w", **kwargs) -> IO:
    """``open(path, mode, **kwargs)`` for a file only its owner may read or write (``0600``), whether it is new or
    already there (an older, world-readable gradebook is made private too). Text mode defaults to UTF-8.

    Raises:
        OSError: as ``open`` does.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # the mode given to os.open only applies to a new file
    except OSError:
        os.close(fd)
        raise
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    return os.fdopen(fd, mode, **kwargs)


def write_private_text(path: Path | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` readable by its owner only (``open_private``)."""
    with open_private(path) as f:
        f.write(text)


def write_csv(path: Path | str, header: Sequence[object], rows: Iterable[Sequence[object]]) -> None:
    """Write a CSV file (``0600``) whose every cell, header included, passes ``csv_safe``."""
    with open_private(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([csv_safe(v) for v in header])
        for row in rows:
            writer.writerow([csv_safe(v) for v in row])


def course_commit(reference: Path | str) -> str | None:
    """The git commit of the course folder holding ``reference`` (a solutions folder or notebook), or ``None`` (no
    git, not a checkout)."""
    git, reference = shutil.which("git"), Path(reference)
    if git is None:
        return None
    done = subprocess.run(
        [git, "-C", str(reference if reference.is_dir() else reference.parent), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def course_version(reference: Path | str) -> str:
    """The course version grades come from, as a feedback file names it: ``gradacc 0.1.0, commit 0123456789ab``
    (the package's version and the first 12 digits of the reference's git commit; the version alone outside git)."""
    from .. import __version__

    commit = course_commit(reference)
    return f"gradacc {__version__}" + (f", commit {commit[:12]}" if commit else "")
