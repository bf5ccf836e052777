"""The Brazilian Portuguese edition cannot drift from the English one (issue 46; locale/README.md).

* the catalogs hold exactly the English sources' units (``gradacc translate extract`` would change nothing);
* ``pt-BR/``, ``README.pt-BR.md`` and the compiled ``gradacc.mo`` are what ``gradacc translate build`` writes from the
  sources and catalogs, byte for byte;
* every entry of the finished sources (``locale/pt_BR/translated.txt``) is translated and not fuzzy; every translation
  keeps its numbers, code spans, math, link targets and URLs; the glossary's terms are rendered its way (and the
  English sits beside each at its first use);
* each pt-BR notebook has its English notebook's cells, ids, tags, code (comments aside) and outputs (the package's
  messages in them in Portuguese, as they print there);
* the machinery itself: msgmerge's rules on a changed, new and removed cell, the fuzzy entry's last translation kept
  in the notebook, the checks failing on a changed number, a dropped code span, a glossary slip; the Portuguese check
  line printed by the package equals the stored output the build writes.

Everything here reads files and runs no notebook: a few seconds of CPU (tests/README.md).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil

import nbformat
import polib
import pytest
from conftest import ROOT

from gradacc import i18n
from gradacc.course import quiz
from gradacc.course.checks import close, run_check
from gradacc.course.notebooks import HOW_TO_CHECK_ID, figure_alt, generate_exercise, set_figure_alt
from gradacc.course.translation.catalogs import (
    DOMAIN,
    EDITION,
    catalog_path,
    extract,
    read_catalog,
    scope,
    sources,
    string_sources,
    update_catalog,
    write_catalog,
)
from gradacc.course.translation.edition import (
    SETUP_CODE,
    Edition,
    MessageCatalog,
    build,
    edition_path,
    finished_messages,
    printed_messages,
)
from gradacc.course.translation.outputs import LiteralTemplate
from gradacc.course.translation.review import entry_problems, glossary_problems, read_glossary, review, unfinished
from gradacc.course.translation.units import (
    code_segments,
    field_key,
    join,
    markdown_segments,
    strip_code_text,
    strip_comments,
)

NOTEBOOKS = [s for s in sources(ROOT) if s.endswith(".ipynb")]


@pytest.fixture(scope="module")
def problems() -> dict[str, list[str]]:
    return review(ROOT)


def test_the_catalogs_hold_the_english_sources():
    stale = extract(ROOT, write=False)
    assert stale == [], f"run `make translations`: these catalogs lag their English source: {stale}"


def test_the_edition_is_what_the_catalogs_make_byte_for_byte():
    changed, missing = build(ROOT, write=False)
    assert missing == [], f"units in no catalog (run `make translations`): {missing[:5]}"
    assert changed == [], f"run `make translations` (never edit pt-BR/ by hand): {[str(p) for p in changed]}"


def test_every_entry_of_the_finished_sources_is_translated(problems):
    finished = scope(ROOT)
    assert {"lessons/00_setup.ipynb", "lessons/01_theory.ipynb", "solutions/01_theory.ipynb", DOMAIN} <= set(finished)
    assert problems["unfinished"] == [], "\n".join(problems["unfinished"])


def test_translations_keep_numbers_code_math_and_links(problems):
    assert problems["kept"] == [], "\n".join(problems["kept"])


def test_the_glossary_is_followed(problems):
    assert problems["glossary"] == [], "\n".join(problems["glossary"])


def english_source(path: str) -> str:
    """The source an edition file is made from: a solution for an exercise."""
    return "solutions/" + path.split("/", 1)[1] if path.startswith("exercises/") else path


def _english_exercise(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / name, as_version=4)


@pytest.mark.parametrize(
    "source", [*NOTEBOOKS, *(f"exercises/{p.split('/')[1]}" for p in NOTEBOOKS if "solutions" in p)]
)
def test_a_pt_notebook_has_the_english_cells_code_and_outputs(source):
    english = nbformat.read(ROOT / source, as_version=4)
    portuguese = nbformat.read(ROOT / edition_path(source), as_version=4)
    package = read_catalog(catalog_path(ROOT, DOMAIN))
    messages, finished = MessageCatalog(printed_messages(package)), finished_messages(package)
    say = lambda text: finished.get(text, text)  # noqa: E731 - a message in the edition's language
    strings = string_sources(ROOT)
    assert portuguese.metadata["gradacc"]["language"] == "pt_BR"
    assert [c.get("id") for c in portuguese.cells] == [c.get("id") for c in english.cells]
    setup = None
    for en, pt in zip(english.cells, portuguese.cells, strict=True):
        where = f"{source}, cell {en.get('id')}"
        alt = figure_alt(en)  # a figure's text alternative is translated like a paragraph (issue 55)
        assert bool(figure_alt(pt)) == bool(alt) and (figure_alt(pt) != alt or not alt), where
        if alt:
            pt.metadata = copy.deepcopy(pt.metadata)
            set_figure_alt(pt, alt)
        assert (pt.cell_type, pt.metadata) == (en.cell_type, en.metadata), where
        if en.cell_type != "code":
            continue
        expected = en.source
        if setup is None and pt.source.startswith(SETUP_CODE):
            setup, expected = en.get("id"), SETUP_CODE + en.source
        assert strip_code_text(pt.source) == strip_code_text(expected), f"{where}: the code differs"
        if english_source(source) not in strings:  # else a run of the pt-BR code's (tests/test_pt_outputs.py)
            # a quiz's output (issue 53) is made again from the catalog: the Portuguese quiz the pt-BR run shows
            expected_outputs = quiz.translate_outputs(messages.translate_outputs(en.outputs), say, "pt_BR")
            assert pt.outputs == expected_outputs, f"{where}: the outputs differ"
        assert pt.get("execution_count") == en.get("execution_count"), where
    assert setup is not None, f"{source}: no setup cell sets the language"


@pytest.mark.parametrize("source", [s for s in sources(ROOT) if s.endswith(".md")])
def test_a_pt_page_has_the_english_skeleton(source):
    """Everything of a page outside its units (blank lines, code blocks but their comments, HTML blocks, rules) is
    the English page's, but for the notebook paths the edition points at its own notebooks."""
    english = (ROOT / source).read_text(encoding="utf-8")
    portuguese = (ROOT / edition_path(source)).read_text(encoding="utf-8")

    def skeleton(text: str) -> list[str]:
        return [s.text.replace("pt-BR/", "") for s in markdown_segments(text) if s.kind == "keep"]

    assert skeleton(portuguese) == skeleton(english)


def test_every_source_reads_back_byte_for_byte_from_its_units():
    for source in sources(ROOT):
        if source.endswith(".md"):
            text = (ROOT / source).read_text(encoding="utf-8")
            assert join(markdown_segments(text)) == text, source
            continue
        for cell in nbformat.read(ROOT / source, as_version=4).cells:
            if cell.cell_type == "markdown":
                assert join(markdown_segments(cell.source)) == cell.source, f"{source}, cell {cell.get('id')}"
            else:  # with the strings a learner reads as units too
                assert join(code_segments(cell.source, strings=True)) == cell.source, f"{source}, {cell.get('id')}"


def test_comments_are_units_and_markers_are_not():
    code = (
        "x = 1  # one, after code\n"
        "# first line of a block\n"
        "# second line of it\n"
        "    # indented, another block\n"
        "s = '# not a comment'\n"
        "### BEGIN SOLUTION\n"
        "y = 2  # noqa: E501\n"
        "f = lambda g: g  # noqa: E731  the words after a directive\n"
    )
    units = [(s.text, s.single) for s in code_segments(code) if s.kind == "comment"]
    assert units == [
        ("one, after code", True),
        ("first line of a block\nsecond line of it", False),
        ("indented, another block", False),
        ("the words after a directive", True),  # 06_jax's jax-24 and jax-37 (issue 54)
    ]
    translated = join(code_segments(code), lambda s: {"one, after code": "um"}.get(s.text, s.text.upper()))
    assert translated.splitlines()[:3] == ["x = 1  # um", "# FIRST LINE OF A BLOCK", "# SECOND LINE OF IT"]
    assert "# noqa: E731  THE WORDS AFTER A DIRECTIVE" in translated
    assert strip_comments(translated) == strip_comments(code) == "x = 1\ns = '# not a comment'\ny = 2\nf = lambda g: g"
    with pytest.raises(ValueError, match="one line"):
        join(code_segments(code), lambda s: "a\nb")


def _message(english: str, translated: str, context: str | None = "cell-1", fuzzy: bool = False) -> polib.POEntry:
    return polib.POEntry(msgid=english, msgstr=translated, msgctxt=context, flags=["fuzzy"] if fuzzy else [])


def test_msgmerge_rules_fuzzy_new_removed_and_same_cell_only():
    old = polib.POFile()
    old.append(_message("Keep me.", "Mantenha-me."))
    old.append(_message("A sentence that will change.", "Uma frase que vai mudar."))
    old.append(_message("Gone for good.", "Foi embora.", context="cell-9"))
    old.append(_message("A long sentence in another cell.", "Outra.", context="cell-2"))
    template = [
        polib.POEntry(msgid="Keep me.", msgctxt="cell-1"),
        polib.POEntry(msgid="A sentence that has changed.", msgctxt="cell-1"),
        polib.POEntry(msgid="A long sentence in another cell!", msgctxt="cell-3"),  # similar, but another cell
        polib.POEntry(msgid="## Summary", msgctxt="cell-4"),
    ]
    new = update_catalog("lessons/x.ipynb", template, old, compendium={"## Summary": "## Resumo"})
    got = {e.msgid: (e.msgstr, e.fuzzy, e.previous_msgid) for e in new if not e.obsolete}
    assert got == {
        "Keep me.": ("Mantenha-me.", False, None),
        "A sentence that has changed.": ("Uma frase que vai mudar.", True, "A sentence that will change."),
        "A long sentence in another cell!": ("", False, None),
        "## Summary": ("## Resumo", False, None),
    }
    assert sorted(e.msgid for e in new if e.obsolete) == ["A long sentence in another cell.", "Gone for good."]
    text = write_catalog(new).decode()
    assert '#| msgid "A sentence that will change."\nmsgctxt "cell-1"\nmsgid "A sentence that has changed."' in text
    assert '#~ msgid "Gone for good."' in text


def test_a_changed_english_cell_goes_fuzzy_and_keeps_its_last_translation(tmp_path):
    """The whole workflow on a copy of the course's sources: translate, change the English, extract, build."""
    for path in (
        "pyproject.toml",
        "lessons",
        "solutions",
        "docs",
        "README.md",
        "locale",
        "src/gradacc",
        "pt-BR",
        "README.pt-BR.md",
    ):
        copy = shutil.copytree if (ROOT / path).is_dir() else shutil.copy2
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        copy(ROOT / path, tmp_path / path)
    lesson = tmp_path / "lessons" / "01_theory.ipynb"
    nb = nbformat.read(lesson, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "theory-29-reading")
    cell.source = cell.source.replace("more than the gradient's own largest entry", "larger than the largest entry")
    nbformat.write(nb, lesson)
    assert extract(tmp_path) == [catalog_path(tmp_path, "lessons/01_theory.ipynb")]
    entry = next(e for e in read_catalog(catalog_path(tmp_path, "lessons/01_theory.ipynb")) if e.msgctxt == cell.id)
    assert entry.fuzzy and "more than the gradient's own largest entry" in entry.previous_msgid
    assert unfinished("lessons/01_theory.ipynb", [entry]) == [
        f"lessons/01_theory.ipynb, cell theory-29-reading: {' '.join(entry.msgid.split())[:90]!r}: fuzzy (the English "
        "changed)"
    ]
    assert extract(tmp_path) == []  # the fuzzy entry and its previous English read back as they were written
    changed, missing = build(tmp_path)
    assert (changed, missing) == ([], [])  # the pt-BR notebook keeps the last translation: nothing to rewrite
    built = nbformat.read(tmp_path / "pt-BR/lessons/01_theory.ipynb", as_version=4)
    assert next(c for c in built.cells if c.get("id") == cell.id).source == entry.msgstr


def test_the_checks_catch_a_changed_number_code_span_link_and_glossary_slip():
    english = "Split the 1,797 samples into micro-batches of `16` ([how](#words)): $n = 32$."
    right = _message(english, "Divida as 1797 amostras em microlotes de `16` ([como](#words)): $n = 32$.")
    assert entry_problems("x.ipynb", right) == []
    wrong = {
        "numbers": "Divida as 1,797 amostras em microlotes de `16` ([como](#words)): $n = 32$.",
        "code": "Divida as 1797 amostras em microlotes de dezesseis ([como](#words)): $n = 32$.",
        "targets": "Divida as 1797 amostras em microlotes de `16` ([como](#palavras)): $n = 32$.",
        "math": "Divida as 1797 amostras em microlotes de `16` ([como](#words)): $n=32$.",
    }
    for kind, translated in wrong.items():
        found = entry_problems("x.ipynb", _message(english, translated))
        assert len(found) == 1 and f"{kind} differ" in found[0], (kind, found)
    assert "placeholders" in entry_problems(DOMAIN, _message("Exercise {exercise}: correct", "Exercício: correto"))[0]
    terms = read_glossary(ROOT)
    slips = [
        _message(english, "Divida as 1797 amostras em microbatches de `16` ([como](#words)): $n = 32$."),
        _message(english, "Divida as 1797 amostras em micro-lotes de `16` ([como](#words)): $n = 32$."),
    ]
    found = glossary_problems("x.ipynb", slips, terms, first_use=False)
    assert len(found) == 3 and "'micro-batch' is 'microlote' here" in found[0] and "'micro-lote'" in found[2]
    first = glossary_problems("x.ipynb", [right], terms, first_use=True)
    assert first == [f"x.ipynb, cell cell-1: {english!r}: first use of 'micro-batch': write the English beside it"]
    assert unfinished("x.ipynb", [_message(english, ""), _message(english, "Divida.", fuzzy=True)]) == [
        f"x.ipynb, cell cell-1: {english!r}: not translated",
        f"x.ipynb, cell cell-1: {english!r}: fuzzy (the English changed)",
    ]


def test_a_translation_may_drop_the_thousands_comma_of_a_field():
    """A pt string may drop the ``,`` grouping option of a field's format spec (``826,378`` reads as a decimal in
    Brazil), and nothing else of it; the output the template makes from the English run prints the number without it."""
    english = 'f"{n:,} tokens in {ms:,.1f} ms ({share:>8,.2%})"'
    comment = "a string the learner reads (printed)"
    right = polib.POEntry(
        msgid=english, msgstr='f"{n} tokens em {ms:.1f} ms ({share:>8.2%})"', msgctxt="c", comment=comment
    )
    assert entry_problems("x.ipynb", right) == []
    for wrong in ('f"{n:.0f} tokens em {ms:.1f} ms ({share:>8.2%})"', 'f"{n} tokens em {ms:.2f} ms ({share:>8.2%})"'):
        found = entry_problems("x.ipynb", polib.POEntry(msgid=english, msgstr=wrong, msgctxt="c", comment=comment))
        assert len(found) == 1 and "f-string fields" in found[0], found
    assert field_key("{x:,<10}") == "{x:,<10}" and field_key("{x[1:2]}") == "{x[1:2]}"  # a fill, a slice: kept
    template = LiteralTemplate(english[2:-1], right.msgstr[2:-1], 'f"')
    assert template.sub("826,378 tokens in 1,234.5 ms (   12.50%)\n") == "826378 tokens em 1234.5 ms (   12.50%)\n"
    kept = LiteralTemplate("{n:,} tokens", "{n:,} tokens", 'f"')
    assert kept.sub("1,797 tokens") == "1,797 tokens"


def _printed(fn) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn()
    return out.getvalue()


def test_a_code_span_that_is_python_stays_code():
    """A code span becomes a package message only when it is that message, not when it is Python that a template
    happens to match (``running {what}`` and lesson 02's `running = running + loss`)."""
    edition = Edition.__new__(Edition)
    edition.messages = MessageCatalog(
        {"running {what}": "executando {what}", "Exercise {exercise}: correct": "Exercício {exercise}: correto"}
    )
    code = "`running = running + loss` and ``running + loss``"
    assert edition.code_spans(code) == code
    assert edition.code_spans("`running the checks`") == "`executando the checks`"
    assert edition.code_spans("`Exercise X.Y: correct`") == "`Exercício X.Y: correto`"
    lesson = (ROOT / EDITION / "lessons" / "02_pytorch.ipynb").read_text()
    assert "`running = running + loss`" in lesson and "executando = running" not in lesson


def test_the_package_prints_what_the_edition_stores(monkeypatch):
    """The check line of a Portuguese run (``set_language``) equals the English line put into Portuguese by the build,
    for a right answer, a wrong one (``close``'s message inside ``report``'s) and an unanswered one."""

    def answers():
        run_check("9.1", lambda: None)
        run_check("9.2", lambda: close("f(2)", 3, 4, 0))
        run_check("9.3", lambda: (_ for _ in ()).throw(NotImplementedError()))
        run_check("9.4", lambda: close("f(2)", "three", 4, 0))

    monkeypatch.delenv(i18n.ENV_VAR, raising=False)
    english = _printed(answers)
    messages = MessageCatalog(printed_messages(read_catalog(catalog_path(ROOT, DOMAIN))))
    try:
        i18n.set_language("pt_BR")
        portuguese = _printed(answers)
    finally:
        i18n.set_language(None)
    assert messages.translate_lines(english) == portuguese
    assert portuguese.splitlines() == [
        "Exercício 9.1: correto",
        "Exercício 9.2: incorreto - f(2) = 3, esperado 4 (tolerância 0)",
        "Exercício 9.3: incorreto - ainda sem resposta (a célula de resposta ainda lança NotImplementedError)",
        "Exercício 9.4: incorreto - f(2) deveria ser um número, mas é 'three'",
    ]
    monkeypatch.setenv(i18n.ENV_VAR, "pt-BR")
    assert i18n.language() == "pt_BR" and i18n._("Exercise {exercise}: correct") == "Exercício {exercise}: correto"
    monkeypatch.setenv(i18n.ENV_VAR, "fr")
    with pytest.raises(ValueError, match=r"'fr' is not a language of the course: use one of en, pt_BR"):
        i18n.language()


CHECK_MODULES = ["__init__", *(f"lesson{n:02d}" for n in range(12))]
"""The check modules, whose messages are in the learner's language."""
DEVELOPER_ERRORS = {
    "reference_peak_at",
    "reference_peak_for_n",
    "epoch_on_ranks",
    "library_scale",
    "reference_loss_factors",
}
"""Functions of those modules whose English errors are for the course's own code (the checks call them with valid
arguments; ``epoch_on_ranks``'s ``what`` goes into ``gradacc.foundations.launch``'s English ``WorkerError``)."""


def _check_module_strings(name: str) -> tuple[list[str], list[str]]:
    """The messages module ``gradacc.course.checks.<name>`` marks (``_("...")``, ``N_("...")``), and what it would
    print wrong: English prose without a lookup (an f-string with two words in a row, or a string literal returned or
    raised), a message formatted with other values than its placeholders, or a variable named ``_``."""
    import ast

    tree = ast.parse((ROOT / "src" / "gradacc" / "course" / "checks" / f"{name}.py").read_text(encoding="utf-8"))
    marked, prose = [], []

    def words(text: str) -> bool:
        return re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", text) is not None

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef):
            function = function or node.name  # the top-level function it belongs to
        if function in DEVELOPER_ERRORS:
            return
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_", "N_"):
            marked.append(node.args[0].value)
            return
        if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store):
            prose.append(f"{name}.{function}: assigns _, which hides gettext's _() in that whole function")
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "format":  # _("... {x}").format(x=...)
            looked_up = node.func.value
            if isinstance(looked_up, ast.Call) and getattr(looked_up.func, "id", None) == "_":
                names = set(re.findall(r"\{(\w+)\}", looked_up.args[0].value))
                given = {k.arg for k in node.keywords}
                if names != given:
                    prose.append(f"{name}.{function}: {looked_up.args[0].value!r} is given {sorted(given)}")
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if words(text):
                prose.append(f"{name}.{function}: f{text!r}")
        if isinstance(node, (ast.Return, ast.Raise)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and words(inner.value):
                    if not any(inner is getattr(c, "args", [None])[0] for c in ast.walk(node) if isinstance(c, ast.Call)
                               and getattr(c.func, "id", None) in ("_", "N_")):  # fmt: skip
                        prose.append(f"{name}.{function}: {inner.value!r}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return marked, prose


@pytest.mark.parametrize("name", CHECK_MODULES)
def test_every_check_message_is_translated_and_none_bypasses_the_catalog(name):
    """Each message of a check module is in ``gradacc.po`` with a translation (the compiled catalog says it in
    Portuguese, not in English), and no English sentence reaches the learner without ``_()``."""
    marked, prose = _check_module_strings(name)
    untranslated = [m for m in marked if i18n.translate(m, "pt_BR") == m]
    assert untranslated == [] and prose == [], (untranslated, prose)
    assert name == "lesson00" or marked  # lesson 00 prints only the package's own messages (close, run_check)


def test_a_lesson_check_prints_portuguese_numbers_and_messages():
    """A check of lesson 03 (no model to train) run in Portuguese: its own message, and ``grouped``'s thousands."""
    from gradacc.course.checks import grouped
    from gradacc.course.checks.lesson03 import check_smallest_fitting_n

    try:
        i18n.set_language("pt_BR")
        line = _printed(lambda: check_smallest_fitting_n(lambda *args, **kwargs: 16))
        assert grouped(12288) == "12 288"
    finally:
        i18n.set_language(None)
    assert line == "Exercício 3.2: incorreto - smallest_fitting_n(100.0, 0.5, 1024, 400.0) retornou 16, esperado 2\n"
    assert grouped(12288) == "12,288"


def test_the_edition_points_at_itself():
    """Badges, navigation and links of a pt-BR notebook and page lead into the edition; other files stay English."""
    nb = nbformat.read(ROOT / "pt-BR" / "solutions" / "01_theory.ipynb", as_version=4)
    cells = {c.get("id"): c.source for c in nb.cells}
    assert "/blob/main/pt-BR/solutions/01_theory.ipynb" in cells["gradacc-badges"]
    assert cells["gradacc-nav"].startswith("---\n[todas as lições](../../README.pt-BR.md#lições) · [lição](")
    exercise = nbformat.read(ROOT / "pt-BR" / "exercises" / "01_theory.ipynb", as_version=4)
    assert "labpath=pt-BR%2Fexercises%2F01_theory.ipynb" in exercise.cells[1].source
    page = (ROOT / "pt-BR" / "docs" / "index.md").read_text(encoding="utf-8")
    assert "(../lessons/01_theory.ipynb#palavras-usadas-neste-curso)" in page
    assert "(../../docs/maintainers.md#the-website)" in page and "`pt-BR/exercises/NN_topic.ipynb`" in page
    readme = (ROOT / "README.pt-BR.md").read_text(encoding="utf-8")
    assert "**English:** [README.md](README.md)" in readme and "`make lab-pt`" in readme
    edition = Edition(ROOT)
    assert edition.target("../README.pt-BR.md", "docs/index.md") == "../../README.md"  # the language switch


def test_exercises_are_generated_from_pt_solutions_by_the_course_generator():
    for solution in sorted((ROOT / "pt-BR" / "solutions").glob("*.ipynb")):
        made = generate_exercise(nbformat.read(solution, as_version=4))
        stored = nbformat.read(ROOT / "pt-BR" / "exercises" / solution.name, as_version=4)
        mine = [c.source for c in made.cells[2:] if c.get("id") != HOW_TO_CHECK_ID]
        assert mine == [c.source for c in stored.cells[2:] if c.get("id") != HOW_TO_CHECK_ID], solution.name
        how = [c.source for c in stored.cells if c.get("id") == HOW_TO_CHECK_ID]  # the package's message, translated
        assert len(how) == 1 and how[0].startswith("**Como verificar as suas respostas.**"), solution.name
        assert f"`pytest --nbval pt-BR/exercises/{solution.name}`" in " ".join(how[0].split()), solution.name
        assert json.dumps(made.metadata, sort_keys=True) == json.dumps(stored.metadata, sort_keys=True)


def test_the_pytest_plugin_compares_a_pt_check_cell_with_its_portuguese_line():
    from types import SimpleNamespace

    from gradacc.course import pytest_plugin

    exercise = nbformat.read(ROOT / "pt-BR" / "exercises" / "01_theory.ipynb", as_version=4)
    position, cell = next((i + 1, c) for i, c in enumerate(exercise.cells) if "check" in c.metadata.get("tags", []))
    item = SimpleNamespace(  # what the plugin reads of nbval's IPyNbCell
        options={},
        cell=cell,
        cell_num=3,
        parent=SimpleNamespace(nb=exercise),
        nodeid="pt-BR/exercises/01_theory.ipynb::Cell 3",
        reportinfo=lambda: ("pt-BR/exercises/01_theory.ipynb", 0, "Cell 3"),
        repr_failure=lambda excinfo, **kwargs: "nbval's report",
        runtest=lambda: None,
    )
    pytest_plugin._judge_code_only(item, "1.1", False, pytest_plugin._language(SimpleNamespace(nb=exercise)))
    assert item.cell.outputs[0]["text"] == "Exercício 1.1: correto\n"
    where = f"célula {position}/{len(exercise.cells)} no JupyterLab"
    assert item.name == f"verificação 1.1 ({where})"
    assert item.repr_failure(None).splitlines()[:2] == [
        "Exercício 1.1: a célula de verificação falhou (o relatório do nbval abaixo diz como)",
        f"(a célula de verificação `check_combine_means(combine_means)`: {where})",
    ]
    english = nbformat.read(ROOT / "exercises" / "01_theory.ipynb", as_version=4)
    assert pytest_plugin._language(SimpleNamespace(nb=english)) == "en"


@pytest.mark.notebook
def test_a_pt_exercise_fails_exactly_at_its_checks_in_portuguese():
    """``pytest --nbval pt-BR/exercises/01_theory.ipynb``, unanswered: the two check cells fail, each with the
    Portuguese line the check cell printed, and no other cell does (one notebook run, about 15 s)."""
    from gradacc.course.notebooks import check_cells, run_nbval

    path = ROOT / "pt-BR" / "exercises" / "01_theory.ipynb"
    run = run_nbval(path, timeout=300)
    checks = [c["code_index"] for c in check_cells(nbformat.read(path, as_version=4))]
    assert run.returncode == 1 and run.failed_cells == checks == [3, 5], run.output[-2000:]
    for index, exercise in zip(checks, ("1.1", "1.2"), strict=True):
        assert run.cells[index]["message"].startswith(
            f"Exercício {exercise}: incorreto - ainda sem resposta (a célula de resposta ainda lança "
            "NotImplementedError)"
        ), run.cells[index]["message"][:300]


def test_the_pt_readme_sends_the_learner_to_the_portuguese_website():
    """Issue 54: README.pt-BR.md linked the English website ("em inglês") though `make site` builds the Portuguese one
    and the site workflow publishes it under ``pt-BR/``: the edition rewrites the site's home to its own."""
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    portuguese = (ROOT / "README.pt-BR.md").read_text(encoding="utf-8")
    (home,) = set(re.findall(r"https://[\w-]+\.github\.io/[\w.-]+/(?=\*\*)", english))
    assert f"**Leia no site: {home}pt-BR/**" in portuguese
    assert "em inglês:" not in portuguese
