"""Reference implementations of the misconceptions check 11.2 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from . import mistake


def _bf16(model, optimizer, windows, per_window_mean=False, step_each=False, one_context=False):
    outer = torch.autocast("cpu", dtype=torch.bfloat16) if one_context else contextlib.nullcontext()
    with outer:
        for window in windows:
            items = sum(len(labels) for _, labels in window)
            for inputs, labels in window:
                inner = contextlib.nullcontext() if one_context else torch.autocast("cpu", dtype=torch.bfloat16)
                with inner:
                    if per_window_mean:
                        loss = F.cross_entropy(model(inputs), labels) / len(window)
                    else:
                        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
                loss.backward()
                if step_each:
                    optimizer.step()
                    optimizer.zero_grad()
            if not step_each:
                optimizer.step()
                optimizer.zero_grad()


@mistake("11.2", "autocast-around-the-loop")
def bf16_one_context(model, optimizer, windows):
    _bf16(model, optimizer, windows, one_context=True)


@mistake("11.2", "mean-of-means")
def bf16_mean_of_means(model, optimizer, windows):
    _bf16(model, optimizer, windows, per_window_mean=True)


@mistake("11.2", "step-every-micro-batch")
def bf16_step_each(model, optimizer, windows):
    _bf16(model, optimizer, windows, step_each=True)
