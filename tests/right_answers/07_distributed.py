"""Correct answers written differently from the reference (issue 29): each must get full points, in the visible check
and in the hidden check on every seed (tests/test_wrong_answers.py). Same format as tests/wrong_answers/.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch, dist, contextlib, count_items and sum_cross_entropy
# come from the import cell


# %% 7.2 Accelerate's gradient-accumulation guide ported to DDP: no no_sync() when there is one process
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    num_processes = dist.get_world_size()
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        num_items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(num_items)
        for i, batch in enumerate(window):
            sync = i == len(window) - 1 or num_processes == 1
            with contextlib.nullcontext() if sync else ddp_model.no_sync():
                loss = sum_cross_entropy(ddp_model, batch) * num_processes / num_items
                loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# %% 7.2 nanoGPT's pattern: require_backward_grad_sync set on every micro-step instead of no_sync()
def train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(batch) for batch in window))])
        dist.all_reduce(items)
        for micro_step, batch in enumerate(window):
            ddp_model.require_backward_grad_sync = micro_step == len(window) - 1
            loss = sum_cross_entropy(ddp_model, batch) * dist.get_world_size() / items
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
