"""The offline text task of lesson 05: which family of standard-library modules a docstring comes from
(``MODULE_FAMILIES``; 4 classes), a ``tokenizers`` WordLevel tokenizer trained here, in-memory ``datasets.Dataset``
objects, and tiny BERT / Llama models built from configs (random initial weights from a seed, no download).
``gradacc.frameworks.trainer`` re-exports all of it, next to the Trainer probes.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..foundations.data import docstring_corpus

__all__ = [
    "MODULE_FAMILIES",
    "FAMILY_NAMES",
    "family_of",
    "FamilySplit",
    "family_split",
    "train_wordlevel_tokenizer",
    "encode_dataset",
    "tiny_bert_classifier",
    "tiny_causal_lm",
    "classification_metrics",
    "quiet_transformers",
]

MODULE_FAMILIES: dict[str, tuple[str, ...]] = {
    "code": ("ast", "dis", "inspect"),
    "types": (
        "typing",
        "abc",
        "dataclasses",
        "enum",
        "contextlib",
        "functools",
        "itertools",
        "collections",
        "copy",
        "heapq",
        "bisect",
        "queue",
    ),
    "system": (
        "logging",
        "shutil",
        "tarfile",
        "threading",
        "tempfile",
        "subprocess",
        "zipfile",
        "pathlib",
        "gzip",
        "pickle",
        "shelve",
        "glob",
        "fnmatch",
        "sqlite3",
        "argparse",
    ),
    "text+data": (
        "string",
        "textwrap",
        "json",
        "statistics",
        "random",
        "re",
        "datetime",
        "fractions",
        "decimal",
        "difflib",
        "csv",
        "calendar",
        "base64",
        "hashlib",
        "pprint",
        "unittest",
        "urllib.parse",
        "email.message",
        "http.client",
        "xml.dom.minidom",
    ),
}
"""Class label -> standard-library modules whose docstrings belong to it. Every module of
``gradacc.foundations.data.DOCSTRING_MODULES`` is in exactly one family; on Python 3.11 the four classes hold about
190-200 docstrings each (the exact counts depend on the Python version)."""

FAMILY_NAMES: tuple[str, ...] = tuple(MODULE_FAMILIES)
"""Label names in label-id order (``0 = "code"``, ...)."""

_FAMILY_OF = {module: family for family, modules in MODULE_FAMILIES.items() for module in modules}


def family_of(module: str) -> str:
    """The family (class name) of a module of ``DOCSTRING_MODULES``.

    Raises:
        ValueError: a module that is not in ``MODULE_FAMILIES``.
    """
    try:
        return _FAMILY_OF[module]
    except KeyError:
        raise ValueError(f"module {module!r} is in no family; add it to {__name__}.MODULE_FAMILIES") from None


@dataclass
class FamilySplit:
    """A stratified train/eval split of the docstring-family task. Labels are ints into ``label_names``."""

    train_texts: list[str]
    train_labels: list[int]
    eval_texts: list[str]
    eval_labels: list[int]
    label_names: tuple[str, ...] = FAMILY_NAMES


def family_split(eval_fraction: float = 0.2, seed: int = 0, min_words: int = 5) -> FamilySplit:
    """Docstrings labelled by module family, split into train and eval sets with the same class proportions.

    Args:
        eval_fraction: share of the docstrings held out for evaluation (0 < eval_fraction < 1).
        seed: seeds the split (``sklearn.model_selection.train_test_split``, stratified by label).
        min_words: passed to ``gradacc.foundations.data.docstring_corpus``.

    Raises:
        ValueError: ``eval_fraction`` outside (0, 1), or a corpus module missing from ``MODULE_FAMILIES``.
    """
    from sklearn.model_selection import train_test_split

    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must lie strictly between 0 and 1, got {eval_fraction}")
    corpus = docstring_corpus(min_words=min_words)
    texts = [doc["text"] for doc in corpus]
    labels = [FAMILY_NAMES.index(family_of(doc["module"])) for doc in corpus]
    train_x, eval_x, train_y, eval_y = train_test_split(
        texts, labels, test_size=eval_fraction, random_state=seed, stratify=labels
    )
    return FamilySplit(list(train_x), list(train_y), list(eval_x), list(eval_y))


def train_wordlevel_tokenizer(texts: Sequence[str], vocab_size: int = 2000):
    """Train a word-level tokenizer on ``texts`` (``tokenizers``), wrapped for transformers.

    Lower-cases, splits on whitespace and punctuation (``Whitespace`` pre-tokenizer: ``\\w+|[^\\w\\s]+``), keeps the
    ``vocab_size`` most frequent tokens plus ``[PAD]`` (id 0), ``[UNK]``, ``[CLS]``, ``[SEP]``, and wraps every
    encoding as ``[CLS] ... [SEP]``.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` (padding on the right with ``[PAD]``).

    Raises:
        ValueError: no texts, or ``vocab_size < 5``.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if len(texts) == 0:
        raise ValueError("train_wordlevel_tokenizer needs at least one text, got none")
    if vocab_size < 5:
        raise ValueError(f"vocab_size must be >= 5 (4 special tokens + 1 word), got {vocab_size}")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        list(texts), trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=specials)
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )


def encode_dataset(tokenizer, texts: Sequence[str], labels: Sequence[int], max_length: int = 64):
    """An in-memory ``datasets.Dataset`` with ``input_ids``, ``attention_mask`` and ``labels`` (unpadded rows).

    Texts are truncated to ``max_length`` tokens (``[CLS]`` and ``[SEP]`` included); pad per batch with
    ``transformers.DataCollatorWithPadding`` (Trainer does when given ``processing_class=tokenizer``).

    Raises:
        ValueError: ``texts`` and ``labels`` of different lengths.
    """
    from datasets import Dataset

    if len(texts) != len(labels):
        raise ValueError(f"texts and labels must be equally long, got {len(texts)} texts and {len(labels)} labels")
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)
    return Dataset.from_dict(
        {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": list(labels)}
    )


def tiny_bert_classifier(
    vocab_size: int,
    num_labels: int,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    max_positions: int = 128,
    dropout: float = 0.0,
):
    """A small ``BertForSequenceClassification`` built from a ``BertConfig`` (random weights from ``seed``).

    About 0.2 M parameters at the defaults with a 2,000-word vocabulary. Dropout defaults to 0 so that one batch of
    32 and four micro-batches of 8 give the same gradient (dropout masks depend on the micro-batch split; lesson 08).
    ``forward`` accepts ``**kwargs`` but ignores ``num_items_in_batch``: the case Trainer gets wrong.
    """
    from transformers import AutoModelForSequenceClassification, BertConfig

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_positions,
        num_labels=num_labels,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        classifier_dropout=dropout,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForSequenceClassification.from_config(config)


def tiny_causal_lm(
    vocab_size: int, *, seed: int = 0, hidden_size: int = 32, num_layers: int = 1, max_positions: int = 64
):
    """A small ``LlamaForCausalLM`` built from a ``LlamaConfig`` (random weights from ``seed``; no download).

    Its loss (``ForCausalLMLoss``) shifts labels by one position, sums over tokens whose label is not -100 and divides
    by ``num_items_in_batch`` when given (else by its own count): it normalizes the accumulated loss correctly.
    """
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config)


def classification_metrics(eval_pred) -> dict[str, float]:
    """``compute_metrics`` for Trainer: accuracy and macro-averaged F1 (scikit-learn), as floats in [0, 1].

    ``eval_pred`` is a ``transformers.EvalPrediction`` (or a ``(logits, labels)`` pair) with logits ``[B, C]``.
    Macro F1 averages the per-class F1 scores, so a model that ignores a class is penalized even when accuracy looks
    fine. (The ``evaluate`` package would fetch metric scripts from the Hub; scikit-learn ships them.)
    """
    import numpy as np
    from sklearn.metrics import accuracy_score, f1_score

    logits, labels = eval_pred
    predictions = np.asarray(logits).argmax(axis=-1)
    return {
        "accuracy": float(accuracy_score(labels, predictions)),
        "f1": float(f1_score(labels, predictions, average="macro")),
    }


def quiet_transformers() -> None:
    """Silence transformers' and datasets' info logs and progress bars (for cells whose output is checked)."""
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
