"""Reference implementations of the misconceptions checks 4.1 and 4.2 recognise (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch.nn.functional as F

from . import mistake


def _epoch(accelerator, model, optimizer, loader, max_norm, divide_by_n=False, clip_each=False):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), labels)
            if divide_by_n:
                loss = loss / accelerator.gradient_accumulation_steps
            accelerator.backward(loss)
            if max_norm is not None and (clip_each or accelerator.sync_gradients):
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


@mistake("4.1", "clip-every-micro-step")
def epoch_clip_each(accelerator, model, optimizer, loader, max_norm):
    _epoch(accelerator, model, optimizer, loader, max_norm, clip_each=True)


@mistake("4.1", "accelerate-divides-already")
def epoch_divided_by_n(accelerator, model, optimizer, loader, max_norm):
    _epoch(accelerator, model, optimizer, loader, max_norm, divide_by_n=True)


@mistake("4.2", "full-window-divisor")
def scale_one(batch_index, n_batches, accum_steps):
    """Accelerate divides every window by N: a scale of 1 leaves a short window divided as if it were full."""
    return 1.0
