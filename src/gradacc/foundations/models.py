"""The small models the lessons share, built from a seed so every lesson starts from the same weights."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DigitsMLP", "DigitsTransformer", "TinyLM", "make_digits_model", "seed_everything"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (CPU and, if present, CUDA) for reproducible lessons."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class DigitsMLP(nn.Module):
    """A multi-layer perceptron for the 8x8 digits: ``[B, 64] float32 -> [B, 10]`` logits.

    Args:
        hidden: width of each hidden layer.
        depth: number of hidden layers (``Linear -> ReLU``), >= 1.
        norm: ``None``, ``"batch"`` (BatchNorm1d), ``"layer"`` (LayerNorm) or ``"group"`` (GroupNorm, 4 groups) after
            each hidden Linear; lesson 08 compares them.
        dropout: dropout probability after each hidden activation.
    """

    def __init__(self, hidden: int = 32, depth: int = 1, norm: str | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        norms = {
            None: None,
            "batch": lambda: nn.BatchNorm1d(hidden),
            "layer": lambda: nn.LayerNorm(hidden),
            "group": lambda: nn.GroupNorm(4, hidden),
        }
        if norm not in norms:
            raise ValueError(f"norm must be one of {sorted(k for k in norms if k)} or None, got {norm!r}")
        layers: list[nn.Module] = []
        width = 64
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            if norm is not None:
                layers.append(norms[norm]())
            layers.append(nn.ReLU())
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = hidden
        layers.append(nn.Linear(width, 10))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_digits_model(seed: int = 0, dtype: torch.dtype = torch.float32, **kwargs) -> DigitsMLP:
    """A ``DigitsMLP`` whose initial weights depend only on ``seed`` (keyword arguments go to ``DigitsMLP``)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DigitsMLP(**kwargs)
    return model.to(dtype)


class TinyLM(nn.Module):
    """A next-token model small enough for CPU lessons: embedding -> tanh MLP -> vocabulary logits.

    ``[B, T] int64 token ids -> [B, T, vocab_size]`` logits; each position sees only its own token (a bigram model),
    which keeps the token-weighting arithmetic of the lessons easy to follow.
    """

    def __init__(self, vocab_size: int, dim: int = 32, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab_size, dim)
            self.hidden = nn.Linear(dim, dim)
            self.out = nn.Linear(dim, vocab_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(self.embed(input_ids))))


class DigitsTransformer(nn.Module):
    """A small transformer encoder for the 8x8 digits: each image row is a token.

    ``[B, 64] float -> [B, 10]`` logits: rows ``[B, 8, 8]`` -> ``Linear(8, width)`` + learned positions ->
    ``depth`` x ``nn.TransformerEncoderLayer(width, heads, 2*width, dropout=0, batch_first=True)`` (each initialised
    on its own, in an ``nn.ModuleList``) -> mean over the 8 tokens -> ``Linear(width, 10)``.

    Raises:
        ValueError: ``depth < 1`` or ``width`` not a multiple of ``heads``.
    """

    def __init__(self, width: int = 64, depth: int = 2, heads: int = 4) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if width % heads:
            raise ValueError(f"width must be a multiple of heads={heads}, got {width}")
        self.embed = nn.Linear(8, width)
        self.position = nn.Parameter(torch.zeros(8, width))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True) for _ in range(depth)
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x.reshape(x.shape[0], 8, 8)) + self.position
        for layer in self.layers:
            tokens = layer(tokens)
        return self.head(tokens.mean(dim=1))
