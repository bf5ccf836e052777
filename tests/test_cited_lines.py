"""Every cited source line (``file.py:N``) still says what tests/cited_lines.json recorded, at the version it names.

No notebook runs: the lessons' and solutions' cells, docs/ and the package's source are read as text, the installed
libraries' files by path (tests/cited_lines.py says how, and how to add the entry for a new citation).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cited_lines  # noqa: E402


def test_every_cited_line_says_what_the_table_recorded():
    found = cited_lines.problems()
    assert not found, f"{len(found)} cited line(s) to fix (python tests/cited_lines.py):\n\n" + "\n\n".join(found)


def test_a_moved_line_a_new_citation_and_a_stale_entry_each_fail_naming_the_cell():
    table = cited_lines.load_table()
    installed = next(e for e in table["entries"] if cited_lines.kind_of(e) == "installed")
    moved = {**installed, "lines": [installed["lines"][0] + 1, installed["lines"][1] + 1]}
    new = cited_lines.Citation(
        "lessons/05_trainer.ipynb#trainer-20", "transformers/trainer.py:1-2", "transformers/trainer.py", (1, 2), 0
    )
    stale = {**installed, "cite": "gone.py:7"}
    others = [e for e in table["entries"] if e is not installed]
    found = cited_lines.problems(cited_lines.all_citations() + [new], {**table, "entries": [moved, stale, *others]})
    place = cited_lines._place(installed["where"])
    assert any(f.startswith(f"{place}: `{installed['cite']}`") and "the lines changed" in f for f in found), found
    assert any(
        "lessons/05_trainer.ipynb, cell trainer-20: the citation `transformers/trainer.py:1-2` has no entry" in f
        and '"text": [' in f
        for f in found
    ), found
    assert any("`gone.py:7`" in f and "no longer cites it" in f for f in found), found


def _place(entry: dict) -> str:
    return cited_lines._place(entry["where"])


def test_colabs_lines_are_checked_against_an_environment_with_colabs_versions(tmp_path):
    """``check_colab`` (run on the Colab replica by test_colab_replica.py) reads Colab's installed copy: a line that
    differs there and a library of another version both fail, naming the cell."""
    entries = [e for e in cited_lines.load_table()["entries"] if e.get("colab") and e["dist"] == "transformers"]
    (tmp_path / "transformers-5.15.0.dist-info").mkdir()
    for e in entries:  # Colab's copy as the table says, but one cited line rewritten
        path = tmp_path / e["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = path.read_text().splitlines() if path.exists() else []
        lines += [""] * (e["lines"][1] - len(lines))
        lines[e["lines"][0] - 1 : e["lines"][1]] = e["text"]
        path.write_text("\n".join(lines) + "\n")
    moved = entries[0]
    path = tmp_path / moved["file"]
    lines = path.read_text().splitlines()
    lines[moved["lines"][0] - 1] = "# moved"
    path.write_text("\n".join(lines) + "\n")
    found = cited_lines.check_colab(tmp_path)
    assert any(f"`{moved['cite']}`" in f and "differ in Colab's installed copy" in f for f in found), found
    line = moved["lines"][0]
    untouched = [e for e in entries if e["file"] != moved["file"] or not e["lines"][0] <= line <= e["lines"][1]]
    assert not any(f"`{e['cite']}` (transformers" in f and _place(e) in f for e in untouched for f in found), found
    assert any("holds torch nowhere, not Colab's 2.11.0" in f for f in found), found
