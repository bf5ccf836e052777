"""Scoring: a check earns its points when nbval passed the reference's check cell and every hidden check printed what
the reference printed (numbers within one unit of the last digit); ``grade`` runs a whole class in parallel
(``gradacc.grading.bench`` measures it).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..course.nbval_run import NbvalRun
from ..i18n import N_, Message, notebook_language, translate
from .discover import Found, discover, load_references, read_submission, refused_row
from .files import course_version, open_private
from .gradebook import (
    STATUS_NAMES,
    Gradebook,
    GradingError,
    Reference,
    Row,
    Settings,
    _check_message,
    _code,
    _md,
    _num,
    _said,
    _say,
    _short,
    answer_error,
    misconception_of,
)
from .journal import read_journal
from .merge import _flags, identify, match_solutions, merge_submission
from .outputs import same_output
from .run import _calibrate, _run_merged
from .sandbox import SANDBOX_NONE_WARNING, Sandbox, start_sandbox

__all__ = ["grade"]


FORGED_FLAG = "forged verdict files"
"""The flag of a row whose notebook left files named as the grader's verdict files once were (``plugin.PLANTED``)."""


def _score(
    ref: Reference, layout: dict[str, int], run: NbvalRun, capture: dict, settings: Settings, row: Row, printed: str
) -> None:
    """Fill ``row`` from a run: points, the instructor's ``message`` and ``hidden`` (English), and the student's
    ``feedback`` (in ``row.language``); ``printed`` is the language the run's check cells printed in."""
    cells, events = capture["cells"], capture["events"]
    kinds = {e.get("kind") for e in events}
    lang = row.language

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
                hidden_problem = (
                    Message(
                        N_("your code raised {error}: {message}"),
                        error=err["ename"],
                        message=_short(err["evalue"], 200),
                    )
                    if err["evalue"]
                    else Message(N_("your code raised {error}"), error=err["ename"])
                )
            elif outcome(key) == "not run":
                hidden_problem = Message(N_("it did not run (the notebook stopped before it)"))
            elif outcome(key) != "passed" or not same_output(got.get("stdout", ""), ref.expected.get(key, "")):
                hidden_problem = Message(N_("your results differ from the reference solution's"))
            if hidden_problem:
                break
        if hidden_keys:
            row.hidden[cid] = str(hidden_problem) or "passed"
        earned = points if visible and not hidden_problem else 0
        row.checks[cid] = earned
        row.points += earned
        if earned:
            row.feedback.append(
                _say(lang, N_("Exercise {check} ({points} points): passed"), check=cid, points=_num(points))
            )
            continue
        first = answer_error(layout, cells, cid)
        if not visible:
            stopped = bool(kinds & {"kernel-died", "output-limit"})
            why = _check_message(cid, cells.get(f"check:{cid}"), stopped, settings.cell_timeout, printed)
            if first is not None:  # the answer's own error first; the check's, which follows from it, second
                why = Message(N_("{answer}; then the check: {check}"), answer=first, check=why)
            failures.append(f"{cid}: {_short(why, 1000)}")
            said = _short(_said(why, lang), 500)
        else:
            why = Message(
                N_(
                    "your answer passed the check in the notebook but not the grader's additional check on inputs "
                    "drawn at grading time: {problem}"
                ),
                problem=hidden_problem,
            )
            failures.append(f"{cid}: {_short('hidden check failed: ' + hidden_problem, 1000)}")
            said = why.into(lang)
        failed = N_("Exercise {check} (0 / {points} points): failed: `{why}`")
        row.feedback.append(_say(lang, failed, check=cid, points=_num(points), why=_code(said)))
        if not visible and (held := misconception_of(cells.get(f"check:{cid}"), printed, lang)):
            row.misconceptions[cid] = held[0]
            row.feedback.append(_md(held[1]))

    last = capture["started"][-1:] or ["?"]
    memory = any(
        (c["error"] or {}).get("ename") == "MemoryError"
        or "can't allocate memory" in (c["error"] or {}).get("evalue", "")
        for c in cells.values()
    ) or any("MemoryError" in c.get("message", "") for c in run.cells.values())
    if run.returncode == -9:
        row.status, row.points = "timeout", 0
        row.checks = dict.fromkeys(row.checks, 0)
        status_message = Message(
            N_("the notebook did not finish within {seconds} s (still running: {cell})"),
            seconds=f"{settings.timeout:g}",
            cell=last[0],
        )
        row.feedback = [status_message.into(lang)]
    elif "output-limit" in kinds:
        row.status = "output-limit"
        where = next((e.get("cell") for e in events if e.get("kind") == "output-limit"), last[0])
        status_message = Message(
            N_("more than {kib} KiB of output (at {cell}); the kernel was stopped"),
            kib=settings.max_output_kib,
            cell=where,
        )
    elif run.output_bytes > settings.max_output_kib * 2**10:
        row.status = "output-limit"
        status_message = Message(
            N_(
                "{mib} MiB written straight into the grading process's pipe (past the {kib} KiB cap; kept the first "
                "part only)"
            ),
            mib=f"{run.output_bytes / 2**20:.1f}",
            kib=settings.max_output_kib,
        )
    elif kinds & {"memory-limit", "process-limit"}:  # the whole tree's limits (gradacc.grading.limits)
        row.status = "memory-limit" if "memory-limit" in kinds else "process-limit"
        status_message = _limit_message(row.status, settings)
    elif "kernel-died" in kinds:
        row.status = "crashed"
        where = next((e.get("cell") for e in events if e.get("kind") == "kernel-died"), last[0])
        status_message = Message(N_("the kernel died while running {cell}"), cell=where)
    elif memory:
        row.status = "memory-limit"
        status_message = Message(N_("a cell ran out of memory (limit {mib} MiB)"), mib=settings.memory_mib)
    elif "cell-timeout" in kinds:
        row.status = "timeout"
        where = [e.get("cell") for e in events if e.get("kind") == "cell-timeout"]
        status_message = Message(
            N_("cell(s) {cells} ran past {seconds} s and were interrupted"),
            cells=where,
            seconds=f"{settings.cell_timeout:g}",
        )
    elif not run.cells:
        row.status = "crashed"
        status_message = Message(
            N_("the nbval process exited with code {code}: {output}"),
            code=run.returncode,
            output=_short(run.output[-400:], 300),
        )
    else:
        row.status = "graded"
        status_message = ""
    if status_message and run.returncode != -9:
        name = translate(STATUS_NAMES[row.status], lang)
        row.feedback.insert(0, f"{name}: `{_code(status_message.into(lang))}`")
    held = [e.get("detail", "") for e in events if e.get("kind") in ("memory-limit", "process-limit")]
    row.message = "; ".join(filter(None, [str(status_message), *held] + failures + [row.message]))
    row.seconds, row.peak_mib = run.wall_s, run.peak_mib


def _limit_message(status: str, settings: Settings) -> Message:
    """What a row held back by its notebook's memory or process limit says (``gradacc.grading.limits``)."""
    if status == "memory-limit":
        return Message(
            N_("the notebook's processes together passed its memory limit of {mib} MiB; the largest was stopped"),
            mib=settings.memory_mib,
        )
    return Message(
        N_("the notebook reached its limit of {count} processes and threads; no more could start"),
        count=settings.max_processes,
    )


def died_before_any_cell(run: NbvalRun, capture: dict) -> bool:
    """Whether a run failed before its first cell started: a kernel that died on start-up (before ``kernel_info``,
    seen on a loaded machine), never anything a submission's code did."""
    return run.returncode not in (0, -9) and not capture.get("started")


def calibrate_or_explain(ref: Reference, settings: Settings, seed: int, pool, log, box: Sandbox) -> str | None:
    """Calibrate ``ref``'s hidden checks (``_calibrate``); after a failure, once more with twice the time limits.

    Returns ``None`` when calibrated, else why it could not be (the rows of its submissions are then ``ungraded``).
    """
    try:
        _calibrate(ref, settings, seed, pool, box)
        return None
    except GradingError as first:
        longer = dataclasses.replace(settings, timeout=2 * settings.timeout, cell_timeout=2 * settings.cell_timeout)
        log(f"warning: the reference {ref.name} failed under the grader; trying once more with twice the time limits")
        try:
            _calibrate(ref, longer, seed, pool, box)
            return None
        except GradingError as second:
            log(f"error: {ref.name}: its submissions are not graded: {_short(str(second), 600)}")
            return f"first try: {_short(str(first), 200)}; second try (limits x2): {_short(str(second), 200)}"


def _grade_one(
    student: str, path: Path, ref: Reference, refs: dict[str, Reference], seed: int, settings: Settings, box: Sandbox
) -> Row:
    row = Row(student, ref.name, "graded", max_points=ref.max_points, file=str(path))
    row.checks = {str(c["check"]): 0 for c in ref.checks}
    nb, ids, problem = read_submission(path)
    if nb is None:
        row.status, row.message = "invalid-notebook", problem
        row.feedback.append(f"`{_code(problem)}`")
        return row
    row.language = lang = notebook_language(nb)
    other, how = identify(nb, ids, ref.name, refs)
    if other is not None:
        row.status = "wrong-exercise"
        wrong = Message(N_("this file should be {name}.ipynb, but {how}"), name=ref.name, how=how)
        row.message = str(wrong)
        row.feedback.append(f"`{_code(wrong.into(lang))}`")
        return row
    sources, notes = match_solutions(ref, nb, ids)
    row.flags = _flags(sources.values())
    # the language the check cells print in: the reference's own (a pt-BR reference sets it in its setup cell), else
    # the submission's (GRADACC_LANG in the run); the points do not depend on it
    printed = notebook_language(ref.notebook) if notebook_language(ref.notebook) != "en" else lang
    merged, layout = merge_submission(ref, sources, seed, language=printed)
    row.sandbox = box.label
    run, capture = _run_merged(merged, ref.name, settings, box, language=printed)
    if died_before_any_cell(run, capture):  # nothing of the student's ran: the machine's fault, not theirs
        notes.append(
            Message(
                N_("the kernel died before the first cell (nbval exit {code}); graded on a second try"),
                code=run.returncode,
            )
        )
        run, capture = _run_merged(merged, ref.name, settings, box, language=printed)
    row.message = "; ".join(notes)
    _score(ref, layout, run, capture, settings, row, printed)
    row.feedback += [_say(lang, N_("note: {note}"), note=_md(_said(n, lang))) for n in notes]
    if capture["planted"]:  # for the instructor: no verdict is read from a file, but the code tried
        row.flags = "; ".join(filter(None, [row.flags, FORGED_FLAG]))
        planted = f"{FORGED_FLAG} left in the working folder, ignored: {', '.join(capture['planted'])}"
        row.message = "; ".join(filter(None, [row.message, planted]))
    return row


# ------------------------------------------------------------------------------------------------------------ grade
def grade(
    submissions: Path,
    reference: Path,
    *,
    hidden: Path | None = None,
    exercises: Sequence[str] | None = None,
    all_exercises: bool = False,
    settings: Settings | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    journal: Path | None = None,
    resume: bool = False,
    private: Sequence[Path] = (),
    only: Callable[[str], bool] | None = None,
) -> Gradebook:
    """Grade every submission in ``submissions`` against the reference notebooks; see the module docstring.

    Which exercises are graded: ``exercises`` when given; else every reference if ``all_exercises``; else (one
    assignment at a time) those that at least one submission hands in, which the log names.

    Returns a ``Gradebook`` with one row per (student, exercise) for each student found and each exercise graded
    (``missing`` when that student sent no file for it; ``refused-file``, never read, when that file is a link or a
    special file: ``discover.refusal``), plus one row per unrecognized file (with an empty student for a stray file
    at the top of ``submissions``). The gradebook records the course version and the day (``Gradebook.course_version``,
    ``graded_on``) for the feedback files. A reference that fails
    under the grader (its own checks, or unstable hidden checks) is calibrated once more with twice the time limits;
    if it still fails, its submissions get ``ungraded`` rows, which are not journaled (``resume`` grades them).
    Raises ``GradingError`` when grading cannot start (bad folders, a broken hidden-checks file, a ``resume`` whose
    journal has another seed, a sandbox that cannot start: see ``gradacc.grading.sandbox.start_sandbox``).

    ``settings.sandbox``: every grading run (the reference's calibration runs too) in a bubblewrap sandbox
    (``"bwrap"``) that cannot see ``reference``, ``hidden``, ``submissions``, ``journal`` nor the paths in
    ``private`` (the gradebook, the feedback folder), or unisolated (``"none"``: a warning is logged); each row that
    ran records which (``Row.sandbox``).

    ``journal``: a JSON-lines file that gets each graded notebook's row as soon as it is done (see ``read_journal``).
    With ``resume``, the rows already in it are kept (same student, exercise and file) and only the other notebooks
    are graded, with the journal's hidden-check seed; without, the journal starts empty.

    ``only``: grade only the students (and unrecognized top-level files, by their name) for whom ``only(student)`` is
    true: one shard of a class (``gradacc.grading.shards``). The exercises graded are still chosen from the whole
    class, so a shard's students get the rows one machine would give them.
    """
    settings = settings or Settings()
    log = log or (lambda msg: print(msg, file=sys.stderr))
    start = time.perf_counter()
    refs = load_references(reference, hidden, exercises)
    found = discover(submissions, refs)
    secret = [Path(submissions), Path(reference), *([Path(hidden)] if hidden else []), *private]
    box = start_sandbox(
        settings.sandbox,
        settings.scratch_mib,
        private=secret + ([journal] if journal else []),
        **(
            {"memory_mib": settings.memory_mib, "max_processes": settings.max_processes}
            if settings.notebook_limits
            else {}
        ),
    )
    if box.kind == "none":
        log(SANDBOX_NONE_WARNING)
    else:
        log(f"sandbox per notebook: {box.label}; no network, none of your files")
    if exercises:
        selected = {n: r for n, r in refs.items() if n in exercises}
    elif all_exercises:
        selected = dict(refs)
    else:
        handed_in = {f.exercise for f in found if f.recognized}
        selected = {n: r for n, r in refs.items() if n in handed_in}
        log(f"grading the exercises handed in: {', '.join(selected) or 'none'} (--all grades every exercise)")
    if only is not None:
        found = [f for f in found if only(f.student)]
    seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
    done: dict[tuple[str, str, str], Row] = {}
    if journal is not None and resume:
        journal_seed, journal_rows = read_journal(journal)
        if journal_seed is not None and settings.seed is not None and journal_seed != settings.seed:
            raise GradingError(
                f"{journal} was graded with seed {journal_seed}, not --seed {settings.seed}: resume with "
                f"--seed {journal_seed}, or grade again without --resume"
            )
        seed = journal_seed if journal_seed is not None else seed
        done = {(r.student, r.exercise, r.file): r for r in journal_rows}

    rows: list[Row] = []
    jobs: list[tuple[str, Path, Reference]] = []
    groups: dict[tuple[str, str], list[Found]] = {}
    for f in found:
        if not f.recognized:
            status = "refused-file" if f.refused else "unrecognized"
            rows.append(Row(f.student, f.exercise, status, message=f.note, file=str(f.path)))
        elif f.exercise in selected:
            groups.setdefault((f.student, f.exercise), []).append(f)
    for (student, name), files in sorted(groups.items()):
        ref = selected[name]
        if len(files) == 1 and files[0].refused:  # a link or a special file: never read, its row kept
            rows.append(refused_row(files[0], ref))
        elif len(files) > 1:
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

    if done:
        kept = [(s, p, ref) for s, p, ref in jobs if (s, ref.name, str(p)) in done]
        rows += [done[(s, ref.name, str(p))] for s, p, ref in kept]
        jobs = [(s, p, ref) for s, p, ref in jobs if (s, ref.name, str(p)) not in done]
        log(f"resuming: {len(kept)} notebooks already graded in {journal}, {len(jobs)} to grade (seed {seed})")
    sink = None
    if journal is not None:
        sink = open_private(journal, "a" if resume else "w")  # the instructor's only; closed in the finally below
        if not done:
            sink.write(json.dumps({"seed": seed}) + "\n")
            sink.flush()
    try:
        book = _grade_jobs(rows, jobs, selected, refs, seed, settings, progress, log, sink, start, box)
    finally:
        if sink is not None:
            sink.close()
    book.course_version = course_version(reference)
    book.graded_on = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return book


def _grade_jobs(rows, jobs, selected, refs, seed, settings, progress, log, sink, start, box) -> Gradebook:
    needed = sorted({ref.name for _, _, ref in jobs})
    for name in selected:
        if not selected[name].hidden:
            log(
                f"warning: {name} has no hidden checks: a student's code that tampers with the kernel could forge its "
                "visible checks (see docs/instructors/hidden-checks.md)"
            )
        else:
            lacking = [c["check"] for c in selected[name].checks if str(c["check"]) not in selected[name].hidden]
            if lacking:
                log(f"warning: {name}: checks {lacking} have no hidden check")
    errors = 0
    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        if needed and any(selected[n].hidden for n in needed):
            log(f"calibrating hidden checks of {needed} on the reference (seed {seed})")
        failed = {
            name: reason
            for name in needed
            if selected[name].hidden
            and (reason := calibrate_or_explain(selected[name], settings, seed, pool, log, box))
        }
        for student, path, ref in [job for job in jobs if job[2].name in failed]:  # a row each, not journaled
            rows.append(
                Row(
                    student,
                    ref.name,
                    "ungraded",
                    0,
                    ref.max_points,
                    f"not graded: the reference could not run under the grader ({failed[ref.name]}); run the same "
                    "command again with --resume",
                    str(path),
                    checks={str(c["check"]): 0 for c in ref.checks},
                )
            )
        jobs = [job for job in jobs if job[2].name not in failed]
        futures = {pool.submit(_grade_one, s, p, ref, refs, seed, settings, box): (s, p, ref) for s, p, ref in jobs}
        bar = None
        if progress and futures:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(futures), desc="grading", unit="notebook", file=sys.stderr)
        for future in as_completed(futures):
            student, path, ref = futures[future]
            try:
                rows.append(future.result())
                if sink is not None:
                    sink.write(json.dumps(dataclasses.asdict(rows[-1])) + "\n")
                    sink.flush()
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
    return Gradebook(rows, columns, seed, time.perf_counter() - start, box.label)


def _check_key(check: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", check))
