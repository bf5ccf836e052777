"""Hidden checks inside another autograder's notebook (nbgrader, Otter-Grader): ``hidden_check`` is what the hidden test
of check X.Y that ``gradacc export-assignments`` writes calls in the student's kernel at grading time.

Those autograders compare nothing themselves: a test passes when it raises nothing. So the test computes its expected
text itself: it draws a fresh seed, runs the check's hidden blocks (``hidden/NN_topic.py``, the same blocks ``gradacc
grade`` runs) once in a copy of the student's namespace and once in a namespace where the reference solution's answer
cells ran (their source travels inside the hidden test, which the student's notebook never holds), and asserts that
both printed the same (``same_output``: numbers within one unit of the last printed digit). Inputs, reference and
expected text exist only inside the grading kernel.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import secrets
import warnings
from collections.abc import Sequence

from .merge import HIDDEN_PREAMBLE
from .outputs import same_output

__all__ = ["HiddenCheckFailed", "hidden_check"]


class HiddenCheckFailed(AssertionError):
    """A hidden check's results differ from the reference solution's, or the student's code raised in it."""


def _run(source: str, namespace: dict, filename: str) -> None:
    """``exec`` with the source kept in ``linecache`` (as IPython keeps a cell's): ``inspect.getsource`` finds it
    (check 7.2 sends a function's source to 2 processes)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)


def _printed(code: str, namespace: dict, seed: int, filename: str) -> str:
    """What ``code`` printed to stdout. Its warnings and stderr are dropped, as ``gradacc grade`` compares a hidden
    check's stdout only (nbgrader fails a test cell that writes to stderr: a library's warning would cost points)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(code, dict(namespace, GRADACC_SEED=seed), filename)
    return out.getvalue()


def hidden_check(
    namespace: dict,
    check: str,
    blocks: Sequence[str],
    *,
    preamble: str = "",
    reference: Sequence[str] = (),
    seed: int | None = None,
) -> None:
    """Run check ``check``'s hidden ``blocks`` on the reference's answers and on the student's; raise unless each block
    printed the same text for both.

    Args:
        namespace: the notebook's globals (``globals()`` in the test cell): the student's answers and setup.
        check: ``"2.1"``, for the messages.
        blocks: the hidden blocks of the check (``load_hidden``), each run after ``HIDDEN_PREAMBLE`` and ``preamble``
            in a copy of a namespace with ``GRADACC_SEED`` defined.
        preamble: the hidden-checks file's own preamble.
        reference: the reference solution's answer cells that precede the check, run in order in a copy of
            ``namespace`` (they replace the student's definitions there).
        seed: the inputs' seed (default: a fresh one per call, as ``gradacc grade`` draws one per run).

    Raises:
        HiddenCheckFailed: the student's code raised in a block, or printed other results than the reference's.
        RuntimeError: the reference itself failed (an export or environment problem, not the student's).
    """
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    expected = None
    for number, block in enumerate(blocks):
        code = "\n\n".join(part for part in (HIDDEN_PREAMBLE.strip(), preamble.strip(), block) if part)
        filename = f"<hidden check {check}.{number}>"
        try:  # the student's first: an answer that raises costs no run of the reference
            got = _printed(code, namespace, seed, filename)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise HiddenCheckFailed(
                f"Exercise {check}: hidden check failed: your code raised {message[:300]}"
            ) from None
        if expected is None:
            expected = dict(namespace)
            try:
                for i, source in enumerate(reference):
                    _run(source, expected, f"<reference answer {i + 1} of check {check}>")
            except Exception as exc:
                raise RuntimeError(f"hidden check {check}: the reference solution failed to run: {exc!r}") from exc
        try:
            want = _printed(code, expected, seed, filename)
        except Exception as exc:
            raise RuntimeError(f"hidden check {check}: the reference solution raised {exc!r} (seed {seed})") from exc
        if not same_output(got, want):
            raise HiddenCheckFailed(
                f"Exercise {check}: hidden check failed: your results differ from the reference solution's on inputs "
                "drawn at grading time"
            )
