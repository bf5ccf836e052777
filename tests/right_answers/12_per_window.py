"""Correct answers written differently from the reference (issue 56): each must get full points, in the visible check
and in the hidden check on every seed (tests/test_wrong_answers.py). Same format as tests/wrong_answers/.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and F come from the import cell


# %% 12.1 stacked tensors and a weighted mean; the amax by torch.max
def combine_window(records):
    counts = torch.tensor([float(r["items"]) for r in records], dtype=torch.float64)
    grads = torch.stack([torch.as_tensor(r["grad"], dtype=torch.float64) for r in records])
    weights = (counts / counts.sum()).reshape(-1, *[1] * (grads.dim() - 1))
    amax = torch.max(torch.tensor([float(r["amax"]) for r in records]))
    return {"grad": (weights * grads).sum(0), "items": int(counts.sum()), "amax": float(amax)}


# %% 12.1 a running fold, one record at a time (what a lax.scan with a max leaf does)
def combine_window(records):
    window = {"grad": 0.0, "items": 0, "amax": float("-inf")}
    for r in records:
        window["grad"] = window["grad"] + r["grad"] * r["items"]
        window["items"] += r["items"]
        window["amax"] = max(window["amax"], r["amax"])
    window["grad"] = window["grad"] / window["items"]
    return window


# %% 12.2 each micro-batch's mean loss weighted by its share of the window; zero_grad(set_to_none=False)
def train_muon(model, optimizer, windows):
    for window in windows:
        total = sum(labels.numel() for _, labels in window)
        for inputs, labels in window:
            loss = F.cross_entropy(model(inputs), labels) * (labels.numel() / total)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)


# %% 12.2 zero_grad() before each window instead of after, the step counted by hand
def train_muon(model, optimizer, windows):
    for window in windows:
        optimizer.zero_grad()
        n = 0
        for _inputs, labels in window:
            n += len(labels)
        for inputs, labels in window:
            F.cross_entropy(model(inputs), labels, reduction="sum").div(n).backward()
        optimizer.step()


# %% 12.2 model.forward(x) called directly, the loss a mean rescaled by the micro-batch's share
def train_muon(model, optimizer, windows):
    for window in windows:
        total = sum(len(labels) for _, labels in window)
        for inputs, labels in window:
            logits = model.forward(inputs)
            (F.cross_entropy(logits, labels, reduction="mean") * len(labels) / total).backward()
        optimizer.step()
        optimizer.zero_grad()
