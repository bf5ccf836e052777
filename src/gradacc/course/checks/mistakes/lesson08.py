"""Reference implementations of the misconceptions checks 8.1 and 8.2 recognise (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch

from ....foundations.pitfalls import info_nce_loss
from . import mistake


@mistake("8.1", "biased-running-var")
def running_var_biased(running_var, micro_batches, momentum):
    for batch in micro_batches:
        biased = ((batch - batch.mean(dim=0)) ** 2).mean(dim=0)
        running_var = running_var + momentum * (biased - running_var)
    return running_var


@mistake("8.1", "window-statistics")
def running_var_of_the_window(running_var, micro_batches, momentum):
    window = torch.cat(list(micro_batches))
    return running_var + momentum * (window.var(dim=0) - running_var)


def _grad_cache(encoder, views_a, views_b, accum_steps, temperature, divide_again=False):
    """GradCache without the random-number replay (``divide_again``: the cached gradients also divided by N)."""
    chunks = views_a.tensor_split(accum_steps) + views_b.tensor_split(accum_steps)
    with torch.no_grad():
        embeddings = [encoder(chunk) for chunk in chunks]
    z_a = torch.cat(embeddings[:accum_steps]).requires_grad_(True)
    z_b = torch.cat(embeddings[accum_steps:]).requires_grad_(True)
    loss = info_nce_loss(z_a, z_b, temperature)
    loss.backward()
    cached = z_a.grad.tensor_split(accum_steps) + z_b.grad.tensor_split(accum_steps)
    for chunk, grad in zip(chunks, cached, strict=True):
        encoder(chunk).backward(grad / accum_steps if divide_again else grad)
    return loss.item()


@mistake("8.2", "chunk-local-negatives")
def grad_cache_per_chunk_loss(encoder, views_a, views_b, accum_steps, temperature=0.1):
    total = 0.0
    for a, b in zip(views_a.tensor_split(accum_steps), views_b.tensor_split(accum_steps), strict=True):
        loss = info_nce_loss(encoder(a), encoder(b), temperature) * (1.0 / accum_steps)
        loss.backward()
        total += loss.item()
    return total


@mistake("8.2", "divided-twice")
def grad_cache_divided_twice(encoder, views_a, views_b, accum_steps, temperature=0.1):
    return _grad_cache(encoder, views_a, views_b, accum_steps, temperature, divide_again=True)


@mistake("8.2", "no-rng-replay")
def grad_cache_without_replay(encoder, views_a, views_b, accum_steps, temperature=0.1):
    return _grad_cache(encoder, views_a, views_b, accum_steps, temperature)
