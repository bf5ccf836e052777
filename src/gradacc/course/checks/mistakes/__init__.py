"""Recognising a misconception from an answer's numbers (issue 53): the reference implementations of the mistakes.

For each exercise, ``gradacc.course.checks.mistakes.lessonNN`` registers the misconceptions its visible check can
recognise, each with one or more reference implementations of the mistake (``@mistake("2.1", "mean-of-means")``):
the function a learner who holds that misconception writes, with the exercise's signature.

How a check recognises one: a check's ``body(answer)`` runs its own cases on ``answer`` and returns the first
problem it finds (``None`` when right). When a learner's answer fails, ``recognise`` runs the same body on each
reference of that exercise (once per process and language: ``_detail`` is cached) and compares the two details: the
same words and the same numbers (``same_detail``, relative tolerance 1e-3), so the learner's answer gave the
reference's results on every case the check ran up to the first one it failed, and failed that one the same way.
Exactly one misconception matching: its hint. None, or several that no case tells apart: no hint. Nothing reads the
learner's code.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import re
import warnings
from collections.abc import Callable

from ...misconceptions import Misconception, lookup

__all__ = ["mistake", "register", "references", "recognise", "same_detail", "reference_detail"]

_REFERENCES: dict[str, list[tuple[str, Callable | dict]]] = {}
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
RTOL = 1e-3
"""Two details' numbers agree within this relative tolerance (a mistake written another way rounds differently)."""


def mistake(exercise: str, misconception_id: str) -> Callable:
    """Register the decorated function as a reference implementation of ``misconception_id`` for ``exercise``.

    A check whose answer is several functions (11.1) registers a ``dict`` of keyword arguments for its body with
    ``register(exercise, misconception_id, {...})``.

    Raises:
        KeyError: ``misconception_id`` is not in the catalogue (``gradacc.course.misconceptions.lookup``).
    """
    lookup(misconception_id)

    def decorate(fn: Callable) -> Callable:
        register(exercise, misconception_id, fn)
        return fn

    return decorate


def register(exercise: str, misconception_id: str, answer: Callable | dict) -> None:
    """Register ``answer`` (a function, or a dict of the body's keyword arguments) as a reference of
    ``misconception_id`` for ``exercise``.

    Raises:
        KeyError: ``misconception_id`` is not in the catalogue.
    """
    lookup(misconception_id)
    _REFERENCES.setdefault(exercise, []).append((misconception_id, answer))


def references(exercise: str) -> list[tuple[str, Callable]]:
    """``(misconception id, reference)`` pairs registered for ``exercise`` (``"2.1"``), importing its lesson's
    module (``mistakes.lesson02``) on first use; empty for an exercise without one."""
    module = f"{__name__}.lesson{int(exercise.split('.')[0]):02d}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
    return list(_REFERENCES.get(exercise, []))


def same_detail(a: str, b: str) -> bool:
    """The same words, and numbers equal within ``RTOL`` (1e-12 absolute for numbers near 0)."""
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    pairs = zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True)
    return all(math.isclose(float(x), float(y), rel_tol=RTOL, abs_tol=1e-12) for x, y in pairs)


def _run(body: Callable, answer: Callable) -> str | None:
    """The body's detail for ``answer``: ``None`` when the answer passed or raised (an error says nothing about
    numbers)."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            return body(**answer) if isinstance(answer, dict) else body(answer)
        except Exception:
            return None


_DETAILS: dict[tuple[str, int, str], str | None] = {}


def reference_detail(exercise: str, index: int, body: Callable, language: str) -> str | None:
    """The detail ``body`` returns for reference ``index`` of ``exercise`` (cached per process and language: a
    learner who runs the check again pays nothing)."""
    key = (exercise, index, language)
    if key not in _DETAILS:
        _DETAILS[key] = _run(body, references(exercise)[index][1])
    return _DETAILS[key]


def recognise(exercise: str, body: Callable, detail: str, language: str) -> Misconception | None:
    """The one misconception whose references give ``detail`` on ``body``'s cases, else ``None`` (no reference
    matches, or references of two misconceptions do)."""
    matched = {
        misconception_id
        for index, (misconception_id, _) in enumerate(references(exercise))
        if (got := reference_detail(exercise, index, body, language)) is not None and same_detail(got, detail)
    }
    return lookup(matched.pop()) if len(matched) == 1 else None
