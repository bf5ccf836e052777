"""Reference implementations of the misconceptions check 5.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch.nn.functional as F

from . import mistake


def _token_loss(outputs, labels, num_items_in_batch, shift=True, mean=False, count_padding=False):
    logits = outputs["logits"]
    if shift:
        logits, labels = logits[:, :-1, :], labels[:, 1:]
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1)
    if mean:
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
    total = F.cross_entropy(flat_logits, flat_labels, reduction="sum", ignore_index=-100)
    if num_items_in_batch is None:
        num_items_in_batch = labels.numel() if count_padding else (labels != -100).sum()
    return total / num_items_in_batch


@mistake("5.1", "no-label-shift")
def loss_without_shift(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, shift=False)


@mistake("5.1", "num-items-ignored")
def loss_mean_of_the_micro_batch(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, mean=True)


@mistake("5.1", "padding-counted")
def loss_padding_counted(outputs, labels, num_items_in_batch=None):
    return _token_loss(outputs, labels, num_items_in_batch, count_padding=True)


def _trainer(model, args, train_dataset, data_collator, loss):
    from transformers import Trainer

    return Trainer(
        model=model, args=args, train_dataset=train_dataset, data_collator=data_collator, compute_loss_func=loss
    )


@mistake("5.2", "num-items-ignored")
def trainer_with_mean_loss(model, args, train_dataset, data_collator):
    def mean_loss(outputs, labels, num_items_in_batch=None):
        return F.cross_entropy(outputs["logits"], labels, reduction="sum") / labels.numel()

    return _trainer(model, args, train_dataset, data_collator, mean_loss)


@mistake("5.2", "divided-twice")
def trainer_divided_twice(model, args, train_dataset, data_collator):
    def loss_over_window_and_n(outputs, labels, num_items_in_batch=None):
        total = F.cross_entropy(outputs["logits"], labels, reduction="sum")
        return total / (num_items_in_batch or labels.numel()) / args.gradient_accumulation_steps

    return _trainer(model, args, train_dataset, data_collator, loss_over_window_and_n)
