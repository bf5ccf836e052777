"""What a question is: ``Question`` and its ``Option``s, and the two ways the question bank writes them (``choice``,
``number``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One answer to a ``Question``: its text (a multiple choice) or value (a number), and either the misconception
    it stands for (a wrong option: an id of ``gradacc.course.misconceptions``) or ``None`` (the right answer)."""

    text: str = ""
    misconception: str | None = None
    value: float | None = None


@dataclass(frozen=True)
class Question:
    """A question of lesson ``lesson`` ("01"-"12"): ``text`` (English, marked ``N_``), its ``options`` (exactly one
    with ``misconception=None``), and ``why`` (shown when the learner picks the right one: why it is right, and when
    it holds). ``digits``: a number question's significant digits (JupyterQuiz's ``precision``); ``None`` for a
    multiple choice."""

    lesson: str
    id: str
    text: str
    options: tuple[Option, ...]
    why: str
    digits: int | None = None

    @property
    def right(self) -> Option:
        return next(o for o in self.options if o.misconception is None)

    @property
    def wrong(self) -> tuple[Option, ...]:
        return tuple(o for o in self.options if o.misconception is not None)


def choice(lesson: str, key: str, text: str, right: str, why: str, *wrong: tuple[str, str]) -> Question:
    """A multiple-choice question: the right answer first here (JupyterQuiz shuffles the options on screen), then
    each wrong answer with its misconception's id."""
    options = (Option(right), *(Option(answer, misconception) for answer, misconception in wrong))
    return Question(lesson, key, text, options, why)


def number(lesson: str, key: str, text: str, right: float, why: str, *wrong: tuple[float, str], digits: int = 3):
    """A number question: the right value, then each wrong value with its misconception's id; an answer is compared
    with them after rounding to ``digits`` significant digits."""
    options = (Option(value=right), *(Option(value=value, misconception=m) for value, m in wrong))
    return Question(lesson, key, text, options, why, digits)
