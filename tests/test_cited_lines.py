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


def test_a_pin_bump_fails_naming_every_line_cited_at_the_old_pin(monkeypatch):
    """transformers 5.24.0 -> 5.25.0 and torch 2.13.0 -> 2.14.0 (faked): one problem per library, each naming every
    line the course cites at the old pin; an entry at the installed version that records no pin fails too."""
    table = cited_lines.load_table()
    real = cited_lines.installed_version
    old = {d: cited_lines._bare(real(d)) for d in ("transformers", "torch")}
    bumped = {"transformers": "5.25.0", "torch": "2.14.0"}
    monkeypatch.setattr(cited_lines, "installed_version", lambda dist: bumped.get(dist) or real(dist))
    found = cited_lines.problems()
    for dist, new in bumped.items():
        at_pin = [e for e in table["entries"] if e["dist"] == dist and e["version"] == old[dist]]
        assert len(at_pin) >= 20, (dist, len(at_pin))
        (problem,) = [f for f in found if f.startswith(f"{dist}: ")]
        assert problem.startswith(
            f"{dist}: the pin moved from {old[dist]} to {new}: re-read these {len(at_pin)} lines in {dist} {new}."
        ), problem
        for e in at_pin:
            assert f"  - {_place(e)}: `{e['cite']}` ({e['file']}:{cited_lines._span(e)}; " in problem, e
    assert len(found) == 2, found  # nothing else: Colab's and other releases' entries do not depend on these pins

    monkeypatch.setattr(cited_lines, "installed_version", real)
    unpinned = next(e for e in table["entries"] if cited_lines.kind_of(e) == "installed")
    rest = [e for e in table["entries"] if e is not unpinned]
    entry = {k: v for k, v in unpinned.items() if k != "pinned_then"}
    found = cited_lines.problems(table={**table, "entries": [entry, *rest]})
    assert len(found) == 1 and "the entry records no pin" in found[0] and f"`{unpinned['cite']}`" in found[0], found


def test_update_missing_records_the_pin_of_an_entry_at_the_installed_version(monkeypatch, tmp_path):
    table = cited_lines.load_table()
    unpinned = next(e for e in table["entries"] if cited_lines.kind_of(e) == "installed")
    unpinned.pop("pinned_then")
    monkeypatch.setattr(cited_lines, "TABLE", tmp_path / "cited_lines.json")
    cited_lines.save_table(table)
    (completed,) = cited_lines.update_missing(None)
    assert cited_lines._key(completed) == cited_lines._key(unpinned), completed
    assert completed["pinned_then"] == completed["version"], completed
    assert not cited_lines.problems(table=cited_lines.load_table())


def test_a_link_to_a_line_and_a_range_after_a_file_name_are_citations():
    pin = cited_lines._bare(cited_lines.installed_version("transformers"))
    text = (
        "optax's `_accumulation.py` 380-390 and "
        f"[the call](https://github.com/huggingface/transformers/blob/v{pin}/src/transformers/trainer.py#L2214-L2215)"
        " and `trainer.py#L2318`; not `test_site.py` 52-63 s of CPU."
    )
    found = cited_lines.find_citations("docs/x.md", text)
    assert [(c.cite, c.path, c.lines) for c in found] == [
        ("380-390", None, (380, 390)),
        (
            f"github.com/huggingface/transformers/blob/v{pin}/src/transformers/trainer.py#L2214-L2215",
            "transformers/trainer.py",
            (2214, 2215),
        ),
        ("trainer.py#L2318", "trainer.py", (2318, 2318)),
    ], found
    entry = cited_lines.guess_entry(found[1], previous={"_text": text})
    assert entry["dist"] == "transformers" and entry["version"] == pin and entry["pinned_then"] == pin, entry
    root = cited_lines.installed_root("transformers")
    assert entry["file"] == "transformers/trainer.py", entry
    assert entry["text"] == cited_lines.read_lines(root, entry["file"], [2214, 2215]) and entry["text"][0], entry
    first = cited_lines.guess_entry(found[0], previous={"_text": text})
    assert first["dist"] == "optax" and first["file"] == "optax/transforms/_accumulation.py", first
