"""Plausible wrong answers to exercises/02_pytorch.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; F and torch come from the import cell


# %% 2.1 the mean loss of each micro-batch divided by the number of micro-batches (a mean of means)
# misconception: mean-of-means
def accumulation_window(model, optimizer, micro_batches):
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels) / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total


# %% 2.1 dividing twice: the sum over the window's items, then by the number of micro-batches again
# misconception: divided-twice
def accumulation_window(model, optimizer, micro_batches):
    items = sum(len(labels) for _, labels in micro_batches)
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items / len(micro_batches)
        loss.backward()
        total += loss.item()
    optimizer.step()
    optimizer.zero_grad()
    return total


# %% 2.1 an optimizer step after every micro-batch
# misconception: step-every-micro-batch
def accumulation_window(model, optimizer, micro_batches):
    items = sum(len(labels) for _, labels in micro_batches)
    total = 0.0
    for inputs, labels in micro_batches:
        loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss.item()
    return total


# %% 2.2 the short last window dropped
# misconception: last-window-dropped
def train_epoch(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []
    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            items = sum(len(labels) for _, labels in window)
            total = 0.0
            for inputs, labels in window:
                loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
                loss.backward()
                total += loss.item()
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            losses.append(total)
            window = []
    return losses


# %% 2.2 the scheduler stepped on every micro-step
# misconception: scheduler-every-micro-step
def train_epoch(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []

    def step(window):
        items = sum(len(labels) for _, labels in window)
        total = 0.0
        for inputs, labels in window:
            loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
            total += loss.item()
            scheduler.step()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(total)

    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            step(window)
            window = []
    if window:
        step(window)
    return losses


# %% 2.2 zero_grad on every micro-step (only the last micro-batch's gradient is left)
# misconception: zero-grad-every-micro-step
def train_epoch(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []

    def step(window):
        items = sum(len(labels) for _, labels in window)
        total = 0.0
        for inputs, labels in window:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
            total += loss.item()
        optimizer.step()
        scheduler.step()
        losses.append(total)

    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            step(window)
            window = []
    if window:
        step(window)
    return losses


# %% 2.2 every window divided by a full window's items (the short last window too)
# misconception: full-window-divisor
def train_epoch(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []
    full_items = accum_steps * len(batches[0][1])

    def step(window):
        total = 0.0
        for inputs, labels in window:
            loss = F.cross_entropy(model(inputs), labels, reduction="sum") / full_items
            loss.backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(total)

    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            step(window)
            window = []
    if window:
        step(window)
    return losses


# %% 2.2 items = the window's micro-batches x the first micro-batch's size (as if every micro-batch were full)
# misconception: full-micro-batch-divisor
def train_epoch(model, optimizer, scheduler, batches, accum_steps):
    losses, window = [], []

    def step(window):
        items = len(window) * len(window[0][1])
        total = 0.0
        for inputs, labels in window:
            loss = F.cross_entropy(model(inputs), labels, reduction="sum") / items
            loss.backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(total)

    for batch in batches:
        window.append(batch)
        if len(window) == accum_steps:
            step(window)
            window = []
    if window:
        step(window)
    return losses
