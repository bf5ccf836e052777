"""The "Check your understanding" questions at the end of each lesson's core path, answered in the notebook and on the
website without a server or network.

Taught in every lesson (01-12), in its section "Check your understanding". A question is a multiple choice or a
number (``Question``); every wrong option names a misconception of the catalogue (``gradacc.course.misconceptions``)
and choosing it shows that misconception's name, why it is wrong and the lesson section that fixes it; the right
option shows why it is right. The questions of every lesson live in this package (``bank``, ``bank_scale``), in
English, with their words marked for the catalog (``N_``): the pt-BR edition asks them in Portuguese.

The quiz is drawn by JupyterQuiz (``jupyterquiz`` 2.9.6.4, pinned in requirements.txt: its question format, its
JavaScript and its styles), as ONE ``text/html`` output that holds the questions, the styles and the script:
JupyterLab runs the script of an output the kernel just made, Colab runs an output's scripts in its output frame,
and the website (Jupyter Book) puts the stored output into the page. Three changes to what
``jupyterquiz.display_quiz`` shows: the output is the same on every run (the container's id is the lesson's and the
language's, not 12 random letters, so a re-executed lesson changes nothing in git); its one English label is said
in the learner's language; and its MathJax loader, which fetches MathJax from cdn.jsdelivr.net in JupyterLab 4, is
removed (the questions hold no math): nothing is requested at run time. The edition's output is made from the same
questions in Portuguese (``translate_outputs``).

Example:
    >>> from gradacc.course.quiz import show_quiz
    >>> show_quiz("02")  # the last code cell of lesson 02's core path
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from ...i18n import N_, language, translate
from .model import Option, Question

__all__ = [
    "Option",
    "Question",
    "all_questions",
    "QUIZ_MIME",
    "questions",
    "quiz_bundle",
    "quiz_data",
    "quiz_html",
    "show_quiz",
    "translate_outputs",
]

QUIZ_KEY = "gradacc_quiz"
"""The key of a quiz output's metadata: the lesson whose questions it shows (the edition finds it there)."""
QUIZ_MIME = "text/html"
JQ_NUMERIC_LABEL = "Type numeric answer here:"
"""JupyterQuiz 2.9.6.4's one English word in its script that a question's data cannot replace (``js/numeric.js``,
``make_numeric``): ``quiz_html`` replaces it with ``NUMERIC_LABEL`` in the learner's language, and fails if it is gone."""
JQ_LABEL_LINE = 'lab.className = "InpLabel";'
"""The line of ``js/numeric.js`` (and ``js/string.js``) that makes a field's label: ``quiz_html`` ties the label to its input
(``htmlFor``), which JupyterQuiz 2.9.6.4 does not, so a screen reader names the field (axe-core's ``label`` rule,
WCAG 2.1 1.3.1 and 4.1.2)."""
NUMERIC_LABEL = N_("Type a number and press Enter:")
_CDN_MATHJAX = re.compile(
    r"else \{\s*console\.log\('WARNING: Trying to force load MathJax 3'\);.*?document\.head\.appendChild\(script\);"
    r"\s*\}\)\(\);\s*\}",
    re.S,
)
"""JupyterQuiz 2.9.6.4's ``show_questions.js`` (twice): where the page defines a MathJax 3 without ``typeset`` (JupyterLab
4.6 does), it replaces ``window.MathJax`` and loads MathJax from cdn.jsdelivr.net. ``quiz_html`` removes both: the
questions hold no math, and nothing is fetched (tests/test_browser.py asserts it in JupyterLab)."""
_NO_CDN = "else { /* gradacc: no MathJax from a CDN (the questions hold no math) */ }"
RIGHT = N_("Right.")
WRONG = N_("Not quite: {name}.")
SEE = N_('The lesson that fixes it: {lesson}, section "{section}".')
OTHER_NUMBER = N_("Not this number. Read the question again: which items, which division, how many times?")
PLAIN = N_(
    "Check your understanding: {count} questions. Run this cell in Jupyter, or read the lesson on the website, to answer them."
)


def questions(lesson: str) -> list[Question]:
    """The questions of ``lesson`` ("01"-"12"), in order.

    Raises:
        KeyError: a lesson without questions (lesson 00, the setup, has none), naming the lessons that have them.
    """
    found = [q for q in all_questions() if q.lesson == lesson]
    if not found:
        raise KeyError(f"lesson {lesson!r} has no questions; these do: {sorted({q.lesson for q in all_questions()})}")
    return found


def all_questions() -> list[Question]:
    """Every lesson's questions, lesson by lesson."""
    from .bank import QUESTIONS_0105
    from .bank_scale import QUESTIONS_0612

    return QUESTIONS_0105 + QUESTIONS_0612


def _as_html(text: str) -> str:
    """``text`` as HTML: ``<``, ``>`` and ``&`` escaped, each code span (```x```) a ``<code>`` element."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(text, quote=False))


_CODE_SPAN = re.compile(r"`([^`]+)`")


def _feedback(option: Option, question: Question, say: Callable[[str], str]) -> str:
    if option.misconception is None:
        return f"{say(RIGHT)} {say(question.why)}"
    from ..misconceptions import lookup

    found = lookup(option.misconception)
    where = say(SEE).format(lesson=found.lesson[len("lessons/") :].removesuffix(".ipynb"), section=say(found.section))
    return " ".join((say(WRONG).format(name=say(found.name)), say(found.why), where))


def quiz_data(lesson: str, say: Callable[[str], str] | None = None) -> list[dict]:
    """The questions of ``lesson`` in JupyterQuiz's format (a list of dicts: ``multiple_choice`` with ``answers`` of
    ``answer``, ``correct``, ``feedback``; ``numeric`` with ``precision`` and ``answers`` of ``value`` or ``default``),
    every text said by ``say`` (default: ``translate`` into the learner's language, ``gradacc.i18n.language()``)."""
    if say is None:
        lang = language()
        say = lambda text: translate(text, lang)  # noqa: E731 - one word's translation
    said = say
    say = lambda text: _as_html(said(text))  # noqa: E731 - JupyterQuiz shows its texts as HTML
    data = []
    for q in questions(lesson):
        answers = [{"answer": say(o.text), "correct": o.misconception is None, "feedback": _feedback(o, q, say)}
                   if q.digits is None else
                   {"type": "value", "value": o.value, "correct": o.misconception is None,
                    "feedback": _feedback(o, q, say)}
                   for o in q.options]  # fmt: skip
        if q.digits is None:
            data.append({"question": say(q.text), "type": "multiple_choice", "answers": answers})
        else:
            answers.append({"type": "default", "feedback": say(OTHER_NUMBER)})
            data.append({"question": say(q.text), "type": "numeric", "precision": q.digits, "answers": answers})
    return data


def quiz_html(lesson: str, say: Callable[[str], str] | None = None, lang: str | None = None) -> str:
    """One self-contained HTML fragment: JupyterQuiz's container, its styles and its script with the questions of
    ``lesson`` (``quiz_data``) in it, said by ``say`` in ``lang`` (default: the learner's language, both). The
    container's id is ``gradaccQuiz<lesson><lang>`` (``gradaccQuiz03en``): the same questions give the same bytes, and
    a lesson's two editions open side by side in JupyterLab keep a quiz each (JupyterQuiz finds its container by id:
    the same lesson's quiz shown twice in one language, in one page, fills the first container twice).

    Raises:
        RuntimeError: the installed JupyterQuiz no longer has the English label this replaces (another version than
            the pinned 2.9.6.4: check its ``js/numeric.js``).
    """
    from jupyterquiz.dynamic.loader import load_questions_script
    from jupyterquiz.dynamic.renderer import build_script, build_styles, render_div

    lang = lang or language()
    if say is None:
        say = lambda text: translate(text, lang)  # noqa: E731
    div_id = f"gradaccQuiz{lesson}{lang}"
    prefix, static, url = load_questions_script(quiz_data(lesson, say), div_id)
    script = build_script(prefix, static, url, div_id, True)
    if JQ_NUMERIC_LABEL not in script:
        raise RuntimeError(f"JupyterQuiz's script has no {JQ_NUMERIC_LABEL!r} to translate: not version 2.9.6.4?")
    script, loaders = _CDN_MATHJAX.subn(_NO_CDN, script)
    if loaders != 2 or "cdn.jsdelivr" in script:
        raise RuntimeError(f"JupyterQuiz's script loads MathJax from a CDN {loaders} time(s), not twice: not 2.9.6.4?")
    script = script.replace(JQ_NUMERIC_LABEL, say(NUMERIC_LABEL).replace('"', "&quot;"))
    if script.count(JQ_LABEL_LINE) != 2:  # the number's and the string's field
        raise RuntimeError(f"JupyterQuiz's script has no {JQ_LABEL_LINE!r} to tie to its input: not version 2.9.6.4?")
    script = script.replace(JQ_LABEL_LINE, JQ_LABEL_LINE + ' lab.htmlFor = id + "-0";')
    container = render_div(div_id, False, True, False, 1_000_000, 700, 10, "left") + "</div>"
    hide = f'var gradaccStatic = document.getElementById("{div_id}-static");\n' + _HIDE
    static = _static(lesson, say, f"{div_id}-static")
    return f"{static}\n{container}\n{build_styles(div_id, _COLORS)}\n<script>\n{hide}{script}\n</script>\n"


_HIDE = "if (gradaccStatic) { gradaccStatic.style.display = 'none'; }\n"
STATIC = N_(
    "Check your understanding (the answers open where this cell runs, in Jupyter or Colab, and on the website):"
)


def _static(lesson: str, say: Callable[[str], str], element_id: str) -> str:
    """The questions and their options as plain HTML, for a viewer that runs no script (GitHub, a notebook not yet run
    in JupyterLab); the quiz's script hides it."""
    items = []
    for q in questions(lesson):
        shown = sorted(say(o.text) for o in q.options) if q.digits is None else []  # not the right one first
        options = f"<ul>{''.join(f'<li>{_as_html(text)}</li>' for text in shown)}</ul>" if shown else ""
        items.append(f"<li>{_as_html(say(q.text))}{options}</li>")
    return f'<div id="{element_id}"><p>{_as_html(say(STATIC))}</p><ol>{"".join(items)}</ol></div>'


_COLORS = {
    # JupyterQuiz's default palette with a darker green: the right and wrong colours read at 4.5:1 or more on white
    "--jq-multiple-choice-bg": "#392061",
    "--jq-mc-button-bg": "#fafafa",
    "--jq-mc-button-border": "#e0e0e0e0",
    "--jq-mc-button-inset-shadow": "#555555",
    "--jq-many-choice-bg": "#f75c03ff",
    "--jq-numeric-bg": "#392061ff",
    "--jq-numeric-input-bg": "#c0c0c0",
    "--jq-numeric-input-label": "#101010",
    "--jq-numeric-input-shadow": "#999999",
    "--jq-string-bg": "#4c1a57",
    "--jq-incorrect-color": "#c80202",
    "--jq-correct-color": "#007a10",
    "--jq-text-color": "#fafafa",
    "--jq-link-color": "#9abafa",
}


def quiz_bundle(lesson: str, say: Callable[[str], str], lang: str) -> tuple[dict, dict]:
    """What ``show_quiz`` displays, said by ``say`` in ``lang``: ``(data, metadata)`` of one ``display_data``."""
    plain = say(PLAIN).format(count=len(questions(lesson)))
    return {QUIZ_MIME: quiz_html(lesson, say, lang), "text/plain": plain}, {QUIZ_KEY: lesson}


def show_quiz(lesson: str) -> None:
    """Show the questions of ``lesson`` ("01"-"12") under the cell, in the learner's language (one ``text/html``
    output, and a one-line ``text/plain`` for a reader without JavaScript)."""
    from IPython.display import display

    lang = language()
    data, metadata = quiz_bundle(lesson, lambda text: translate(text, lang), lang)
    display(data, raw=True, metadata=metadata)


def translate_outputs(outputs: list, say: Callable[[str], str], lang: str) -> list:
    """A code cell's outputs with every quiz output (its metadata names a lesson) made again with ``say`` (the
    edition's catalog) in ``lang``, the others unchanged: the pt-BR notebook stores the Portuguese quiz its own run would show."""
    import nbformat  # here, not at the top: the kernel's show_quiz never imports it (0.75 s of CPU: jsonschema's parsers)

    made = []
    for out in outputs:
        lesson = out.get("metadata", {}).get(QUIZ_KEY)
        if out.get("output_type") == "display_data" and lesson:
            data, _ = quiz_bundle(lesson, say, lang)
            out = nbformat.from_dict({**out, "data": data})
        made.append(out)
    return made
