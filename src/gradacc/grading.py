"""The classroom grader: ``gradacc grade SUBMISSIONS --reference solutions/ --out gradebook.csv``.

Nothing a student can edit decides a score. For every (student, exercise) the grader

1. reads the submitted notebook (bad JSON, an empty file, something that is not a notebook: ``invalid-notebook``);
2. takes only its ``solution`` cells, matched to the reference's by cell id, or, when no id matches, by order (cells
   tagged ``solution`` in order, else an alignment of the code cells against the generated exercise), with a warning;
   nbval comment markers in them (``# NBVAL_SKIP`` ...) are neutralized so the student's code always runs;
3. puts them into a copy of the pristine reference notebook (``solutions/NN_topic.ipynb``): check cells, expected
   outputs, points, tags and markers all come from the reference; hidden checks (``hidden/NN_topic.py``, see
   ``load_hidden``) are inserted right after the check cell they belong to;
4. runs that merged notebook with ``pytest --nbval-lax`` in a separate process (``gradacc.notebooks.run_nbval``) in a
   temporary folder, with a wall-clock limit per notebook and per cell, a memory limit, a cap on output size and a
   watchdog on the kernel (``gradacc.grading_plugin``), several submissions in parallel;
5. scores each check: its points when nbval passed the reference's check cell AND every hidden check of it printed
   exactly what the reference solution printed for the same inputs (drawn from a seed chosen at grading time; the
   expected text is measured by running the reference itself twice before grading, and never enters a student's
   process).

Statuses (the gradebook's ``status`` column): see ``STATUSES``.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import re
import secrets
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

import nbformat

from .notebooks import NbvalRun, check_cells, generate_exercise, run_nbval

__all__ = [
    "STATUSES",
    "Settings",
    "Reference",
    "Row",
    "Gradebook",
    "GradingError",
    "load_hidden",
    "load_references",
    "read_submission",
    "match_solutions",
    "merge_submission",
    "same_output",
    "discover",
    "grade",
    "bench_grading",
    "add_cli",
]

STATUSES: dict[str, str] = {
    "graded": "the notebook ran to the end within the limits; points are the checks it passed",
    "timeout": "a cell ran past --cell-timeout (points: checks passed anyway) or the notebook past --timeout (0 points)",
    "crashed": "the kernel died (killed itself, segfault) or the grading process failed; points: checks passed before",
    "memory-limit": "a cell ran out of the --memory-mib limit (MemoryError); points: checks passed anyway",
    "output-limit": "the notebook printed more than --max-output-kib; the kernel was stopped; points: checks passed before",
    "invalid-notebook": "the file is empty, not JSON, or not a Jupyter notebook; 0 points",
    "wrong-exercise": "the notebook is another exercise (its cell ids or cells match another one); 0 points",
    "duplicate": "more than one file for the same student and exercise; none graded (keep one and grade again)",
    "missing": "no file for this exercise from a student who submitted something else; 0 points",
    "unrecognized": "a file whose name is no exercise (listed so that nothing goes unseen); 0 points",
    "grader-error": "the grader itself failed on this file (a bug: please report it); the exit code is 1",
}

MAX_NOTEBOOK_BYTES = 32 * 2**20
_IGNORED_NAMES = ("__MACOSX", "__pycache__", "Thumbs.db")
_SUSPICIOUS: dict[str, str] = {
    "gradacc.checks": r"gradacc\s*\.\s*checks|from\s+gradacc(\.checks)?\s+import",
    "stdout/stderr": r"sys\s*\.\s*(stdout|stderr|__stdout__|__stderr__)|redirect_std(out|err)|os\.dup2?\b",
    "builtins": r"\bbuiltins\b|__builtins__",
    "IPython hooks": r"get_ipython|input_transformers|events\s*\.\s*register|display_pub",
    "frames": r"sys\s*\.\s*_getframe|\binspect\b|gc\s*\.\s*get_objects|linecache",
    "processes": r"os\s*\.\s*(_exit|kill|fork|setsid)|\bsignal\s*\.|/proc/|subprocess",
    "expected line": r"Exercise\s+\d+\.\d+\s*:\s*correct",
    "check names": r"\bcheck_\w+\s*=(?!=)|\brun_check\b|\breport\s*=(?!=)",
    "notebook files": r"\.ipynb|\bnbformat\b",
    "grader internals": r"GRADACC_|gradacc_capture|junit|grading_plugin|nbval",
}


class GradingError(RuntimeError):
    """The grader cannot run (bad reference or hidden checks, missing folder); the CLI exits with code 2."""


@dataclass
class Settings:
    """Limits of one grading run.

    Attributes:
        timeout: wall-clock seconds per notebook (the nbval process and its kernel are killed after it).
        cell_timeout: seconds per cell (nbval interrupts the kernel; the next cells still run).
        memory_mib: ``RLIMIT_DATA`` of the nbval process and its kernel, in MiB (2**20 bytes); each has its own.
        max_output_kib: all outputs of one notebook together, in KiB; the kernel is stopped past it.
        workers: notebooks run at the same time (default: the number of cores).
        seed: seed of the hidden checks' inputs (default: a fresh random one per grading run).
        file_mib: the largest file the kernel may write, in MiB (``RLIMIT_FSIZE``).
    """

    timeout: float = 300.0
    cell_timeout: float = 120.0
    memory_mib: int = 2048
    max_output_kib: int = 2048
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    seed: int | None = None
    file_mib: int = 256

    def __post_init__(self) -> None:
        for name in ("timeout", "cell_timeout", "memory_mib", "max_output_kib", "workers", "file_mib"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass
class Reference:
    """One exercise as the grader knows it: the pristine reference notebook and what it derives from it."""

    name: str
    path: Path
    notebook: nbformat.NotebookNode
    exercise: nbformat.NotebookNode
    checks: list[dict]
    solution_ids: list[str]
    hidden: dict[str, list[str]] = field(default_factory=dict)
    hidden_preamble: str = ""
    expected: dict[str, str] = field(default_factory=dict)

    @property
    def max_points(self) -> float:
        return sum(c["points"] for c in self.checks)

    @property
    def known_ids(self) -> set[str]:
        return set(self.solution_ids) | {c["id"] for c in self.checks}

    @property
    def stubs(self) -> dict[str, str]:
        return {c.id: c.source for c in self.exercise.cells if c.get("id") in self.solution_ids}


@dataclass
class Row:
    """One gradebook row: a (student, exercise) pair, or one unrecognized file."""

    student: str
    exercise: str
    status: str
    points: float = 0
    max_points: float = 0
    message: str = ""
    file: str = ""
    seconds: float | None = None
    peak_mib: float | None = None
    flags: str = ""
    checks: dict[str, float] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)


@dataclass
class Gradebook:
    """All rows of a grading run, with the check columns, the hidden checks' seed and the wall time (s)."""

    rows: list[Row]
    check_columns: list[str]
    seed: int
    wall_s: float

    def row(self, student: str, exercise: str) -> Row:
        matches = [r for r in self.rows if r.student == student and r.exercise == exercise]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} rows for ({student!r}, {exercise!r})")
        return matches[0]

    def write_csv(self, path: Path) -> None:
        """One row per (student, exercise): the fixed columns, then ``check X.Y`` (points earned) per check."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fixed = ["student", "exercise", "points", "max_points", "status", "message", "file", "seconds", "peak_mib"]
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(fixed + ["flags"] + [f"check {c}" for c in self.check_columns])
            for r in self.rows:
                values = [
                    r.student,
                    r.exercise,
                    _num(r.points),
                    _num(r.max_points),
                    r.status,
                    r.message,
                    r.file,
                    "" if r.seconds is None else f"{r.seconds:.1f}",
                    "" if r.peak_mib is None else f"{r.peak_mib:.0f}",
                    r.flags,
                ] + [_num(r.checks[c]) if c in r.checks else "" for c in self.check_columns]
                writer.writerow([_csv_safe(v) for v in values])

    def write_feedback(self, folder: Path) -> list[Path]:
        """Write ``folder/<student>.md`` for every student: per exercise the status, points and each check's result."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for student in sorted({r.student for r in self.rows}):
            rows = [r for r in self.rows if r.student == student]
            lines = [f"# Feedback: {_md(student)}", "", "| exercise | points | status |", "|---|---|---|"]
            for r in rows:
                lines.append(f"| {_md(r.exercise)} | {_num(r.points)} / {_num(r.max_points)} | {r.status} |")
            for r in rows:
                lines += ["", f"## {_md(r.exercise)}: {_num(r.points)} / {_num(r.max_points)} points ({r.status})", ""]
                if r.status != "graded":
                    lines.append(f"- {_md(STATUSES.get(r.status, r.status))}")
                if r.message and r.status != "graded":
                    lines.append(f"- `{_code(r.message)}`")
                lines += [f"- {line}" for line in r.feedback]
            path = folder / f"{_safe_name(student)}.md"
            number = 1
            while path in written:  # two names that differ only in characters a file name cannot hold
                number += 1
                path = folder / f"{_safe_name(student)}-{number}.md"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            written.append(path)
        return written


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _csv_safe(value: str) -> str:
    """Keep a spreadsheet from evaluating a cell (``=...``, ``+...``, ``-...``, ``@...``): prefix a quote."""
    value = str(value)
    return "'" + value if value[:1] in ("=", "+", "-", "@") and not re.fullmatch(r"-?\d+(\.\d+)?", value) else value


def _md(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", str(text))


def _code(text: str) -> str:
    return " ".join(str(text).replace("`", "'").split())


def _safe_name(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name).strip(".") or "student"


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------------------- references
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
    not UTF-8 JSON, not a notebook). The ids come from the raw JSON (nbformat invents ids where they are missing).
    """
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return None, [], "the file is empty (0 bytes)"
    if size > MAX_NOTEBOOK_BYTES:
        return None, [], f"the file is {size / 2**20:.1f} MiB, over the {MAX_NOTEBOOK_BYTES // 2**20} MiB limit"
    try:
        text = path.read_bytes().decode("utf-8")
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


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _code_sources(nb) -> list[str]:
    return [_norm(c.source) for c in nb.cells if c.cell_type == "code"]


def identify(nb, ids: list[str | None], name: str, refs: dict[str, Reference]) -> tuple[str | None, str]:
    """Which exercise is this notebook? ``(other exercise or None, how it was decided)``.

    Cell ids decide when any matches a reference's solution or check ids; otherwise the code cells are compared
    with each generated exercise (``difflib`` ratio) and another exercise wins only by a clear margin.
    """
    present = {i for i in ids if i}
    overlap = {n: len(present & r.known_ids) for n, r in refs.items()}
    if overlap.get(name, 0):
        return None, "ids"
    best = max(overlap, key=overlap.get, default=None)
    if best is not None and overlap[best] > 0:
        return best, f"its cell ids are those of {best}"
    sources = _code_sources(nb)
    ratios = {
        n: SequenceMatcher(None, _code_sources(r.exercise), sources, autojunk=False).ratio() for n, r in refs.items()
    }
    best = max(ratios, key=ratios.get)
    if best != name and ratios[best] >= 0.3 and ratios[best] > ratios.get(name, 0) + 0.2:
        return best, f"its cells look like {best} ({ratios[best]:.0%} alike vs {ratios.get(name, 0):.0%})"
    if ratios.get(name, 0) == 0:
        return "?", f"none of its code cells matches exercise {name}"
    return None, "order"


def match_solutions(ref: Reference, nb, ids: list[str | None]) -> tuple[dict[str, str], list[str]]:
    """The student's source for each reference solution cell id, and warnings for the instructor and student.

    By id when any solution id is present (a solution cell not found keeps its exercise stub, with a warning);
    otherwise by order: the cells tagged ``solution`` if there are as many as in the reference, else an alignment of
    the code cells with the generated exercise (unchanged cells anchor; each solution cell takes the cell(s) at its
    place).
    """
    cells = list(nb.cells)
    by_id = {i: cell for i, cell in zip(ids, cells, strict=True) if i}
    if set(ref.solution_ids) & set(by_id):
        found, notes = {}, []
        for sid in ref.solution_ids:
            cell = by_id.get(sid)
            if cell is None:
                notes.append(f"solution cell {sid} is not in your notebook (deleted?): it ran as the empty exercise")
            elif cell.cell_type != "code":
                notes.append(f"solution cell {sid} is a {cell.cell_type} cell in your notebook: it ran as the exercise")
            else:
                found[sid] = cell.source
        return found, notes
    tagged = [c for c in cells if c.cell_type == "code" and "solution" in c.get("metadata", {}).get("tags", [])]
    if tagged and len(tagged) == len(ref.solution_ids):
        return (
            {sid: c.source for sid, c in zip(ref.solution_ids, tagged, strict=True)},
            ["no cell ids matched: solution cells were taken in order by their 'solution' tag"],
        )
    ex = [c for c in ref.exercise.cells if c.cell_type == "code"]
    sub = [c for c in cells if c.cell_type == "code"]
    matcher = SequenceMatcher(None, [_norm(c.source) for c in ex], [_norm(c.source) for c in sub], autojunk=False)
    found, notes = {}, ["no cell ids matched: solution cells were taken by their position among the code cells"]
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        positions = [i for i in range(i1, i2) if ex[i].get("id") in ref.solution_ids]
        if op in ("equal", "delete") or not positions:
            continue
        if i2 - i1 == j2 - j1:
            for i in positions:
                found[ex[i].id] = sub[j1 + i - i1].source
        elif i2 - i1 == 1:
            found[ex[i1].id] = "\n\n".join(c.source for c in sub[j1:j2])
        else:
            notes.append(f"could not place solution cells {[ex[i].id for i in positions]}: they ran as the exercise")
    return found, notes


def _neutralize_markers(source: str) -> str:
    """Make nbval ignore its comment markers (``# NBVAL_SKIP`` ...) in a student's code; the code is unchanged."""
    from nbval.plugin import comment_markers

    lines = source.split("\n")
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#") and stripped.lstrip("#").strip() in comment_markers:
            lines[i] = line + "  (ignored by the grader)"
    return "\n".join(lines)


def _hidden_cell(check: str, number: int, preamble: str, block: str, seed: int):
    code = (preamble.strip() + "\n\n" + block) if preamble.strip() else block
    source = (
        f"# hidden check {check} (added by gradacc grade)\n"
        f"exec(compile({code!r}, 'hidden check {check}', 'exec'), dict(globals(), GRADACC_SEED={int(seed)}))\n"
    )
    return nbformat.v4.new_code_cell(
        source,
        id=f"gradacc-hidden-{check.replace('.', '-')}-{number}",
        metadata={"gradacc_capture": f"hidden:{check}:{number}"},
    )


def merge_submission(
    ref: Reference, sources: dict[str, str], seed: int
) -> tuple[nbformat.NotebookNode, dict[str, int]]:
    """The reference notebook with the student's solution sources in place, plus hidden-check cells.

    Returns the merged notebook and ``{capture key: code-cell index}`` for its check (``check:X.Y``), hidden
    (``hidden:X.Y:i``) and solution (``solution:<id>``) cells; nbval names items by code-cell index.
    Solution cells get no outputs and no execution count (nbval never compares them); check cells keep the reference's
    outputs, are tagged ``nbval-check-output`` and get an execution count if missing (nbval skips comparing cells
    without one).
    """
    nb = copy.deepcopy(ref.notebook)
    stubs = ref.stubs
    cells = []
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        cells.append(cell)
        if cell.cell_type != "code":
            continue
        if "solution" in tags:
            cell.source = _neutralize_markers(sources.get(cell.id, stubs[cell.id]))
            cell.outputs, cell.execution_count = [], None
            cell.metadata["gradacc_capture"] = f"solution:{cell.id}"
        elif "check" in tags:
            check = str(cell.metadata["gradacc"]["check"])
            cell.metadata["gradacc_capture"] = f"check:{check}"
            if "nbval-check-output" not in tags:
                cell.metadata["tags"] = tags + ["nbval-check-output"]
            if cell.execution_count is None:
                cell.execution_count = 1
            for number, block in enumerate(ref.hidden.get(check, [])):
                cells.append(_hidden_cell(check, number, ref.hidden_preamble, block, seed))
    nb.cells = cells
    layout, code_index = {}, -1
    for cell in nb.cells:
        if cell.cell_type == "code":
            code_index += 1
            key = cell.metadata.get("gradacc_capture")
            if key:
                layout[key] = code_index
    return nb, layout


def _flags(sources: Iterable[str]) -> str:
    text = "\n".join(sources)
    return "; ".join(name for name, pattern in _SUSPICIOUS.items() if re.search(pattern, text))


# ---------------------------------------------------------------------------------------------------------- running
def _run_merged(nb, name: str, settings: Settings) -> tuple[NbvalRun, dict]:
    """Run a merged notebook under nbval with the grading plugin; returns the run and the plugin's capture."""
    from .grading_plugin import ENV

    threads = str(max(1, (os.cpu_count() or 1) // settings.workers))
    with tempfile.TemporaryDirectory(prefix="gradacc-grade-", ignore_cleanup_errors=True) as tmp:
        path, capture = Path(tmp) / f"{name}.ipynb", Path(tmp) / "capture.json"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        plugin = {
            "capture": str(capture),
            "memory_bytes": settings.memory_mib * 2**20,
            "file_bytes": settings.file_mib * 2**20,
            "output_bytes": settings.max_output_kib * 2**10,
            "text_bytes": 4096,
        }
        env = {
            ENV: json.dumps(plugin),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only nbval and our plugin in the runner
            "PYTHONSAFEPATH": "1",  # the runner does not import from its working directory
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
        }
        run = run_nbval(
            path,
            lax=True,
            timeout=settings.timeout,
            cell_timeout=settings.cell_timeout,
            env=env,
            extra_args=(
                "-p",
                "gradacc.grading_plugin",
                "-p",
                "nbval.plugin",
                "-p",
                "gradacc.pytest_plugin",
                "--noconftest",
            ),
            max_output_bytes=settings.max_output_kib * 2**10 + 2**16,
        )
        data = None
        if capture.exists() and capture.stat().st_size < 2**20 + 2 * settings.max_output_kib * 2**10:
            try:
                data = json.loads(capture.read_text(encoding="utf-8"))
            except ValueError:
                data = None
        return run, _clean_capture(data)


def _clean_capture(data: object) -> dict:
    """The plugin's capture with the types ``_score`` expects (the file sat where the student's code could write)."""
    data = data if isinstance(data, dict) else {}
    cells = {}
    for key, cell in (data.get("cells") if isinstance(data.get("cells"), dict) else {}).items():
        cell = cell if isinstance(cell, dict) else {}
        error = cell.get("error") if isinstance(cell.get("error"), dict) else None
        cells[str(key)] = {
            "stdout": str(cell.get("stdout", "")),
            "stderr": str(cell.get("stderr", "")),
            "error": None
            if error is None
            else {"ename": str(error.get("ename", "")), "evalue": str(error.get("evalue", ""))},
        }
    events = [
        {"kind": str(e.get("kind", "")), "cell": str(e.get("cell")), "detail": str(e.get("detail", ""))}
        for e in (data.get("events") if isinstance(data.get("events"), list) else [])
        if isinstance(e, dict)
    ]
    started = [str(s) for s in (data.get("started") if isinstance(data.get("started"), list) else [])]
    return {"cells": cells, "events": events, "started": started}


def _calibrate(ref: Reference, settings: Settings, seed: int, pool: ThreadPoolExecutor) -> None:
    """Run the reference's own answers twice; fill ``ref.expected`` with what each hidden check printed.

    Raises:
        GradingError: the reference fails a check, a hidden check raises or prints nothing, or the two runs print
            different text (round the printed values coarser).
    """
    answers = {c.id: c.source for c in ref.notebook.cells if c.get("id") in ref.solution_ids}
    merged, layout = merge_submission(ref, answers, seed)
    runs = [f.result() for f in [pool.submit(_run_merged, merged, ref.name, settings) for _ in range(2)]]
    outputs = []
    for run, capture in runs:
        failed = [
            k
            for k, i in layout.items()
            if not k.startswith("solution:") and run.cells.get(i, {}).get("outcome") != "passed"
        ]
        if run.returncode == -9 or failed:
            raise GradingError(
                f"the reference {ref.path} fails under the grader ({'timeout' if run.returncode == -9 else failed}); "
                f"events {capture.get('events')}; nbval said:\n{run.output[-3000:]}"
            )
        cells = capture.get("cells", {})
        for key in layout:
            if key.startswith("hidden:") and (cells.get(key, {}).get("error") or not cells.get(key, {}).get("stdout")):
                raise GradingError(
                    f"{ref.name}: hidden check {key} must print the student's results, got {cells.get(key)}"
                )
        outputs.append({k: cells[k]["stdout"] for k in layout if k.startswith("hidden:")})
    if outputs[0] != outputs[1]:
        differ = sorted(k for k in outputs[0] if outputs[0][k] != outputs[1].get(k))
        raise GradingError(f"{ref.name}: hidden checks {differ} print different text on two runs of the reference")
    ref.expected = outputs[0]


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_output(got: str, want: str) -> bool:
    """Whether a hidden check printed the same as the reference: equal text and integers, decimal numbers within one
    unit of the last digit the reference printed (``0.12345`` accepts 0.12344 .. 0.12346; ``1.5e-03`` accepts
    1.4e-03 .. 1.6e-03).

    Rounding makes the last digit flip for answers that differ from the reference in float noise only (a different
    summation order); a wrong answer differs far more. ``nan`` and ``inf`` must match as text.
    """
    got_parts, want_parts = _NUMBER.split(got), _NUMBER.split(want)
    got_numbers, want_numbers = _NUMBER.findall(got), _NUMBER.findall(want)
    if got_parts != want_parts or len(got_numbers) != len(want_numbers):
        return False
    for g, w in zip(got_numbers, want_numbers, strict=True):
        if not any(c in w for c in ".eE"):  # integers (counts, sizes) must match exactly
            if g != w:
                return False
            continue
        mantissa, _, exponent = w.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        unit = 10.0 ** (int(exponent or 0) - decimals)
        if not abs(float(g) - float(w)) <= 1.000001 * unit:
            return False
    return True


def _check_message(check: str, captured: dict | None, stopped: bool, cell_timeout: float) -> str:
    """What the student sees for a failed visible check: its own ``Exercise X.Y: ...`` line, or why there is none."""
    if not captured or stopped and not captured.get("stdout") and not captured.get("error"):
        return "the check could not run: the kernel had stopped (see the status)"
    lines = captured.get("stdout", "").splitlines()
    own = [line for line in lines if line.startswith(f"Exercise {check}:")]
    if own and own[0].strip() == f"Exercise {check}: correct" and len(lines) > 1:
        return "the check printed 'correct' but also other lines (your code printed while being checked)"
    if own:
        return _short(own[0], 300)
    if captured.get("error"):
        err = captured["error"]
        if err["ename"] == "KeyboardInterrupt":
            return f"the check was interrupted after {cell_timeout:g} s (an endless loop in your code?)"
        return _short(f"the check cell raised {err['ename']}" + (f": {err['evalue']}" if err["evalue"] else ""), 300)
    if captured.get("stderr"):
        return "the check printed to stderr (a warning from your code?) instead of its one line"
    return "the check printed nothing (did your code redirect sys.stdout?)"


def _score(ref: Reference, layout: dict[str, int], run: NbvalRun, capture: dict, settings: Settings, row: Row) -> None:
    cells, events = capture["cells"], capture["events"]
    kinds = {e.get("kind") for e in events}

    def outcome(key: str) -> str:
        return run.cells.get(layout[key], {}).get("outcome", "not run")

    failures = []
    for check in ref.checks:
        cid, points = str(check["check"]), check["points"]
        visible = outcome(f"check:{cid}") == "passed"
        hidden_keys = [k for k in layout if k.startswith(f"hidden:{cid}:")]
        hidden_problem = ""
        for key in hidden_keys:
            got = cells.get(key) or {}
            if got.get("error"):
                err = got["error"]
                hidden_problem = f"your code raised {err['ename']}" + (
                    f": {_short(err['evalue'], 200)}" if err["evalue"] else ""
                )
            elif outcome(key) != "passed" or not same_output(got.get("stdout", ""), ref.expected.get(key, "")):
                hidden_problem = "your results differ from the reference solution's"
            if hidden_problem:
                break
        earned = points if visible and not hidden_problem else 0
        row.checks[cid] = earned
        row.points += earned
        if earned:
            row.feedback.append(f"Exercise {cid} ({_num(points)} points): passed")
            continue
        if not visible:
            stopped = bool(kinds & {"kernel-died", "output-limit"})
            why = _check_message(cid, cells.get(f"check:{cid}"), stopped, settings.cell_timeout)
        else:
            why = (
                "your answer passed the check in the notebook but not the grader's additional check on inputs drawn "
                f"at grading time: {hidden_problem}"
            )
        failures.append(f"{cid}: {_short(why if not visible else 'hidden check failed: ' + hidden_problem, 160)}")
        row.feedback.append(f"Exercise {cid} (0 / {_num(points)} points): failed: `{_code(why)}`")

    last = capture["started"][-1:] or ["?"]
    memory = any(
        (c["error"] or {}).get("ename") == "MemoryError"
        or "can't allocate memory" in (c["error"] or {}).get("evalue", "")
        for c in cells.values()
    ) or any("MemoryError" in c.get("message", "") for c in run.cells.values())
    if run.returncode == -9:
        row.status, row.points = "timeout", 0
        row.checks = dict.fromkeys(row.checks, 0)
        row.feedback = [f"the notebook did not finish within {settings.timeout:g} s (still running: {last[0]})"]
        status_message = row.feedback[0]
    elif "output-limit" in kinds:
        row.status = "output-limit"
        where = next((e.get("cell") for e in events if e.get("kind") == "output-limit"), last[0])
        status_message = f"more than {settings.max_output_kib} KiB of output (at {where}); the kernel was stopped"
    elif run.output_bytes > settings.max_output_kib * 2**10:
        row.status = "output-limit"
        status_message = (
            f"{run.output_bytes / 2**20:.1f} MiB written straight into the grading process's pipe (past the "
            f"{settings.max_output_kib} KiB cap; kept the first part only)"
        )
    elif "kernel-died" in kinds:
        row.status = "crashed"
        where = next((e.get("cell") for e in events if e.get("kind") == "kernel-died"), last[0])
        status_message = f"the kernel died while running {where}"
    elif memory:
        row.status = "memory-limit"
        status_message = f"a cell ran out of memory (limit {settings.memory_mib} MiB)"
    elif "cell-timeout" in kinds:
        row.status = "timeout"
        where = [e.get("cell") for e in events if e.get("kind") == "cell-timeout"]
        status_message = f"cell(s) {where} ran past {settings.cell_timeout:g} s and were interrupted"
    elif not run.cells:
        row.status = "crashed"
        status_message = f"the nbval process exited with code {run.returncode}: {_short(run.output[-400:], 300)}"
    else:
        row.status = "graded"
        status_message = ""
    if status_message and run.returncode != -9:
        row.feedback.insert(0, f"{row.status}: `{_code(status_message)}`")
    row.message = "; ".join(filter(None, [status_message] + failures + [row.message]))
    row.seconds, row.peak_mib = run.wall_s, run.peak_mib


def _grade_one(
    student: str, path: Path, ref: Reference, refs: dict[str, Reference], seed: int, settings: Settings
) -> Row:
    row = Row(student, ref.name, "graded", max_points=ref.max_points, file=str(path))
    row.checks = {str(c["check"]): 0 for c in ref.checks}
    nb, ids, problem = read_submission(path)
    if nb is None:
        row.status, row.message = "invalid-notebook", problem
        row.feedback.append(f"`{_code(problem)}`")
        return row
    other, how = identify(nb, ids, ref.name, refs)
    if other is not None:
        row.status = "wrong-exercise"
        row.message = f"this file should be {ref.name}.ipynb, but {how}"
        row.feedback.append(f"`{_code(row.message)}`")
        return row
    sources, notes = match_solutions(ref, nb, ids)
    row.flags = _flags(sources.values())
    merged, layout = merge_submission(ref, sources, seed)
    run, capture = _run_merged(merged, ref.name, settings)
    row.message = "; ".join(notes)
    _score(ref, layout, run, capture, settings, row)
    row.feedback += [f"note: {_md(n)}" for n in notes]
    return row


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


def _ignored(name: str) -> bool:
    return name.startswith(".") or name in _IGNORED_NAMES


def _classify(student: str, path: Path, filename: str, names: set[str]) -> Found:
    if not filename.endswith(".ipynb"):
        return Found(student, Path(filename).stem, path, False, "not a .ipynb file")
    stem = filename[: -len(".ipynb")]
    if stem in names:
        return Found(student, stem, path, True)
    cleaned = re.sub(r"(?i)(\s*[-_ ]\s*copy\d*|\s*\(\d+\))+$", "", stem).strip()
    if cleaned in names:
        return Found(student, cleaned, path, True, f"file name {filename!r} read as {cleaned}.ipynb")
    return Found(student, stem, path, False, f"no exercise is called {stem!r} (expected {sorted(names)})")


def discover(folder: Path, names: Iterable[str]) -> list[Found]:
    """Every submitted file: ``folder/<student>/**/NN_topic.ipynb`` or ``folder/<student>__NN_topic.ipynb``.

    Dot files and folders, ``__MACOSX`` and ``.ipynb_checkpoints`` are skipped; every other file is returned, and
    those whose name is no exercise (after dropping ``-Copy1`` / `` (1)`` suffixes) come back with
    ``recognized=False``.

    Raises:
        GradingError: ``folder`` is not a folder.
    """
    folder, names = Path(folder), set(names)
    if not folder.is_dir():
        raise GradingError(f"submissions folder {folder} does not exist or is not a folder")
    found = []
    for entry in sorted(folder.iterdir()):
        if _ignored(entry.name):
            continue
        if entry.is_dir():
            for path in sorted(entry.rglob("*")):
                if path.is_file() and not any(_ignored(p) for p in path.relative_to(entry).parts):
                    found.append(_classify(entry.name, path, path.name, names))
        elif entry.is_file():
            student, sep, rest = entry.name.partition("__")
            if sep and student:
                found.append(_classify(student, entry, rest, names))
            else:
                note = "files at the top level must be named <student>__NN_topic.ipynb"
                found.append(Found(entry.stem, entry.stem, entry, False, note, real_student=False))
    return found


# ------------------------------------------------------------------------------------------------------------ grade
def grade(
    submissions: Path,
    reference: Path,
    *,
    hidden: Path | None = None,
    exercises: Sequence[str] | None = None,
    settings: Settings | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> Gradebook:
    """Grade every submission in ``submissions`` against the reference notebooks; see the module docstring.

    Returns a ``Gradebook`` with one row per (student, exercise) for each student found and each exercise graded,
    plus one row per unrecognized file. Raises ``GradingError`` when grading cannot start (bad folders, a
    reference that fails its own checks, unstable hidden checks).
    """
    settings = settings or Settings()
    log = log or (lambda msg: print(msg, file=sys.stderr))
    start = time.perf_counter()
    refs = load_references(reference, hidden, exercises)
    selected = {n: r for n, r in refs.items() if not exercises or n in exercises}
    found = discover(submissions, refs)
    seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)

    rows: list[Row] = []
    jobs: list[tuple[str, Path, Reference]] = []
    groups: dict[tuple[str, str], list[Found]] = {}
    for f in found:
        if not f.recognized:
            rows.append(Row(f.student, f.exercise, "unrecognized", message=f.note, file=str(f.path)))
        elif f.exercise in selected:
            groups.setdefault((f.student, f.exercise), []).append(f)
    for (student, name), files in sorted(groups.items()):
        ref = selected[name]
        if len(files) > 1:
            listed = ", ".join(str(f.path) for f in files)
            rows.append(
                Row(
                    student,
                    name,
                    "duplicate",
                    0,
                    ref.max_points,
                    f"{len(files)} files: {listed}; keep one and grade again",
                    listed,
                    checks={str(c["check"]): 0 for c in ref.checks},
                )
            )
        else:
            jobs.append((student, files[0].path, ref))
            if files[0].note:
                log(f"{student}: {files[0].note}")
    students = sorted({f.student for f in found if f.real_student})
    for student in students:
        for name, ref in selected.items():
            if not any(f.student == student and f.exercise == name and f.recognized for f in found):
                rows.append(
                    Row(
                        student,
                        name,
                        "missing",
                        0,
                        ref.max_points,
                        f"no {name}.ipynb from {student}",
                        checks={str(c["check"]): 0 for c in ref.checks},
                    )
                )

    needed = sorted({ref.name for _, _, ref in jobs})
    for name in selected:
        if not selected[name].hidden:
            log(
                f"warning: {name} has no hidden checks: a student's code that tampers with the kernel could forge its "
                "visible checks (see the README's instructor's guide)"
            )
        else:
            lacking = [c["check"] for c in selected[name].checks if str(c["check"]) not in selected[name].hidden]
            if lacking:
                log(f"warning: {name}: checks {lacking} have no hidden check")
    errors = 0
    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        if needed and any(selected[n].hidden for n in needed):
            log(f"calibrating hidden checks of {needed} on the reference (seed {seed})")
        for name in needed:
            if selected[name].hidden:
                _calibrate(selected[name], settings, seed, pool)
        futures = {pool.submit(_grade_one, s, p, ref, refs, seed, settings): (s, p, ref) for s, p, ref in jobs}
        bar = None
        if progress and futures:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(futures), desc="grading", unit="notebook", file=sys.stderr)
        for future in as_completed(futures):
            student, path, ref = futures[future]
            try:
                rows.append(future.result())
            except Exception as exc:  # a grader bug must cost one row, not the gradebook
                errors += 1
                rows.append(
                    Row(
                        student,
                        ref.name,
                        "grader-error",
                        0,
                        ref.max_points,
                        f"{type(exc).__name__}: {exc}",
                        str(path),
                        checks={str(c["check"]): 0 for c in ref.checks},
                    )
                )
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
    rows.sort(key=lambda r: (r.student, r.exercise, r.file))
    columns = sorted({str(c["check"]) for r in selected.values() for c in r.checks}, key=_check_key)
    return Gradebook(rows, columns, seed, time.perf_counter() - start)


def _check_key(check: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", check))


# ------------------------------------------------------------------------------------------------------------- bench
def bench_grading(
    reference: Path, exercise: str, n: int = 30, *, hidden: Path | None = None, settings: Settings | None = None
) -> dict:
    """Grade ``n`` submissions of one exercise and time it: a third answered with the reference's answers, a third
    left unanswered, a third with every ``raise NotImplementedError()`` replaced by ``pass`` (wrong answers).

    Returns ``{"exercise", "submissions", "workers", "wall_s", "per_notebook_s", "cpu_s", "cores",
    "load_average_1min", "statuses", "points"}``: seconds of wall time (the whole run, calibration included; the mean
    per notebook) and of CPU time of all grading processes and kernels (what the run costs on an idle machine,
    ``cpu_s / cores`` being a lower bound of its wall time there).
    """
    import resource

    settings = settings or Settings()
    refs = load_references(reference, hidden, [exercise])
    ref = refs[exercise]
    answers = {c.id: c.source for c in ref.notebook.cells if c.get("id") in ref.solution_ids}
    with tempfile.TemporaryDirectory(prefix="gradacc-bench-") as tmp:
        for i in range(n):
            nb = copy.deepcopy(ref.exercise)
            for cell in nb.cells:
                if cell.get("id") in answers:
                    if i % 3 == 0:
                        cell.source = answers[cell.id]
                    elif i % 3 == 2:
                        cell.source = cell.source.replace("raise NotImplementedError()", "pass")
            nbformat.write(nb, Path(tmp) / f"student{i:02d}__{exercise}.ipynb")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        book = grade(Path(tmp), reference, hidden=hidden, exercises=[exercise], settings=settings, progress=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    statuses: dict[str, int] = {}
    for r in book.rows:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "exercise": exercise,
        "submissions": n,
        "workers": settings.workers,
        "wall_s": round(book.wall_s, 1),
        "per_notebook_s": round(sum(r.seconds or 0 for r in book.rows) / max(n, 1), 1),
        "cpu_s": round(cpu_s, 1),
        "cores": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "statuses": statuses,
        "points": sorted(r.points for r in book.rows),
    }


# --------------------------------------------------------------------------------------------------------------- CLI
def _default_hidden(reference: Path) -> Path | None:
    candidate = (Path(reference) if Path(reference).is_dir() else Path(reference).parent).resolve().parent / "hidden"
    return candidate if candidate.is_dir() else None


def _settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        timeout=args.timeout,
        cell_timeout=args.cell_timeout,
        memory_mib=args.memory_mib,
        max_output_kib=args.max_output_kib,
        workers=args.workers,
        seed=args.seed,
    )


def _hidden_from(args: argparse.Namespace) -> Path | None:
    if args.no_hidden:
        return None
    if args.hidden:
        if not Path(args.hidden).is_dir():
            raise GradingError(f"hidden-checks folder {args.hidden} does not exist")
        return Path(args.hidden)
    return _default_hidden(args.reference)


def _cmd_grade(args: argparse.Namespace) -> int:
    try:
        hidden = _hidden_from(args)
        print(f"hidden checks: {hidden or 'none'}", file=sys.stderr)
        book = grade(
            Path(args.submissions),
            Path(args.reference),
            hidden=hidden,
            exercises=args.exercise,
            settings=_settings_from(args),
            progress=not args.quiet,
        )
        book.write_csv(Path(args.out))
        if args.feedback:
            book.write_feedback(Path(args.feedback))
    except (GradingError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in book.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"wrote {args.out}: {len(book.rows)} rows ({summary}) in {book.wall_s:.1f} s; hidden-check seed {book.seed}")
    if args.feedback:
        print(f"wrote feedback for {len({r.student for r in book.rows})} students to {args.feedback}")
    return 1 if counts.get("grader-error") else 0


def _cmd_bench(args: argparse.Namespace) -> int:
    try:
        result = bench_grading(
            Path(args.reference), args.exercise, args.n, hidden=_hidden_from(args), settings=_settings_from(args)
        )
    except (GradingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


def _limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", default="solutions", help="solutions folder (or one solution notebook)")
    p.add_argument("--hidden", help="hidden-checks folder (default: hidden/ next to the reference folder, if any)")
    p.add_argument("--no-hidden", action="store_true", help="grade with the visible checks only")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="notebooks at once (default: cores)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per notebook (default 300)")
    p.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell (default 120)")
    p.add_argument("--memory-mib", type=int, default=2048, help="memory limit per process in MiB (default 2048)")
    p.add_argument("--max-output-kib", type=int, default=2048, help="output cap per notebook in KiB (default 2048)")
    p.add_argument("--seed", type=int, help="seed of the hidden checks' inputs (default: random per run)")


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "grade",
        help="grade a class: student notebooks into a gradebook CSV (+ feedback), against the pristine solutions",
        description="Grade SUBMISSIONS (one folder per student with NN_topic.ipynb files, or flat files "
        "<student>__NN_topic.ipynb) against the reference solutions. Exit code 0 when every submission got a row.",
    )
    p.add_argument("submissions", help="folder of submissions")
    p.add_argument("--out", default="gradebook.csv", help="gradebook CSV to write (default gradebook.csv)")
    p.add_argument("--feedback", help="folder for one Markdown feedback file per student")
    p.add_argument("--exercise", action="append", help="grade only this exercise (NN_topic; repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _limits(p)
    p.set_defaults(func=_cmd_grade)
    b = subparsers.add_parser("grade-bench", help="time grading N generated submissions of one exercise (prints JSON)")
    b.add_argument("--exercise", required=True, help="NN_topic")
    b.add_argument("--n", type=int, default=30, help="submissions (default 30)")
    _limits(b)
    b.set_defaults(func=_cmd_bench)
