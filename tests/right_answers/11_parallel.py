"""Correct answers written differently from the reference (issue 32): each must get full points, in the visible check
and in the hidden check on every seed (tests/test_wrong_answers.py). Same format as tests/wrong_answers/.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and F come from the import cell


# %% 11.1 exact fractions, counted per rank: each rank's share of the items, then the rank's own micro-batches
def count_items(micro_batches, shifts_labels):
    counts = []
    for batch in micro_batches:
        labels = batch["labels"]
        rows = labels.reshape(-1, labels.shape[-1]).tolist()  # 1-D labels: one row
        counts.append(sum(1 for row in rows for label in row[1 if shifts_labels else 0 :] if label != -100))
    return counts


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    from fractions import Fraction

    samples = micro_batch_size * n_microbatches * step_calls * world_size
    if scale_grads and step_calls != 1 and n_microbatches != 1:
        return {"effective_batch_size": samples, "loss_factor": None}
    items_per_rank = Fraction(global_items, world_size)  # DDP averages: each rank stands for 1 / W of the mean
    undo = n_microbatches if scale_grads else 1
    if loss_reduction == "mean":
        if not equal_items:
            return {"effective_batch_size": samples, "loss_factor": None}
        per_micro_batch = items_per_rank / (n_microbatches * step_calls)
        return {"effective_batch_size": samples, "loss_factor": undo * per_micro_batch / items_per_rank}
    return {"effective_batch_size": samples, "loss_factor": undo / items_per_rank}


# %% 11.1 the same numbers as numpy scalars (an np.int64 effective batch, an np.float64 factor)
def count_items(micro_batches, shifts_labels):
    import numpy as np

    predicted = (
        batch["labels"].numpy()[..., 1:] if shifts_labels else batch["labels"].numpy() for batch in micro_batches
    )
    return [np.count_nonzero(labels != -100) for labels in predicted]


def window_plan(
    micro_batch_size, n_microbatches, step_calls, world_size, loss_reduction, scale_grads, global_items, equal_items
):
    import numpy as np

    effective = np.prod([micro_batch_size, n_microbatches, step_calls, world_size], dtype=np.int64)
    if scale_grads and step_calls > 1 and n_microbatches > 1:
        return {"effective_batch_size": effective, "loss_factor": None}
    divided = np.float64(n_microbatches if scale_grads else 1)
    if loss_reduction == "sum":
        return {"effective_batch_size": effective, "loss_factor": divided * world_size / global_items}
    factor = divided / (n_microbatches * step_calls) if equal_items else None
    return {"effective_batch_size": effective, "loss_factor": factor}


# %% 11.2 one autocast context for the whole loop, with its weight cache turned off (cache_enabled=False)
def train_bf16(model, optimizer, windows):
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        for window in windows:
            items = sum(len(labels) for _, labels in window)
            for inputs, labels in window:
                loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
                loss.backward()
            optimizer.step()
            optimizer.zero_grad()


# %% 11.2 one autocast context per window, left before optimizer.step(); mean loss x samples / window samples
def train_bf16(model, optimizer, windows):
    for window in windows:
        items = sum(len(labels) for _, labels in window)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for inputs, labels in window:
                loss = F.cross_entropy(model(inputs), labels) * len(labels) / items
                loss.backward()
        optimizer.step()
        optimizer.zero_grad()
