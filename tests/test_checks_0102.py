"""The checks of lessons 00-02 (gradacc.course.checks.lesson00/01/02): each prints `correct` for the reference answer and
`incorrect - <reason>` for plausible wrong answers, and never raises."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from gradacc.course.checks.lesson00 import check_effective_batch_size
from gradacc.course.checks.lesson01 import check_combine_means, check_window_token_losses
from gradacc.course.checks.lesson02 import check_accumulation_window, check_train_epoch
from gradacc.course.misconceptions import lookup
from gradacc.foundations.data import IGNORE_INDEX


def _line(capsys, misconception: str | None = None) -> str:
    """The check's one line; after it, exactly ``misconception``'s hint when one is named (these tests' wrong answers
    are written otherwise than the package's references: the same numbers, the same hint), else nothing."""
    out = capsys.readouterr().out
    line, _, rest = out.partition("\n")
    assert rest == (lookup(misconception).hint() + "\n" if misconception else ""), f"got {out!r}"
    return line


# ---------------------------------------------------------------- 0.1


def test_effective_batch_size(capsys):
    assert check_effective_batch_size(lambda m, n, world_size=1: m * n * world_size) is None
    assert _line(capsys) == "Exercise 0.1: correct"
    check_effective_batch_size(lambda m, n, world_size=1: m * n)  # forgets the processes (lesson 00's setup-20)
    assert _line(capsys, "one-rank-effective-batch") == (
        "Exercise 0.1: incorrect - effective_batch_size(16, 4, world_size=2) = 64, expected 128 (tolerance 0)"
    )
    check_effective_batch_size(lambda m, n, world_size=1: m * world_size)  # forgets the micro-steps
    assert _line(capsys, "accum-steps-forgotten") == (
        "Exercise 0.1: incorrect - effective_batch_size(16, 4, world_size=1) = 16, expected 64 (tolerance 0)"
    )
    check_effective_batch_size(lambda m, n, world_size=1: m + n + world_size)  # no known misconception: no hint
    assert _line(capsys).startswith("Exercise 0.1: incorrect - effective_batch_size(16, 4, world_size=1) = 21")


# ---------------------------------------------------------------- 1.1


def combine_means_reference(means, counts):
    total = sum(counts)
    return sum(mean * (count / total) for mean, count in zip(means, counts, strict=True))


def test_combine_means_accepts_the_reference(capsys):
    check_combine_means(combine_means_reference)
    assert _line(capsys) == "Exercise 1.1: correct"


def test_combine_means_rejects_the_plain_mean_of_means(capsys):
    check_combine_means(lambda means, counts: sum(means) / len(means))
    line = _line(capsys, "mean-of-means")
    assert line.startswith("Exercise 1.1: incorrect - combine_means([2.0, 4.0], [10, 30]) = 3, expected 3.5")
    assert "weight each mean by its count" in line


def test_combine_means_rejects_an_answer_that_only_works_for_numbers(capsys):
    check_combine_means(
        lambda means, counts: sum(float(m) * c for m, c in zip(means, counts, strict=True)) / sum(counts)
    )
    assert _line(capsys) == (
        "Exercise 1.1: incorrect - your code raised ValueError: only one element tensors can be converted to "
        "Python scalars"
    )


def test_combine_means_rejects_a_scalar_for_tensors(capsys):
    def sums_everything(means, counts):  # right for numbers, collapses a gradient to one number
        weights = torch.tensor(counts, dtype=torch.float32) / sum(counts)
        stacked = torch.stack([torch.as_tensor(m, dtype=torch.float32) for m in means])
        return (stacked * weights.reshape(-1, *[1] * (stacked.dim() - 1))).sum()

    check_combine_means(sums_everything)
    assert _line(capsys) == (
        "Exercise 1.1: incorrect - for gradient tensors of shape (32, 64) it returned (); return a tensor of that shape"
    )


def test_combine_means_rejects_an_answer_that_forgets_the_last_micro_batch(capsys):
    def forgets_last(means, counts):  # right for two micro-batches only
        if len(means) > 2:
            means, counts = means[:-1], counts[:-1]
        return combine_means_reference(means, counts)

    check_combine_means(forgets_last)
    assert "incorrect - the combined mean loss of digit micro-batches of (1, 5, 26) = " in _line(capsys)


def test_unanswered_exercise_says_so(capsys):
    def combine_means(means, counts):
        raise NotImplementedError()

    check_combine_means(combine_means)
    assert _line(capsys) == (
        "Exercise 1.1: incorrect - not answered yet (the answer cell still raises NotImplementedError)"
    )


def test_a_check_prints_its_line_and_no_library_warning(capsys):
    """A warning raised while a check runs (torch 2.11's Dynamo warns on Python 3.13.0 only) reaches neither stderr
    nor the verdict: strict nbval compares stderr, so a check cell must not depend on a library's warnings."""

    def combine_means(means, counts):
        warnings.warn("Guards may run slower on Python 3.13.0.", RuntimeWarning, stacklevel=1)
        return sum(m * c for m, c in zip(means, counts, strict=True)) / sum(counts)

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")  # what a fresh kernel does with a warning raised for the first time
        check_combine_means(combine_means)
    assert capsys.readouterr().out == "Exercise 1.1: correct\n" and shown == []


# ---------------------------------------------------------------- 1.2


def _summed(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum", ignore_index=IGNORE_INDEX)


def window_token_losses_reference(logits_list, labels_list):
    tokens = sum(int((labels != IGNORE_INDEX).sum()) for labels in labels_list)
    return [_summed(logits, labels) / tokens for logits, labels in zip(logits_list, labels_list, strict=True)]


def test_window_token_losses_accepts_the_reference(capsys):
    check_window_token_losses(window_token_losses_reference)
    assert _line(capsys) == "Exercise 1.2: correct"


def test_window_token_losses_rejects_the_mean_of_micro_batch_means(capsys):
    def mean_of_means(logits_list, labels_list):
        return [
            F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX) / len(logits_list)
            for logits, labels in zip(logits_list, labels_list, strict=True)
        ]

    check_window_token_losses(mean_of_means)
    line = _line(capsys, "mean-of-means")
    assert line.startswith("Exercise 1.2: incorrect - the losses add up to")
    assert "the mean of the micro-batch means" in line and "divide each micro-batch's summed token losses by" in line


def test_window_token_losses_rejects_counting_padding(capsys):
    def counts_padding(logits_list, labels_list):
        positions = sum(labels.numel() for labels in labels_list)
        return [_summed(logits, labels) / positions for logits, labels in zip(logits_list, labels_list, strict=True)]

    check_window_token_losses(counts_padding)
    line = _line(capsys, "padding-counted")
    assert line.startswith("Exercise 1.2: incorrect - the sum of the micro-batch losses =")
    assert "padding labels are -100" in line


def test_window_token_losses_rejects_floats(capsys):
    check_window_token_losses(lambda a, b: [loss.item() for loss in window_token_losses_reference(a, b)])
    assert _line(capsys) == (
        "Exercise 1.2: incorrect - each loss must be a 0-d tensor that autograd can differentiate (do not call .item())"
    )


def test_window_token_losses_rejects_one_total_instead_of_a_list(capsys):
    check_window_token_losses(lambda a, b: sum(window_token_losses_reference(a, b)))
    assert _line(capsys) == "Exercise 1.2: incorrect - return a list with one loss per micro-batch (3 here), got Tensor"


# ---------------------------------------------------------------- 2.1


def accumulation_window_reference(model, optimizer, micro_batches):
    items = sum(len(labels) for _, labels in micro_batches)
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total


def test_accumulation_window_accepts_the_reference(capsys):
    check_accumulation_window(accumulation_window_reference)
    assert _line(capsys) == "Exercise 2.1: correct"


def test_accumulation_window_rejects_dividing_means_by_n(capsys):
    def mean_over_n(model, optimizer, micro_batches):
        total = 0.0
        for inputs, labels in micro_batches:
            loss = F.cross_entropy(model(inputs), labels) / len(micro_batches)
            loss.backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        return total

    check_accumulation_window(mean_over_n)
    line = _line(capsys, "mean-of-means")
    assert line.startswith("Exercise 2.1: incorrect - with micro-batches of (40, 40, 16) samples the weights after")
    assert "divide by the 96 samples of the whole window" in line


def test_accumulation_window_rejects_one_backward_on_the_summed_window(capsys):
    def one_backward(model, optimizer, micro_batches):
        items = sum(len(labels) for _, labels in micro_batches)
        loss = sum(F.cross_entropy(model(x), y, reduction="sum") for x, y in micro_batches) / items
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    check_accumulation_window(one_backward)
    line = _line(capsys)
    assert "incorrect - with micro-batches of (40, 40, 16) samples the activations of several micro-batches" in line
    assert "call backward after each micro-batch's forward" in line


def test_accumulation_window_rejects_a_step_per_micro_batch(capsys):
    def step_each(model, optimizer, micro_batches):
        items = sum(len(labels) for _, labels in micro_batches)
        for inputs, labels in micro_batches:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
            optimizer.step()
        optimizer.zero_grad()
        return 0.0

    check_accumulation_window(step_each)
    assert _line(capsys, "step-every-micro-batch") == (
        "Exercise 2.1: incorrect - with micro-batches of (40, 40, 16) samples it made 3 optimizer steps; "
        "a window makes exactly one"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("tensor", "return the window's mean loss as a Python float (loss.item()), got Tensor"),
        ("no zero_grad", "the gradients are not zeroed after the optimizer step"),
    ],
)
def test_accumulation_window_rejects_tensors_and_stale_gradients(capsys, change, message):
    def answer(model, optimizer, micro_batches):
        items = sum(len(labels) for _, labels in micro_batches)
        total = torch.zeros(())
        for inputs, labels in micro_batches:
            loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
            total += loss.detach()
        optimizer.step()
        if change != "no zero_grad":
            optimizer.zero_grad()
        return total if change == "tensor" else total.item()

    check_accumulation_window(answer)
    assert _line(capsys) == f"Exercise 2.1: incorrect - {message}"


# ---------------------------------------------------------------- 2.2


def _window_step(model, optimizer, window, divide_by=None):
    items = divide_by or sum(len(labels) for _, labels in window)
    total = 0.0
    for inputs, labels in window:
        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total


def train_epoch_reference(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []
    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            losses.append(_window_step(model, optimizer, window))
            scheduler.step()
            window = []
    if window:
        losses.append(_window_step(model, optimizer, window))
        scheduler.step()
    return losses


def test_train_epoch_accepts_the_reference(capsys):
    check_train_epoch(train_epoch_reference)
    assert _line(capsys) == "Exercise 2.2: correct"


def test_train_epoch_rejects_dropping_the_last_window(capsys):
    def plain(model, optimizer, scheduler, batches, accum_steps):
        losses, total = [], 0.0
        for micro_step, (inputs, labels) in enumerate(batches):
            loss = F.cross_entropy(model(inputs), labels) / accum_steps
            loss.backward()
            total += loss.item()
            if (micro_step + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
                losses.append(total)
                total = 0.0
        return losses

    check_train_epoch(plain)
    assert _line(capsys, "last-window-dropped") == (
        "Exercise 2.2: incorrect - 10 micro-batches with accum_steps=4: 2 optimizer steps, expected 3 "
        "(the last window may be shorter)"
    )


def test_train_epoch_rejects_a_scheduler_per_micro_batch(capsys):
    def fast_scheduler(model, optimizer, scheduler, batches, accum_steps):
        losses, window = [], []
        for batch in batches:
            window.append(batch)
            scheduler.step()
            if len(window) == accum_steps:
                losses.append(_window_step(model, optimizer, window))
                window = []
        if window:
            losses.append(_window_step(model, optimizer, window))
        return losses

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        check_train_epoch(fast_scheduler)
    assert shown == []  # PyTorch warns about the order of the first calls; the check's one line says what matters
    line = _line(capsys, "scheduler-every-micro-step")
    assert line.startswith("Exercise 2.2: incorrect - 10 micro-batches with accum_steps=4: the learning rate after")
    assert "step the scheduler once per optimizer step" in line


def test_train_epoch_rejects_dividing_the_last_window_by_n(capsys):
    def divides_by_n(model, optimizer, scheduler, batches, accum_steps):
        losses, window = [], []
        batches = list(batches)
        size = len(batches[0][1])
        for batch in batches:
            window.append(batch)
            if len(window) == accum_steps:
                losses.append(_window_step(model, optimizer, window, divide_by=size * accum_steps))
                scheduler.step()
                window = []
        if window:  # the short window divided as if it were full
            losses.append(_window_step(model, optimizer, window, divide_by=size * accum_steps))
            scheduler.step()
        return losses

    check_train_epoch(divides_by_n)
    line = _line(capsys, "full-window-divisor")
    assert line.startswith("Exercise 2.2: incorrect - 10 micro-batches with accum_steps=4: the weights after the epoch")
    assert "divide each window's summed loss by the number of samples in that window" in line
