"""PyTorch Lightning's ``Trainer(accumulate_grad_batches=N)``, measured (lesson 10, section 5).

What pytorch-lightning 2.6.6 does (read from its source; the same in every 2.6 release):

* **who divides, by what**: the loss ``training_step`` returns is divided by ``accumulate_grad_batches`` before
  ``backward`` (``ClosureResult.from_training_step_output(..., normalize)``, ``loops/optimization/automatic.py:81-83``,
  called with ``trainer.accumulate_grad_batches`` at line 329), in every window, the short last one included
  (Lightning-AI/pytorch-lightning#19987: a last window of 2 batches at N = 4 gives half the update);
* **when it steps**: when ``batches seen % N == 0`` or on the epoch's last batch
  (``_should_accumulate``, ``loops/training_epoch_loop.py:438-454``); an epoch shorter than N therefore steps once per
  epoch over all its batches, still divided by N, and 2.6.6 says nothing (#21808; the warning of PR #21811 came later).

``fit`` runs a real ``pytorch_lightning.Trainer`` on CPU and records the accumulated gradient before every optimizer
step; ``mean_loss`` is what Lightning's examples write, ``short_window_fix`` the fix for windows of equal
micro-batches (Lightning's division by N undone for the window's real size).
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..foundations.accumulation import count_items
from . import check_item_counts, probe_batches, probe_loss_sum, probe_model, probe_weights, windows

__all__ = [
    "quiet_lightning",
    "LitRun",
    "mean_loss",
    "short_window_fix",
    "window_of",
    "make_module",
    "fit",
    "lightning_weights",
]

LossFn = Callable[[Any, Any, int], torch.Tensor]
"""``loss_fn(module, batch, batch_idx)``: the loss ``training_step`` returns for one micro-batch (Lightning then
divides it by ``accumulate_grad_batches``)."""

# torch 2.13 deprecates a pytree name Lightning 2.6 still uses; noise in a lesson's output, harmless
_NOISE = ("`isinstance(treespec, LeafSpec)` is deprecated",)


def quiet_lightning() -> None:
    """Silence Lightning's info lines ("GPU available: False, used: False", ...) for cells whose output is read."""
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)


def window_of(batch_idx: int, num_batches: int, accum_steps: int) -> range:
    """The micro-batch indices of the window holding ``batch_idx`` in an epoch of ``num_batches`` (the last window
    may be shorter; ``gradacc.stacks.windows``).

    Raises:
        ValueError: ``batch_idx`` outside ``range(num_batches)``, or bad counts.
    """
    if not 0 <= batch_idx < num_batches:
        raise ValueError(f"batch_idx must be in range({num_batches}), got {batch_idx}")
    return windows(num_batches, accum_steps)[batch_idx // accum_steps]


def mean_loss(module: Any, batch: Any, batch_idx: int) -> torch.Tensor:
    """What Lightning's examples return from ``training_step``: the micro-batch's MEAN loss (cross-entropy, or the
    weight probe's ``-w[k]``). Lightning divides it by N: right only for full windows of equal micro-batches."""
    inputs, labels = batch
    if isinstance(module.model, nn.Linear) and module.model.out_features == 1:  # the weight probe
        return probe_loss_sum(module.model, batch) / len(labels)
    return F.cross_entropy(module.model(inputs), labels)


def short_window_fix(module: Any, batch: Any, batch_idx: int) -> torch.Tensor:
    """The fix for the short last window (#19987) and for an epoch shorter than N (#21808): ``mean_loss`` times
    ``accumulate_grad_batches / (micro-batches the window really holds)``, so Lightning's division by N becomes a
    division by the window's real size. Right when the micro-batches hold equal numbers of items; unequal ones need
    the window's items instead (the lesson's exercise 10.2)."""
    trainer = module.trainer
    window = window_of(batch_idx, trainer.num_training_batches, trainer.accumulate_grad_batches)
    return mean_loss(module, batch, batch_idx) * trainer.accumulate_grad_batches / len(window)


@dataclass
class LitRun:
    """What one ``fit`` did: ``grads`` holds, per optimizer step, the accumulated gradient of every parameter just
    before ``optimizer.step()``; ``micro_steps`` the batch indices of each window; ``warnings`` every warning message
    raised during ``fit`` (a torch 2.13 pytree deprecation aside)."""

    grads: list[list[torch.Tensor]] = field(default_factory=list)
    micro_steps: list[list[int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def optimizer_steps(self) -> int:
        return len(self.grads)


def _module_class():
    import pytorch_lightning as pl

    class AccumulatingModule(pl.LightningModule):
        """A ``LightningModule`` around ``model`` whose ``training_step`` returns ``loss_fn(self, batch, batch_idx)``
        and which records the accumulated gradient before each optimizer step (SGD, learning rate ``lr``)."""

        def __init__(self, model: nn.Module, loss_fn: LossFn, lr: float, item_counts: Sequence[int] | None) -> None:
            super().__init__()
            self.model = model
            self.loss_fn = loss_fn
            self.lr = lr
            self.item_counts = list(item_counts) if item_counts is not None else None
            self.record = LitRun()
            self._window: list[int] = []

        def training_step(self, batch, batch_idx):
            self._window.append(batch_idx)
            return self.loss_fn(self, batch, batch_idx)

        def on_before_optimizer_step(self, optimizer) -> None:
            grads = [p.grad.detach().clone() for p in self.model.parameters()]
            self.record.grads.append(grads)
            self.record.micro_steps.append(self._window)
            self._window = []

        def configure_optimizers(self):
            return torch.optim.SGD(self.model.parameters(), lr=self.lr)

    return AccumulatingModule


def make_module(model: nn.Module, loss_fn: LossFn = mean_loss, *, lr: float = 0.1, item_counts=None):
    """A ``LightningModule`` training ``model`` with SGD at ``lr``; ``training_step`` returns
    ``loss_fn(module, batch, batch_idx)``; ``module.item_counts`` holds ``item_counts``, the items of every micro-batch of the epoch
    in order (a ``loss_fn`` that weighs items by their window needs them)."""
    return _module_class()(model, loss_fn, lr, item_counts)


def fit(module, batches: Sequence[Any], accum_steps: int, *, epochs: int = 1) -> LitRun:
    """Train ``module`` on ``batches`` (one micro-batch each, in order) for ``epochs`` epochs with a real
    ``pytorch_lightning.Trainer(accumulate_grad_batches=accum_steps)`` on the CPU, silently; returns the module's
    ``LitRun``.

    Raises:
        ValueError: ``accum_steps`` < 1 or ``epochs`` < 1.
    """
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    if accum_steps < 1 or epochs < 1:
        raise ValueError(f"accum_steps and epochs must be >= 1, got {accum_steps} and {epochs}")
    quiet_lightning()
    loader = DataLoader(list(batches), batch_size=None, shuffle=False)
    with tempfile.TemporaryDirectory(prefix="gradacc-lightning-") as root, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer = pl.Trainer(
            max_epochs=epochs,
            accumulate_grad_batches=accum_steps,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
        )
        trainer.fit(module, loader)
    module.record.warnings = [str(w.message) for w in seen if not str(w.message).startswith(_NOISE)]
    return module.record


def lightning_weights(item_counts: Sequence[int], accum_steps: int, loss_fn: LossFn = mean_loss) -> list[float]:
    """The weight probe (``gradacc.stacks``) trained for one epoch by Lightning at ``accumulate_grad_batches =
    accum_steps``, ``training_step`` returning ``loss_fn``: the weight each micro-batch got in its update."""
    counts = check_item_counts(item_counts)
    model = probe_model(len(counts))
    module = make_module(model, loss_fn, lr=1.0, item_counts=[count_items(b) for b in probe_batches(counts)])
    fit(module, probe_batches(counts), accum_steps)
    return probe_weights(model)
