"""gradacc.stacks (lesson 10): the windows and weights the weight probe is judged by, the arithmetic of the fixes, the
errors bad input gets, the scan for classes that opt out of the token count, and the auxiliary loss on 2 gloo ranks.
The libraries' one-process runs are asserted in lesson 10 itself (tests/test_notebooks.py)."""

from __future__ import annotations

import textwrap

import psutil
import pytest

from gradacc.course.checks.lesson10 import reference_loss_factors
from gradacc.stacks import check_item_counts, loop_weights, right_weights, windows
from gradacc.stacks.grpo import normalizer_before_fix, normalizer_trl
from gradacc.stacks.keras3 import window_sample_weights
from gradacc.stacks.lit import window_of
from gradacc.stacks.moe import run_trainer, run_trainer_on_ranks, window_objective
from gradacc.stacks.sft import opted_out_classes


def test_windows_and_right_weights():
    assert windows(6, 4) == [range(0, 4), range(4, 6)] and windows(3, 4) == [range(0, 3)]
    assert right_weights([6, 2, 5, 3, 4, 1], 4) == [0.375, 0.125, 0.3125, 0.1875, 0.8, 0.2]
    assert window_of(5, 6, 4) == range(4, 6) and window_of(0, 3, 4) == range(0, 3)


def test_the_course_loop_gives_the_right_weights():
    got, want = loop_weights([6, 2, 5, 3, 4, 1], 4), right_weights([6, 2, 5, 3, 4, 1], 4)
    assert max(abs(g - w) for g, w in zip(got, want, strict=True)) < 1e-6


def test_fixes_arithmetic():
    # Keras: N x n_k / W undoes the mean over n_k and the division by N
    assert window_sample_weights([6, 2, 5, 3], 4) == [1.5, 0.5, 1.25, 0.75]
    # DAPO: before the fix a window of half the generation batch's tokens got 0.5x; trl 1.16 divides by the average
    assert 41 / normalizer_before_fix(82) == 0.5 and normalizer_trl(82, 2, 4) == 41.0
    # who divides: Lightning's 1/N is undone (mean loss: n_k / W x N), Keras's short window is never applied
    assert reference_loss_factors("lightning", 4, [6, 2, 5, 3], "mean") == [1.5, 0.5, 1.25, 0.75]
    assert reference_loss_factors("trainer", 4, [4, 1], "mean") == [1.6, 0.4]
    assert reference_loss_factors("keras", 4, [4, 1], "mean") is None
    assert reference_loss_factors("pytorch", 3, [7, 1], "sum") == [0.125, 0.125]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_item_counts([]), "at least one micro-batch"),
        (lambda: check_item_counts([3, 0]), "at least 1 item"),
        (lambda: windows(0, 4), "n_micro_batches must be >= 1"),
        (lambda: windows(4, 0), "accum_steps must be >= 1"),
        (lambda: window_of(6, 6, 4), r"batch_idx must be in range\(6\)"),
        (lambda: window_sample_weights([16] * 6, 4), "Keras never applies the short last window"),
        (lambda: reference_loss_factors("deepspeed", 4, [1], "mean"), "library must be one of"),
        (lambda: reference_loss_factors("keras", 4, [1], "avg"), "reduction must be 'mean' or 'sum'"),
        (lambda: reference_loss_factors("keras", 2, [1, 2, 3], "mean"), "a window holds 1 to accum_steps=2"),
        (
            lambda: run_trainer(None, [{}] * 3, accum_steps=2, micro_batch_size=2),
            "exactly one window: accum_steps x micro_batch_size x world_size = 2 x 2 x 1 examples, got 3",
        ),
        (lambda: window_objective(None, [], balance="global"), "balance must be one of"),
        (lambda: run_trainer_on_ranks(world_size=0), "world_size must be >= 1, got 0"),
    ],
)
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_scan_finds_the_classes_that_opt_out_by_their_own_flag_or_a_base_class(tmp_path):
    """gradacc.stacks.sft.opted_out_classes reads modeling files: a trainable class opts out by its own flag or an
    inherited one (from another file too), a class that sets True opts back in, a base model is not trainable."""
    files = {
        "a/modeling_a.py": """
            class AModel(APreTrainedModel):
                accepts_loss_kwargs = False

            class AForConditionalGeneration(APreTrainedModel, GenerationMixin):
                _tied = {}
                accepts_loss_kwargs = False

            class APreTrainedModel(PreTrainedModel):
                pass
            """,
        "b/modeling_b.py": """
            class BPreTrainedModel(PreTrainedModel):
                accepts_loss_kwargs = False

            class BForMaskedLM(BPreTrainedModel):
                pass

            class BForCausalLM(BPreTrainedModel):
                accepts_loss_kwargs = True
            """,
        "c/modeling_c.py": """
            class CForConditionalGeneration(modeling_a.AForConditionalGeneration):
                pass

            class CForCausalLM(CPreTrainedModel):
                pass
            """,
    }
    for name, text in files.items():
        (tmp_path / "models" / name).parent.mkdir(parents=True)
        (tmp_path / "models" / name).write_text(textwrap.dedent(text))
    assert opted_out_classes(tmp_path) == {
        "AForConditionalGeneration": "models/a/modeling_a.py:7",
        "BForMaskedLM": "models/b/modeling_b.py:3",
        "CForConditionalGeneration": "models/a/modeling_a.py:7",
    }


@pytest.mark.slow
def test_trainer_counts_the_auxiliary_loss_n_times_world_size_on_two_ranks():
    """Lesson 10, section 2, on 2 gloo ranks holding different micro-batches (N = 2): Trainer multiplies the model's
    loss, auxiliary term included, by world_size (trainer.py:2207-2215, transformers 5.24) and DDP averages, so
    router_aux_loss_coef / N still counts the auxiliary part twice, and coef / (N x world_size) gives the window's
    objective; SFTTrainer multiplies the token loss only and divides the auxiliary loss by N: right at world_size 2."""
    result = run_trainer_on_ranks(world_size=2)
    runs = result["runs"]
    print({name: (run["aux_times"], f"{run['objective_gap']:.1e}") for name, run in runs.items()})
    assert result["world_size"] == 2 and result["accum_steps"] == 2
    assert all(run["num_items"] == [84, 84] for run in runs.values())  # 42 completion tokens per rank's window
    assert {name: run["aux_times"] for name, run in runs.items()} == {
        "Trainer, coef": 3,  # N x world_size - 1 times too many
        "Trainer, coef / N": 1,  # world_size - 1
        "Trainer, coef / (N x world_size)": 0,
        "SFTTrainer, coef": 0,
    }
    assert all(run["aux_times_gap"] < 1e-6 for run in runs.values())
    assert runs["Trainer, coef / N"]["objective_gap"] > 1e-4
    assert psutil.Process().children(recursive=True) == []
