"""Plausible wrong answers to exercises/04_accelerate.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; F and torch come from the import cell


# %% 4.1 the gradient clipped on every micro-step, not once per window
# misconception: clip-every-micro-step
def train_epoch(accelerator, model, optimizer, loader, max_norm):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), labels)
            accelerator.backward(loss)
            if max_norm is not None:
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


# %% 4.1 dividing twice: the loss divided by N by hand (accelerator.backward divides already)
# misconception: accelerate-divides-already
def train_epoch(accelerator, model, optimizer, loader, max_norm):
    accum_steps = accelerator.gradient_accumulation_steps
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), labels) / accum_steps
            accelerator.backward(loss)
            if max_norm is not None and accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad()


# %% 4.2 a short window scaled by 1 (as if every window were full)
# misconception: full-window-divisor
def window_loss_scale(batch_index, n_batches, accum_steps):
    return 1.0


# %% 4.2 the scale inverted: micro-batches in the window / N
def window_loss_scale(batch_index, n_batches, accum_steps):
    window_start = (batch_index // accum_steps) * accum_steps
    return min(accum_steps, n_batches - window_start) / accum_steps


# %% 4.2 every window scaled by N / (micro-batches in the last window)
def window_loss_scale(batch_index, n_batches, accum_steps):
    last = n_batches % accum_steps or accum_steps
    return accum_steps / last
