"""Unit tests of gradacc.foundations.data and gradacc.foundations.accumulation: the numbers lessons 01-02 rely on."""

from __future__ import annotations

import heapq
import inspect
import json
import subprocess
import sys

import pytest
import torch

from gradacc.foundations.accumulation import (
    accumulation_step,
    count_items,
    full_batch_gradients,
    max_abs_diff,
    sum_cross_entropy,
    train_accumulated,
)
from gradacc.foundations.data import (
    DOCSTRING_FILE,
    EXTRA_FUNCTIONS,
    IGNORE_INDEX,
    build_vocab,
    digits_loader,
    docstring_corpus,
    encode,
    function_docstring,
    live_docstring_corpus,
    load_digits_tensors,
    pad_batch,
    split_micro_batches,
)
from gradacc.foundations.models import TinyLM, make_digits_model


def test_digits_are_the_real_bundled_dataset():
    x, y = load_digits_tensors()
    assert x.shape == (1797, 64) and x.dtype == torch.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert torch.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_digits_are_exactly_what_sklearns_loader_returns_without_importing_sklearn():
    """``load_digits_tensors`` reads scikit-learn's bundled file itself (the import of scikit-learn costs each process
    about 1 s of CPU); the arrays are bit for bit ``sklearn.datasets.load_digits()``'s, and a process that loads the
    digits never imports scikit-learn."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x, y = load_digits_tensors(torch.float64)
    assert torch.equal(x * 16.0, torch.as_tensor(bunch.data)) and torch.equal(y, torch.as_tensor(bunch.target))
    code = (
        "import sys; from gradacc.foundations.data import load_digits_tensors; load_digits_tensors(); "
        "print('sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_loader_is_seeded():
    first = [b[1].tolist() for b in digits_loader(32, seed=3, n_samples=128)]
    again = [b[1].tolist() for b in digits_loader(32, seed=3, n_samples=128)]
    other = [b[1].tolist() for b in digits_loader(32, seed=4, n_samples=128)]
    assert first == again and first != other


def test_docstring_corpus_is_real_variable_length_text():
    corpus = docstring_corpus()
    lengths = [len(encode(d["text"], build_vocab([d["text"]]))) for d in corpus]
    assert len(corpus) > 300
    assert min(lengths) >= 5 and max(lengths) > 20 * min(lengths)
    assert corpus == docstring_corpus()  # deterministic order
    assert len(docstring_corpus(min_words=0)) == 823 and len(corpus) == 778


def test_the_shipped_docstring_corpus_is_what_python_3_11_reads():
    """docstrings.json is data, not a cache: written on the pinned Python (3.11) and re-read here on it, so a Colab
    kernel on Python 3.13 trains lesson 05 on the same text (3.13 changed e.g. pathlib's docstrings and module)."""
    shipped = json.loads(DOCSTRING_FILE.read_text(encoding="utf-8"))
    assert sys.version_info[:2] == (3, 11) and shipped["python"].startswith("3.11.")
    assert shipped["docstrings"] == live_docstring_corpus()
    assert shipped["functions"] == {name: inspect.getdoc(getattr(heapq, name[6:])) for name in EXTRA_FUNCTIONS}
    assert function_docstring("textwrap.dedent").startswith("Remove any common leading whitespace")
    with pytest.raises(KeyError, match="'numpy.mean' is not in the shipped docstring corpus"):
        function_docstring("numpy.mean")


@pytest.mark.parametrize("bad", [0, -1, 2.0, "4", True, None])
def test_split_refuses_bad_accum_steps(bad):
    x, y = torch.zeros(8, 3), torch.zeros(8)
    with pytest.raises(ValueError, match="accum_steps"):
        split_micro_batches(x, y, bad)


def test_split_refuses_too_few_samples_and_mismatches():
    with pytest.raises(ValueError, match="3 samples cannot be split into accum_steps=4"):
        split_micro_batches(torch.zeros(3, 2), torch.zeros(3), 4)
    with pytest.raises(ValueError, match="8 inputs and 7 labels"):
        split_micro_batches(torch.zeros(8, 2), torch.zeros(7), 2)


def test_split_sizes_and_order():
    x, y = torch.arange(10.0).unsqueeze(1), torch.arange(10)
    parts = split_micro_batches(x, y, 4)
    assert [len(p[1]) for p in parts] == [3, 3, 2, 2]
    assert torch.cat([p[1] for p in parts]).tolist() == list(range(10))


@pytest.mark.parametrize("sizes", [(8, 8, 8, 8), (10, 22), (1, 5, 26)])
def test_accumulated_gradient_equals_full_batch(sizes):
    x, y = load_digits_tensors()
    x, y = x[:32], y[:32]
    model = make_digits_model(seed=0)
    target = full_batch_gradients(model, (x, y))
    bounds = torch.tensor((0, *sizes)).cumsum(0).tolist()
    micro = [(x[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    items = sum(count_items(b) for b in micro)
    for batch in micro:
        (sum_cross_entropy(model, batch) / items).backward()
    diff = max_abs_diff([p.grad for p in model.parameters()], target)
    assert diff < 1e-6, diff


def test_accumulation_step_matches_one_sgd_step_on_the_full_batch():
    x, y = load_digits_tensors()
    x, y = x[:64], y[:64]
    full, accum = make_digits_model(seed=1), make_digits_model(seed=1)
    opt_full = torch.optim.SGD(full.parameters(), lr=0.5)
    (sum_cross_entropy(full, (x, y)) / 64).backward()
    opt_full.step()
    record = accumulation_step(accum, torch.optim.SGD(accum.parameters(), lr=0.5), split_micro_batches(x, y, 4))
    assert record["items"] == 64 and record["micro_steps"] == 4
    assert max_abs_diff(full.parameters(), accum.parameters()) < 1e-6
    assert all(p.grad is None for p in accum.parameters())  # zeroed after the step


def test_clipping_happens_once_at_the_boundary():
    x, y = load_digits_tensors()
    x, y = x[:64], y[:64]
    model = make_digits_model(seed=2)
    target = torch.cat([g.flatten() for g in full_batch_gradients(model, (x, y))])
    before = [p.detach().clone() for p in model.parameters()]
    record = accumulation_step(
        model, torch.optim.SGD(model.parameters(), lr=1.0), split_micro_batches(x, y, 4), max_norm=0.1
    )
    update = torch.cat([(b - p.detach()).flatten() for b, p in zip(before, model.parameters(), strict=True)])
    assert abs(record["grad_norm"] - float(target.norm())) < 1e-5
    assert abs(float(update.norm()) - 0.1) < 1e-6
    assert float(torch.nn.functional.cosine_similarity(update, target, dim=0)) >= 1 - 1e-6


def test_train_handles_the_short_last_window_and_steps_the_scheduler_once_per_update():
    loader = digits_loader(16, seed=0, n_samples=160)  # 10 micro-batches
    model = make_digits_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    history = train_accumulated(model, opt, loader, accum_steps=4, scheduler=sched)
    assert [h["micro_steps"] for h in history] == [4, 4, 2]
    assert [h["items"] for h in history] == [64, 64, 32]
    assert [round(h["lr"], 6) for h in history] == [0.1, 0.05, round(0.1 / 3, 6)]
    assert all(isinstance(h["loss"], float) for h in history)
    assert all(p.grad is None for p in model.parameters())


def test_short_last_window_update_equals_its_full_batch_update():
    x, y = load_digits_tensors()
    batches = [(x[i * 8 : (i + 1) * 8], y[i * 8 : (i + 1) * 8]) for i in range(10)]
    model = make_digits_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_accumulated(model, opt, batches[:8], accum_steps=4)
    reference = make_digits_model(seed=0)
    reference.load_state_dict(model.state_dict())
    before = [p.detach().clone() for p in model.parameters()]
    train_accumulated(model, opt, batches[8:], accum_steps=4)  # a window of 2 micro-batches
    last = torch.cat([x[64:80]]), torch.cat([y[64:80]])
    expected = [b - 0.1 * g for b, g in zip(before, full_batch_gradients(reference, last), strict=True)]
    assert max_abs_diff(model.parameters(), expected) < 1e-6


def test_token_windows_are_weighted_by_tokens():
    corpus = [d["text"] for d in docstring_corpus()[:50]]
    vocab = build_vocab(corpus, max_size=300)
    seqs = [encode(t, vocab, max_len=60) for t in corpus[:8]]
    model = TinyLM(len(vocab), seed=0)
    full = pad_batch(seqs)
    target = full_batch_gradients(model, full)
    micro = [pad_batch(seqs[:3]), pad_batch(seqs[3:4]), pad_batch(seqs[4:])]
    assert sum(count_items(b) for b in micro) == count_items(full) == int((full[1] != IGNORE_INDEX).sum())
    items = count_items(full)
    for batch in micro:
        (sum_cross_entropy(model, batch) / items).backward()
    assert max_abs_diff([p.grad for p in model.parameters()], target) < 1e-6


def test_bad_arguments_raise_clear_errors():
    model = make_digits_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="accum_steps must be >= 1, got 0"):
        train_accumulated(model, opt, [], accum_steps=0)
    with pytest.raises(ValueError, match="at least one micro-batch"):
        accumulation_step(model, opt, [])
    with pytest.raises(ValueError, match="micro-batch 0: .*4 inputs and 3 labels"):
        accumulation_step(model, opt, [(torch.zeros(4, 64), torch.zeros(3, dtype=torch.int64))])
    with pytest.raises(ValueError, match="no items"):
        accumulation_step(model, opt, [(torch.zeros(2, 64), torch.full((2,), IGNORE_INDEX))])
