"""Lesson 12's helpers (``gradacc.stacks.window_*``, ``gradacc.memory.in_backward``): cheap value checks, the lesson's
notebook run covers the rest."""

import pytest
import torch
from torch.distributed.optim import _apply_optimizer_in_backward

from gradacc.stacks.window_clocks import (
    dp_epsilon,
    nanochat_lr_multiplier,
    optimizer_steps,
    progress_per_micro_batch,
    progress_per_optimizer_step,
)
from gradacc.stacks.window_optimizers import (
    DeferredSteps,
    digit_windows,
    largest_difference,
    make_matrix_model,
    parameters_of,
    relative_difference,
    short_last_window_sizes,
    step_in_backward,
    train_accumulated,
    train_backward_only,
    train_full_batch,
    train_step_per_micro_batch,
)

SIZES = [[8, 8, 7, 7], [10, 3, 9], [5]]  # unequal micro-batches and a short last window


def adam(params):
    return torch.optim.Adam(params, lr=1e-2)


def test_window_sizes_and_steps_count_the_short_last_window():
    assert short_last_window_sizes(70, 8, 4) == [[8, 8, 8, 8], [8, 8, 8, 8], [6]]
    assert optimizer_steps(9, 4) == 3 and optimizer_steps(9, 4, drop_last=True) == 2
    with pytest.raises(ValueError, match="must be >= 1"):
        short_last_window_sizes(0, 8, 4)
    with pytest.raises(ValueError, match="accum_steps >= 1"):
        optimizer_steps(9, 0)


def test_in_backward_steps_per_micro_batch_and_the_deferred_fix_equals_the_full_batch():
    full = make_matrix_model()
    before = parameters_of(full)
    train_full_batch(full, adam(full.parameters()), digit_windows(SIZES))
    torch_in_backward = make_matrix_model()
    _apply_optimizer_in_backward(torch.optim.Adam, torch_in_backward.parameters(), {"lr": 1e-2})
    train_backward_only(torch_in_backward, digit_windows(SIZES))
    hooked = make_matrix_model()
    step_in_backward(hooked, adam)
    train_backward_only(hooked, digit_windows(SIZES))
    deferred_model = make_matrix_model()
    deferred = DeferredSteps(deferred_model, adam)
    train_backward_only(deferred_model, digit_windows(SIZES), boundary=deferred.step)
    assert relative_difference(parameters_of(torch_in_backward), parameters_of(full), before) > 0.5
    assert largest_difference(parameters_of(hooked), parameters_of(torch_in_backward)) < 1e-15
    assert largest_difference(parameters_of(deferred_model), parameters_of(full)) < 1e-12


def test_muon_once_per_window_equals_the_full_batch_and_per_micro_batch_does_not():
    def muon(params):
        return torch.optim.Muon(params, lr=0.02)

    full, accumulated, per_micro = make_matrix_model(), make_matrix_model(), make_matrix_model()
    before = parameters_of(full)
    train_full_batch(full, muon(full.parameters()), digit_windows(SIZES))
    train_accumulated(accumulated, muon(accumulated.parameters()), digit_windows(SIZES))
    train_step_per_micro_batch(per_micro, muon(per_micro.parameters()), digit_windows(SIZES))
    assert largest_difference(parameters_of(accumulated), parameters_of(full)) < 1e-12
    assert relative_difference(parameters_of(per_micro), parameters_of(full), before) > 0.5


def test_progress_in_micro_batches_turns_nanochats_multiplier_negative():
    assert [nanochat_lr_multiplier(p) for p in progress_per_micro_batch(256, 128, 2)] == [-127.0, -254.0]
    assert [nanochat_lr_multiplier(p) for p in progress_per_optimizer_step(256, 128, 2)] == [1.0, 0.0]


def test_epsilon_counted_per_optimizer_step_does_not_depend_on_the_split():
    accumulated = dp_epsilon(1.0, 4, 256, 14_732, 3, 2e-5)
    one_batch = dp_epsilon(1.0, 1024, 1, 14_732, 3, 2e-5)
    assert accumulated["optimizer_steps"] == one_batch["optimizer_steps"] == 45  # 15 an epoch, the short one included
    assert accumulated["per_optimizer_step"] == pytest.approx(one_batch["per_optimizer_step"], rel=1e-12)
    assert accumulated["per_micro_batch"] < accumulated["per_optimizer_step"] / 5
    with pytest.raises(ValueError, match="delta in"):
        dp_epsilon(1.0, 4, 256, 14_732, 3, 0.0)


def test_the_visible_12_1_cases_put_the_largest_amax_first_in_the_middle_and_last():
    """The comment of ``_COMBINE_CASES``, computed: the largest amax first, in the middle, last, then alone; and
    ``micro_batch_amaxes`` (the hidden draws' test) gives the records' amaxes."""
    from gradacc.course.checks.lesson12 import _COMBINE_CASES, micro_batch_amaxes, micro_batch_records

    positions = []
    for seed, sizes, start in _COMBINE_CASES:
        amaxes = micro_batch_amaxes(seed, sizes, start)
        assert amaxes == [r["amax"] for r in micro_batch_records(seed, sizes, start)[0]]
        positions.append((amaxes.index(max(amaxes)), len(amaxes)))
    assert positions == [(0, 4), (1, 5), (2, 3), (0, 1)]


def test_hidden_12_1_shows_the_largest_amax_in_the_middle():
    from pathlib import Path

    from gradacc.grading.discover import load_hidden

    scope: dict = {}
    exec(load_hidden(Path(__file__).parents[1] / "hidden" / "12_per_window.py")[0], scope)
    middle_order = scope["middle_order"]
    assert middle_order([9.0, 1.0, 3.0]) == [1, 0, 2]  # first -> middle
    assert middle_order([1.0, 3.0, 2.0, 9.0]) == [0, 1, 3, 2]  # last -> middle (position 2 of 4)
    assert middle_order([1.0, 9.0, 3.0]) == [0, 1, 2]  # already inside
    assert middle_order([9.0]) == [0]
