"""Real data that ships offline, seeded loaders, and splitting a batch into micro-batches.

* Handwritten digits: scikit-learn's bundled copy of the UCI "Optical Recognition of Handwritten Digits" test set,
  1,797 real 8x8 grey-scale images of the digits 0-9 (``sklearn.datasets.load_digits``; no download).
* English text of variable length: the docstrings of a fixed list of modules of Python's standard library, read once
  on Python 3.11 and shipped with the package (``docstrings.json``), so that every interpreter trains on the same text
  (Python 3.13 rewrote some of them and moved ``pathlib``'s classes to ``pathlib._local``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

__all__ = [
    "load_digits_tensors",
    "digits_loader",
    "split_micro_batches",
    "check_accum_steps",
    "docstring_corpus",
    "DOCSTRING_MODULES",
    "DOCSTRING_FILE",
    "function_docstring",
    "tokenize",
    "build_vocab",
    "encode",
    "pad_batch",
    "IGNORE_INDEX",
]

IGNORE_INDEX = -100
"""Label value that losses skip (PyTorch's ``cross_entropy`` default ``ignore_index``): padding tokens."""


def load_digits_tensors(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Return scikit-learn's bundled handwritten digits as tensors.

    Returns:
        ``(x, y)``: ``x`` of shape ``[1797, 64]`` and the given ``dtype``, pixel intensities scaled from 0..16 to 0..1;
        ``y`` of shape ``[1797]``, ``torch.int64`` class labels 0..9.

    Source: ``sklearn.datasets.load_digits`` (UCI ML hand-written digits, 1,797 samples, shipped inside scikit-learn),
    read from its file without importing scikit-learn (``_digits_array``).
    """
    data = _digits_array()
    x = torch.as_tensor(data[:, :-1], dtype=dtype) / 16.0
    y = torch.as_tensor(data[:, -1].astype(int), dtype=torch.int64)
    return x, y


@cache
def _digits_array():
    """scikit-learn's ``digits.csv.gz`` as one float64 array of shape ``[1797, 65]`` (64 pixels, then the label).

    ``sklearn.datasets.load_digits`` reads the same file the same way (scikit-learn 1.9.1,
    ``sklearn/datasets/_base.py`` lines 451-454 and 1004-1005: ``np.loadtxt`` of the gzip-decompressed CSV, pixels
    ``data[:, :-1]``, label ``data[:, -1]``); reading it here spares every process that loads the digits the import of
    scikit-learn (about 1 s of CPU: each rank of a torchrun launch, each grading kernel). Where the file is not found
    (another layout in a future scikit-learn), ``load_digits()`` itself. ``tests/test_accumulation.py`` checks that
    both give the same arrays, bit for bit.
    """
    import gzip
    import importlib.util

    import numpy as np

    spec = importlib.util.find_spec("sklearn")  # finds the package without running its __init__
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return np.column_stack([bunch.data, bunch.target])
    with gzip.open(path, mode="rt", encoding="utf-8") as file:
        return np.loadtxt(file, delimiter=",")


def digits_loader(
    batch_size: int,
    *,
    seed: int = 0,
    n_samples: int | None = None,
    shuffle: bool = True,
    drop_last: bool = False,
    dtype: torch.dtype = torch.float32,
) -> DataLoader:
    """A seeded ``DataLoader`` over the digits (same order for the same ``seed``).

    Args:
        batch_size: samples per batch (a micro-batch when used with accumulation).
        seed: seeds the shuffling generator.
        n_samples: keep only the first ``n_samples`` digits (``None``: all 1,797).
        shuffle, drop_last: as in ``torch.utils.data.DataLoader``.

    Raises:
        ValueError: ``batch_size < 1`` or ``n_samples`` outside ``1..1797``.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    x, y = load_digits_tensors(dtype)
    if n_samples is not None:
        if not 1 <= n_samples <= len(x):
            raise ValueError(f"n_samples must be in 1..{len(x)}, got {n_samples!r}")
        x, y = x[:n_samples], y[:n_samples]
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, generator=generator
    )


def check_accum_steps(accum_steps: object) -> int:
    """Validate the number of accumulation steps N (micro-batches per optimizer step).

    Returns:
        ``accum_steps`` unchanged, as an ``int``.

    Raises:
        ValueError: ``accum_steps`` is not an ``int`` (``bool`` is refused too) or is ``< 1``.
    """
    if isinstance(accum_steps, bool) or not isinstance(accum_steps, int):
        raise ValueError(
            f"accum_steps must be an int >= 1, got {accum_steps!r} ({type(accum_steps).__name__}); "
            "pass a whole number such as 4"
        )
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    return accum_steps


def split_micro_batches(
    inputs: torch.Tensor, labels: torch.Tensor, accum_steps: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Split one batch into ``accum_steps`` micro-batches along dimension 0.

    When the batch size ``B`` is not a multiple of ``accum_steps`` the micro-batches differ in size by at most one
    sample (``torch.tensor_split``); weight them by their sample counts (see ``gradacc.foundations.accumulation``).

    Args:
        inputs: shape ``[B, ...]``.
        labels: shape ``[B, ...]``.
        accum_steps: N >= 1.

    Returns:
        ``accum_steps`` pairs ``(inputs_i, labels_i)``, views of the inputs, in order.

    Raises:
        ValueError: bad ``accum_steps`` (see ``check_accum_steps``); ``inputs`` and ``labels`` with different first
            dimensions; fewer than ``accum_steps`` samples (a micro-batch would be empty).
    """
    check_accum_steps(accum_steps)
    if inputs.shape[0] != labels.shape[0]:
        raise ValueError(
            f"inputs and labels must hold the same number of samples, got {inputs.shape[0]} inputs and "
            f"{labels.shape[0]} labels"
        )
    if inputs.shape[0] < accum_steps:
        raise ValueError(
            f"a batch of {inputs.shape[0]} samples cannot be split into accum_steps={accum_steps} non-empty "
            f"micro-batches; use accum_steps <= {inputs.shape[0]} or a larger batch"
        )
    return list(zip(torch.tensor_split(inputs, accum_steps), torch.tensor_split(labels, accum_steps), strict=True))


DOCSTRING_MODULES: tuple[str, ...] = (
    "string",
    "textwrap",
    "json",
    "collections",
    "itertools",
    "functools",
    "statistics",
    "random",
    "shutil",
    "pathlib",
    "re",
    "datetime",
    "heapq",
    "bisect",
    "copy",
    "fractions",
    "decimal",
    "difflib",
    "csv",
    "glob",
    "fnmatch",
    "tempfile",
    "logging",
    "argparse",
    "calendar",
    "inspect",
    "typing",
    "dataclasses",
    "enum",
    "contextlib",
    "abc",
    "queue",
    "threading",
    "subprocess",
    "zipfile",
    "tarfile",
    "gzip",
    "base64",
    "hashlib",
    "pprint",
    "unittest",
    "urllib.parse",
    "email.message",
    "http.client",
    "xml.dom.minidom",
    "ast",
    "dis",
    "pickle",
    "shelve",
    "sqlite3",
)
"""Standard-library modules whose docstrings form the text corpus (a fixed list, so the corpus is reproducible)."""

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]")


DOCSTRING_FILE = Path(__file__).with_name("docstrings.json")
"""The shipped corpus: ``{"python": "3.11.7", "docstrings": [{"module", "name", "text"}, ...], "functions": {...}}``,
written by ``write_docstring_file()``; ``tests/test_accumulation.py`` reads the live docstrings again on Python 3.11
and requires the same text."""

EXTRA_FUNCTIONS: tuple[str, ...] = ("heapq.heappush", "heapq.heappop")
"""Functions whose docstrings ``function_docstring`` serves although the corpus skips them (defined in ``_heapq``)."""


def live_docstring_corpus() -> list[dict[str, str]]:
    """Every docstring of ``DOCSTRING_MODULES`` and their public callables, read from the running interpreter.

    This is how ``docstrings.json`` was made (on Python 3.11); the text differs on other versions. Order: module list
    order, then member name; a member re-exported from another module is skipped, and so is a repeated text.
    """
    seen: set[str] = set()
    corpus: list[dict[str, str]] = []
    for module_name in DOCSTRING_MODULES:
        module = importlib.import_module(module_name)
        members = [("", module)] + sorted(
            (name, obj) for name, obj in vars(module).items() if not name.startswith("_") and callable(obj)
        )
        for name, obj in members:
            if getattr(obj, "__module__", module_name) not in (module_name, None) and name:
                continue  # re-exported from another module: counted there
            doc = inspect.getdoc(obj)
            if not doc or doc in seen:
                continue
            seen.add(doc)
            corpus.append({"module": module_name, "name": name or module_name, "text": doc})
    return corpus


def _live_function_docstrings() -> dict[str, str]:
    functions = {}
    for qualified in EXTRA_FUNCTIONS:
        module, attr = qualified.rsplit(".", 1)
        functions[qualified] = inspect.getdoc(getattr(importlib.import_module(module), attr)) or ""
    return functions


def write_docstring_file(path: Path = DOCSTRING_FILE) -> Path:
    """(Maintainers) Read the corpus from the running interpreter and write it to ``path``; returns ``path``.

    Raises:
        RuntimeError: not Python 3.11, the version every stored lesson output was computed with.
    """
    if sys.version_info[:2] != (3, 11):
        raise RuntimeError(f"write the docstring corpus on Python 3.11 (the pinned one), not {sys.version.split()[0]}")
    data = {
        "python": sys.version.split()[0],
        "docstrings": live_docstring_corpus(),
        "functions": _live_function_docstrings(),
    }
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@cache
def _shipped() -> dict:
    return json.loads(DOCSTRING_FILE.read_text(encoding="utf-8"))


def function_docstring(qualified_name: str) -> str:
    """The shipped docstring of a function of the corpus (``"textwrap.dedent"``) or of ``EXTRA_FUNCTIONS``.

    Raises:
        KeyError: the name is in neither.
    """
    data = _shipped()
    if qualified_name in data["functions"]:
        return data["functions"][qualified_name]
    module, _, name = qualified_name.rpartition(".")
    for entry in data["docstrings"]:
        if entry["module"] == module and entry["name"] == name:
            return entry["text"]
    raise KeyError(f"{qualified_name!r} is not in the shipped docstring corpus ({DOCSTRING_FILE.name})")


def docstring_corpus(min_words: int = 5, max_words: int | None = None) -> list[dict[str, str]]:
    """Real English text of variable length: docstrings of ``DOCSTRING_MODULES`` and their public members, as read on
    Python 3.11 and shipped in ``docstrings.json`` (the same text on every interpreter).

    Args:
        min_words, max_words: keep docstrings whose ``tokenize`` length lies in this range (``None``: no maximum).

    Returns:
        A list of ``{"module": str, "name": str, "text": str}`` in a fixed order (module list order, then member name),
        without duplicates: 823 entries in all, 778 of at least 5 words.
    """
    return [
        dict(entry)
        for entry in _shipped()["docstrings"]
        if min_words <= len(tokenize(entry["text"]))
        and (max_words is None or len(tokenize(entry["text"])) <= max_words)
    ]


def tokenize(text: str) -> list[str]:
    """Lower-case word-level tokens: words, numbers, and single punctuation marks."""
    return _WORD.findall(text.lower())


def build_vocab(texts: Sequence[str], max_size: int = 2000) -> dict[str, int]:
    """Word -> id for the ``max_size`` most frequent tokens (ties broken alphabetically).

    Ids 0 and 1 are ``"<pad>"`` and ``"<unk>"``.
    """
    counts = Counter(token for text in texts for token in tokenize(text))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: max(0, max_size - 2)]
    vocab = {"<pad>": 0, "<unk>": 1}
    vocab.update({token: i + 2 for i, (token, _) in enumerate(ranked)})
    return vocab


def encode(text: str, vocab: dict[str, int], max_len: int | None = None) -> torch.Tensor:
    """Token ids (``torch.int64``, shape ``[L]``) of ``text``; unknown words map to ``<unk>``."""
    ids = [vocab.get(token, vocab["<unk>"]) for token in tokenize(text)]
    return torch.tensor(ids[:max_len] if max_len else ids, dtype=torch.int64)


def pad_batch(sequences: Sequence[torch.Tensor], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad sequences for next-token prediction.

    Returns:
        ``(input_ids, labels)``, both ``[B, T]`` int64 with ``T`` the longest length minus one: inputs are tokens
        ``0..L-2`` and labels tokens ``1..L-1`` of each sequence; padded label positions are ``IGNORE_INDEX``.

    Raises:
        ValueError: an empty list, or a sequence shorter than 2 tokens.
    """
    if not sequences:
        raise ValueError("pad_batch needs at least one sequence, got an empty list")
    short = [len(s) for s in sequences if len(s) < 2]
    if short:
        raise ValueError(f"every sequence needs >= 2 tokens for next-token prediction, got lengths {short}")
    width = max(len(s) for s in sequences) - 1
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.int64)
    labels = torch.full((len(sequences), width), IGNORE_INDEX, dtype=torch.int64)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq) - 1] = seq[:-1]
        labels[row, : len(seq) - 1] = seq[1:]
    return input_ids, labels
