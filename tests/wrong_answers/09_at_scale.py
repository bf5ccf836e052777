"""Plausible wrong answers to exercises/09_at_scale.ipynb (README: "Hidden checks"; tests/test_wrong_answers.py).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and sum_cross_entropy come from the import cell


# %% 9.1 always the boundary (it communicates least), whatever the budget
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    sent = parameter_bytes * (world_size - 1) / world_size
    return "boundary", sent / (bandwidth_gb_s * 1e9)


# %% 9.1 the boundary keeps the whole gradient ON TOP of the shard (+ parameter_bytes, not the missing part)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    sent = parameter_bytes * (world_size - 1) / world_size
    one = sent / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return "boundary", one
    if peak_each_mib <= budget_mib:
        return "each", accum_steps * one
    return None


# %% 9.1 seconds per reduce-scatter, not per optimizer step (the N reduce-scatters of sync-each not counted)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    sent = parameter_bytes * (world_size - 1) / world_size
    one = sent / (bandwidth_gb_s * 1e9)
    extra_mib = sent / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return "boundary", one
    if peak_each_mib <= budget_mib:
        return "each", one
    return None


# %% 9.1 every rank sends the whole gradient (the ring's (W - 1) / W forgotten)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    one = parameter_bytes / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes * (world_size - 1) / world_size / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return "boundary", one
    if peak_each_mib <= budget_mib:
        return "each", accum_steps * one
    return None


# %% 9.1 the boundary's extra memory taken as one more shard (P / W), not the missing part (W - 1) / W x P
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    sent = parameter_bytes * (world_size - 1) / world_size
    one = sent / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes / world_size / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return "boundary", one
    if peak_each_mib <= budget_mib:
        return "each", accum_steps * one
    return None


# %% 9.2 logging with .item() every micro-step (a graph break, and a device sync on a GPU)
def micro_step(model, batch, items, stats):
    loss = sum_cross_entropy(model, batch) / items
    stats["loss_sum"] += loss.item()
    stats["nonfinite"] |= ~torch.isfinite(loss)
    return loss


# %% 9.2 backward inside the compiled micro-step
def micro_step(model, batch, items, stats):
    loss = sum_cross_entropy(model, batch) / items
    stats["loss_sum"] += loss.detach()
    stats["nonfinite"] |= ~torch.isfinite(loss)
    loss.backward()
    return loss.detach().requires_grad_()


# %% 9.2 the loss summed with its graph (every micro-step's graph kept alive)
def micro_step(model, batch, items, stats):
    loss = sum_cross_entropy(model, batch) / items
    stats["loss_sum"] = stats["loss_sum"] + loss
    stats["nonfinite"] |= ~torch.isfinite(loss)
    return loss


# %% 9.2 divided by the micro-batch's own size instead of the window's items
def micro_step(model, batch, items, stats):
    loss = sum_cross_entropy(model, batch) / len(batch[1])
    stats["loss_sum"] += loss.detach()
    stats["nonfinite"] |= ~torch.isfinite(loss)
    return loss


# %% 9.2 the NaN flag overwritten by each micro-step (only the last micro-batch counts)
def micro_step(model, batch, items, stats):
    loss = sum_cross_entropy(model, batch) / items
    stats["loss_sum"] += loss.detach()
    stats["nonfinite"] = ~torch.isfinite(loss)
    return loss
