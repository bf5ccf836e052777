"""Plausible wrong answers to exercises/09_at_scale.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and sum_cross_entropy come from the import cell


# %% 9.1 the course's old reference (before issue 31): the boundary whenever it fits, with its reduce-scatter seconds only (a preference)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    sent = parameter_bytes * (world_size - 1) / world_size
    one = sent / (bandwidth_gb_s * 1e9)
    extra_mib = sent / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return "boundary", one
    if peak_each_mib <= budget_mib:
        return "each", accum_steps * one
    return None


# %% 9.1 only the setting that communicates less among those that fit (a choice, not the costs of both)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    if peak_each_mib + extra_mib <= budget_mib:
        return {"boundary": (peak_each_mib + extra_mib, (2 * accum_steps + 1) * one)}
    if peak_each_mib <= budget_mib:
        return {"each": (peak_each_mib, 3 * accum_steps * one)}
    return {}


# %% 9.1 the boundary listed whatever the budget (it communicates least)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    costs = {"boundary": (peak_each_mib + extra_mib, (2 * accum_steps + 1) * one)}
    if peak_each_mib <= budget_mib:
        costs["each"] = (peak_each_mib, 3 * accum_steps * one)
    return costs


# %% 9.1 only the reduce-scatters counted (N against 1: the all-gathers of both settings forgotten)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    costs = {"each": (peak_each_mib, accum_steps * one), "boundary": (peak_each_mib + extra_mib, one)}
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 one all-gather per micro-step (the backward pass's second all-gather forgotten)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    costs = {
        "each": (peak_each_mib, 2 * accum_steps * one),
        "boundary": (peak_each_mib + extra_mib, (accum_steps + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 the boundary keeps the whole gradient ON TOP of the shard (+ parameter_bytes, not the missing part)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes / 2**20 if accum_steps >= 2 else 0.0
    costs = {
        "each": (peak_each_mib, 3 * accum_steps * one),
        "boundary": (peak_each_mib + extra_mib, (2 * accum_steps + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 the boundary's extra memory taken as one more shard (P / W), not the missing part (W - 1) / W x P
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes / world_size / 2**20 if accum_steps >= 2 else 0.0
    costs = {
        "each": (peak_each_mib, 3 * accum_steps * one),
        "boundary": (peak_each_mib + extra_mib, (2 * accum_steps + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 seconds per micro-step, not per optimizer step (the window's N micro-steps not counted)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    costs = {"each": (peak_each_mib, 3 * one), "boundary": (peak_each_mib + extra_mib, (2 + 1 / accum_steps) * one)}
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 every rank sends the whole gradient (the ring's (W - 1) / W forgotten)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    one = parameter_bytes / (bandwidth_gb_s * 1e9)
    extra_mib = parameter_bytes * (world_size - 1) / world_size / 2**20 if accum_steps >= 2 else 0.0
    costs = {
        "each": (peak_each_mib, 3 * accum_steps * one),
        "boundary": (peak_each_mib + extra_mib, (2 * accum_steps + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


# %% 9.1 all-gathers counted 2N - 1 per optimizer step (the root rule of a root with parameters, misread)
def sync_plan(parameter_bytes, world_size, accum_steps, peak_each_mib, budget_mib, bandwidth_gb_s):
    share = parameter_bytes * (world_size - 1) / world_size
    one = share / (bandwidth_gb_s * 1e9)
    extra_mib = share / 2**20 if accum_steps >= 2 else 0.0
    gathers = 2 * accum_steps - 1
    costs = {
        "each": (peak_each_mib, (gathers + accum_steps) * one),
        "boundary": (peak_each_mib + extra_mib, (gathers + 1) * one),
    }
    return {mode: cost for mode, cost in costs.items() if cost[0] <= budget_mib}


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
