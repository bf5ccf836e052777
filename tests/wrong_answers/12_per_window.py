"""Plausible wrong answers to exercises/12_per_window.ipynb (docs/instructors/hidden-checks.md; tests/test_wrong_answers.py).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and F come from the import cell


# %% 12.1 the amax averaged like a gradient (marin#7659: every leaf of the tree treated as a gradient)
def combine_window(records):
    items = sum(r["items"] for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": sum(r["amax"] for r in records) / len(records)}


# %% 12.1 the last micro-batch's amax kept (an accumulation that overwrites a custom-gradient leaf)
def combine_window(records):
    items = sum(r["items"] for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": records[-1]["amax"]}


# %% 12.1 the right amax, but the gradient a mean of micro-batch means (mlx-lm's trainer: PRs #1413, #1544 closed)
def combine_window(records):
    grad = sum(r["grad"] for r in records) / len(records)
    return {"grad": grad, "items": sum(r["items"] for r in records), "amax": max(r["amax"] for r in records)}


# %% 12.1 the amax weighted by the items like the gradient
def combine_window(records):
    items = sum(r["items"] for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": sum(r["amax"] * r["items"] for r in records) / items}


# %% 12.1 the first micro-batch's amax kept (a fold that never updates the carried amax)
def combine_window(records):
    items = sum(r["items"] for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": records[0]["amax"]}


# %% 12.1 the larger of the first and the last micro-batch's amax
def combine_window(records):
    items = sum(r["items"] for r in records)
    grad = sum(r["grad"] * r["items"] for r in records) / items
    return {"grad": grad, "items": items, "amax": max(records[0]["amax"], records[-1]["amax"])}


# %% 12.2 a Muon step per micro-batch (an optimizer inside backward; ZeRO-3's Muon before DeepSpeed#8600)
def train_muon(model, optimizer, windows):
    for window in windows:
        items = sum(len(labels) for _, labels in window)
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
            optimizer.step()
            optimizer.zero_grad()


# %% 12.2 the mean loss of each micro-batch divided by the micro-batches (a mean of means)
def train_muon(model, optimizer, windows):
    for window in windows:
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels) / len(window)).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 12.2 every window divided by the first window's samples (the short last window's step shrinks; Muon's momentum sees it)
def train_muon(model, optimizer, windows):
    items = sum(len(labels) for _, labels in windows[0])
    for window in windows:
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 12.2 zero_grad() forgotten: each window's gradient adds to the previous windows'
def train_muon(model, optimizer, windows):
    for window in windows:
        items = sum(len(labels) for _, labels in window)
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
        optimizer.step()


# %% 12.2 the short last window dropped (a loop that steps only on full windows)
def train_muon(model, optimizer, windows):
    for window in windows:
        if len(window) < len(windows[0]):
            continue
        items = sum(len(labels) for _, labels in window)
        for inputs, labels in window:
            (F.cross_entropy(model(inputs), labels, reduction="sum") / items).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 12.2 the window concatenated into one batch (the right weights, but no accumulation: one forward per window)
def train_muon(model, optimizer, windows):
    for window in windows:
        inputs = torch.cat([x for x, _ in window])
        labels = torch.cat([y for _, y in window])
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
        optimizer.zero_grad()
