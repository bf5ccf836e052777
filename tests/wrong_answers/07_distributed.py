"""Plausible wrong answers to exercises/07_distributed.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; contextlib, torch, dist, count_items and
# sum_cross_entropy come from the import cell


# %% 7.1 divided by the rank's own tokens (each rank's mean; DDP then averages the means)
# misconception: rank-own-tokens
def token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum / local_tokens


# %% 7.1 divided by all tokens but not multiplied by the world size (DDP's average divides again)
# misconception: ddp-average-forgotten
def token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum / global_tokens


# %% 7.2 no no_sync: gradients all-reduced on every micro-step
# misconception: sync-every-micro-step
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(items)
        scale = dist.get_world_size() / float(items)
        for batch in window:
            (sum_cross_entropy(ddp_model, batch) * scale).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 7.2 no_sync() around backward() alone (the forward pass outside: DDP still all-reduces on every micro-step)
# misconception: sync-every-micro-step
# (its hint says "unless the forward pass and backward() both run inside no_sync()", right for this answer too;
# no-sync-backward-only is not registered for 7.2: its count is the same, so two matches would print no hint)
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(items)
        scale = dist.get_world_size() / float(items)
        for i, batch in enumerate(window):
            loss = sum_cross_entropy(ddp_model, batch) * scale
            with contextlib.nullcontext() if i == len(window) - 1 else ddp_model.no_sync():
                loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 7.2 synchronised only on micro-steps whose number is a multiple of N (the short last window never syncs)
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(items)
        scale = dist.get_world_size() / float(items)
        for i, batch in enumerate(window):
            sync = (start + i + 1) % accum_steps == 0
            with contextlib.nullcontext() if sync else ddp_model.no_sync():
                (sum_cross_entropy(ddp_model, batch) * scale).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 7.3 the rank's own window count (no all-reduce of the token count)
# misconception: rank-own-tokens
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = float(sum(count_items(batch) for batch in window))
        scale = dist.get_world_size() / items
        for i, batch in enumerate(window):
            last = i == len(window) - 1
            with contextlib.nullcontext() if last else ddp_model.no_sync():
                (sum_cross_entropy(ddp_model, batch) * scale).backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 7.3 the all-reduced count without the world size (DDP's average divides again)
# misconception: ddp-average-forgotten
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(items)
        for i, batch in enumerate(window):
            last = i == len(window) - 1
            with contextlib.nullcontext() if last else ddp_model.no_sync():
                (sum_cross_entropy(ddp_model, batch) / float(items)).backward()
        optimizer.step()
        optimizer.zero_grad()
