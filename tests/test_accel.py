"""Unit tests of gradacc.frameworks.accelerate and gradacc.workers.accelerate_train: the Accelerate facts lesson 04
relies on (accelerate 1.15)."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
import torch.nn.functional as F

from gradacc.course.misconceptions import lookup
from gradacc.foundations.accumulation import max_abs_diff, train_accumulated
from gradacc.foundations.data import digits_loader
from gradacc.foundations.models import make_digits_model
from gradacc.frameworks.accelerate import (
    micro_batch_sizes,
    reset_accelerate_state,
    train_with_accelerate,
    window_items,
)

accelerate = pytest.importorskip("accelerate")
Accelerator = accelerate.Accelerator


@pytest.fixture(autouse=True)
def _fresh_state():
    reset_accelerate_state()
    yield
    reset_accelerate_state()


def _manual(n_samples: int, accum_steps: int, *, epochs: int = 1, micro_batch_size: int = 16, **kwargs):
    model = make_digits_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = digits_loader(micro_batch_size, seed=0, n_samples=n_samples)
    history = train_accumulated(model, optimizer, itertools.chain(*[loader] * epochs), accum_steps, **kwargs)
    return model, history


def test_batch_and_window_sizes():
    assert micro_batch_sizes(10, 4) == [4, 4, 2]
    assert micro_batch_sizes(10, 4, drop_last=True) == [4, 4]
    assert micro_batch_sizes(8, 4) == [4, 4]
    assert window_items([16] * 10, 4) == [64, 64, 32]
    assert window_items([4, 4, 2], 2) == [8, 2]
    with pytest.raises(ValueError, match="micro_batch_size must be >= 1, got 0"):
        micro_batch_sizes(10, 0)
    with pytest.raises(ValueError, match="accum_steps must be >= 1, got 0"):
        window_items([4], 0)


def test_accelerate_loop_reproduces_the_manual_loop():
    run = train_with_accelerate(4, n_samples=640)
    model, history = _manual(640, 4)
    assert run.optimizer_steps == len(history) == 10
    assert run.effective_batch_size == 64 and run.num_processes == 1
    diff = max_abs_diff(run.state_dict.values(), model.state_dict().values())
    assert diff < 1e-6, diff
    # and it actually trained: the weights moved
    start = make_digits_model(0).state_dict()
    assert max_abs_diff(run.state_dict.values(), start.values()) > 1e-2


def test_sync_pattern_and_noop_steps_on_10_batches():
    run = train_with_accelerate(4, n_samples=160)
    syncs = [h["sync_gradients"] for h in run.history]
    stepped = [h["optimizer_stepped"] for h in run.history]
    assert syncs == [False, False, False, True] * 2 + [False, True]  # the end of the dataloader forces a sync
    assert stepped == syncs
    assert run.optimizer_steps == 3
    assert [h["grad_norm"] is not None for h in run.history] == syncs


def test_scheduler_advances_once_per_optimizer_step():
    run = train_with_accelerate(
        4, n_samples=160, scheduler_fn=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (1 + s))
    )
    lrs = [h["lr"] for h in run.history]
    assert lrs[:4] == [0.1] * 4
    assert lrs[4:8] == [pytest.approx(0.05)] * 4
    assert lrs[8:] == [pytest.approx(0.1 / 3)] * 2


def test_last_incomplete_window_gets_half_the_update_and_the_fixes():
    mean = train_with_accelerate(4, n_samples=160)
    items = train_with_accelerate(4, n_samples=160, normalize="items")
    model, history = _manual(160, 4)
    assert [h["items"] for h in history] == [64, 64, 32]
    assert max_abs_diff(items.state_dict.values(), model.state_dict().values()) < 1e-6
    assert max_abs_diff(mean.state_dict.values(), model.state_dict().values()) > 1e-3
    # sync_with_dataloader=False: 2 epochs of 10 batches = 5 full windows, the third spans the epoch boundary
    across = train_with_accelerate(4, n_samples=160, epochs=2, sync_with_dataloader=False)
    assert [h["micro_step"] for h in across.history if h["optimizer_stepped"]] == [4, 8, 12, 16, 20]
    model2, _ = _manual(160, 4, epochs=2)
    assert max_abs_diff(across.state_dict.values(), model2.state_dict().values()) < 1e-6


def test_clipping_only_at_sync_steps_matches_manual_clipping():
    run = train_with_accelerate(4, n_samples=640, max_norm=0.05)
    model, history = _manual(640, 4, max_norm=0.05)
    assert max(h["grad_norm"] for h in history) > 0.05  # clipping was active
    assert max_abs_diff(run.state_dict.values(), model.state_dict().values()) < 1e-6


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="accum_steps must be >= 1, got 0"):
        train_with_accelerate(0)
    with pytest.raises(ValueError, match="normalize must be one of"):
        train_with_accelerate(2, normalize="tokens")
    with pytest.raises(ValueError, match="sync_with_dataloader=True"):
        train_with_accelerate(2, normalize="items", sync_with_dataloader=False)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        train_with_accelerate(2, epochs=0)


def test_a_second_accelerator_reconfigures_the_first_even_after_a_reset():
    first = Accelerator(gradient_accumulation_steps=4)
    assert first.gradient_accumulation_steps == 4
    Accelerator(gradient_accumulation_steps=2)
    assert first.gradient_accumulation_steps == 2  # the process-wide GradientState leaks
    reset_accelerate_state()
    first = Accelerator(gradient_accumulation_steps=4)
    reset_accelerate_state()
    Accelerator(gradient_accumulation_steps=2)
    assert first.gradient_accumulation_steps == 2  # still shared: make one Accelerator per loop, right before it


def _interrupted_loop() -> None:
    accelerator = Accelerator(gradient_accumulation_steps=4)
    model = make_digits_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, digits_loader(16, n_samples=160))
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            accelerator.backward(F.cross_entropy(model(inputs), labels))
            optimizer.step()
            optimizer.zero_grad()
        break  # stopped before the first sync step, as an interrupted cell is


def _plain_step_changes_weights() -> bool:
    accelerator = Accelerator()
    model = make_digits_model(1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    before = [p.detach().clone() for p in model.parameters()]
    x, y = next(iter(digits_loader(8, n_samples=8, shuffle=False)))
    accelerator.backward(F.cross_entropy(model(x), y))
    optimizer.step()
    return any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_interrupted_loop_leaks_sync_gradients_and_reset_fixes_it():
    _interrupted_loop()
    assert _plain_step_changes_weights() is False  # the new optimizer's step was silently skipped
    reset_accelerate_state()
    _interrupted_loop()
    reset_accelerate_state()
    assert _plain_step_changes_weights() is True


def test_reset_allows_a_different_mixed_precision():
    Accelerator()
    with pytest.raises(ValueError, match="cannot be changed"):
        Accelerator(mixed_precision="bf16")
    reset_accelerate_state()
    assert Accelerator(mixed_precision="bf16").mixed_precision == "bf16"


def test_script_writes_weights_that_round_trip(tmp_path):
    from gradacc.frameworks.accelerate import read_result
    from gradacc.workers.accelerate_train import main

    out = tmp_path / "run.json"
    assert main(["--accum-steps", "4", "--n-samples", "160", "--output", str(out), "--expect-processes", "1"]) == 0
    result = read_result(out)
    assert result["num_processes"] == 1 and result["optimizer_steps"] == 3
    assert result["effective_batch_size"] == 64 and len(result["history"]) == 10
    reset_accelerate_state()
    direct = train_with_accelerate(4, n_samples=160)
    assert max_abs_diff(result["weights"].values(), direct.state_dict.values()) == 0.0
    assert json.loads(out.read_text())["args"]["accum_steps"] == 4
    reset_accelerate_state()
    assert main(["--n-samples", "160", "--output", str(tmp_path / "x.json"), "--expect-processes", "2"]) == 3


@pytest.mark.slow
def test_two_launched_cpu_processes_match_one(tmp_path):
    """What the docstring of gradacc.workers.accelerate_train promises: 2 processes x 16 samples = 1 process x 32 (about 30 s)."""
    import os
    import subprocess
    import sys

    from gradacc.frameworks.accelerate import read_result
    from gradacc.workers.accelerate_train import main

    one = tmp_path / "one.json"
    assert main(["--micro-batch-size", "32", "--n-samples", "320", "--output", str(one)]) == 0
    two = tmp_path / "two.json"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"]
    cmd = launch + ["-m", "gradacc.workers.accelerate_train", "--micro-batch-size", "16", "--n-samples", "320"]
    cmd += ["--expect-processes", "2", "--output", str(two)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = read_result(one), read_result(two)
    assert b["num_processes"] == 2 and b["effective_batch_size"] == a["effective_batch_size"] == 128
    assert a["optimizer_steps"] == b["optimizer_steps"] == 3
    assert max_abs_diff(a["weights"].values(), b["weights"].values()) < 1e-6


# ---- exercise checks of lesson 04: each accepts the answer and prints "incorrect" for plausible wrong ones ----


def _epoch_right(accelerator, model, optimizer, loader, max_norm):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            accelerator.backward(F.cross_entropy(model(inputs), labels))
            if max_norm is not None and accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


def _epoch_clips_every_micro_step(accelerator, model, optimizer, loader, max_norm):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            accelerator.backward(F.cross_entropy(model(inputs), labels))
            if max_norm is not None:
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


def _epoch_without_accumulate(accelerator, model, optimizer, loader, max_norm):
    for inputs, labels in loader:
        accelerator.backward(F.cross_entropy(model(inputs), labels))
        optimizer.step()
        optimizer.zero_grad()


def _epoch_plain_backward(accelerator, model, optimizer, loader, max_norm):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            F.cross_entropy(model(inputs), labels).backward()  # skips the division by N
            if max_norm is not None and accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


def test_check_4_1_accepts_the_answer_and_rejects_wrong_loops(capsys):
    from gradacc.course.checks.lesson04 import check_train_epoch

    check_train_epoch(_epoch_right)
    assert capsys.readouterr().out == "Exercise 4.1: correct\n"
    named = {_epoch_clips_every_micro_step: "clip-every-micro-step"}  # issue 53: the same numbers, the same hint
    for wrong in (_epoch_clips_every_micro_step, _epoch_without_accumulate, _epoch_plain_backward):
        check_train_epoch(wrong)
        out = capsys.readouterr().out
        line, _, hint = out.partition("\n")
        assert line.startswith("Exercise 4.1: incorrect - "), (wrong.__name__, out)
        assert hint == (lookup(named[wrong]).hint() + "\n" if wrong in named else ""), (wrong.__name__, out)


def test_check_4_2_accepts_the_answer_and_rejects_wrong_scales(capsys):
    from gradacc.course.checks.lesson04 import check_window_loss_scale, reference_window_loss_scale

    assert [reference_window_loss_scale(i, 10, 4) for i in range(10)] == [1.0] * 8 + [2.0, 2.0]
    assert [reference_window_loss_scale(i, 5, 8) for i in range(5)] == [1.6] * 5
    check_window_loss_scale(reference_window_loss_scale)
    assert capsys.readouterr().out == "Exercise 4.2: correct\n"
    wrong_answers = {
        "always one (Accelerate's default)": lambda i, n, N: 1.0,
        "inverted": lambda i, n, N: min(N, n - (i // N) * N) / N,
        "counts from the end": lambda i, n, N: N / min(N, n - i),
        "not answered": lambda i, n, N: (_ for _ in ()).throw(NotImplementedError()),
    }
    named = {"always one (Accelerate's default)": "full-window-divisor"}  # issue 53: its hint; the others none
    for name, wrong in wrong_answers.items():
        check_window_loss_scale(wrong)
        out = capsys.readouterr().out
        line, _, hint = out.partition("\n")
        assert line.startswith("Exercise 4.2: incorrect - "), (name, out)
        assert hint == (lookup(named[name]).hint() + "\n" if name in named else ""), (name, out)
