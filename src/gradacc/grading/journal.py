"""The grading journal: ``gradacc grade --out G`` appends one JSON line per graded notebook to ``G.journal.jsonl``
(``grading.score.grade`` writes it); ``read_journal`` reads it back for ``--resume`` and for a shard's merge."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .gradebook import Row

__all__ = ["read_journal"]


def read_journal(path: Path) -> tuple[int | None, list[Row]]:
    """``(seed, rows)`` from a grading journal (``grade(..., journal=path)``): JSON lines, a header ``{"seed": S}``
    and then one ``Row`` per graded notebook, appended and flushed as each one finished. A last line cut short by a
    kill is ignored (that notebook is graded again). ``(None, [])`` when the file does not exist."""
    if not path.exists():
        return None, []
    seed, rows = None, []
    fields = {f.name for f in dataclasses.fields(Row)}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line being written when the run was killed
        if "seed" in record and "student" not in record:
            seed = int(record["seed"])
        elif set(record) <= fields:
            rows.append(Row(**record))
    return seed, rows
