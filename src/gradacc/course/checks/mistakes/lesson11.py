"""Reference implementations of the misconceptions checks 11.1 and 11.2 recognise
(``gradacc.course.checks.mistakes``): 11.1's are ``reference_window_plan`` with one thing changed, beside the right
``reference_count_items`` (a learner whose count is wrong fails before the plan, with another detail)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ..lesson11 import reference_count_items, reference_window_plan
from . import mistake, register


def _plan(change):
    def window_plan(b, m, a, w, reduction, scale_grads, global_items, equal_items):
        plan = reference_window_plan(b, m, a, w, reduction, scale_grads, global_items, equal_items)
        return change(plan, b=b, m=m, a=a, w=w, reduction=reduction, scale_grads=scale_grads, items=global_items)

    return {"window_plan": window_plan, "count_items": reference_count_items}


def _sum_without_w(plan, w, reduction, **_):
    if reduction == "sum" and plan["loss_factor"] is not None:
        plan["loss_factor"] /= w
    return plan


def _one_rank(plan, w, **_):
    plan["effective_batch_size"] //= w
    return plan


def _divided_by_w(plan, w, **_):
    if plan["loss_factor"] is not None:
        plan["loss_factor"] /= w
    return plan


def _mean_taken_as_exact(plan, m, a, reduction, scale_grads, **_):
    if reduction == "mean" and plan["loss_factor"] is None and not (scale_grads and a > 1 and m > 1):
        plan["loss_factor"] = (m if scale_grads else 1) / (m * a)
    return plan


def _divided_again_by_m(plan, m, scale_grads, **_):
    if scale_grads and plan["loss_factor"] is not None:
        plan["loss_factor"] /= m
    return plan


def _sum_as_mean(plan, m, a, reduction, scale_grads, **_):
    if reduction == "sum" and plan["loss_factor"] is not None:
        plan["loss_factor"] = (m if scale_grads else 1) / (m * a)
    return plan


def _constant_despite_scale_grads(plan, m, a, w, reduction, scale_grads, items, **_):
    if scale_grads and a > 1 and m > 1:
        plan["loss_factor"] = m * w / items if reduction == "sum" else 1.0 / a
    return plan


def _count_without_shift(micro_batches, shifts_labels):
    """Every label that is not -100, as if no model shifted its labels."""
    return [int((batch["labels"] != -100).sum()) for batch in micro_batches]


register("11.1", "no-label-shift", {"window_plan": reference_window_plan, "count_items": _count_without_shift})
register("11.1", "ddp-average-forgotten", _plan(_sum_without_w))
register("11.1", "schedule-divides-already", _plan(_divided_again_by_m))
register("11.1", "sum-treated-as-mean", _plan(_sum_as_mean))


def _sum_despite_scale_grads(plan, m, a, w, reduction, scale_grads, items, **_):
    """The same belief for a summed loss only (a learner who knows a mean loss has no constant there)."""
    if reduction == "sum":
        return _constant_despite_scale_grads(
            plan, m=m, a=a, w=w, reduction=reduction, scale_grads=scale_grads, items=items
        )
    return plan


register("11.1", "scale-grads-divides-all", _plan(_constant_despite_scale_grads))
register("11.1", "scale-grads-divides-all", _plan(_sum_despite_scale_grads))
register("11.1", "one-rank-effective-batch", _plan(_one_rank))
register("11.1", "ddp-divides-already", _plan(_divided_by_w))
register("11.1", "mean-of-means", _plan(_mean_taken_as_exact))


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
