"""A class graded as the shards of a job array (Slurm, a Kubernetes Indexed Job), then merged into one gradebook.

``gradacc grade SUBMISSIONS --shard K/N --seed S ...`` grades only the students of shard K of N: those whose id (the
student's folder name, or the ``<student>__`` prefix of a flat file) has ``shard_of(id, N) == K``, a SHA-256 hash of
the id, so a late submission never moves another student to another shard (listing order would). Every shard still
chooses the exercises from the whole class (those anyone handed in, as one machine does), so each student gets the
rows one machine would give. The hidden checks' inputs depend on the seed alone (``merge._hidden_cell`` gives every
hidden cell ``GRADACC_SEED``, never the student's position in the class): with the same ``--seed`` every student gets
the draws of a one-machine run, and ``--shard`` refuses to run without ``--seed``.

A shard writes into ``OUT.shards/K-of-N/`` (``shard_paths``): its gradebook (``OUT``'s file name), its journal
(``--resume`` continues a killed shard, as on one machine), ``feedback/`` and ``shard.json``, the record of what it
graded with (shard, seed, SHA-256 of every reference and hidden-check file, the limits), written when it starts and
again, with its rows, when it ends.

``gradacc grade-merge --out OUT`` reads ``OUT.shards/*/shard.json`` (or the shard folders named) and writes ``OUT``, its
journal and the feedback folder, equal to what one machine writes for the same class and seed except the
``seconds`` and ``peak_mib`` columns (and the order of the journal's lines, the order notebooks finished in). It
refuses, naming them, a missing or unfinished shard, a shard graded twice, shards cut for different counts or
graded with different seeds, references, hidden checks, exercises or limits, and a student in two shards.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from .files import open_private, private_folder, write_private_text
from .gradebook import Gradebook, GradingError, Row, Settings, refused_warning
from .journal import read_journal

__all__ = [
    "Shard",
    "shard_of",
    "parse_shard",
    "fingerprints",
    "shard_paths",
    "begin_shard",
    "finish_shard",
    "merge_shards",
    "shard_sizes",
    "write_merged",
    "add_cli",
]

_LIMITS = (
    "timeout",
    "cell_timeout",
    "memory_mib",
    "max_output_kib",
    "file_mib",
    "sandbox",
    "scratch_mib",
    "max_processes",
    "notebook_limits",
)
"""The settings that can change a row (``workers`` cannot: it only sets how many notebooks run at once)."""


def shard_of(student: str, count: int) -> int:
    """The shard (0 .. ``count`` - 1) of a student id: the first 8 bytes of SHA-256 of its UTF-8, big-endian, modulo
    ``count``. The same on every machine and Python (``hash()`` is salted per process).

    Raises:
        ValueError: ``count < 1``.
    """
    if count < 1:
        raise ValueError(f"the shard count must be >= 1, got {count}")
    return int.from_bytes(hashlib.sha256(student.encode("utf-8")).digest()[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (numbered from 0, as ``sbatch --array=0-(N-1)`` and Kubernetes number them)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise GradingError(
                f"shard {self.index} of {self.count}: K must be in 0..{self.count - 1} (shards are numbered from 0: "
                f"sbatch --array=0-{self.count - 1}, a Kubernetes Indexed Job's completions: {self.count})"
            )

    @property
    def name(self) -> str:
        return f"{self.index}-of-{self.count}"

    def holds(self, student: str) -> bool:
        return shard_of(student, self.count) == self.index


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise GradingError(f"{what} must be a whole number, got {text!r}") from None


def parse_shard(spec: str, environ: Mapping[str, str] | None = None) -> Shard:
    """The shard that ``--shard SPEC`` names.

    ``K/N``: shard K of N. ``auto``: K and N from a Slurm job array (``SLURM_ARRAY_TASK_ID``,
    ``SLURM_ARRAY_TASK_COUNT``; the array must be ``--array=0-(N-1)``). ``auto/N``: K from ``SLURM_ARRAY_TASK_ID`` or
    from a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` (Kubernetes gives no count: N is its ``completions``),
    N given (also a Slurm task submitted again on its own, ``sbatch --array=2``, whose array has one task).

    Raises:
        GradingError: a malformed SPEC, K outside 0..N-1, or ``auto`` outside a job array (each message names the fix).
    """
    env = os.environ if environ is None else environ
    head, slash, tail = spec.strip().partition("/")
    if head != "auto":
        if not slash:
            raise GradingError(f"--shard must be K/N (shard K of N, from 0), auto or auto/N, got {spec!r}")
        return Shard(_int(head, "--shard's K"), _int(tail, "--shard's N"))
    count = _int(tail, "--shard auto/N's N") if slash else None
    if "SLURM_ARRAY_TASK_ID" in env:
        index = _int(env["SLURM_ARRAY_TASK_ID"], "SLURM_ARRAY_TASK_ID")
        if count is None:
            total = _int(env.get("SLURM_ARRAY_TASK_COUNT", ""), "SLURM_ARRAY_TASK_COUNT")
            low, high = env.get("SLURM_ARRAY_TASK_MIN", "0"), env.get("SLURM_ARRAY_TASK_MAX", str(total - 1))
            if (low, high) != ("0", str(total - 1)):
                raise GradingError(
                    f"--shard auto: this job array runs tasks {low}-{high} ({total} of them), not 0-{total - 1}: pass "
                    "--shard auto/N with the class's shard count N (a task submitted again on its own needs it)"
                )
            count = total
        return Shard(index, count)
    if "JOB_COMPLETION_INDEX" in env:
        if count is None:
            raise GradingError(
                "--shard auto: Kubernetes gives the index (JOB_COMPLETION_INDEX) but not the count: pass --shard "
                "auto/N with N = the Job's spec.completions"
            )
        return Shard(_int(env["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX"), count)
    raise GradingError(
        f"--shard {spec}: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes "
        "Indexed Job) is set: outside a job array pass --shard K/N"
    )


def fingerprints(reference: Path, hidden: Path | None) -> dict[str, dict[str, str]]:
    """``{"references": {name: sha256}, "hidden": {name: sha256}}`` of the files ``load_references`` reads: every
    ``reference/*.ipynb`` (or the one notebook) and ``hidden/<name>.py`` of each."""
    reference = Path(reference)
    paths = [reference] if reference.is_file() else sorted(reference.glob("*.ipynb"))
    digest = {p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    secret = {}
    for name in digest:
        path = Path(hidden) / f"{name}.py" if hidden is not None else None
        if path is not None and path.is_file():
            secret[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"references": digest, "hidden": secret}


# ------------------------------------------------------------------------------------------------------ one shard
@dataclass(frozen=True)
class ShardPaths:
    """Where shard ``name`` of the gradebook ``out`` writes: ``folder`` = ``OUT.shards/K-of-N/``."""

    folder: Path
    gradebook: Path
    journal: Path
    feedback: Path
    record: Path


def shard_paths(out: Path, shard: Shard) -> ShardPaths:
    folder = Path(str(out) + ".shards") / shard.name
    gradebook = folder / Path(out).name
    return ShardPaths(
        folder, gradebook, Path(str(gradebook) + ".journal.jsonl"), folder / "feedback", folder / "shard.json"
    )


def _limits(settings: Settings) -> dict:
    return {name: getattr(settings, name) for name in _LIMITS}


def begin_shard(
    paths: ShardPaths, shard: Shard, settings: Settings, reference: Path, hidden: Path | None, *, resume: bool
) -> dict:
    """Write the shard's record (``status: running``) before it grades; returns it.

    Raises:
        GradingError: ``settings.seed`` is ``None`` (every shard must draw the same hidden inputs), or a ``resume``
            whose earlier start had another seed, other references, hidden checks or limits.
    """
    if settings.seed is None:
        raise GradingError(
            "--shard needs --seed: every shard must draw the same hidden-check inputs. Choose one for the class, e.g. "
            "--seed $(python3 -c 'import secrets; print(secrets.randbelow(2**31))'), and pass it to every shard"
        )
    record = {
        "shard": [shard.index, shard.count],
        "status": "running",
        "seed": settings.seed,
        **fingerprints(reference, hidden),
        "limits": _limits(settings),
        "gradacc": __version__,
    }
    if resume and paths.record.exists():
        before = json.loads(paths.record.read_text(encoding="utf-8"))
        changed = [key for key in ("seed", "references", "hidden", "limits") if before.get(key) != record[key]]
        if changed:
            raise GradingError(
                f"{paths.record}: shard {shard.name} was started with other {', '.join(changed)}: grade it again "
                "without --resume (or with what it started with)"
            )
    private_folder(paths.folder)
    write_private_text(paths.record, json.dumps(record, indent=1) + "\n")
    return record


def finish_shard(paths: ShardPaths, record: dict, book: Gradebook, cpu_s: float | None = None) -> None:
    """Add the shard's rows, check columns, wall time, CPU seconds (``cpu_s``: the grader's and its grading processes'
    and kernels', user + system) and sandbox to its record (``status: done``)."""
    record = {
        **record,
        "status": "done",
        "check_columns": book.check_columns,
        "wall_s": round(book.wall_s, 1),
        "cpu_s": None if cpu_s is None else round(cpu_s, 1),
        "sandbox": book.sandbox,
        "course_version": book.course_version,
        "graded_on": book.graded_on,
        "rows": [dataclasses.asdict(r) for r in book.rows],
    }
    write_private_text(paths.record, json.dumps(record, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------------------- merge
def _differ(records: dict[str, dict], key: str, what: str) -> str | None:
    """A problem naming the shards that disagree on ``record[key]``, or ``None``."""
    groups: dict[str, list[str]] = {}
    for name, record in records.items():
        groups.setdefault(json.dumps(record.get(key), sort_keys=True), []).append(name)
    if len(groups) < 2:
        return None
    if isinstance(next(iter(records.values())).get(key), dict):
        values = [r.get(key) or {} for r in records.values()]
        names = sorted({n for v in values for n in v if any(w.get(n) != v.get(n) for w in values)})
        detail = f" ({', '.join(names)} differ)" if names else ""
        return f"shards graded with different {what}{detail}: " + "; ".join(
            ", ".join(sorted(group)) for group in groups.values()
        )
    return f"shards graded with different {what}: " + "; ".join(
        f"{', '.join(sorted(group))}: {json.loads(value)}" for value, group in groups.items()
    )


def merge_shards(folders: Sequence[Path]) -> tuple[Gradebook, list[Row]]:
    """The class's gradebook and journal rows from the shard folders (``OUT.shards/K-of-N``), after checking that they
    make one class graded one way.

    Returns ``(gradebook, journal rows)``: every shard's rows sorted by (student, exercise, file) as ``grade`` sorts
    them; the journal rows are those of the shards' journals (the notebooks graded). ``wall_s`` is the longest
    shard's.

    Raises:
        GradingError: every problem found, each naming its shards or students: no shard; a shard folder without a
            record, or unfinished; a shard graded twice; shards of different counts, seeds, references, hidden
            checks, exercises (check columns) or limits; a missing shard; a student in two shards, or in a shard its
            id does not hash to.
    """
    if not folders:
        raise GradingError("no shard to merge: grade the class with --shard K/N first (its folders: OUT.shards/K-of-N)")
    problems: list[str] = []
    records: dict[str, dict] = {}
    seen: dict[str, list[Path]] = {}
    for folder in folders:
        path = Path(folder) / "shard.json"
        if not path.is_file():
            problems.append(f"{folder} holds no shard.json (not a shard's folder, or its shard never started)")
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        name = Shard(*record["shard"]).name
        seen.setdefault(name, []).append(Path(folder))
        record["folder"] = Path(folder)
        if record.get("status") != "done":
            _, kept = read_journal(_journal_of(Path(folder)))
            problems.append(
                f"shard {name} did not finish ({len(kept)} notebooks in its journal): run it again with --resume "
                f"(the guide's Slurm script: TASKS={record['shard'][0]} bash grade-class.sh), then merge"
            )
        records[name] = record
    for name, where in seen.items():
        if len(where) > 1:
            problems.append(f"shard {name} was graded twice: {', '.join(map(str, where))}; keep one folder")
    for key, what in (("seed", "seeds"), ("references", "references"), ("hidden", "hidden checks"),
                      ("check_columns", "exercises (check columns)"), ("limits", "limits")):  # fmt: skip
        done = {n: r for n, r in records.items() if r.get("status") == "done" or key != "check_columns"}
        problem = _differ(done, key, what)
        if problem:
            problems.append(problem)
    counts = sorted({r["shard"][1] for r in records.values()})
    if len(counts) > 1:
        problems.append(f"the shards were cut for different counts {counts}: {', '.join(sorted(records))}")
    elif counts:
        absent = [f"{k}-of-{counts[0]}" for k in range(counts[0]) if f"{k}-of-{counts[0]}" not in records]
        if absent:
            tasks = ",".join(a.split("-")[0] for a in absent)
            problems.append(
                f"shard{'s' if len(absent) > 1 else ''} {', '.join(absent)} missing: grade "
                f"{'them' if len(absent) > 1 else 'it'} (the guide's Slurm script: TASKS={tasks} bash grade-class.sh), "
                "then merge"
            )
    owners: dict[str, set[str]] = {}
    for name, record in records.items():
        for row in record.get("rows", []):
            owners.setdefault(row["student"], set()).add(name)
    for student, names in sorted(owners.items()):
        if len(names) > 1:
            problems.append(f"student {student!r} has rows in shards {', '.join(sorted(names))}")
        else:
            (name,) = names
            index, count = records[name]["shard"]
            if shard_of(student, count) != index:
                problems.append(
                    f"student {student!r} is in shard {name} but its id hashes to shard {shard_of(student, count)} "
                    f"of {count} (graded by another gradacc? this one is {__version__})"
                )
    if problems:
        raise GradingError("cannot merge the shards: " + "; ".join(problems))
    rows = sorted(
        (Row(**row) for r in records.values() for row in r["rows"]), key=lambda r: (r.student, r.exercise, r.file)
    )
    journal = sorted(
        (row for r in records.values() for row in read_journal(_journal_of(r["folder"]))[1]),
        key=lambda r: (r.student, r.exercise, r.file),
    )
    first = next(iter(records.values()))
    book = Gradebook(
        rows, first["check_columns"], first["seed"], max(r["wall_s"] for r in records.values()), first["sandbox"],
        first.get("course_version", ""), max(r.get("graded_on", "") for r in records.values()),
    )  # fmt: skip
    return book, journal


def _journal_of(folder: Path) -> Path:
    found = sorted(Path(folder).glob("*.journal.jsonl"))
    return found[0] if found else Path(folder) / "missing.journal.jsonl"


def write_merged(book: Gradebook, journal: Sequence[Row], out: Path, feedback: Path | None = None) -> None:
    """Write ``out`` (the gradebook CSV), ``out.journal.jsonl`` (the seed, then the journal rows: ``gradacc grade
    --resume`` with the same ``--out`` continues from it) and, with ``feedback``, one Markdown file per student."""
    book.write_csv(Path(out))
    with open_private(str(out) + ".journal.jsonl") as f:
        f.write(json.dumps({"seed": book.seed}) + "\n")
        for row in journal:
            f.write(json.dumps(dataclasses.asdict(row)) + "\n")
    if feedback is not None:
        book.write_feedback(Path(feedback))


# ------------------------------------------------------------------------------------------------------------ CLI
def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "grade-merge",
        help="merge the shards of a class graded with `gradacc grade --shard K/N` into one gradebook",
        description="Read the shards' records (OUT.shards/K-of-N/shard.json, or the SHARD folders given) and write "
        "OUT, OUT.journal.jsonl and, with --feedback, the feedback folder: what one machine writes for the same class "
        "and seed. Exit code 2 when the shards do not make one class graded one way (each problem is named), 3 when "
        "rows are ungraded, 1 when the grader failed on a file, 4 when submissions were refused (refused-file; unless "
        "--allow-refused).",
    )
    p.add_argument("shards", nargs="*", help="shard folders (default: every OUT.shards/*/)")
    p.add_argument("--out", default="gradebook.csv", help="the gradebook the shards were graded for (default "
                   "gradebook.csv): the merged one is written there")  # fmt: skip
    p.add_argument("--feedback", help="folder for one Markdown feedback file per student")
    p.add_argument("--allow-refused", action="store_true", help="exit 0 even when submissions were refused "
                   "(refused-file: a link or a special file, never read); the warning is printed all the same")  # fmt: skip
    p.set_defaults(func=_cmd_merge)
    p = subparsers.add_parser(
        "grade-shards",
        help="count the students of each shard before a job array grades them (shards are not equal)",
        description="Print how many students each of COUNT shards holds (the ids `gradacc grade --shard K/COUNT` "
        "reads: folder names, or the <student>__ prefix of flat files) and the largest: size a task's time limit by "
        "the largest shard.",
    )
    p.add_argument("submissions", help="the class's submissions folder")
    p.add_argument("--count", type=int, required=True, help="the number of shards (tasks) you plan to submit")
    p.set_defaults(func=_cmd_count)


def shard_sizes(students: Sequence[str], count: int) -> list[int]:
    """How many of ``students`` (ids, each counted once) fall into each of ``count`` shards (``shard_of``).

    Raises:
        ValueError: ``count < 1``.
    """
    if count < 1:
        raise ValueError(f"the shard count must be >= 1, got {count}")
    sizes = [0] * count
    for student in set(students):
        sizes[shard_of(student, count)] += 1
    return sizes


def _cmd_count(args: argparse.Namespace) -> int:
    from .discover import discover

    try:
        students = {f.student for f in discover(Path(args.submissions), []) if f.student}
        sizes = shard_sizes(list(students), args.count)
    except (GradingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    width = len(str(args.count - 1))
    for index, size in enumerate(sizes):
        print(f"shard {index:>{width}}/{args.count}: {size} students")
    print(f"{len(students)} students; the largest shard holds {max(sizes)} (mean {len(students) / args.count:.1f})")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    folders = [Path(s) for s in args.shards] or sorted(p for p in Path(args.out + ".shards").glob("*") if p.is_dir())
    try:
        book, journal = merge_shards(folders)
        write_merged(book, journal, Path(args.out), Path(args.feedback) if args.feedback else None)
    except (GradingError, OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in book.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(
        f"wrote {args.out}: {len(book.rows)} rows ({summary}) from {len(folders)} shards; hidden-check seed "
        f"{book.seed}; the longest shard took {book.wall_s:.1f} s"
    )
    if args.feedback:
        print(f"wrote feedback for {len({r.student for r in book.rows if r.student})} students to {args.feedback}")
    refused = [r for r in book.rows if r.status == "refused-file" and r.student]
    if refused:
        print(refused_warning(refused, args.allow_refused), file=sys.stderr)
    if counts.get("ungraded") or counts.get("grader-error"):
        return 3 if counts.get("ungraded") else 1
    return 4 if refused and not args.allow_refused else 0
