"""Plausible wrong answers to exercises/05_trainer.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; F, torch and Trainer come from the import cell


# %% 5.1 no label shift: the token at t predicts itself
# misconception: no-label-shift
def causal_lm_loss(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), reduction="sum")
    if num_items_in_batch is None:
        num_items_in_batch = (labels != -100).sum()
    return loss / num_items_in_batch


# %% 5.1 num_items_in_batch ignored: the mean over this micro-batch's tokens
# misconception: num-items-ignored
def causal_lm_loss(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"][:, :-1, :]
    targets = labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)


# %% 5.1 the padding counted when Trainer gives no count
# misconception: padding-counted
def causal_lm_loss(outputs, labels, num_items_in_batch=None):
    logits = outputs["logits"][:, :-1, :]
    targets = labels[:, 1:]
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="sum", ignore_index=-100
    )
    if num_items_in_batch is None:
        num_items_in_batch = targets.numel()
    return loss / num_items_in_batch


# %% 5.2 a plain Trainer (its default loss)
# misconception: num-items-ignored
def make_fixed_trainer(model, args, train_dataset, data_collator):
    return Trainer(model=model, args=args, train_dataset=train_dataset, data_collator=data_collator)


# %% 5.2 a compute_loss_func that takes each micro-batch's mean (num_items_in_batch ignored)
# misconception: num-items-ignored
def make_fixed_trainer(model, args, train_dataset, data_collator):
    def mean_loss(outputs, labels, num_items_in_batch=None):
        return F.cross_entropy(outputs["logits"], labels)

    return Trainer(
        model=model, args=args, train_dataset=train_dataset, data_collator=data_collator, compute_loss_func=mean_loss
    )


# %% 5.2 dividing twice: by num_items_in_batch and by the accumulation steps
# misconception: divided-twice
def make_fixed_trainer(model, args, train_dataset, data_collator):
    def sum_over_window(outputs, labels, num_items_in_batch=None):
        loss = F.cross_entropy(outputs["logits"], labels, reduction="sum")
        if num_items_in_batch is None:
            num_items_in_batch = labels.numel()
        return loss / num_items_in_batch / args.gradient_accumulation_steps

    return Trainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        data_collator=data_collator,
        compute_loss_func=sum_over_window,
    )
