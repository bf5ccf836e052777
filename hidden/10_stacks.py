"""Hidden checks of exercises/10_stacks.ipynb, run by `gradacc grade` (docs/instructors/hidden-checks.md).

Every block runs after the shared preamble `gradacc.grading.merge.HIDDEN_PREAMBLE` (`rng`, `quietly`, `weights`)
and this file's own preamble, and PRINTS the student's results on inputs drawn from `rng`, never a verdict.
"""
# ruff: noqa: F821 - rng, quietly, weights and the student's functions come from the notebook and the preamble

from gradacc.course.checks.lesson10 import LIBRARIES, lightning_window_grads


def factors_line(library: str, accum_steps: int, counts: list[int], reduction: str) -> str:
    """The student's factors for one window (6 significant digits), ``None``, the result's repr if it is not a list
    of numbers, or the error's name."""
    try:
        got = quietly(loss_factors, library, accum_steps, list(counts), reduction)
        if got is None:
            shown = "None"
        else:
            shown = "[" + ", ".join(f"{float(v):.6g}" for v in got) + "]"
    except Exception as exc:  # a wrong answer may raise; print its name, as the reference never raises here
        shown = type(exc).__name__
    return f"{library}, N = {accum_steps}, {reduction}, window {counts}: {shown}"


def draw_10_2(rng) -> dict:
    """An epoch of 5-10 micro-batches of 2-12 digits at N = 3 or 4, with a short last window and two micro-batch
    sizes differing inside the first window; a model seed, a hidden width and the first digit."""
    accum_steps = rng.choice([3, 4])
    n_batches = rng.choice([k for k in range(5, 11) if k % accum_steps])  # a short last window, always
    sizes = [rng.randint(2, 12) for _ in range(n_batches)]
    if sizes[1] == sizes[0]:  # unequal micro-batches inside the first window, always
        sizes[1] = sizes[0] % 12 + 2 if sizes[0] != 12 else 3
    return {
        "sizes": sizes,
        "accum_steps": accum_steps,
        "seed": rng.randrange(2**31),
        "hidden": rng.choice([16, 32]),
        "start": rng.randint(0, 1797 - sum(sizes)),
    }


def edges_10_2(case: dict) -> dict[str, bool]:
    sizes, n = case["sizes"], case["accum_steps"]
    return {
        # Lightning's division by N, and a division by the real window size, differ only on a short window
        "a short last window (N kept for it; the real window size for it)": len(sizes) % n != 0,
        # a mean loss times N / window size is right only when a window's micro-batches are equal
        "unequal micro-batches in the first window (a mean per micro-batch)": sizes[0] != sizes[1],
        "N >= 3 (Lightning's division not undone)": n >= 3,
    }


EDGE_CASES = {"10.2": (draw_10_2, edges_10_2)}
"""Check -> (the block's draws, the edge cases every draw holds and which corpus mistakes each one separates);
tests/test_wrong_answers.py replays the draws of 1,000 seeds. 10.1 is replayed in full (it is cheap)."""


# %% hidden 10.1
for library in LIBRARIES:  # every seed: every library, a full window of unequal micro-batches and a short one
    accum_steps = rng.choice([2, 3, 4, 8])
    full = [rng.randint(1, 20) for _ in range(accum_steps)]
    full[0] = full[-1] + rng.randint(1, 9)  # unequal micro-batches
    # a short window: 1 to N - 1 micro-batches, 2 or more when N allows it
    short = [rng.randint(1, 20) for _ in range(rng.randint(min(2, accum_steps - 1), accum_steps - 1))]
    print(factors_line(library, accum_steps, full, "sum"))  # a summed loss over unequal micro-batches
    print(factors_line(library, accum_steps, short, "mean"))

# %% hidden 10.2
case = draw_10_2(rng)
grads = lightning_window_grads(
    lightning_loss, case["sizes"], case["accum_steps"], seed=case["seed"], hidden=case["hidden"], start=case["start"]
)
print(f"sizes {case['sizes']}, accumulate_grad_batches={case['accum_steps']}: {len(grads)} optimizer steps")
for w, window_grads in enumerate(grads):  # per tensor its norm, 6 significant digits (a bias's sum can be ~0)
    print(f"window {w + 1}: " + " ".join(f"{float(g.norm()):.5e}" for g in window_grads))
