"""Correct answers written differently from the reference (issue 32): each must get full points, in the visible check
and in the hidden check on every seed (tests/test_wrong_answers.py). Same format as tests/wrong_answers/.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer


# %% 3.5 each operation's fixed part and per-sample slope from the second timeline, per category, N read as b = B / N
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or first.accum_steps < 2 or second.accum_steps < 2:
        raise ValueError("every N must be >= 2")
    effective = second.micro_batch_size * second.accum_steps
    b = effective // accum_steps
    b1, b2 = first.micro_batch_size, second.micro_batch_size

    def rows(timeline):
        start = timeline.event_index("forward", timeline.accum_steps)
        return [timeline.at(i) for i in range(start, timeline.event_index("optimizer step"))]

    best = None
    for r1, r2 in zip(rows(first), rows(second), strict=True):
        per_sample = sum(r1.values()) - sum(r2.values())
        per_sample /= b1 - b2
        fixed = sum(r2.values()) - per_sample * b2
        value = fixed + per_sample * b
        best = value if best is None else max(best, value)
    step_at = second.event_index("optimizer step")
    step = max(second.total[step_at:])
    if best > step:
        return best, "micro-step"
    return step, "optimizer step"
