"""Unit tests of gradacc.frameworks.trainer and the lesson-05 checks: the Trainer facts lesson 05 relies on
(transformers 5.24)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")

from gradacc.foundations.data import DOCSTRING_MODULES, docstring_corpus  # noqa: E402
from gradacc.frameworks.trainer import (  # noqa: E402
    FAMILY_NAMES,
    MODULE_FAMILIES,
    batch_gradients,
    classification_metrics,
    encode_dataset,
    family_of,
    family_split,
    first_step_probe,
    probe_args,
    quiet_transformers,
    run_trainer_ddp,
    tiny_bert_classifier,
    tiny_causal_lm,
    train_wordlevel_tokenizer,
    update_ratio,
)
from gradacc.workers.trainer_ddp import lm_sequences  # noqa: E402

quiet_transformers()


@pytest.fixture(scope="module")
def task():
    from transformers import DataCollatorWithPadding

    split = family_split(seed=0)
    tokenizer = train_wordlevel_tokenizer(split.train_texts, vocab_size=600)
    dataset = encode_dataset(tokenizer, split.train_texts[:64], split.train_labels[:64], max_length=32)
    return split, tokenizer, dataset, DataCollatorWithPadding(tokenizer)


def test_every_corpus_module_is_in_exactly_one_family():
    listed = [m for modules in MODULE_FAMILIES.values() for m in modules]
    assert sorted(listed) == sorted(DOCSTRING_MODULES) and len(listed) == len(set(listed))
    assert FAMILY_NAMES == ("code", "types", "system", "text+data")
    assert family_of("ast") == "code" and family_of("json") == "text+data"
    with pytest.raises(ValueError, match="module 'numpy' is in no family"):
        family_of("numpy")


def test_family_split_is_stratified_disjoint_and_seeded():
    split = family_split(eval_fraction=0.2, seed=0)
    corpus = docstring_corpus()
    assert len(split.train_texts) + len(split.eval_texts) == len(corpus)
    assert not set(split.train_texts) & set(split.eval_texts)
    for label in range(4):
        share_train = split.train_labels.count(label) / len(split.train_labels)
        share_eval = split.eval_labels.count(label) / len(split.eval_labels)
        assert abs(share_train - share_eval) < 0.02
        assert split.train_labels.count(label) >= 100  # balanced-enough classes on Python 3.11
    assert family_split(seed=0).eval_texts == split.eval_texts != family_split(seed=1).eval_texts
    with pytest.raises(ValueError, match="eval_fraction must lie strictly between 0 and 1, got 1.5"):
        family_split(eval_fraction=1.5)


def test_wordlevel_tokenizer_trained_locally(task):
    _, tokenizer, dataset, _ = task
    assert len(tokenizer) == 600
    assert tokenizer.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]"]) == [0, 1, 2, 3]
    ids = tokenizer("Return the value. Zyzzyvaquux!")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "return", "the", "value", ".", "[UNK]", "!", "[SEP]"]
    assert dataset.column_names == ["input_ids", "attention_mask", "labels"]
    assert max(len(row) for row in dataset["input_ids"]) == 32
    with pytest.raises(ValueError, match="vocab_size must be >= 5"):
        train_wordlevel_tokenizer(["a b"], vocab_size=3)
    with pytest.raises(ValueError, match="at least one text"):
        train_wordlevel_tokenizer([])
    with pytest.raises(ValueError, match="got 2 texts and 1 labels"):
        encode_dataset(tokenizer, ["a", "b"], [0])


def test_classification_metrics_are_sklearns():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 2.0]]).numpy()
    labels = [0, 1, 1, 1]  # predictions 0, 1, 0, 1: accuracy 3/4; F1 class 0 = 2/3, class 1 = 4/5
    metrics = classification_metrics((logits, labels))
    assert metrics["accuracy"] == 0.75
    assert metrics["f1"] == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_bert_classifier_gets_n_times_the_update_and_both_fixes_restore_it(task):
    _, tokenizer, dataset, collator = task

    def make_model():
        return tiny_bert_classifier(len(tokenizer), 4, seed=0, hidden_size=32, num_layers=1)

    one = first_step_probe(make_model, dataset, 32, 1, data_collator=collator)
    default = first_step_probe(make_model, dataset, 8, 4, data_collator=collator)
    assert one["loss"] == pytest.approx(math.log(4), abs=0.05)
    assert [m["num_items_in_batch"] for m in default["micro_steps"]] == [32] * 4
    ratio = update_ratio(default["weights_after"], one["weights_after"], one["weights_before"])
    # transformers 5.24: 4.000 (the bug); a release that fixes it would give 1.000. Nothing else is acceptable.
    assert min(abs(ratio - 4), abs(ratio - 1)) < 1e-4, ratio
    if default["model_accepts_loss_kwargs"]:
        assert ratio == pytest.approx(4, abs=1e-4) and default["loss"] / one["loss"] == pytest.approx(4, abs=1e-4)

    def sum_over_window(outputs, labels, num_items_in_batch=None):
        loss = F.cross_entropy(outputs["logits"], labels, reduction="sum")
        return loss / (num_items_in_batch if num_items_in_batch is not None else labels.numel())

    for fix in ({"compute_loss_func": sum_over_window}, {"accepts_loss_kwargs": False}):
        fixed = first_step_probe(make_model, dataset, 8, 4, data_collator=collator, **fix)
        ratio = update_ratio(fixed["weights_after"], one["weights_after"], one["weights_before"])
        diff = max(
            float((fixed["weights_after"][k] - one["weights_after"][k]).abs().max()) for k in one["weights_after"]
        )
        assert ratio == pytest.approx(1, abs=1e-4) and diff < 1e-6, fix
        assert fixed["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)


def test_causal_lm_counts_28_tokens_and_matches_the_single_batch(task):
    from datasets import Dataset
    from transformers import DataCollatorForLanguageModeling

    split, tokenizer, _, _ = task
    sequences = lm_sequences(tokenizer, split.train_texts)  # lesson 05's, and the multi-process worker's
    assert [len(s) for s in sequences] == [4, 10, 2, 16]
    dataset = Dataset.from_dict({"input_ids": sequences, "attention_mask": [[1] * len(s) for s in sequences]})
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)

    def make_lm():
        return tiny_causal_lm(len(tokenizer), seed=0)

    single = collator([{"input_ids": s, "attention_mask": [1] * len(s)} for s in sequences])
    run = first_step_probe(make_lm, dataset, 1, 4, data_collator=collator, keep_tensors=True)
    assert [m["num_items_in_batch"] for m in run["micro_steps"]] == [28] * 4
    step = run["optimizer_steps"][0]
    target = batch_gradients(make_lm, step["weights_before"], single)
    assert max(float((step["grads"][k] - target[k]).abs().max()) for k in target) < 1e-6
    old = first_step_probe(make_lm, dataset, 1, 4, data_collator=collator, keep_tensors=True, accepts_loss_kwargs=False)
    old_grads = old["optimizer_steps"][0]["grads"]
    assert max(float((old_grads[k] - target[k]).abs().max()) for k in target) > 1e-2  # mean of means: wrong


def test_short_final_window_is_divided_by_its_real_size(task):
    _, tokenizer, dataset, collator = task
    small = dataset.select(range(40))  # 5 micro-batches of 8, N = 4: windows of 32 and 8 samples

    def make_model():
        return tiny_bert_classifier(len(tokenizer), 4, seed=1, hidden_size=32, num_layers=1)

    run = first_step_probe(
        make_model, small, 8, 4, data_collator=collator, keep_tensors=True, max_steps=2, accepts_loss_kwargs=False
    )
    assert len(run["optimizer_steps"]) == 2 and len(run["micro_steps"]) == 5
    step = run["optimizer_steps"][1]
    target = batch_gradients(make_model, step["weights_before"], collator([small[i] for i in range(32, 40)]))
    assert max(float((step["grads"][k] - target[k]).abs().max()) for k in target) < 1e-6


def test_argument_errors():
    with pytest.raises(ValueError, match="accum_steps must be >= 1, got 0"):
        probe_args("unused", 8, 0)
    with pytest.raises(ValueError, match="micro_batch_size must be >= 1, got 0"):
        probe_args("unused", 0, 2)
    a = {"w": torch.ones(2)}
    with pytest.raises(ValueError, match="update b is zero"):
        update_ratio(a, a, a)
    with pytest.raises(ValueError, match="same parameter names"):
        update_ratio(a, {"v": torch.ones(2)}, a)
    assert (
        update_ratio({"w": torch.tensor([3.0, 0.0])}, {"w": torch.tensor([2.0, 0.0])}, {"w": torch.tensor([1.0, 0.0])})
        == 2.0
    )
    with pytest.raises(ValueError, match="exactly the model's parameters"):
        batch_gradients(lambda: tiny_causal_lm(10), {"w": torch.ones(1)}, {})


# ---- exercise checks of lesson 05: each accepts the answer and prints "incorrect" for plausible wrong ones ----


def _lm_loss_right(outputs, labels, num_items_in_batch=None):
    logits, targets = outputs["logits"][:, :-1], labels[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum())


def _lm_loss_mean(outputs, labels, num_items_in_batch=None):
    logits, targets = outputs["logits"][:, :-1], labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _lm_loss_no_shift(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum())


def _lm_loss_counts_unshifted(outputs, labels, num_items_in_batch=None):
    logits, targets = outputs["logits"][:, :-1], labels[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum())


def test_check_5_1_accepts_the_answer_and_rejects_wrong_losses(capsys):
    from gradacc.course.checks.lesson05 import check_causal_lm_loss

    check_causal_lm_loss(_lm_loss_right)
    assert capsys.readouterr().out == "Exercise 5.1: correct\n"
    for wrong in (
        _lm_loss_mean,
        _lm_loss_no_shift,
        _lm_loss_counts_unshifted,
        lambda outputs, labels, num_items_in_batch=None: 0.5,
    ):
        check_causal_lm_loss(wrong)
        out = capsys.readouterr().out
        assert out.startswith("Exercise 5.1: incorrect - ") and out.count("Exercise 5.1") == 1, out  # a hint may follow


def test_check_5_2_accepts_fixed_trainers_and_rejects_the_default(capsys):
    from transformers import Trainer

    from gradacc.course.checks.lesson05 import check_fixed_trainer

    def by_flag(model, args, train_dataset, data_collator):
        model.accepts_loss_kwargs = False
        return Trainer(model=model, args=args, train_dataset=train_dataset, data_collator=data_collator)

    def plain(model, args, train_dataset, data_collator):
        return Trainer(model=model, args=args, train_dataset=train_dataset, data_collator=data_collator)

    def mean_loss_func(model, args, train_dataset, data_collator):
        return Trainer(
            model=model,
            args=args,
            train_dataset=train_dataset,
            data_collator=data_collator,
            compute_loss_func=lambda outputs, labels, num_items_in_batch=None: F.cross_entropy(
                outputs["logits"], labels
            ),
        )

    check_fixed_trainer(by_flag)
    assert capsys.readouterr().out == "Exercise 5.2: correct\n"
    for wrong in (plain, mean_loss_func, lambda *a: "not a trainer"):
        check_fixed_trainer(wrong)
        out = capsys.readouterr().out
        assert out.startswith("Exercise 5.2: incorrect - ") and out.count("Exercise 5.2") == 1, out  # a hint may follow


@pytest.mark.slow
def test_two_trainer_processes_average_tokens_across_devices():
    import psutil

    result = run_trainer_ddp()
    on, off = result["settings"]["True"], result["settings"]["False"]
    assert result["world_size"] == 2 and result["predicted_tokens"] == 28
    assert [r["label_tokens"] for r in on["ranks"]] == [r["label_tokens"] for r in off["ranks"]] == [[3, 1], [9, 15]]
    assert [r["num_items_in_batch"] for r in on["ranks"]] == [[28, 28], [28, 28]]  # all-gathered: the window's
    assert [r["num_items_in_batch"] for r in off["ranks"]] == [[4, 4], [24, 24]]  # each rank its own
    assert on["grad_diff"] < 1e-6 and off["grad_diff"] > 1e-2  # off: the mean of per-rank means
    for run in (on, off):  # logged: mean over ranks of each rank's summed micro-step losses
        assert abs(run["logged_loss"] - sum(sum(r["losses"]) for r in run["ranks"]) / 2) < 1e-4
    assert psutil.Process().children(recursive=True) == []
