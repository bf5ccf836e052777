"""Lesson 11's helpers (issues 32 and 43): reading collectives from compiled HLO, the pipeline stages, the item loss
and padded sequences of the unequal cases, citations from the installed source, FSDP2's bfloat16 window (the extra
layer in the root unit and as its own unit) and the CUDA-graph check's code path, and the launchers' argument errors.
The multi-process runs themselves are asserted by the lesson (tests/test_notebooks.py, pinned and Colab replica)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gradacc.course.checks.lesson11 import PACKED_DOCUMENTS, PACKED_SEQ_LENGTH, reference_count_items
from gradacc.foundations.data import load_digits_tensors
from gradacc.foundations.models import make_digits_model
from gradacc.parallel.hlo import collective_counts, loop_bodies
from gradacc.parallel.jax_sharding import compiled_collectives
from gradacc.parallel.parallel_stacks import (
    MODEL,
    cudagraph_accumulation_check,
    fsdp_bf16_window,
    item_cross_entropy,
    padded_digit_sequences,
    pipeline_stage_module,
    run_parallel_lesson,
    source_line,
    trl_packed_micro_batches,
    trl_padded_micro_batches,
)
from gradacc.parallel.runs import run_jax_worker

HLO = """HloModule jit_step

%body.1 (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %ar.1 = f32[8]{0} all-reduce(f32[8]{0} %g), channel_id=1, to_apply=%add
  %ag.1 = f32[4,8]{1,0} all-gather(f32[1,8]{1,0} %h), dimensions={0}
}

%cond.1 (p: (s32[], f32[8])) -> pred[] {
  %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %w = (s32[], f32[8]) while((s32[], f32[8]) %t), condition=%cond.1, body=%body.1, backend_config={"known_trip_count":{"n":"3"}}
  %ar.2 = (f32[], f32[8]{0}) all-reduce-start(f32[] %a, f32[8]{0} %b), channel_id=2, to_apply=%add
  %done = (f32[], f32[8]{0}) all-reduce-done((f32[], f32[8]{0}) %ar.2)
}
"""


def test_collectives_in_a_loop_count_once_per_iteration():
    assert len(loop_bodies(HLO)) == 1 and "%ar.1" in loop_bodies(HLO)[0]
    counts = collective_counts(HLO)
    assert counts["all-reduce"] == {
        "instructions": 2,
        "in_loop": 1,
        "per_call": 4,  # 3 iterations + the asynchronous pair outside, counted once
        "shapes": ["f32[8]{0}", "(f32[], f32[8]{0})"],
    }
    assert counts["all-gather"]["per_call"] == 3 and counts["reduce-scatter"]["instructions"] == 0
    with pytest.raises(ValueError, match="known_trip_count"):
        collective_counts(HLO.replace(', backend_config={"known_trip_count":{"n":"3"}}', ""))


def test_the_two_pipeline_stages_are_the_model():
    x, _ = load_digits_tensors()
    model = make_digits_model(seed=0, **MODEL)
    first, second = pipeline_stage_module(0, 2), pipeline_stage_module(1, 2)
    assert torch.equal(second(first(x[:5])), model(x[:5]))
    assert torch.equal(pipeline_stage_module(0, 1)(x[:5]), model(x[:5]))
    both = [*first.parameters(), *second.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(both, model.parameters(), strict=True))
    for bad in ((2, 2), (0, 3), (-1, 1)):
        with pytest.raises(ValueError, match="num_stages"):
            pipeline_stage_module(*bad)


def test_the_item_loss_counts_tokens_that_are_not_padding():
    tokens, labels = padded_digit_sequences([3, 0, 2], seq_len=4, start=10)
    x, y = load_digits_tensors()
    assert tokens.shape == (3, 4, 64) and torch.equal(tokens[1, 2], x[10 + 4 + 2])
    assert labels.tolist()[0] == [*y[10:13].tolist(), -100] and labels[1].tolist() == [-100] * 4
    model = make_digits_model(seed=0, **MODEL)
    real = labels != -100
    total = item_cross_entropy(model(tokens), labels, "sum")
    assert torch.allclose(total, F.cross_entropy(model(tokens[real]), labels[real], reduction="sum"))
    assert torch.allclose(item_cross_entropy(model(tokens), labels), total / int(real.sum()))
    assert torch.allclose(item_cross_entropy(model(x[:5]), y[:5]), F.cross_entropy(model(x[:5]), y[:5]))
    with pytest.raises(ValueError, match="0..seq_len=4"):
        padded_digit_sequences([5], seq_len=4)
    with pytest.raises(ValueError, match="1797"):
        padded_digit_sequences([1] * 2, seq_len=4, start=1795)


def test_trl_packs_rows_of_one_length_that_hold_different_numbers_of_items():
    """TRL's own pack_dataset and collator (trl 1.16): every document set of exercise 11.1 fills rows of 12 tokens,
    each row's items are 12 minus its documents (the first label of each is -100), and a caller that edits a result
    does not change the next one."""
    counts = {}
    for documents in PACKED_DOCUMENTS:
        batches = trl_packed_micro_batches(documents, PACKED_SEQ_LENGTH)
        assert sum(int(b["labels"].numel()) for b in batches) == sum(documents)
        assert {b["labels"].shape for b in batches} == {torch.Size([1, PACKED_SEQ_LENGTH])}
        starts = [int((b["position_ids"] == 0).sum()) for b in batches]
        assert reference_count_items(batches, True) == [PACKED_SEQ_LENGTH - n for n in starts]
        assert set(starts) <= {1, 2, 3, 4, 6}
        assert reference_count_items(batches, False) == [PACKED_SEQ_LENGTH - n for n in starts]  # rows start at -100
        counts[documents] = reference_count_items(batches, True)
        batches[0]["labels"].fill_(-100)
        assert reference_count_items(trl_packed_micro_batches(documents, PACKED_SEQ_LENGTH), True) == counts[documents]
    assert [sorted(c, reverse=True) for c in counts.values()] == [
        [10, 10, 10, 9],
        [10, 10, 10],
        [11, 10, 9, 8],
        [10, 10, 6],
    ]
    two = trl_packed_micro_batches(PACKED_DOCUMENTS[0], PACKED_SEQ_LENGTH, packs_per_micro_batch=2)
    assert [b["labels"].shape[1] for b in two] == [24, 24] and sum(reference_count_items(two, True)) == 39


def test_a_causal_lm_predicts_one_label_fewer_per_row_than_trl_pads():
    """TRL's own collator without packing (trl 1.16) keeps each row's first label; transformers' causal-LM loss
    (5.24) shifts the labels, so it predicts ``labels[..., 1:]``: 3 items where 5 labels are not -100, and exercise
    11.1's reference counts those 3."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    (batch,) = trl_padded_micro_batches((3, 2), 2, start=1)
    assert batch["labels"].tolist() == [[1, 2, 3], [4, 5, -100]]
    logits = torch.zeros(2, 3, 8)  # every label costs log(8)
    summed = ForCausalLMLoss(logits, batch["labels"], vocab_size=8, num_items_in_batch=torch.tensor(1))
    mean = ForCausalLMLoss(logits, batch["labels"], vocab_size=8)
    assert torch.isclose(summed / mean, torch.tensor(3.0))
    assert reference_count_items([batch], True) == [3] and reference_count_items([batch], False) == [5]


def test_trl_wrapped_packing_with_the_padded_collator_gives_rows_of_equal_items():
    """TRL's ``"wrapped"`` packing (trl 1.16) cuts documents at each row's end and its default collator then keeps
    every label: rows of 12 tokens hold 11 items each for a causal LM, where ``"bfd"`` gave ``[10, 10, 10, 9]``."""
    import datasets
    from trl.data_utils import pack_dataset
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    lengths = PACKED_DOCUMENTS[0]
    documents = [list(range(sum(lengths[:k]), sum(lengths[: k + 1]))) for k in range(len(lengths))]
    packs = pack_dataset(datasets.Dataset.from_dict({"input_ids": documents}), PACKED_SEQ_LENGTH, strategy="wrapped")
    batch = DataCollatorForLanguageModeling(pad_token_id=0)(list(packs))
    assert batch["labels"].shape == (4, PACKED_SEQ_LENGTH)
    rows = [{"labels": row} for row in batch["labels"]]
    assert reference_count_items(rows, True) == [PACKED_SEQ_LENGTH - 1] * 4


def test_source_line_cites_the_installed_file_and_line():
    cited = source_line(torch.amp.autocast_mode.autocast.__exit__, "clear_autocast_cache")
    path, line = cited.rsplit(":", 1)
    assert path == "torch/amp/autocast_mode.py"
    source = (Path(torch.__file__).parents[1] / path).read_text(encoding="utf-8").splitlines()
    assert "clear_autocast_cache" in source[int(line) - 1]
    module_cited = source_line(torch.amp.autocast_mode, "class autocast")  # a module: its lines count from 1
    assert source[int(module_cited.rsplit(":", 1)[1]) - 1].startswith("class autocast")
    with pytest.raises(ValueError, match="not in the source"):
        source_line(torch.amp.autocast_mode.autocast.__exit__, "no such text")


def test_fsdp_bf16_window_reports_the_assertion_and_unused_parameters():
    x, y = load_digits_tensors()
    window = [(x[k * 6 : (k + 1) * 6], y[k * 6 : (k + 1) * 6]) for k in range(3)]
    extra = slice(-(64 * 10 + 10), None)  # the extra layer's weight and bias, last in parameters()
    root = fsdp_bf16_window(window, extra_on=[2])["outcome"]
    assert root.startswith("error: AssertionError: FSDP reduce-scatter expects uniform")
    never = fsdp_bf16_window(window, extra_on=[])  # the extra layer gets no gradient at all: zeros, not an error
    assert never["outcome"] == "ok" and not never["grads"][extra].any()
    first = fsdp_bf16_window(window, extra_on=[0])  # used before the synchronizing micro-step: no mixture
    assert first["outcome"] == "ok" and first["grads"][extra].any()
    synced = fsdp_bf16_window(window, extra_on=[2], sync_each=True)["grads"]
    for unit in (False, True):  # the extra layer in the root unit, then as its own FSDP unit
        fixed = fsdp_bf16_window(window, extra_on=[2], touch_unused="output", extra_unit=unit)
        assert fixed["outcome"] == "ok" and torch.equal(fixed["grads"], synced), unit
    gathered = fsdp_bf16_window(window, extra_on=[0], extra_unit=True)  # its own unit, gathered on micro-step 0
    assert gathered["outcome"] == "ok" and gathered["grads"][extra].any()
    own = fsdp_bf16_window(window, extra_on=[2], extra_unit=True)["outcome"]  # never gathered before micro-step 0
    touched = fsdp_bf16_window(window, extra_on=[2], extra_unit=True, touch_unused="parameters")["outcome"]
    print(f"own unit at the boundary: {own}; with 0 x sum(parameters): {touched}")
    assert own.startswith("error: ") and "mixed torch.Tensor and DTensor" in touched
    with pytest.raises(ValueError, match="touch_unused"):
        fsdp_bf16_window(window, extra_on=[2], touch_unused="weights")


def test_the_cuda_graph_check_runs_its_loop_and_refuses_a_missing_gpu():
    eager = cudagraph_accumulation_check(device="cpu", compile_fn=lambda model: model)
    assert eager["eager_bias_grad"] == pytest.approx(1.0) == eager["compiled_bias_grad"] and eager["error"] is None
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cudagraph_accumulation_check()


def test_the_launchers_refuse_bad_sizes_before_starting_anything():
    with pytest.raises(ValueError, match="1797"):
        run_parallel_lesson(micro_batch_size=64, n_microbatches=8)  # 6,144 digits for the padded sequences
    with pytest.raises(ValueError, match="micro_batch_size"):
        run_parallel_lesson(micro_batch_size=0)
    with pytest.raises(ValueError, match="windows"):
        run_parallel_lesson(windows=0)
    with pytest.raises(ValueError, match="devices"):
        run_jax_worker("gradacc.workers.jax_sharding", [], devices=0)
    with pytest.raises(ValueError, match="devices must be in 1..1"):
        compiled_collectives(2)  # this process sees one CPU device
