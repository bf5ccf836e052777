"""Keras 3's ``optimizer(gradient_accumulation_steps=N)`` on the torch backend, measured (lesson 10, section 6).

What Keras does (``keras/src/optimizers/base_optimizer.py``, the same lines in 3.15.1, the pins, and 3.13.2,
Colab's):

* **what it counts**: calls of ``optimizer.apply`` (one per batch of ``fit``/``train_on_batch``) in
  ``optimizer._iterations``; ``optimizer.iterations`` is that count floor-divided by N (lines 196-202);
* **who divides, by what**: each batch's gradient (of the batch's MEAN loss) is added to an accumulator; every N-th
  call applies ``(g + accumulated) / N`` (lines 563-568) and resets the accumulators. Micro-batches of unequal sizes
  therefore weigh 1/N each, not by their items;
* **when it steps**: when ``(_iterations + 1) % N == 0`` (lines 551-554), whatever the epoch: a window is never closed
  early. A short last window of an epoch continues into the next epoch; after the last epoch its gradients stay in the
  accumulators, unapplied (and a later ``fit`` call picks them up).

The JAX backend's optimizer (``keras/src/backend/jax/optimizer.py:16-46``) divides by N the same way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ..i18n import _
from . import check_item_counts, probe_batches

__all__ = [
    "keras_on_torch",
    "probe_weights_keras",
    "keras_digits_model",
    "torch_weights",
    "fit_keras",
    "window_sample_weights",
    "pending_gradient_norm",
]


def keras_on_torch():
    """Import Keras 3 on its torch backend and return the module.

    Keras reads its backend once, at import (``KERAS_BACKEND``; Colab's default is TensorFlow): this sets
    ``KERAS_BACKEND=torch`` first when Keras is not imported yet.

    Raises:
        RuntimeError: Keras is already imported on another backend (restart the kernel, or set ``KERAS_BACKEND=torch``
            before anything imports it).
    """
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "torch"
    import keras

    if keras.backend.backend() != "torch":
        raise RuntimeError(
            f"Keras is already imported on the {keras.backend.backend()!r} backend; the course runs it on 'torch': "
            "restart the kernel (or set KERAS_BACKEND=torch before importing keras)"
        )
    return keras


class _Batches:
    """A ``keras.utils.PyDataset`` over fixed micro-batches (made lazily: Keras must be imported first)."""

    def __new__(cls, batches: Sequence[tuple]):
        keras = keras_on_torch()

        class Batches(keras.utils.PyDataset):
            def __init__(self, items):
                super().__init__()
                self.items = list(items)

            def __len__(self):
                return len(self.items)

            def __getitem__(self, index):
                return self.items[index]

        return Batches(batches)


def _numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def fit_keras(
    model: Any,
    batches: Sequence[tuple],
    accum_steps: int,
    *,
    lr: float,
    loss: Any = None,
    sample_weights: Sequence[float] | None = None,
    epochs: int = 1,
) -> dict[str, Any]:
    """Compile ``model`` with ``keras.optimizers.SGD(learning_rate=lr, gradient_accumulation_steps=accum_steps)`` and
    fit it on ``batches`` (``(inputs, labels)`` pairs, one micro-batch each, in order) for ``epochs`` epochs, silently.

    Args:
        loss: a Keras loss (default ``SparseCategoricalCrossentropy(from_logits=True)``: the mean over the batch).
        sample_weights: one weight per micro-batch, given to every sample of it (Keras multiplies each sample's loss
            by it before taking the batch's mean).

    Returns:
        ``{"optimizer": the optimizer, "updates": optimizer.iterations (int), "micro_steps": batches applied (int),
        "pending_norm": the L2 norm of the gradients waiting in the accumulators (float)}``.

    Raises:
        ValueError: ``accum_steps < 2`` (Keras's own limit) or ``sample_weights`` of the wrong length.
    """
    keras = keras_on_torch()
    if accum_steps < 2:
        raise ValueError(f"Keras needs gradient_accumulation_steps >= 2, got {accum_steps}")
    if sample_weights is not None and len(sample_weights) != len(batches):
        raise ValueError(
            f"give one sample weight per micro-batch: {len(batches)} batches, {len(sample_weights)} weights"
        )
    items = []
    for k, (inputs, labels) in enumerate(batches):
        x, y = _numpy(inputs).astype("float32"), _numpy(labels)
        if sample_weights is None:
            items.append((x, y))
        else:
            items.append((x, y, np.full(len(y), sample_weights[k], dtype="float32")))
    optimizer = keras.optimizers.SGD(learning_rate=lr, gradient_accumulation_steps=accum_steps)
    model.compile(optimizer=optimizer, loss=loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(_Batches(items), epochs=epochs, verbose=0, shuffle=False)
    return {
        "optimizer": optimizer,
        "updates": int(keras.ops.convert_to_numpy(optimizer.iterations)),
        "micro_steps": int(keras.ops.convert_to_numpy(optimizer._iterations)),
        "pending_norm": pending_gradient_norm(optimizer),
    }


def pending_gradient_norm(optimizer: Any) -> float:
    """The L2 norm of the gradient sum waiting in a Keras optimizer's accumulators (0.0 right after an update)."""
    keras = keras_on_torch()
    total = 0.0
    for accumulator in getattr(optimizer, "_accumulated_gradients", []) or []:
        if accumulator is not None:
            total += float((keras.ops.convert_to_numpy(accumulator.value) ** 2).sum())
    return total**0.5


def probe_weights_keras(item_counts: Sequence[int], accum_steps: int, *, epochs: int = 1) -> list[float]:
    """The weight probe (``gradacc.stacks``) trained by Keras's ``fit`` with ``SGD(learning_rate=1,
    gradient_accumulation_steps=accum_steps)``, the per-sample loss ``-w[k]`` averaged over each batch as Keras does:
    the weight each micro-batch got in its update (0 for a window never applied)."""
    keras = keras_on_torch()
    counts = check_item_counts(item_counts)
    model = keras.Sequential(
        [keras.Input((len(counts),)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")]
    )
    fit_keras(
        model, probe_batches(counts), accum_steps, lr=1.0, loss=lambda y_true, y_pred: -y_pred[:, 0], epochs=epochs
    )
    return [float(w) for w in keras.ops.convert_to_numpy(model.layers[-1].kernel.value).flatten()]


def keras_digits_model(torch_model: nn.Module) -> Any:
    """A Keras ``Sequential`` copy of a ``gradacc.foundations.models.DigitsMLP`` without normalization or dropout: the
    same ``Dense`` layers (ReLU between them) holding the same weights (Keras stores a kernel as ``[in, out]``, PyTorch
    a ``Linear`` weight as ``[out, in]``).

    Raises:
        ValueError: the model holds layers other than ``Linear`` and ``ReLU``.
    """
    keras = keras_on_torch()
    layers = list(torch_model.net) if hasattr(torch_model, "net") else list(torch_model.children())
    if any(not isinstance(layer, nn.Linear | nn.ReLU) for layer in layers):
        raise ValueError("keras_digits_model copies Linear and ReLU layers only (build the model without norm/dropout)")
    linears = [layer for layer in layers if isinstance(layer, nn.Linear)]
    dense = [
        keras.layers.Dense(layer.out_features, activation="relu" if i < len(linears) - 1 else None)
        for i, layer in enumerate(linears)
    ]
    model = keras.Sequential([keras.Input((linears[0].in_features,)), *dense])
    for layer, linear in zip(dense, linears, strict=True):
        layer.set_weights([_numpy(linear.weight).T.copy(), _numpy(linear.bias).copy()])
    return model


def torch_weights(keras_model: Any) -> list[torch.Tensor]:
    """A Keras ``keras_digits_model``'s weights in PyTorch's layout and order (weight ``[out, in]``, then bias, per
    layer), float32 tensors, to compare with ``torch_model.parameters()``."""
    tensors = []
    for layer in keras_model.layers:
        kernel, bias = layer.get_weights()
        tensors += [torch.from_numpy(np.asarray(kernel).T.copy()), torch.from_numpy(np.asarray(bias).copy())]
    return tensors


def window_sample_weights(item_counts: Sequence[int], accum_steps: int) -> list[float]:
    """The sample weight that makes Keras weigh every item of a full window the same: ``accum_steps * n_k / W``.

    Keras takes each batch's mean of the weighted sample losses (dividing by ``n_k``) and divides the window's sum by
    N, so a weight of ``N * n_k / W`` leaves each item's loss divided by ``W``, the window's items.

    Raises:
        ValueError: the micro-batches do not fill whole windows (Keras never applies a short last window: no weight
            fixes that).
    """
    counts = check_item_counts(item_counts)
    if len(counts) % accum_steps:
        raise ValueError(
            _(
                "{count} micro-batches do not fill windows of {accum_steps}: Keras never applies the short last window "
                "(drop it, or make the number of batches a multiple of gradient_accumulation_steps)"
            ).format(count=len(counts), accum_steps=accum_steps)
        )
    weights = []
    for start in range(0, len(counts), accum_steps):
        window = counts[start : start + accum_steps]
        weights += [accum_steps * n / sum(window) for n in window]
    return weights
