"""How a hidden check's printed line is compared with the reference's (``same_output``): the one rule the grader and
the hidden-check tests share."""

from __future__ import annotations

import re

__all__ = ["same_output"]

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_output(got: str, want: str) -> bool:
    """Whether a hidden check printed the same as the reference: equal text and integers, decimal numbers within one
    unit of the last digit the reference printed (``0.12345`` accepts 0.12344 .. 0.12346; ``1.5e-03`` accepts
    1.4e-03 .. 1.6e-03).

    Rounding makes the last digit flip for answers that differ from the reference in float noise only (a different
    summation order); a wrong answer differs far more. ``nan`` and ``inf`` must match as text.
    """
    got_parts, want_parts = _NUMBER.split(got), _NUMBER.split(want)
    got_numbers, want_numbers = _NUMBER.findall(got), _NUMBER.findall(want)
    if got_parts != want_parts or len(got_numbers) != len(want_numbers):
        return False
    for g, w in zip(got_numbers, want_numbers, strict=True):
        if not any(c in w for c in ".eE"):  # integers (counts, sizes) must match exactly
            if g != w:
                return False
            continue
        mantissa, _, exponent = w.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        unit = 10.0 ** (int(exponent or 0) - decimals)
        if not abs(float(g) - float(w)) <= 1.000001 * unit:
            return False
    return True
