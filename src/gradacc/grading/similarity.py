"""The copying report: ``gradacc similarity SUBMISSIONS`` compares the answer cells of every pair of students, and each
student's against the published solution, exercise by exercise, and lists the pairs above a threshold. It never
changes a score: it writes a report and a ``similar_to`` column in the gradebook, for the instructor to read.

The comparison is copydetect's (https://github.com/blingenf/copydetect, MIT; 0.5.0 is pinned): the winnowing of
MOSS (Schleimer, Wilkerson and Aiken, "Winnowing: local algorithms for document fingerprinting", SIGMOD 2003) on
Pygments' Python tokens, with every variable, function and class name replaced by one letter and comments, blank
space and strings dropped, so that renamed variables or reworded comments change nothing. The exercise's own code
(what every student starts from: the stub of each answer cell) is boilerplate and never counts.

A pair's ``similarity`` is copydetect's share of a student's compared tokens that also occur, as runs of at least
``NOISE`` characters of that normalised code, in the other's: the larger of the two shares (a student who copied a
whole answer and added to it covers all of the other's). Short answers give few runs: two honest answers of one
line can match; the report shows the answers' lengths so that the instructor can judge.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .discover import discover, load_references, read_submission
from .files import csv_safe, open_private, write_csv
from .gradebook import Reference
from .merge import match_solutions

__all__ = ["NOISE", "THRESHOLD", "SOLUTION", "Pair", "class_answers", "compare", "write_report", "flag_gradebook"]

NOISE = 25
"""copydetect's noise threshold ``k`` (its default): runs shorter than this many characters of normalised code never
count as shared."""
THRESHOLD = 0.8
"""Pairs whose similarity is at least this are reported (copydetect's own report shows 0.33 and up)."""
SOLUTION = "published solution"
"""The name the report gives the course's solution notebook."""
COLUMN = "similar_to"
"""The gradebook column: ``other student (0.93); published solution (0.88)`` per (student, exercise)."""


@dataclass(frozen=True)
class Pair:
    """Two answers to one exercise whose similarity is at least the threshold: ``second`` is a student or
    ``SOLUTION``; ``similarity`` in [0, 1]; ``tokens`` the normalised characters both share."""

    exercise: str
    first: str
    second: str
    similarity: float
    tokens: int
    first_chars: int
    second_chars: int


def _fingerprint(name: str, code: str, boilerplate=()):
    from copydetect import CodeFingerprint  # imports matplotlib: only when a report is made

    return CodeFingerprint(name, NOISE, 1, boilerplate=list(boilerplate), language="python", fp=io.StringIO(code))


def class_answers(submissions: Path, refs: dict[str, Reference]) -> dict[str, dict[str, str]]:
    """``{exercise: {student: answer code}}``: each recognized, readable submission's answer cells, matched to the
    reference's as the grader matches them (``match_solutions``), joined. Links and unreadable files are skipped
    (the gradebook already has their row); a student who handed in one exercise twice keeps the first file."""
    answers: dict[str, dict[str, str]] = {}
    for found in discover(Path(submissions), refs):
        if not found.recognized or not found.real_student or found.path.is_symlink():
            continue
        nb, ids, problem = read_submission(found.path)
        if problem:
            continue
        cells, _ = match_solutions(refs[found.exercise], nb, ids)
        answers.setdefault(found.exercise, {}).setdefault(found.student, "\n\n".join(cells.values()))
    return answers


def _solution_answer(ref: Reference) -> str:
    by_id = {c.get("id"): c.source for c in ref.notebook.cells}
    return "\n\n".join(by_id[i] for i in ref.solution_ids)


def compare(submissions: Path, reference: Path, *, threshold: float = THRESHOLD) -> list[Pair]:
    """Every pair of students' answers to each exercise, and each against the published solution: the pairs whose
    similarity is at least ``threshold``, most similar first.

    Raises:
        GradingError: no reference notebooks, or ``submissions`` is not a folder.
    """
    from copydetect import compare_files

    refs = load_references(Path(reference))
    pairs = []
    for exercise, answers in sorted(class_answers(submissions, refs).items()):
        ref = refs[exercise]
        stubs = _fingerprint("stub.py", "\n\n".join(ref.stubs.values()))
        documents = [(s, _fingerprint(f"{s}.py", code, stubs.hashes)) for s, code in sorted(answers.items())]
        solution = (SOLUTION, _fingerprint("solution.py", _solution_answer(ref), stubs.hashes))
        for i, (first, a) in enumerate(documents):
            for second, b in [*documents[i + 1 :], solution]:  # every later student, then the published solution
                shared, (sim_a, sim_b), _ = compare_files(a, b)
                similarity = float(max(sim_a, sim_b))
                if shared and similarity >= threshold:
                    sizes = len(a.filtered_code), len(b.filtered_code)
                    pairs.append(Pair(exercise, first, second, round(similarity, 3), int(shared), *sizes))
    return sorted(pairs, key=lambda p: (-p.similarity, p.exercise, p.first, p.second))


def write_report(pairs: list[Pair], out: Path, threshold: float = THRESHOLD) -> tuple[Path, Path]:
    """Write ``out`` (CSV: one row per pair) and ``out`` with ``.md`` (a table to read), both readable by their
    owner only; return both paths."""
    out = Path(out)
    md = out.with_suffix(".md") if out.suffix != ".md" else out.with_name(out.name + ".md")
    write_csv(
        out,
        ["exercise", "first", "second", "similarity", "shared_chars", "first_chars", "second_chars"],
        ([p.exercise, p.first, p.second, p.similarity, p.tokens, p.first_chars, p.second_chars] for p in pairs),
    )
    lines = [
        "# Similar answers",
        "",
        f"Pairs of answers whose similarity (copydetect {_version()}, noise threshold {NOISE}) is at least "
        f"{threshold}: a lead to read both notebooks, not a verdict. No score was changed.",
        "",
    ]
    if pairs:
        lines += ["| exercise | first | second | similarity | shared / first / second chars |", "|---|---|---|---|---|"]
        lines += [
            f"| {p.exercise} | {_cell(p.first)} | {_cell(p.second)} | {p.similarity:.2f} | "
            f"{p.tokens} / {p.first_chars} / {p.second_chars} |"
            for p in pairs
        ]
    else:
        lines.append("No pair reached the threshold.")
    with open_private(md) as f:
        f.write("\n".join(lines) + "\n")
    return out, md


def _cell(text: str) -> str:
    return "`" + str(text).replace("`", "'").replace("|", "/") + "`"


def _version() -> str:
    from importlib.metadata import version

    return version("copydetect")


def flag_gradebook(gradebook: Path, pairs: list[Pair]) -> int:
    """Write the ``similar_to`` column into ``gradebook`` (after ``flags``; replaced if there): for each (student,
    exercise) row the others its answer resembles, with the similarity. Every other cell is written back as read,
    and the file stays readable by its owner only (0600). Return the number of rows flagged.

    Raises:
        ValueError: the file is no gradacc gradebook (no ``student`` and ``exercise`` columns).
    """
    gradebook = Path(gradebook)
    with gradebook.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0] if rows else []
    if "student" not in header or "exercise" not in header:
        raise ValueError(f"{gradebook} is not a gradacc gradebook (no student and exercise columns)")
    if COLUMN in header:
        drop = header.index(COLUMN)
        rows = [r[:drop] + r[drop + 1 :] for r in rows]
        header = rows[0]
    at = header.index("flags") + 1 if "flags" in header else len(header)
    student, exercise = header.index("student"), header.index("exercise")
    similar: dict[tuple[str, str], list[str]] = {}
    for p in pairs:
        for me, other in ((p.first, p.second), (p.second, p.first)):
            similar.setdefault((csv_safe(me), p.exercise), []).append(f"{other} ({p.similarity:.2f})")
    flagged, out = 0, [header[:at] + [COLUMN] + header[at:]]
    for row in rows[1:]:
        text = "; ".join(similar.get((row[student], row[exercise]), []))  # names as the gradebook wrote them
        flagged += bool(text)
        out.append(row[:at] + [text] + row[at:])
    tmp = gradebook.with_name(gradebook.name + ".tmp")
    write_csv(tmp, out[0], out[1:])  # private (0600) and formula-safe, as the grader writes it
    os.replace(tmp, gradebook)
    return flagged


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "similarity",
        help="a copying report: pairs of students (and student and published solution) with similar answer cells",
        description="Compare the answer cells of every pair of students in SUBMISSIONS, and each against the "
        "published solution, per exercise (copydetect's winnowing on Python tokens, names ignored). Write the pairs "
        "at or above --threshold to OUT (CSV) and OUT with .md, and, with --gradebook, a similar_to column into it. "
        "No score changes.",
    )
    p.add_argument("submissions", help="folder of submissions (as for gradacc grade)")
    p.add_argument("--reference", default="solutions", help="solutions folder (default solutions)")
    p.add_argument("--gradebook", help="gradebook CSV of the same class: gets a similar_to column")
    p.add_argument("--out", default="similarity.csv", help="report to write (default similarity.csv, and .md)")
    p.add_argument("--threshold", type=float, default=THRESHOLD, help=f"report pairs at or above (default {THRESHOLD})")
    p.set_defaults(func=_cmd_similarity)


def _cmd_similarity(args) -> int:
    from .gradebook import GradingError

    if not 0 < args.threshold <= 1:
        print(f"gradacc similarity: --threshold must be in (0, 1], got {args.threshold}", file=sys.stderr)
        return 2
    try:
        pairs = compare(Path(args.submissions), Path(args.reference), threshold=args.threshold)
        csv_path, md_path = write_report(pairs, Path(args.out), args.threshold)
        flagged = flag_gradebook(Path(args.gradebook), pairs) if args.gradebook else None
    except (GradingError, ValueError, OSError) as error:
        print(f"gradacc similarity: {error}", file=sys.stderr)
        return 2
    between = [p for p in pairs if SOLUTION not in (p.first, p.second)]
    print(
        f"wrote {csv_path} and {md_path}: {len(pairs)} pairs at or above {args.threshold}, {len(between)} of them "
        f"between students, {len(pairs) - len(between)} with the {SOLUTION}"
    )
    for p in between[:10]:  # the pairs between students first: the ones to read
        print(f"  {p.exercise}: {p.first} ~ {p.second} ({p.similarity:.2f})")
    if flagged is not None:
        print(f"wrote the {COLUMN} column of {args.gradebook}: {flagged} rows flagged (no score changed)")
    return 0
