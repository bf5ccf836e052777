"""Putting a student's answers into the pristine reference: which exercise a file is, which of its cells are the
answers (by cell id, else by order), neutralized nbval markers, hidden checks inserted after their check cell, and
the flags that point an instructor at answer code worth a look.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from difflib import SequenceMatcher

import nbformat

from ..i18n import N_, Message, translate
from .gradebook import Reference

__all__ = [
    "HIDDEN_PREAMBLE",
    "identify",
    "match_solutions",
    "merge_submission",
]


_SUSPICIOUS: dict[str, str] = {
    "gradacc.course.checks": r"gradacc\s*\.\s*(course\s*\.\s*)?checks|from\s+gradacc(\.course)?(\.checks)?\s+import",
    "stdout/stderr": r"sys\s*\.\s*(stdout|stderr|__stdout__|__stderr__)|redirect_std(out|err)|os\.dup2?\b",
    "builtins": r"\bbuiltins\b|__builtins__",
    "IPython hooks": r"get_ipython|input_transformers|events\s*\.\s*register|display_pub",
    "frames": r"sys\s*\.\s*_getframe|\binspect\b|gc\s*\.\s*get_objects|linecache",
    "processes": r"os\s*\.\s*(_exit|kill|fork|setsid)|\bsignal\s*\.|/proc/|subprocess",
    "expected line": r"(Exercise|Exercício)\s+\d+\.\d+\s*:\s*(correct|correto)",
    "check names": r"\bcheck_\w+\s*=(?!=)|\brun_check\b|\breport\s*=(?!=)",
    "notebook files": r"\.ipynb|\bnbformat\b",
    "grader internals": r"GRADACC_|gradacc_capture|junit|grading_plugin|grading\.plugin|nbval",
}


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
        return best, Message(N_("its cell ids are those of {exercise}"), exercise=best)
    sources = _code_sources(nb)
    ratios = {
        n: SequenceMatcher(None, _code_sources(r.exercise), sources, autojunk=False).ratio() for n, r in refs.items()
    }
    best = max(ratios, key=ratios.get)
    if best != name and ratios[best] >= 0.3 and ratios[best] > ratios.get(name, 0) + 0.2:
        alike = N_("its cells look like {exercise} ({alike} alike vs {own})")
        return best, Message(alike, exercise=best, alike=f"{ratios[best]:.0%}", own=f"{ratios.get(name, 0):.0%}")
    if ratios.get(name, 0) == 0:
        return "?", Message(N_("none of its code cells matches exercise {exercise}"), exercise=name)
    return None, "order"


def match_solutions(ref: Reference, nb, ids: list[str | None]) -> tuple[dict[str, str], list[str]]:
    """The student's source for each reference solution cell id, and warnings for the instructor and student
    (``gradacc.i18n.Message``: the English text, which the student's feedback says in the submission's language).

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
                notes.append(
                    Message(
                        N_("solution cell {id} is not in your notebook (deleted?): it ran as the empty exercise"),
                        id=sid,
                    )
                )
            elif cell.cell_type != "code":
                notes.append(
                    Message(
                        N_("solution cell {id} is a {kind} cell in your notebook: it ran as the exercise"),
                        id=sid,
                        kind=cell.cell_type,
                    )
                )
            else:
                found[sid] = cell.source
        return found, notes
    tagged = [c for c in cells if c.cell_type == "code" and "solution" in c.get("metadata", {}).get("tags", [])]
    if tagged and len(tagged) == len(ref.solution_ids):
        return (
            {sid: c.source for sid, c in zip(ref.solution_ids, tagged, strict=True)},
            [Message(N_("no cell ids matched: solution cells were taken in order by their 'solution' tag"))],
        )
    ex = [c for c in ref.exercise.cells if c.cell_type == "code"]
    sub = [c for c in cells if c.cell_type == "code"]
    matcher = SequenceMatcher(None, [_norm(c.source) for c in ex], [_norm(c.source) for c in sub], autojunk=False)
    found, notes = (
        {},
        [Message(N_("no cell ids matched: solution cells were taken by their position among the code cells"))],
    )
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
            ids = [ex[i].id for i in positions]
            notes.append(Message(N_("could not place solution cells {ids}: they ran as the exercise"), ids=ids))
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


HIDDEN_PREAMBLE = """import random

from gradacc.course.checks import quietly
from gradacc.course.checks import weights_fingerprint as weights

rng = random.Random(GRADACC_SEED)
"""
"""Runs before every hidden-check file's own preamble: ``rng`` (every input is drawn from the grading run's seed),
``quietly`` (call the student's code with its prints swallowed) and ``weights`` (a float fingerprint of a model)."""


def _hidden_cell(check: str, number: int, preamble: str, block: str, seed: int):
    code = "\n\n".join(part for part in (HIDDEN_PREAMBLE.strip(), preamble.strip(), block) if part)
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
    ref: Reference, sources: dict[str, str], seed: int, language: str = "en"
) -> tuple[nbformat.NotebookNode, dict[str, int]]:
    """The reference notebook with the student's solution sources in place, plus hidden-check cells.

    Returns the merged notebook and ``{capture key: code-cell index}`` for its check (``check:X.Y``), hidden
    (``hidden:X.Y:i``) and solution (``solution:<id>``) cells; nbval names items by code-cell index.
    Solution cells get no outputs and no execution count (nbval never compares them); check cells keep the reference's
    outputs, are tagged ``nbval-check-output`` and get an execution count if missing (nbval skips comparing cells
    without one). ``language``: the language the run prints in (``GRADACC_LANG`` of the run): for any but English,
    each check cell's expected output is its ``correct`` line in that language (``Exercício 2.1: correto``).
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
            if language != "en":
                line = translate("Exercise {exercise}: correct", language).format(exercise=check)
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
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
