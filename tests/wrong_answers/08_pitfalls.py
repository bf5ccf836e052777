"""Plausible wrong answers to exercises/08_pitfalls.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and info_nce_loss come from the import cell


# %% 8.1 the biased variance (BatchNorm normalises with it, but its running_var keeps the unbiased one)
# misconception: biased-running-var
def running_var_after(running_var, micro_batches, momentum):
    for batch in micro_batches:
        running_var = (1 - momentum) * running_var + momentum * batch.var(dim=0, unbiased=False)
    return running_var


# %% 8.1 one update with the whole window's variance (as if the micro-batches were one batch)
# misconception: window-statistics
def running_var_after(running_var, micro_batches, momentum):
    window = torch.cat(list(micro_batches))
    return (1 - momentum) * running_var + momentum * window.var(dim=0, unbiased=True)


# %% 8.2 each chunk's own InfoNCE loss (negatives only from the chunk), averaged over the chunks
# misconception: chunk-local-negatives
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    total = 0.0
    for chunk_a, chunk_b in zip(views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps), strict=True):
        loss = info_nce_loss(encoder(chunk_a), encoder(chunk_b), temperature) / accum_steps
        loss.backward()
        total += loss.item()
    return total


# %% 8.2 dividing twice: the cached gradients divided by the number of chunks
# misconception: divided-twice
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    chunks_a, chunks_b = views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps)
    with torch.no_grad():
        z_a = torch.cat([encoder(chunk) for chunk in chunks_a])
        z_b = torch.cat([encoder(chunk) for chunk in chunks_b])
    z_a.requires_grad_(True)
    z_b.requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    cached = z_a.grad.tensor_split(accum_steps) + z_b.grad.tensor_split(accum_steps)
    for chunk, grad in zip(chunks_a + chunks_b, cached, strict=True):
        encoder(chunk).backward(grad / accum_steps)
    return loss.item()


# %% 8.2 no random-number replay (dropout draws new masks in the re-run: the gradient of another function)
# misconception: no-rng-replay
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    chunks_a, chunks_b = views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps)
    with torch.no_grad():
        z_a = torch.cat([encoder(chunk) for chunk in chunks_a])
        z_b = torch.cat([encoder(chunk) for chunk in chunks_b])
    z_a.requires_grad_(True)
    z_b.requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    cached = z_a.grad.tensor_split(accum_steps) + z_b.grad.tensor_split(accum_steps)
    for chunk, grad in zip(chunks_a + chunks_b, cached, strict=True):
        encoder(chunk).backward(grad)
    return loss.item()


# %% 8.2 the first chunk's random-number state restored before every re-run (each chunk gets the first one's masks)
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    chunks = views_a.tensor_split(accum_steps) + views_b.tensor_split(accum_steps)
    state = torch.get_rng_state()
    with torch.no_grad():
        embeddings = [encoder(chunk) for chunk in chunks]
    z_a = torch.cat(embeddings[:accum_steps]).requires_grad_(True)
    z_b = torch.cat(embeddings[accum_steps:]).requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    cached = z_a.grad.tensor_split(accum_steps) + z_b.grad.tensor_split(accum_steps)
    for chunk, grad in zip(chunks, cached, strict=True):
        torch.set_rng_state(state)
        encoder(chunk).backward(grad)
    return loss.item()


# %% 8.3 the embeddings computed with gradients (the whole batch's activations kept for the backward)
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    z_a = torch.cat([encoder(chunk) for chunk in views_a.tensor_split(accum_steps)])
    z_b = torch.cat([encoder(chunk) for chunk in views_b.tensor_split(accum_steps)])
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    return loss.item()


# %% 8.3 every chunk's graph built first, the backwards after (all chunks' activations alive at once)
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    chunks_a, chunks_b = views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps)
    with torch.no_grad():
        z_a = torch.cat([encoder(chunk) for chunk in chunks_a])
        z_b = torch.cat([encoder(chunk) for chunk in chunks_b])
    z_a.requires_grad_(True)
    z_b.requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    cached = z_a.grad.tensor_split(accum_steps) + z_b.grad.tensor_split(accum_steps)
    outputs = [encoder(chunk) for chunk in chunks_a + chunks_b]
    for out, grad in zip(outputs, cached, strict=True):
        out.backward(grad)
    return loss.item()


# %% 8.3 recomputed per view, not per chunk (one whole view's activations alive at once)
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    with torch.no_grad():
        z_a = torch.cat([encoder(chunk) for chunk in views_a.tensor_split(accum_steps)])
        z_b = torch.cat([encoder(chunk) for chunk in views_b.tensor_split(accum_steps)])
    z_a.requires_grad_(True)
    z_b.requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    encoder(views_a).backward(z_a.grad)
    encoder(views_b).backward(z_b.grad)
    return loss.item()
