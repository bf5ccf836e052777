"""Real text with chosen numbers of label tokens per sequence, micro-batch and rank: the token-weighting windows of
lesson 07 (its notebook and ``gradacc.workers.ddp``), built from standard-library docstrings so nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..foundations.data import build_vocab, encode, function_docstring, pad_batch, tokenize

__all__ = ["TOKEN_LABEL_COUNTS", "token_vocab_size", "token_windows"]


TOKEN_LABEL_COUNTS: tuple[tuple[tuple[int, ...], ...], ...] = (((2,), (1, 2)), ((4, 3), (8,)))
"""Label tokens per sequence, per micro-batch, per rank, for the token-weighting demo: rank 0 holds 2 micro-batches
with 2 and 1 + 2 = 3 tokens (5 in its window), rank 1 holds 4 + 3 = 7 and 8 (15 in its window); 20 in all."""


# Docstrings of the shipped corpus (gradacc/foundations/docstrings.json, read on Python 3.11): the same text on every
# interpreter.
_TOKEN_SOURCES = (
    "textwrap.dedent",
    "json.dumps",
    "heapq.heappush",
    "heapq.heappop",
    "string.capwords",
    "shutil.copyfile",
    "textwrap.wrap",
)


def _token_texts() -> list[str]:
    return [function_docstring(name) for name in _TOKEN_SOURCES]


def _token_vocab() -> dict[str, int]:
    return build_vocab(_token_texts(), max_size=200)


def token_vocab_size() -> int:
    """Size of the vocabulary of ``token_windows`` (ids 0 and 1 are ``<pad>`` and ``<unk>``)."""
    return len(_token_vocab())


def token_windows(label_counts: Sequence[Sequence[Sequence[int]]] = TOKEN_LABEL_COUNTS) -> list[list[Any]]:
    """Next-token micro-batches of real text with chosen numbers of label tokens, one accumulation window per rank.

    Sequence ``j`` overall (counting through ranks, micro-batches and sequences) is the first ``count + 1`` word
    tokens of the docstring of one of a fixed list of standard-library functions (``textwrap.dedent``, ``json.dumps``,
    ...), so it has exactly ``count`` labels; sequences of one micro-batch are right-padded (``IGNORE_INDEX`` labels).

    Args:
        label_counts: ``label_counts[rank][micro_batch]`` lists the label tokens of each sequence (each >= 1).

    Returns:
        ``windows[rank][micro_batch] = (input_ids, labels)``, both ``[B, T]`` int64
        (``gradacc.foundations.data.pad_batch``).

    Raises:
        ValueError: a count < 1, an empty micro-batch, or a count longer than the docstring allows.
    """
    texts = _token_texts()
    vocab = _token_vocab()
    windows: list[list[Any]] = []
    j = 0
    for rank, micro_batches in enumerate(label_counts):
        window = []
        for m, counts in enumerate(micro_batches):
            if not counts or any(c < 1 for c in counts):
                raise ValueError(f"rank {rank}, micro-batch {m}: label counts must be >= 1 each, got {list(counts)}")
            sequences = []
            for count in counts:
                text = texts[j % len(texts)]
                if count + 1 > len(tokenize(text)):
                    raise ValueError(f"a sequence of {count} labels needs {count + 1} tokens; the text has fewer")
                sequences.append(encode(text, vocab, max_len=count + 1))
                j += 1
            window.append(pad_batch(sequences))
        windows.append(window)
    return windows
