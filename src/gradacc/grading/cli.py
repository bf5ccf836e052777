"""The ``gradacc grade`` and ``gradacc grade-bench`` sub-commands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .bench import bench_grading, bench_limits, bench_sandbox, write_class
from .discover import hidden_from_args
from .gradebook import GradingError, Settings, refused_warning
from .sandbox import SANDBOX_NONE_WARNING, SANDBOXES
from .score import grade
from .shards import begin_shard, finish_shard, parse_shard, shard_paths

__all__ = [
    "add_cli",
]


# --------------------------------------------------------------------------------------------------------------- CLI
def _settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        timeout=args.timeout,
        cell_timeout=args.cell_timeout,
        memory_mib=args.memory_mib,
        max_output_kib=args.max_output_kib,
        workers=args.workers,
        seed=args.seed,
        sandbox=args.sandbox,
        scratch_mib=args.scratch_mib,
        max_processes=args.max_processes,
        notebook_limits=not args.no_notebook_limits,
    )


def _cpu_s() -> float:
    """User + system CPU seconds of this process and of the children it has waited for (grading runs, kernels)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _say(quiet: bool):
    """The grading log: every line to stderr, or with ``--quiet`` only warnings, errors and the line of a resumed run
    that says how many rows it kept from the journal (its gradebook is partly an earlier run's: a batch log says so)."""

    def say(message: str) -> None:
        if not quiet or message.startswith(("warning", "error", "resuming")):
            print(message, file=sys.stderr)

    return say


def _cmd_grade(args: argparse.Namespace) -> int:
    cpu_start = _cpu_s()
    say = _say(args.quiet)
    out, journal = Path(args.out), Path(args.out + ".journal.jsonl")
    feedback = Path(args.feedback) if args.feedback else None
    private = [out] + ([feedback] if feedback else [])
    try:
        hidden = hidden_from_args(args)
        say(f"hidden checks: {hidden or 'none'}")
        settings, shard = _settings_from(args), parse_shard(args.shard) if args.shard else None
        if shard is not None:  # this shard's own gradebook, journal, feedback and record in OUT.shards/K-of-N/
            paths = shard_paths(out, shard)
            record = begin_shard(paths, shard, settings, Path(args.reference), hidden, resume=args.resume)
            private.append(paths.folder)
            out, journal, feedback = paths.gradebook, paths.journal, paths.feedback if feedback else None
            say(f"shard {shard.index} of {shard.count}: writing {paths.folder}")
        journal.parent.mkdir(parents=True, exist_ok=True)  # the journal is opened before the gradebook is written
        book = grade(
            Path(args.submissions),
            Path(args.reference),
            hidden=hidden,
            exercises=args.exercise,
            all_exercises=args.all_exercises,
            settings=settings,
            progress=not args.quiet,
            log=say,
            journal=journal,
            resume=args.resume,
            private=private,
            only=shard.holds if shard else None,
        )
        book.write_csv(out)
        if feedback:
            book.write_feedback(feedback)
        if shard is not None:
            finish_shard(paths, record, book, _cpu_s() - cpu_start)
    except (GradingError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for r in book.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    if not args.quiet:
        _summary(book, counts, out, feedback)
    if book.sandbox.split("; ")[0] == "none":  # the label goes on with the tree's limits (gradacc.grading.limits)
        print(SANDBOX_NONE_WARNING, file=sys.stderr)
    if counts.get("grader-error"):
        n = counts["grader-error"]
        print(
            f"error: the grader failed on {n} file{'s' if n > 1 else ''} (grader-error; a bug: please report it); "
            f"see the message of {'those rows' if n > 1 else 'that row'} in {out}",
            file=sys.stderr,
        )
    refused = [r for r in book.rows if r.status == "refused-file" and r.student]
    if refused:
        print(refused_warning(refused, args.allow_refused), file=sys.stderr)
    if counts.get("ungraded"):
        print(
            f"warning: {counts['ungraded']} rows are ungraded (their reference could not run under the grader): run "
            "the same command again with --resume to grade them",
            file=sys.stderr,
        )
        return 3
    if counts.get("grader-error"):
        return 1
    return 4 if refused and not args.allow_refused else 0


def _summary(book, counts: dict[str, int], out: Path, feedback: Path | None) -> None:
    """The lines a run prints on stdout when it is not ``--quiet``: the rows by status, the time, the seed and the
    grading process's own peak memory (``ru_maxrss``, in MiB: each notebook runs in a process of its own)."""
    import resource

    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    print(
        f"wrote {out}: {len(book.rows)} rows ({summary}) in {book.wall_s:.1f} s; hidden-check seed {book.seed}; "
        f"grader peak RSS {rss_mib:.0f} MiB (each notebook runs in its own limited processes); sandbox {book.sandbox}"
    )
    if feedback:
        print(f"wrote feedback for {len({r.student for r in book.rows if r.student})} students to {feedback}")


def _cmd_bench(args: argparse.Namespace) -> int:
    try:
        if args.write_class:
            paths = write_class(
                Path(args.reference), args.exercise, args.n, Path(args.write_class), hidden=hidden_from_args(args)
            )
            print(
                f"wrote {len(paths)} submissions of {args.exercise} to {args.write_class}: grade them with "
                f"gradacc grade {args.write_class} --exercise {args.exercise}"
            )
            return 0
        if args.nbgrader:
            from .external import bench_nbgrader

            result = bench_nbgrader(
                Path(args.reference),
                args.exercise,
                args.n,
                hidden=hidden_from_args(args),
                settings=_settings_from(args),
                python=args.nbgrader_python,
            )
        else:
            bench = bench_sandbox if args.compare_sandbox else bench_limits if args.compare_limits else bench_grading
            hidden, settings = hidden_from_args(args), _settings_from(args)
            result = bench(Path(args.reference), args.exercise, args.n, hidden=hidden, settings=settings)
    except (GradingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    if args.compare_limits and not args.compare_sandbox and not args.nbgrader:
        off, on = result["off"], result["on"]
        print(
            f"CPU seconds of the notebooks {off['cpu_s']} without the tree limits, {on['cpu_s']} with "
            f"({on['sandbox'].split('; ')[-1]}): ratio {result['cpu_ratio']}; the grader's own {off['grader_cpu_s']} "
            f"-> {on['grader_cpu_s']}; seconds per notebook {off['per_notebook_s']} -> {on['per_notebook_s']}; load "
            f"average {off['load_average_1min']} -> {on['load_average_1min']}"
        )
    if args.compare_sandbox:
        none, bwrap = result["none"], result["bwrap"]
        print(
            f"seconds per notebook: {none['per_notebook_s']} without a sandbox, {bwrap['per_notebook_s']} in "
            f"{bwrap['sandbox']}: ratio {result['per_notebook_ratio']}; CPU seconds {none['cpu_s']} -> "
            f"{bwrap['cpu_s']} (ratio {result['cpu_ratio']}); load average {none['load_average_1min']} -> "
            f"{bwrap['load_average_1min']}"
        )
    return 0


def _limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", default="solutions", help="solutions folder (or one solution notebook)")
    p.add_argument("--hidden", help="hidden-checks folder (default: hidden/ next to the reference folder, if any)")
    p.add_argument("--no-hidden", action="store_true", help="grade with the visible checks only")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="notebooks at once (default: cores)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per notebook (default 300)")
    p.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell (default 120)")
    p.add_argument(
        "--memory-mib",
        type=int,
        default=2048,
        help="memory limit of each notebook's whole process tree (its kernel and every process it starts) in MiB, "
        "also each process's own limit (default 2048)",
    )
    p.add_argument(
        "--max-processes",
        type=int,
        default=1024,
        help="processes and threads of each notebook's tree at once (default 1024)",
    )
    p.add_argument(
        "--no-notebook-limits",
        action="store_true",
        help="enforce --memory-mib per process only and no process limit (to measure what the tree limits cost); "
        "the gradebook's sandbox column says so",
    )
    p.add_argument("--max-output-kib", type=int, default=2048, help="output cap per notebook in KiB (default 2048)")
    p.add_argument("--seed", type=int, help="seed of the hidden checks' inputs (default: random per run)")
    p.add_argument(
        "--sandbox",
        choices=list(SANDBOXES),
        default="bwrap",
        help="how each notebook is isolated: "
        + "; ".join(f"{k}: {v}" for k, v in SANDBOXES.items())
        + ". Where bwrap cannot start, grading stops with the fix",
    )
    p.add_argument(
        "--scratch-mib",
        type=int,
        default=256,
        help="size of each sandboxed notebook's only writable folder (a tmpfs in memory), in MiB (default 256)",
    )


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "grade",
        help="grade a class: student notebooks into a gradebook CSV (+ feedback), against the pristine solutions",
        description="Grade SUBMISSIONS (one folder per student with NN_topic.ipynb files, or flat files "
        "<student>__NN_topic.ipynb) against the reference solutions. The gradebook, its journal and the feedback are "
        "written readable by you only (0600 files, 0700 folders). Exit code 0 when every submission was read and got a row (however many scored 0); 1 when the "
        "grader failed on a file (grader-error), 2 when grading could not start, 3 when rows are ungraded, 4 when "
        "submissions were refused (refused-file; unless --allow-refused).",
    )
    p.add_argument("submissions", help="folder of submissions")
    p.add_argument("--out", default="gradebook.csv", help="gradebook CSV to write (default gradebook.csv)")
    p.add_argument("--feedback", help="folder for one Markdown feedback file per student")
    p.add_argument("--exercise", action="append", help="grade only this exercise (NN_topic; repeatable)")
    p.add_argument(
        "--all",
        action="store_true",
        dest="all_exercises",
        help="grade every reference exercise (default: those at least one submission hands in)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar and no summary: only warnings, errors and what --resume kept (on stderr)",
    )
    p.add_argument(
        "--allow-refused",
        action="store_true",
        help="exit 0 even when submissions were refused (refused-file: a link or a special file, never read); the "
        "warning is printed all the same",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="grade only shard K of N (from 0) of the class, chosen by a hash of each student's id, into "
        "OUT.shards/K-of-N/ (merge them with gradacc grade-merge); needs --seed. auto: K and N from a Slurm job array "
        "(SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT); auto/N: K from SLURM_ARRAY_TASK_ID or a Kubernetes Indexed "
        "Job's JOB_COMPLETION_INDEX",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows of OUT.journal.jsonl (written as each notebook is graded) and grade only the notebooks "
        "without one, with the journal's seed: restart a killed run",
    )
    _limits(p)
    p.set_defaults(func=_cmd_grade)
    b = subparsers.add_parser("grade-bench", help="time grading N generated submissions of one exercise (prints JSON)")
    b.add_argument("--exercise", required=True, help="NN_topic")
    b.add_argument("--n", type=int, default=30, help="submissions (default 30)")
    b.add_argument(
        "--write-class",
        metavar="DIR",
        help="only write the generated submissions into DIR (one folder per student) to grade with `gradacc grade`",
    )
    b.add_argument(
        "--compare-sandbox",
        action="store_true",
        help="grade the class twice, without a sandbox and in bwrap, and print seconds per notebook as a ratio",
    )
    b.add_argument(
        "--compare-limits",
        action="store_true",
        help="grade the class twice in the same sandbox, without and with the per-notebook limits on the whole "
        "process tree, and print the CPU seconds as a ratio",
    )
    b.add_argument(
        "--nbgrader",
        action="store_true",
        help="also autograde the same class with nbgrader (export-assignments + nbgrader autograde) and print both",
    )
    b.add_argument(
        "--nbgrader-python",
        default=sys.executable,
        help="a Python with nbgrader installed (default: this one); run as PYTHON -m nbgrader",
    )
    _limits(b)
    b.set_defaults(func=_cmd_bench)
