"""Plausible wrong answers to exercises/10_stacks.ipynb (docs/instructors/hidden-checks.md; tests/test_wrong_answers.py).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and F come from the import cell


# %% 10.1 every library treated as your own loop (the library's own division forgotten)
# misconception: library-division-forgotten
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    return [(n if reduction == "mean" else 1) / window_items for n in item_counts]


# %% 10.1 Lightning and Accelerate taken to divide a short last window by its real size (as Trainer does)
# misconception: library-short-window
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    scale = {
        "pytorch": 1.0,
        "lightning": 1.0 / len(item_counts),
        "accelerate": 1.0 / len(item_counts),
        "trainer": 1.0 / len(item_counts),
        "keras": 1.0 / accum_steps if len(item_counts) == accum_steps else None,
    }[library]
    if scale is None:
        return None
    return [(n if reduction == "mean" else 1) / (window_items * scale) for n in item_counts]


# %% 10.1 Trainer taken to divide by accum_steps (the real number of micro-batches of a short window ignored)
# misconception: library-short-window
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    scale = {
        "pytorch": 1.0,
        "lightning": 1.0 / accum_steps,
        "accelerate": 1.0 / accum_steps,
        "trainer": 1.0 / accum_steps,
        "keras": 1.0 / accum_steps if len(item_counts) == accum_steps else None,
    }[library]
    if scale is None:
        return None
    return [(n if reduction == "mean" else 1) / (window_items * scale) for n in item_counts]


# %% 10.1 Keras's short window given factors too (as if Keras applied it at the end of the epoch)
# misconception: library-short-window
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    scale = {
        "pytorch": 1.0,
        "lightning": 1.0 / accum_steps,
        "accelerate": 1.0 / accum_steps,
        "trainer": 1.0 / len(item_counts),
        "keras": 1.0 / accum_steps,
    }[library]
    return [(n if reduction == "mean" else 1) / (window_items * scale) for n in item_counts]


# %% 10.1 Keras's short window returns an empty list instead of None (a list reads as factors to apply)
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    if library == "keras" and len(item_counts) < accum_steps:
        return []
    scale = {
        "pytorch": 1.0,
        "lightning": 1.0 / accum_steps,
        "accelerate": 1.0 / accum_steps,
        "trainer": 1.0 / len(item_counts),
        "keras": 1.0 / accum_steps,
    }[library]
    return [(n if reduction == "mean" else 1) / (window_items * scale) for n in item_counts]


# %% 10.1 the reduction ignored (a summed loss treated as a mean)
# misconception: sum-treated-as-mean
def loss_factors(library, accum_steps, item_counts, reduction):
    window_items = sum(item_counts)
    scale = {
        "pytorch": 1.0,
        "lightning": 1.0 / accum_steps,
        "accelerate": 1.0 / accum_steps,
        "trainer": 1.0 / len(item_counts),
        "keras": 1.0 / accum_steps if len(item_counts) == accum_steps else None,
    }[library]
    if scale is None:
        return None
    return [n / (window_items * scale) for n in item_counts]


# %% 10.2 the mean loss Lightning's examples return (each micro-batch weighs 1/N, a short window divided by N)
# misconception: mean-of-means
def lightning_loss(module, batch, batch_idx):
    inputs, labels = batch
    return F.cross_entropy(module.model(inputs), labels)


# %% 10.2 summed over the window's samples but Lightning's division by N not undone
# misconception: library-division-forgotten
def lightning_loss(module, batch, batch_idx):
    inputs, labels = batch
    n = module.trainer.accumulate_grad_batches
    start = batch_idx // n * n
    window_items = sum(module.item_counts[start : start + n])
    return F.cross_entropy(module.model(inputs), labels, reduction="sum") / window_items


# %% 10.2 Lightning's division undone with the window's real size instead of N (a short window scaled by its size / N)
# misconception: library-short-window
def lightning_loss(module, batch, batch_idx):
    inputs, labels = batch
    n = module.trainer.accumulate_grad_batches
    start = batch_idx // n * n
    window = module.item_counts[start : start + n]
    return F.cross_entropy(module.model(inputs), labels, reduction="sum") / sum(window) * len(window)


# %% 10.2 the short window fixed but micro-batches weighed equally (mean x N / real window size)
# misconception: mean-of-means
def lightning_loss(module, batch, batch_idx):
    inputs, labels = batch
    n = module.trainer.accumulate_grad_batches
    start = batch_idx // n * n
    size = min(n, module.trainer.num_training_batches - start)
    return F.cross_entropy(module.model(inputs), labels) * n / size
