"""The demonstration check of lesson 00 (``00_setup``): what a check cell does, on the course's first formula."""

from __future__ import annotations

from collections.abc import Callable

from . import close, run_check

__all__ = ["check_effective_batch_size"]

# (micro_batch_size, accum_steps, world_size) -> effective batch size in samples
_CASES = ((16, 4, 1), (8, 1, 1), (16, 4, 2), (3, 5, 7))


def check_effective_batch_size(effective_batch_size: Callable[..., int]) -> None:
    """Exercise 0.1: ``effective_batch_size(micro_batch_size, accum_steps, world_size=1)`` in samples.

    The effective batch size is ``micro_batch_size x accum_steps x world_size`` (samples per optimizer step over
    all processes). Prints ``Exercise 0.1: correct`` or ``Exercise 0.1: incorrect - <the first failing case>`` and
    returns ``None``, so a check cell shows that one line and nothing else (a trailing ``;`` does not silence a
    return value under nbval, whose kernels do not store input history).
    """

    def body(effective_batch_size=effective_batch_size) -> str | None:
        for micro, steps, world in _CASES:
            call = f"effective_batch_size({micro}, {steps}, world_size={world})"
            problem = close(call, effective_batch_size(micro, steps, world_size=world), micro * steps * world, 0)
            if problem:
                return problem
        return None

    run_check("0.1", body)
