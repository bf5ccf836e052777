"""Gradient accumulation with Hugging Face Accelerate: the lesson-04 loop, and the state reset notebooks need.

``Accelerator(gradient_accumulation_steps=N)`` plus ``with accelerator.accumulate(model):`` is Accelerate's way to
accumulate. Inside the context, ``accelerator.sync_gradients`` is true on every N-th micro-batch and on the last batch
of the dataloader; the prepared optimizer's ``step``/``zero_grad`` do nothing on the other micro-batches, and
``accelerator.backward`` divides the loss by N (so a short final window is divided by N too: its update is
``n_real / N`` of the mean-gradient update). Facts measured with accelerate 1.15 (see FACTS.md and lesson 04).

Accelerate's state (``AcceleratorState``, ``GradientState``) is process-wide: a second ``Accelerator`` silently
reconfigures the first, and an interrupted loop leaves ``sync_gradients`` behind. ``reset_accelerate_state`` clears
it between demos in a notebook.

The same loop runs under ``accelerate launch`` through ``python -m gradacc.workers.accelerate_train`` (see that module).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..foundations.data import check_accum_steps, digits_loader, load_digits_tensors
from ..foundations.models import make_digits_model

__all__ = [
    "reset_accelerate_state",
    "micro_batch_sizes",
    "window_items",
    "AccelerateRun",
    "train_with_accelerate",
    "NORMALIZATIONS",
    "WEIGHT_DTYPES",
    "write_result",
    "read_result",
    "unequal_items_window",
]

NORMALIZATIONS: tuple[str, ...] = ("mean", "items")
"""How ``train_with_accelerate`` scales each micro-batch loss before ``accelerator.backward`` (which divides by N):

* ``"mean"``: the micro-batch mean loss, as Accelerate's docs do. A final window of ``n_real < N`` micro-batches gets
  ``n_real / N`` of the mean-gradient update.
* ``"items"``: the micro-batch SUM of losses times ``N / items_in_window``: after Accelerate's division by N every
  window, short or not, is divided by its real number of samples (the rule of lesson 01).
"""


def reset_accelerate_state() -> None:
    """Clear Accelerate's process-wide state so the next ``Accelerator`` starts fresh (call it before making one).

    Accelerate keeps its configuration in process-wide "shared state" classes whose instances all share one dict:
    ``PartialState`` (processes, device), ``AcceleratorState`` (mixed precision, distributed type) and
    ``GradientState`` (``num_steps`` = accumulation steps, ``sync_gradients``, the active dataloader). In a notebook,
    where cells are re-run and loops are interrupted, that bites three ways (measured with accelerate 1.15, see
    tests/test_accel.py):

    * an ``Accelerator`` made while another is alive reconfigures it: after ``a = Accelerator(gradient_accumulation_
      steps=4)`` and ``b = Accelerator(gradient_accumulation_steps=2)``, ``a.gradient_accumulation_steps`` is 2.
      Resetting does NOT separate them (they still share the dict): make each ``Accelerator`` right before its own
      loop and do not reuse an old one after making a new one;
    * a loop stopped inside ``accumulate()`` before a sync step leaves ``sync_gradients = False`` behind, and the next
      ``Accelerator``'s prepared optimizer silently skips ``step()`` outside ``accumulate()``. Resetting fixes it;
    * an ``Accelerator`` with a different ``mixed_precision`` (or ``cpu``) raises ``ValueError: AcceleratorState has
      already been initialized and cannot be changed``. Resetting fixes it.

    It calls ``AcceleratorState._reset_state(reset_partial_state=True)`` and ``GradientState._reset_state()``: PRIVATE
    Accelerate API (their docstrings say "should not be called"; Accelerate's own tests use them), checked against
    accelerate 1.15; a later release may rename them. Do not call it inside a script started by ``accelerate launch``
    once training has started (the process group survives, but the ranks' bookkeeping is dropped).

    Source: ``accelerate/state.py`` (the ``_shared_state`` dict of each class).
    """
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def micro_batch_sizes(n_samples: int, micro_batch_size: int, *, drop_last: bool = False) -> list[int]:
    """Samples in each micro-batch of one epoch of a ``DataLoader`` over ``n_samples`` samples (no sampler surprises).

    Example: ``micro_batch_sizes(10, 4) == [4, 4, 2]``; with ``drop_last=True``: ``[4, 4]``.

    Raises:
        ValueError: ``n_samples < 0`` or ``micro_batch_size < 1``.
    """
    if n_samples < 0:
        raise ValueError(f"n_samples must be >= 0, got {n_samples}")
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    sizes = [micro_batch_size] * (n_samples // micro_batch_size)
    if n_samples % micro_batch_size and not drop_last:
        sizes.append(n_samples % micro_batch_size)
    return sizes


def window_items(sizes: list[int], accum_steps: int) -> list[int]:
    """Samples per accumulation window when an epoch's micro-batches (``sizes``) are cut into windows of N.

    The last window may hold fewer than N micro-batches (Accelerate still steps there: it syncs at the end of the
    dataloader). Example: ``window_items([16] * 10, 4) == [64, 64, 32]``.

    Raises:
        ValueError: bad ``accum_steps`` (see ``gradacc.foundations.data.check_accum_steps``).
    """
    check_accum_steps(accum_steps)
    return [sum(sizes[i : i + accum_steps]) for i in range(0, len(sizes), accum_steps)]


@dataclass
class AccelerateRun:
    """What ``train_with_accelerate`` returns.

    Attributes:
        state_dict: final weights, detached CPU copies (``float32`` or the ``dtype`` asked for), keyed as the model's.
        history: one dict per micro-step: ``epoch`` and ``micro_step`` (1-based, counted over the whole run),
            ``sync_gradients`` (bool), ``optimizer_stepped`` (bool: the real optimizer's ``step`` ran, seen by a
            ``register_step_post_hook``), ``lr`` (learning rate in the param group during this micro-step),
            ``loss`` (the micro-batch MEAN loss on this process, a float), ``samples`` (in this process's micro-batch),
            ``grad_norm`` (L2 norm of the accumulated gradient before clipping on sync steps, else ``None``).
        optimizer_steps: real optimizer steps taken.
        num_processes: ``accelerator.num_processes``.
        effective_batch_size: micro_batch_size x accum_steps x num_processes (samples per full window).
        model: the trained model, unwrapped, on the accelerator's device.
        step_weights: with ``keep_step_weights=True``, the weights (CPU copies) before training and after each real
            optimizer step (``optimizer_steps + 1`` dicts); else empty.
    """

    state_dict: dict[str, torch.Tensor]
    history: list[dict[str, Any]]
    optimizer_steps: int
    num_processes: int
    effective_batch_size: int
    model: nn.Module = field(repr=False)
    step_weights: list[dict[str, torch.Tensor]] = field(default_factory=list, repr=False)


def _grad_norm(model: nn.Module) -> float:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))


def train_with_accelerate(
    accum_steps: int,
    *,
    micro_batch_size: int = 16,
    n_samples: int | None = 640,
    epochs: int = 1,
    lr: float = 0.1,
    seed: int = 0,
    hidden: int = 32,
    dtype: torch.dtype = torch.float32,
    max_norm: float | None = None,
    normalize: str = "mean",
    sync_with_dataloader: bool = True,
    split_batches: bool = False,
    scheduler_fn: Callable[[torch.optim.Optimizer], Any] | None = None,
    cpu: bool = False,
    reset_state: bool = True,
    on_micro_step: Callable[[dict[str, Any]], None] | None = None,
    keep_step_weights: bool = False,
) -> AccelerateRun:
    """Train ``make_digits_model`` with plain SGD on the digits, accumulating with Accelerate (the lesson-04 loop).

    The loop is the lesson-02 loop rewritten for Accelerate::

        accelerator = Accelerator(gradient_accumulation_steps=accum_steps)
        model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
        for inputs, labels in loader:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(inputs), labels)   # normalize="mean"
                accelerator.backward(loss)                      # divides by accum_steps
                if accelerator.sync_gradients and max_norm:
                    accelerator.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()       # a no-op unless accelerator.sync_gradients
                scheduler.step()       # advances once per real optimizer step
                optimizer.zero_grad()  # a no-op unless accelerator.sync_gradients

    Data: ``gradacc.foundations.data.digits_loader(micro_batch_size, seed=seed, n_samples=n_samples)`` (shuffled,
    seeded), the same loader lesson 02 uses, so with equal micro-batch sizes the final weights match
    ``gradacc.foundations.accumulation.train_accumulated`` on the same batches to float rounding (about 1e-8 in
    float32).

    Under ``accelerate launch`` with W processes the prepared loader gives each process its own micro-batches of
    ``micro_batch_size`` samples (``split_batches=False``: global micro-batch = W x micro_batch_size, made of W
    consecutive loader batches) or splits each loader batch into W parts (``split_batches=True``: global micro-batch =
    ``micro_batch_size``). DDP averages gradients over processes. A run with W processes and ``split_batches=True``
    therefore matches one process with the same arguments (choose ``micro_batch_size`` divisible by W and
    ``n_samples`` divisible by ``micro_batch_size``, so no process gets padded or duplicated samples).

    Args:
        accum_steps: N, micro-batches per optimizer step (>= 1).
        micro_batch_size: samples per loader batch.
        n_samples: digits used (first ``n_samples`` of the 1,797; ``None`` for all).
        epochs: passes over the data.
        lr: SGD learning rate (no momentum, no weight decay).
        seed: seeds the model's initial weights and the loader's shuffling.
        hidden: hidden width of the MLP.
        dtype: parameter and input dtype (``torch.float32`` or ``torch.float64``).
        max_norm: clip the accumulated gradient's L2 norm with ``accelerator.clip_grad_norm_`` on sync steps only.
        normalize: ``"mean"`` or ``"items"`` (see ``NORMALIZATIONS``); ``"items"`` needs a single process.
        sync_with_dataloader: ``False`` passes ``GradientAccumulationPlugin(sync_with_dataloader=False)``: no forced
            step at the end of each epoch; windows run across the epoch boundary; a short window at the very end of
            training leaves its gradient unapplied.
        split_batches: passed to ``Accelerator`` through ``DataLoaderConfiguration`` (see above).
        scheduler_fn: builds a learning-rate scheduler from the (unprepared) optimizer; it is prepared too.
        cpu: force the CPU even if a GPU is present.
        reset_state: call ``reset_accelerate_state()`` first (leave ``True`` in notebooks).
        on_micro_step: called with each micro-step's history record as soon as it is made.
        keep_step_weights: keep a CPU copy of the weights before training and after every optimizer step.

    Returns:
        An ``AccelerateRun`` (final weights, per-micro-step history, counts).

    Raises:
        ValueError: bad ``accum_steps``, ``epochs < 1``, an unknown ``normalize``, ``normalize="items"`` with more
            than one process, or ``normalize="items"`` together with ``sync_with_dataloader=False`` (windows then
            cross epochs and the per-epoch count below no longer applies).
    """
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, GradientAccumulationPlugin

    check_accum_steps(accum_steps)
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    if normalize == "items" and not sync_with_dataloader:
        raise ValueError("normalize='items' counts samples per epoch window; use it with sync_with_dataloader=True")
    if reset_state:
        reset_accelerate_state()
    plugin = GradientAccumulationPlugin(num_steps=accum_steps, sync_with_dataloader=sync_with_dataloader)
    # split_batches goes through DataLoaderConfiguration: accelerate 1.15 still accepts Accelerator(split_batches=...)
    # but ignores it.
    accelerator = Accelerator(
        gradient_accumulation_plugin=plugin,
        dataloader_config=DataLoaderConfiguration(split_batches=split_batches),
        cpu=cpu,
    )
    if normalize == "items" and accelerator.num_processes > 1:
        raise ValueError(
            f"normalize='items' is implemented for one process, got {accelerator.num_processes}; "
            "use normalize='mean' with equal micro-batch sizes under accelerate launch"
        )

    model = make_digits_model(seed=seed, dtype=dtype, hidden=hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    steps_taken = [0]
    optimizer.register_step_post_hook(lambda *_: steps_taken.__setitem__(0, steps_taken[0] + 1))
    loader = digits_loader(micro_batch_size, seed=seed, n_samples=n_samples, dtype=dtype)
    n_used = len(loader.dataset)
    items_per_window = window_items(micro_batch_sizes(n_used, micro_batch_size), accum_steps)
    scheduler = scheduler_fn(optimizer) if scheduler_fn is not None else None
    if scheduler is not None:
        model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    else:
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    history: list[dict[str, Any]] = []
    step_weights: list[dict[str, torch.Tensor]] = []

    def snapshot() -> None:
        if keep_step_weights:
            weights = accelerator.unwrap_model(model).state_dict()
            step_weights.append({k: v.detach().to("cpu", copy=True) for k, v in weights.items()})

    snapshot()
    for epoch in range(1, epochs + 1):
        for batch_index, (inputs, labels) in enumerate(loader):
            with accelerator.accumulate(model):
                lr_now = float(optimizer.param_groups[0]["lr"])
                logits = model(inputs)
                mean_loss = F.cross_entropy(logits, labels)
                if normalize == "mean":
                    loss = mean_loss
                else:  # sum / items_in_window, pre-multiplied by N because accelerator.backward divides by N
                    items = items_per_window[batch_index // accum_steps]
                    loss = F.cross_entropy(logits, labels, reduction="sum") * (accum_steps / items)
                accelerator.backward(loss)
                grad_norm = None
                if accelerator.sync_gradients:
                    grad_norm = _grad_norm(model)
                    if max_norm is not None:
                        accelerator.clip_grad_norm_(model.parameters(), max_norm)
                before = steps_taken[0]
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                optimizer.zero_grad()
                record = {
                    "epoch": epoch,
                    "micro_step": len(history) + 1,
                    "sync_gradients": bool(accelerator.sync_gradients),
                    "optimizer_stepped": steps_taken[0] > before,
                    "lr": lr_now,
                    "loss": float(mean_loss.detach()),
                    "samples": int(labels.shape[0]),
                    "grad_norm": grad_norm,
                }
                history.append(record)
                if record["optimizer_stepped"]:
                    snapshot()
                if on_micro_step is not None:
                    on_micro_step(record)

    unwrapped = accelerator.unwrap_model(model)
    state = {k: v.detach().to("cpu", copy=True) for k, v in unwrapped.state_dict().items()}
    world = accelerator.num_processes
    run = AccelerateRun(
        state_dict=state,
        history=history,
        optimizer_steps=steps_taken[0],
        num_processes=world,
        effective_batch_size=micro_batch_size * accum_steps * (1 if split_batches else world),
        model=unwrapped,
        step_weights=step_weights,
    )
    return run


WEIGHT_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def unequal_items_window(cpu: bool = False) -> dict[str, Any]:
    """One window of 2 micro-batches per process with UNEQUAL numbers of samples on the processes (process ``r``: ``3 +
    5r`` and ``5 + 3r`` digits), weighted by the items of the window on ALL processes; returns how far the
    gradient Accelerate leaves is from the mean gradient over every sample of the window.

    Each micro-batch's summed loss is multiplied by ``N / count``, ``count = accelerator.reduce(local items, "sum")``
    (the window's items on all processes; ``N`` undoes ``accelerator.backward``'s division), once also by
    ``accelerator.num_processes`` (the DDP model ``accelerator.prepare`` makes averages the processes' gradients)
    and once not. Run it on every process after the others' ``Accelerator`` exists (it makes its own, with
    ``gradient_accumulation_steps=2``; Accelerate's state is process-wide, see ``reset_accelerate_state``).

    Returns:
        ``{"num_processes", "items_per_process" (list), "gap_times_processes", "gap_without"}``: the max |g - g_full|
        of each recipe (float32), the same on every process.
    """
    from accelerate import Accelerator
    from accelerate.state import GradientState

    GradientState._reset_state()  # a training loop before this one may have left its dataloader registered
    accelerator = Accelerator(gradient_accumulation_steps=2, cpu=cpu)
    world, rank = accelerator.num_processes, accelerator.process_index
    sizes = [[3 + 5 * r, 5 + 3 * r] for r in range(world)]
    x, y = load_digits_tensors()
    total = sum(map(sum, sizes))
    full = make_digits_model(seed=0)
    F.cross_entropy(full(x[:total]), y[:total]).backward()
    start = sum(map(sum, sizes[:rank]))
    bounds = [start, start + sizes[rank][0], start + sum(sizes[rank])]
    micro_batches = [(x[a:b], y[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    result: dict[str, Any] = {"num_processes": world, "items_per_process": [sum(s) for s in sizes]}
    for key, factor in (("gap_times_processes", world), ("gap_without", 1)):
        model = accelerator.prepare(make_digits_model(seed=0))
        count = accelerator.reduce(torch.tensor([float(sum(sizes[rank]))], device=accelerator.device), "sum")
        for inputs, labels in micro_batches:
            with accelerator.accumulate(model):
                logits = model(inputs.to(accelerator.device))
                loss = F.cross_entropy(logits, labels.to(accelerator.device), reduction="sum") * 2 / count
                accelerator.backward(loss * factor)
        grads = [p.grad.detach().cpu() for p in accelerator.unwrap_model(model).parameters()]
        result[key] = max(float((g - w.grad).abs().max()) for g, w in zip(grads, full.parameters(), strict=True))
    return result


def write_result(path: Path, run: AccelerateRun, args: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Write a run's arguments, counts, rank-0 history and final weights to ``path`` as JSON (parents created), and
    the keys of ``extra``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "args": args,
        "num_processes": run.num_processes,
        "effective_batch_size": run.effective_batch_size,
        "optimizer_steps": run.optimizer_steps,
        "history": run.history,
        "weights": {name: t.tolist() for name, t in run.state_dict.items()},
        "weights_dtype": str(next(iter(run.state_dict.values())).dtype).removeprefix("torch."),
        **(extra or {}),
    }
    path.write_text(json.dumps(payload), encoding="utf-8")


def read_result(path: Path) -> dict[str, Any]:
    """Read a file written by ``write_result``; ``"weights"`` come back as tensors of the saved dtype."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    dtype = WEIGHT_DTYPES[payload.get("weights_dtype", "float32")]
    payload["weights"] = {name: torch.tensor(value, dtype=dtype) for name, value in payload["weights"].items()}
    return payload
