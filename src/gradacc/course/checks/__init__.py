"""What exercise check cells call. Each check prints one deterministic line, e.g. ``Exercise 2.1: correct``.

A check cell in a solution notebook is tagged ``check`` and carries ``{"gradacc": {"check": "2.1", "points": 2}}`` in
its metadata; its stored output is the ``correct`` line, which nbval compares. A wrong answer prints
``Exercise 2.1: incorrect - <what was wrong>`` instead (wrapped at word boundaries inside a notebook), followed, when
the answer's numbers are those of exactly one known misconception, by its hint (``gradacc.course.misconceptions``:
its name, why it is wrong, the lesson section that fixes it), and, inside a notebook, raises ``CheckFailed`` with a
short message (``Exercise 2.1: incorrect, see above``): nbval (and the classroom grader) fail that cell whatever output
the saved file holds.
One module per lesson: ``gradacc.course.checks.lesson01`` holds the checks of ``01_theory``, and so on.

The lines are in the learner's language (``gradacc.i18n``): a notebook of the Brazilian Portuguese edition prints
``Exercício 2.1: correto`` and ``Exercício 2.1: incorreto - ...``. A message is a template looked up with ``_()`` and
formatted after (``_("Exercise {exercise}: correct").format(exercise=...)``), so that it is in ``gradacc.po``.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import sys
import warnings
from collections.abc import Callable
from typing import Any

from ...i18n import _, language
from ..misconceptions import wrap

__all__ = ["CheckFailed", "report", "run_check", "close", "grouped", "quietly", "weights_fingerprint"]


def report(exercise: str, ok: bool, message: str = "") -> bool:
    """Print the line a check cell shows, in the learner's language (``gradacc.i18n``), and return ``ok``.

    In a notebook a long ``incorrect`` line is wrapped at word boundaries (``gradacc.course.misconceptions.wrap``,
    continuation lines indented by two spaces): JupyterLab breaks a line wider than its output area inside words.
    Elsewhere (a terminal, a test) it stays one line."""
    if ok:
        print(_("Exercise {exercise}: correct").format(exercise=exercise))
    else:
        line = _("Exercise {exercise}: incorrect - {problem}").format(exercise=exercise, problem=message)
        print(wrap(line, "  ") if _in_notebook() else line)
    return ok


class CheckFailed(AssertionError):
    """Raised by a check cell, inside a notebook, after it printed ``Exercise X.Y: incorrect - ...``.

    The error makes the cell fail when it is run, so a self-check (``pytest --nbval exercises/NN_topic.ipynb``) fails
    at a wrong or unanswered check whatever outputs the saved file holds: a learner who ran a wrong answer and saved
    stores the wrong output, and nbval would otherwise compare the new run with it. Jupyter shows it as one line
    (IPython calls ``_render_traceback_`` instead of printing a traceback; IPython 7.34 on Colab does too).
    """

    def _render_traceback_(self) -> list[str]:
        return [f"CheckFailed: {self}"]


def _in_notebook() -> bool:
    """True inside an IPython kernel or shell (a notebook, JupyterLab, Colab), False in plain Python and in tests."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def _takes_the_answer(body: Callable) -> bool:
    """Whether ``body`` can be run on another answer (its parameters default to the learner's): only such a check
    recognises misconceptions. A body without parameters (an instructor's own check) is never re-run, and the
    references (which import torch) are never imported for it."""
    try:
        return bool(inspect.signature(body).parameters)
    except (TypeError, ValueError):
        return False


def run_check(exercise: str, body: Callable[..., str | None]) -> bool:
    """Run ``body``; it returns ``None`` when the answer is right, else a message saying what is wrong.

    Prints ``Exercise X.Y: correct`` or ``Exercise X.Y: incorrect - <what is wrong>`` (wrapped at word boundaries),
    and nothing else but, when the answer's numbers are those of exactly one known misconception of this exercise,
    that misconception's name, why it is wrong and the lesson section that fixes it (``mistakes.recognise``: the
    check's ``body`` takes the answer as its argument and runs again on each misconception's reference, the same
    cases). The warnings raised while ``body`` runs are dropped, so the verdict cannot depend on which library
    version warns (torch 2.11's Dynamo warns "Guards may run slower on Python 3.13.0" on that one patch release). An
    exception raised by the student's code is reported as ``incorrect`` with its type and message.

    Raises:
        CheckFailed: the answer is not correct and this runs in a notebook (after the lines are printed); its message
            is one short line (``Exercise 2.1: incorrect, see above``): the detail is printed once.
    """
    measured = True  # the body returned its verdict: the detail is about the answer's numbers
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            problem = body()
    except NotImplementedError:
        problem, measured = _("not answered yet (the answer cell still raises NotImplementedError)"), False
    except Exception as exc:  # the student's code failed: say how
        problem, measured = (
            _("your code raised {error}: {message}").format(error=type(exc).__name__, message=exc),
            False,
        )
    ok = report(exercise, problem is None, problem or "")
    if not ok and measured and _takes_the_answer(body):
        from .mistakes import recognise

        found = recognise(exercise, body, problem, language())
        if found is not None:
            print(found.hint())
    if not ok and _in_notebook():
        raise CheckFailed(_("Exercise {exercise}: incorrect, see above").format(exercise=exercise))
    return ok


def close(name: str, got: float, want: float, tol: float) -> str | None:
    """``None`` when ``|got - want| <= tol``, else a message with both values."""
    try:
        got = float(got)
    except (TypeError, ValueError):
        return _("{name} should be a number, got {got}").format(name=name, got=repr(got))
    if math.isfinite(got) and abs(got - want) <= tol:
        return None
    return _("{name} = {got}, expected {want} (tolerance {tol})").format(
        name=name, got=f"{got:.6g}", want=f"{want:.6g}", tol=f"{tol:g}"
    )


def grouped(count: int) -> str:
    """An integer with its thousands grouped for the learner's language: ``12,288`` in English, ``12 288`` in
    Brazilian Portuguese (whose decimal mark is the comma; locale/README.md)."""
    text = f"{int(count):,d}"
    return text if language() == "en" else text.replace(",", " ")


def quietly(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call a learner's function with its own prints swallowed (hidden checks compare printed text)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def weights_fingerprint(model) -> str:
    """Per parameter tensor of a ``torch.nn.Module`` (or of an iterable of tensors): its sum and its sum of absolute
    values (4 decimals)."""
    tensors = model.parameters() if hasattr(model, "parameters") else model
    return " ".join(f"{float(p.sum()):.4f}/{float(p.abs().sum()):.4f}" for p in tensors)
