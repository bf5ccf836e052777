"""Correct answers written differently from the reference (issue 59): each must get full points, in the visible check
and in the hidden check on every seed (tests/test_wrong_answers.py). Same format as tests/wrong_answers/.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch and info_nce_loss come from the import cell


# %% 8.2 the two views' chunks interleaved (a1, b1, a2, b2, ...), each re-run inside its own fork_rng
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    pairs = list(zip(views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps), strict=True))
    states, z_a, z_b = [], [], []
    with torch.no_grad():
        for chunk_a, chunk_b in pairs:
            for chunk, out in ((chunk_a, z_a), (chunk_b, z_b)):
                states.append(torch.get_rng_state())  # as RandContext (luyug/GradCache, sentence-transformers) does
                out.append(encoder(chunk))
    z_a, z_b = torch.cat(z_a).requires_grad_(), torch.cat(z_b).requires_grad_()
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    pairs_of_grads = zip(z_a.grad.tensor_split(accum_steps), z_b.grad.tensor_split(accum_steps), strict=True)
    grads = [grad for pair in pairs_of_grads for grad in pair]
    chunks = [chunk for pair in pairs for chunk in pair]
    for chunk, grad, state in zip(chunks, grads, states, strict=True):
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(state)
            encoder(chunk).backward(grad)
    return float(loss)


# %% 8.2 the width probed on one sample first, then preallocated buffers filled chunk by chunk (issue 59 review)
def grad_cache_backward(encoder, views_a, views_b, accum_steps, temperature=0.1):
    with torch.no_grad():
        width = encoder(views_a[:1]).shape[1]  # a probe before the first pass: its masks are not the first pass's
    z_a, z_b = torch.empty(len(views_a), width), torch.empty(len(views_b), width)
    chunks_a, chunks_b = views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps)
    states = []
    with torch.no_grad():
        start = 0
        for chunk_a, chunk_b in zip(chunks_a, chunks_b, strict=True):
            stop = start + len(chunk_a)
            states.append(torch.get_rng_state())
            z_a[start:stop] = encoder(chunk_a)
            states.append(torch.get_rng_state())
            z_b[start:stop] = encoder(chunk_b)
            start = stop
    z_a.requires_grad_(True)
    z_b.requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    grads_a, grads_b = z_a.grad.tensor_split(accum_steps), z_b.grad.tensor_split(accum_steps)
    reruns = []  # in the first pass's order: a1, b1, a2, b2, ...
    for chunk_a, grad_a, chunk_b, grad_b in zip(chunks_a, grads_a, chunks_b, grads_b, strict=True):
        reruns += [(chunk_a, grad_a), (chunk_b, grad_b)]
    for (chunk, grad), state in zip(reruns, states, strict=True):
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(state)
            encoder(chunk).backward(grad)
    return loss.item()


# %% 8.2 the generator's state kept once and restored once: the re-runs draw the first pass's numbers in its order
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
    torch.set_rng_state(state)  # nothing between the two passes draws random numbers
    for chunk, grad in zip(chunks, cached, strict=True):
        encoder(chunk).backward(grad)
    return loss.item()
