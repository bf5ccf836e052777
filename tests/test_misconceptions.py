"""The catalogue of misconceptions (issue 53): its entries, where each sends the learner, the loader that collects
every module, and how a check's detail is compared. No notebook runs: about 3 s of CPU (importing the references)."""

from __future__ import annotations

import re
import sys
import types

import nbformat
import pytest
from conftest import ROOT

from gradacc.course import misconceptions
from gradacc.course.checks.mistakes import references, same_detail
from gradacc.course.misconceptions import Misconception, catalogue, lookup, named_in
from gradacc.i18n import translate

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def test_every_entry_points_at_a_real_section_of_its_lesson():
    """The lesson file exists, its cell ``cell`` is the section's heading, and ``section`` is that heading's text (so
    a renamed section fails here); the explanation is two sentences."""
    assert len(catalogue()) >= 25, sorted(catalogue())
    for entry in catalogue().values():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.id), entry.id
        cells = {c.get("id"): c for c in nbformat.read(ROOT / entry.lesson, as_version=4).cells}
        assert entry.cell in cells, f"{entry.id}: no cell {entry.cell} in {entry.lesson}"
        headings = re.findall(r"^## (.+)$", cells[entry.cell].source, re.MULTILINE)
        assert entry.section in headings, f"{entry.id}: {entry.section!r} is not a heading of {entry.cell}: {headings}"
        assert len(_SENTENCE_END.split(entry.why)) == 2, f"{entry.id}: {entry.why}"
        assert entry.name == entry.name.strip() and "\n" not in entry.name and not entry.name.endswith(".")


def test_every_entry_is_said_in_portuguese_and_its_hint_names_the_pt_lesson():
    for entry in catalogue().values():
        for text in (entry.name, entry.why, entry.section):
            assert translate(text, "pt_BR") != text or text == "1. BatchNorm", f"{entry.id}: {text!r} untranslated"
        hint = entry.hint("pt_BR")
        assert hint.startswith("Isto parece um equívoco conhecido: ") and f"pt-BR/{entry.lesson}" in hint
        assert entry.hint("en").startswith("This looks like a known misconception: ")
        assert all(len(line) <= 100 for line in entry.hint("en").splitlines()), entry.id  # wrapped, words whole
        assert named_in(hint, "pt_BR") == [entry.id] and named_in(entry.hint("en"), "en") == [entry.id]


def test_every_reference_names_a_catalogued_misconception_and_checks_share_them():
    recognised = {}
    for check in ("0.1", "1.1", "1.2", "2.1", "2.2", "3.1", "4.1", "4.2", "5.1", "5.2", "6.1", "6.2", "7.1", "7.2", "7.3", "8.1", "8.2", "10.1", "10.2", "11.1",
                  "11.2"):  # fmt: skip
        ids = {misconception for misconception, _ in references(check)}
        assert ids and ids <= set(catalogue()), (check, ids)
        for key in ids:
            recognised.setdefault(key, []).append(check)
    shared = {key: checks for key, checks in recognised.items() if len(checks) > 1}
    print("misconceptions recognised by several checks:", shared)
    assert len(shared["mean-of-means"]) >= 5


def test_the_loader_collects_a_new_module_and_refuses_a_second_id(monkeypatch):
    """A module added to the package (``reading.py``, the questions' own misconceptions) is collected without
    touching the others; an id defined twice is an error naming both modules."""
    extra = Misconception("test-only-entry", "a test", "One. Two.", "lessons/01_theory.ipynb", "x", "theory-16")
    module = types.ModuleType(f"{misconceptions.__name__}.zz_test_only")
    module.ENTRY = extra
    monkeypatch.setitem(sys.modules, module.__name__, module)
    listed = misconceptions.pkgutil.iter_modules
    monkeypatch.setattr(
        misconceptions.pkgutil,
        "iter_modules",
        lambda path: [*listed(path), types.SimpleNamespace(name="zz_test_only")],
    )
    misconceptions.catalogue.cache_clear()
    try:
        assert misconceptions.catalogue()["test-only-entry"] is extra
        module.COPY = Misconception("mean-of-means", "a copy", "One. Two.", "lessons/01_theory.ipynb", "x", "y")
        misconceptions.catalogue.cache_clear()
        with pytest.raises(ValueError, match="mean-of-means.*defined twice.*division.*zz_test_only"):
            misconceptions.catalogue()
    finally:
        monkeypatch.undo()
        misconceptions.catalogue.cache_clear()
    with pytest.raises(KeyError, match="did you mean.*mean-of-means"):
        lookup("mean-of-mean")


def test_two_details_match_on_their_words_and_numbers_only():
    a = "with micro-batches of (40, 40, 16) samples the weights differ by 0.0061 (tolerance 1e-06)"
    assert same_detail(a, a.replace("0.0061", "0.006102"))  # the same mistake written another way rounds otherwise
    assert not same_detail(a, a.replace("0.0061", "0.0062"))  # another mistake: another number
    assert not same_detail(a, a.replace("(40, 40, 16)", "(8, 8, 8, 8)"))  # another case
    assert not same_detail(a, a.replace("weights", "losses"))
