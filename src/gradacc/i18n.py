"""Learner-facing messages in the learner's language: the gettext domain ``gradacc`` (stdlib ``gettext``).

The language is, in order: the one ``set_language`` chose in this process (the setup cell of every notebook of the
Brazilian Portuguese edition, ``pt-BR/``, calls ``set_language("pt_BR")``), else the environment variable
``GRADACC_LANG`` (``en`` or ``pt_BR``), else English. A check cell then prints ``Exercício 2.1: correto`` instead of
``Exercise 2.1: correct``.

The catalog's source is ``locale/pt_BR/LC_MESSAGES/gradacc.po`` (with the notebooks' catalogs); ``gradacc translate
build`` compiles it into ``src/gradacc/locale/pt_BR/LC_MESSAGES/gradacc.mo``, which ships with the package.

To add a learner-facing string (locale/README.md says the same, with the commands):

1. write it as ``_("Exercise {exercise}: correct").format(exercise=exercise)``: a literal English template with
   named ``{placeholders}`` (never an f-string: the extractor reads the literal, and the translation must be looked
   up before the values are put in); a ``# TRANSLATORS:`` comment on the line above reaches the translator;
2. ``make translations`` (``gradacc translate extract``, then ``build``) adds it to ``gradacc.po`` untranslated;
3. translate it there (same placeholders: a test checks), and run ``make translations`` again.

Strings that are not printed where they are written (a table of labels) are marked with ``N_("...")`` and
translated with ``_()`` where they are shown. A message said in more than one language (the grader writes the
instructor's gradebook in English and a student's feedback in the submission's language) is a ``Message``: the English
text itself, which ``Message.into(language)`` says in another language.
"""

from __future__ import annotations

import gettext
import os
from functools import cache
from pathlib import Path

__all__ = [
    "DOMAIN",
    "ENV_VAR",
    "LANGUAGES",
    "LOCALE_DIR",
    "Message",
    "N_",
    "_",
    "chosen_language",
    "language",
    "normalize_language",
    "notebook_language",
    "set_language",
    "translate",
]

DOMAIN = "gradacc"
ENV_VAR = "GRADACC_LANG"
LANGUAGES: tuple[str, ...] = ("en", "pt_BR")
"""The languages of the course: English (the source) and Brazilian Portuguese."""
LOCALE_DIR = Path(__file__).parent / "locale"
"""Where the compiled catalogs ship: ``LOCALE_DIR/pt_BR/LC_MESSAGES/gradacc.mo``."""

_chosen: str | None = None


def normalize_language(value: str) -> str:
    """``"pt_BR"`` for ``pt_BR``, ``pt-BR``, ``pt-br``, ``pt`` (any case); ``"en"`` for ``en``, ``en_US``, ``C``, ``""``.

    Raises:
        ValueError: a language the course is not written in, naming the value and the choices.
    """
    code = value.strip().replace("-", "_").split(".")[0].lower()
    if code in ("", "c", "posix") or code == "en" or code.startswith("en_"):
        return "en"
    if code in ("pt", "pt_br"):
        return "pt_BR"
    raise ValueError(
        f"{value!r} is not a language of the course: use one of {', '.join(LANGUAGES)} "
        f"(set_language(...) or the {ENV_VAR} environment variable)"
    )


def set_language(value: str | None) -> None:
    """Make this process's learner-facing messages ``value`` (``"pt_BR"``, ``"en"``); ``None`` goes back to
    ``GRADACC_LANG`` (or English).

    Raises:
        ValueError: an unknown language (``normalize_language``).
    """
    global _chosen
    _chosen = None if value is None else normalize_language(value)


def language() -> str:
    """The language messages are printed in now: ``"en"`` or ``"pt_BR"``.

    Raises:
        ValueError: ``GRADACC_LANG`` holds a language the course is not written in.
    """
    return _chosen or normalize_language(os.environ.get(ENV_VAR, ""))


def chosen_language() -> str | None:
    """The language chosen for this process (``set_language``, else ``GRADACC_LANG``), or ``None`` when neither chose
    one (``language()`` is then English; a caller may follow something else, such as its notebooks' language).

    Raises:
        ValueError: ``GRADACC_LANG`` holds a language the course is not written in.
    """
    value = os.environ.get(ENV_VAR, "")
    return _chosen or (normalize_language(value) if value.strip() else None)


def notebook_language(notebook) -> str:
    """The language a notebook is written in: its ``metadata.gradacc.language`` (``"pt_BR"`` in the pt-BR edition),
    normalized; ``"en"`` when it has none, or one the course is not written in (an edited file is graded, in English,
    rather than refused)."""
    meta = notebook.get("metadata", {}).get("gradacc", {}) if isinstance(notebook, dict) else {}
    chosen = meta.get("language") if isinstance(meta, dict) else None
    try:
        return normalize_language(chosen) if isinstance(chosen, str) else "en"
    except ValueError:
        return "en"


@cache
def _translations(lang: str) -> gettext.NullTranslations:
    if lang == "en":
        return gettext.NullTranslations()
    try:
        return gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[lang])
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no compiled catalog {LOCALE_DIR / lang / 'LC_MESSAGES' / (DOMAIN + '.mo')}: "
            "run `gradacc translate build` (or reinstall the gradacc package)"
        ) from None


def _(message: str) -> str:
    """``message`` (an English template) in the current language; English when the catalog has no translation."""
    return _translations(language()).gettext(message)


def translate(message: str, lang: str) -> str:
    """``message`` in ``lang`` (``"en"``, ``"pt_BR"``, ...), whatever this process's language is: what a notebook of
    that language prints (the pytest plugin compares a pt-BR check cell with its Portuguese line).

    Raises:
        ValueError: an unknown language (``normalize_language``).
    """
    return _translations(normalize_language(lang)).gettext(message)


def N_(message: str) -> str:
    """``message`` unchanged: marks a string for the catalog where it is defined; ``_()`` translates it where shown."""
    return message


class Message(str):
    """A message said in English (the ``str`` itself: the gradebook's text) that can be said in another language.

    ``Message(N_("the kernel died while running {cell}"), cell="Cell 3")`` is ``"the kernel died while running Cell
    3"``; ``.into("pt_BR")`` looks the template up in that language and puts the values in, each value that is a
    ``Message`` itself said in that language too. Any other operation (``+``, slicing, ``str.join``) gives a plain
    ``str``: say it in its language first.
    """

    template: str
    values: dict

    def __new__(cls, template: str, **values) -> Message:
        said = super().__new__(cls, template.format(**values))
        said.template, said.values = template, values
        return said

    def __reduce__(self):  # a copy or a pickle is the English text (``dataclasses.asdict`` deep-copies)
        return (str, (str(self),))

    def into(self, lang: str) -> str:
        """This message in ``lang`` (``"en"``, ``"pt_BR"``)."""
        values = {k: v.into(lang) if isinstance(v, Message) else v for k, v in self.values.items()}
        return translate(self.template, lang).format(**values)
