"""Plausible wrong answers to exercises/11_parallel.ipynb (docs/instructors/hidden-checks.md; tests/test_wrong_answers.py).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and F come from the import cell


# %% 11.1 the equal-micro-batch recipe (the old reference answer): global_items ignored, every item a sample
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    per_sample = 1.0 if loss_reduction == "mean" else 1.0 / micro_batch_size
    if scale_grads:
        factor = per_sample if step_calls == 1 else None
    else:
        factor = per_sample / (n_microbatches * step_calls)
    return {"effective_batch_size": micro_batch_size * n_microbatches * step_calls * world_size, "loss_factor": factor}


# %% 11.1 the global item count, but DDP's average over the ranks forgotten (no x W)
# misconception: ddp-average-forgotten
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 the hand-written loop's habit: loss / (M x A) whatever scale_grads does (divided twice by default)
# misconception: schedule-divides-already
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    per_sample = 1.0 if loss_reduction == "mean" else 1.0 / micro_batch_size
    return {
        "effective_batch_size": micro_batch_size * n_microbatches * step_calls * world_size,
        "loss_factor": per_sample / (n_microbatches * step_calls),
    }


# %% 11.1 the schedule divides by M, so the loss only by the step() calls (torchtitan's bug: a moving average)
# misconception: scale-grads-divides-all
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    per_sample = 1.0 if loss_reduction == "mean" else 1.0 / micro_batch_size
    divisor = step_calls if scale_grads else n_microbatches * step_calls
    return {
        "effective_batch_size": micro_batch_size * n_microbatches * step_calls * world_size,
        "loss_factor": per_sample / divisor,
    }


# %% 11.1 the effective batch of one rank (the data-parallel ranks forgotten)
# misconception: one-rank-effective-batch
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        factor = None
    elif loss_reduction == "sum":
        factor = (n_microbatches if scale_grads else 1) * world_size / global_items
    elif equal_items:
        factor = (n_microbatches if scale_grads else 1) / (n_microbatches * step_calls)
    else:
        factor = None
    return {"effective_batch_size": effective // world_size, "loss_factor": factor}


# %% 11.1 divided by the world size too (DDP already averages the ranks)
# misconception: ddp-divides-already
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    per_sample = 1.0 if loss_reduction == "mean" else 1.0 / micro_batch_size
    if scale_grads:
        factor = per_sample / world_size if step_calls == 1 else None
    else:
        factor = per_sample / (n_microbatches * step_calls * world_size)
    return {"effective_batch_size": micro_batch_size * n_microbatches * step_calls * world_size, "loss_factor": factor}


# %% 11.1 a summed loss treated like a mean (the micro-batch's samples not divided out)
# misconception: sum-treated-as-mean
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    if scale_grads:
        factor = 1.0 if step_calls == 1 else None
    else:
        factor = 1.0 / (n_microbatches * step_calls)
    return {"effective_batch_size": micro_batch_size * n_microbatches * step_calls * world_size, "loss_factor": factor}


# %% 11.1 a mean token loss taken as exact (each micro-batch's mean, / M x A, equal_items ignored)
# misconception: mean-of-means
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls)
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 equal items inferred from global_items == samples (packed sequences of one length graded None)
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if global_items == effective else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 a summed loss taken to survive scale_grads=True with A >= 2 (each step() divides ALL of .grad again)
# misconception: scale-grads-divides-all
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        return {"effective_batch_size": effective, "loss_factor": divided * world_size / global_items}
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 the sum divided by one step() call's items, not the optimizer step's (global_items / step_calls)
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / (global_items / step_calls)
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 TRL-packed rows of one length taken as equal (every token of a pack counted as an item)
def count_items(micro_batches, shifts_labels):
    return [batch["labels"].numel() for batch in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 the shift applied to 1-D sample labels too (labels[..., 1:] whatever the model: one sample of each dropped)
def count_items(micro_batches, shifts_labels):
    return [int((batch["labels"][..., 1:] != -100).sum()) for batch in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 no constant for A >= 2 step() calls with scale_grads, even at M = 1 (where the schedule divides by 1)
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 the shift forgotten: every label that is not -100 counted on a causal LM's rows (one item per row too many)
# misconception: no-label-shift
def count_items(micro_batches, shifts_labels):
    return [int((batch["labels"] != -100).sum()) for batch in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 the shift read from the labels' shape (2-D labels shifted, even for a model that reads each token alone)
def count_items(micro_batches, shifts_labels):
    return [
        int((b["labels"][..., 1:] if b["labels"].dim() == 2 else b["labels"]).ne(-100).sum()) for b in micro_batches
    ]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    else:
        factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.1 one micro-batch per rank (M = A = 1) taken as exact: a mean loss's factor 1 with different items per rank
def count_items(micro_batches, shifts_labels):
    return [int((b["labels"][..., 1:] if shifts_labels else b["labels"]).ne(-100).sum()) for b in micro_batches]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    effective = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = n_microbatches if scale_grads else 1
    if loss_reduction == "sum":
        factor = divided * world_size / global_items
    elif equal_items or n_microbatches * step_calls == 1:
        factor = divided / (n_microbatches * step_calls)
    else:
        factor = None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.2 the lesson's loop unchanged: one autocast context around every window (stale bfloat16 weights)
# misconception: autocast-around-the-loop
def train_bf16(model, optimizer, windows):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for window in windows:
            items = sum(len(labels) for _, labels in window)
            for inputs, labels in window:
                loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
                loss.backward()
            optimizer.step()
            optimizer.zero_grad()


# %% 11.2 autocast per forward, but each micro-batch's mean loss (divided by its own size, not the window's)
# misconception: mean-of-means
def train_bf16(model, optimizer, windows):
    for window in windows:
        for inputs, labels in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(inputs), labels) / len(window)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 11.2 autocast per forward, but an optimizer step after every micro-batch
# misconception: step-every-micro-batch
def train_bf16(model, optimizer, windows):
    for window in windows:
        items = sum(len(labels) for _, labels in window)
        for inputs, labels in window:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
