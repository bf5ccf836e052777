"""Plausible wrong answers to exercises/01_theory.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; F, torch and IGNORE_INDEX come from the import cell


# %% 1.1 the plain mean of the micro-batch means
# misconception: mean-of-means
def combine_means(means, counts):
    return sum(means) / len(means)


# %% 1.1 weighted by the counts, then divided by the number of micro-batches
# misconception: divided-by-micro-batches
def combine_means(means, counts):
    return sum(mean * count for mean, count in zip(means, counts, strict=True)) / len(counts)


# %% 1.2 each micro-batch divided by its own token count (a mean of means)
# misconception: mean-of-means
def window_token_losses(logits_list, labels_list):
    return [
        F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX) / len(labels_list)
        for logits, labels in zip(logits_list, labels_list, strict=True)
    ]


# %% 1.2 the padding counted as tokens
# misconception: padding-counted
def window_token_losses(logits_list, labels_list):
    tokens = sum(labels.numel() for labels in labels_list)
    return [
        F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum", ignore_index=IGNORE_INDEX) / tokens
        for logits, labels in zip(logits_list, labels_list, strict=True)
    ]
