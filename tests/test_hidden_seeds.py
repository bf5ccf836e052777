"""Hidden checks that test the hard case on EVERY seed (issue 13): a plausible wrong answer loses the check on 20 of 20
grading seeds, and the reference passes, compared the way the grader compares (``same_output``).

The blocks of ``hidden/NN_topic.py`` run here in-process, after the grader's own preamble, with the answer functions
in their namespace (the grader runs the same code in the student's kernel).
"""

from __future__ import annotations

import contextlib
import io
import random
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import ROOT
from test_checks_lesson06 import window_concatenated, window_mean_of_means, window_right
from test_distributed import _global_count_without_world_size, _local_count, _train_epoch_ddp

from gradacc.course.checks.lesson07 import epoch_on_ranks
from gradacc.grading.discover import load_hidden
from gradacc.grading.merge import HIDDEN_PREAMBLE
from gradacc.grading.score import same_output

SEEDS = range(1, 21)


def _printed(path, check: str, seed: int, answers: dict) -> str:
    """What the hidden blocks of ``check`` print for ``seed`` with ``answers`` (the student's names) in scope."""
    preamble, blocks = load_hidden(path)
    namespace = {"GRADACC_SEED": seed, **answers}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(HIDDEN_PREAMBLE + preamble, str(path), "exec"), namespace)
        for block in blocks[check]:
            exec(compile(block, f"{path} {check}", "exec"), namespace)
    return out.getvalue()


@pytest.mark.slow
def test_hidden_6_2_rejects_the_concatenated_window_and_the_mean_of_means_on_every_seed():
    path = ROOT / "hidden" / "06_jax.py"
    lost = {window_concatenated.__name__: 0, window_mean_of_means.__name__: 0}
    for seed in SEEDS:
        want = _printed(path, "6.2", seed, {"window_grads": window_right})
        assert same_output(_printed(path, "6.2", seed, {"window_grads": window_right}), want)
        for wrong in (window_concatenated, window_mean_of_means):
            lost[wrong.__name__] += not same_output(_printed(path, "6.2", seed, {"window_grads": wrong}), want)
    print(f"hidden 6.2, {len(SEEDS)} seeds, checks lost: {lost}")
    assert lost == dict.fromkeys(lost, len(SEEDS))


@pytest.mark.slow
def test_hidden_7_3_rejects_an_unreduced_count_and_a_missing_world_size_on_every_seed():
    """All 20 seeds' epochs in one 2-rank run per answer (each run is a torchrun launch of a few seconds)."""
    path = ROOT / "hidden" / "07_distributed.py"
    preamble, _ = load_hidden(path)
    helpers: dict = {}
    exec(compile(preamble, str(path), "exec"), helpers)  # draw_rank_case, rank_result_line
    cases = []
    for seed in SEEDS:  # the block's first draw after the grader's preamble: rng = random.Random(GRADACC_SEED)
        cases.append(helpers["draw_rank_case"](random.Random(seed)))
    assert all(len(set(map(sum, c["sizes"]))) == 2 and len(c["sizes"][0]) % c["accum_steps"] for c in cases)
    lines = {}
    for answer in (_train_epoch_ddp, _local_count, _global_count_without_world_size):
        results = epoch_on_ranks(answer, cases, timeout=300)
        assert len(results) == len(cases) and not any("error" in r for r in results), results[-1]
        lines[answer] = [helpers["rank_result_line"](c, r) for c, r in zip(cases, results, strict=True)]
    lost = {
        wrong.__name__: sum(
            not same_output(got, want) for got, want in zip(lines[wrong], lines[_train_epoch_ddp], strict=True)
        )
        for wrong in (_local_count, _global_count_without_world_size)
    }
    print(f"hidden 7.3, {len(SEEDS)} seeds, checks lost: {lost}")
    assert lost == dict.fromkeys(lost, len(SEEDS))
    assert not dist.is_initialized() and torch.get_num_threads() >= 1 and "gradacc" in sys.modules
