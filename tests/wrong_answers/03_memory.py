"""Plausible wrong answers to exercises/03_memory.ipynb: the wrong-answer corpus of tests/test_wrong_answers.py
(docs/instructors/hidden-checks.md).

Each ``# %% X.Y <mistake>`` cell is the solution cell a learner who made that mistake would write; it runs after the
exercise's own import cell. Every one must lose check X.Y in the visible check and in the hidden check on every seed.
"""
# ruff: noqa: F811, F821 - each cell redefines the answer; torch, weakref, TorchDispatchMode and tree_leaves come
# from the import cell


# %% 3.1 the whole effective batch's activations (N forgotten)
# misconception: whole-batch-activations
def micro_batch_activation_mib(activation_mib_per_sample, effective_batch_size, accum_steps):
    if accum_steps < 1 or effective_batch_size % accum_steps:
        raise ValueError(f"{effective_batch_size} samples cannot be split into {accum_steps} equal micro-batches")
    return activation_mib_per_sample * effective_batch_size


# %% 3.1 floor division: an effective batch N does not divide is accepted
def micro_batch_activation_mib(activation_mib_per_sample, effective_batch_size, accum_steps):
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    return activation_mib_per_sample * (effective_batch_size // accum_steps)


# %% 3.1 a constant: the lesson's example of 4 MiB
def micro_batch_activation_mib(activation_mib_per_sample, effective_batch_size, accum_steps):
    if accum_steps < 1 or effective_batch_size % accum_steps:
        raise ValueError(f"{effective_batch_size} samples cannot be split into {accum_steps} equal micro-batches")
    return 4.0


# %% 3.2 the candidates tried in the order given (not the smallest N first)
def smallest_fitting_n(
    persistent_mib, activation_mib_per_sample, effective_batch_size, budget_mib, candidates=(1, 2, 4, 8, 16, 32, 64)
):
    if budget_mib <= 0:
        raise ValueError(f"budget_mib must be > 0, got {budget_mib}")
    for n in candidates:
        if (
            effective_batch_size % n == 0
            and persistent_mib + activation_mib_per_sample * effective_batch_size / n <= budget_mib
        ):
            return n
    return None


# %% 3.2 a peak exactly at the budget counted as not fitting (< instead of <=)
def smallest_fitting_n(
    persistent_mib, activation_mib_per_sample, effective_batch_size, budget_mib, candidates=(1, 2, 4, 8, 16, 32, 64)
):
    if budget_mib <= 0:
        raise ValueError(f"budget_mib must be > 0, got {budget_mib}")
    for n in sorted(candidates):
        if (
            effective_batch_size % n == 0
            and persistent_mib + activation_mib_per_sample * effective_batch_size / n < budget_mib
        ):
            return n
    return None


# %% 3.2 an N that does not divide the effective batch accepted
def smallest_fitting_n(
    persistent_mib, activation_mib_per_sample, effective_batch_size, budget_mib, candidates=(1, 2, 4, 8, 16, 32, 64)
):
    if budget_mib <= 0:
        raise ValueError(f"budget_mib must be > 0, got {budget_mib}")
    for n in sorted(candidates):
        if persistent_mib + activation_mib_per_sample * effective_batch_size / n <= budget_mib:
            return n
    return None


# %% 3.3 every output tensor counted, views of a counted storage too
class PeakCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.current_bytes = 0
        self.peak_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                nbytes = t.untyped_storage().nbytes()
                self.current_bytes += nbytes
                weakref.finalize(t, self._free, 0, nbytes)
        self.peak_bytes = max(self.peak_bytes, self.current_bytes)
        return out

    def _free(self, key, nbytes):
        self.current_bytes -= nbytes


# %% 3.3 storages counted once but never freed (no finalizer)
class PeakCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.current_bytes = 0
        self.peak_bytes = 0
        self._alive = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                if id(storage) not in self._alive:
                    self._alive.add(id(storage))
                    self.current_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.current_bytes)
        return out

    def _free(self, key, nbytes):
        pass


# %% 3.4 the gradient buffer counted in the backward pass at N = 1 too
def peak_at(breakdown, accum_steps):
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    b = breakdown
    backward = b["parameters"] + b["optimizer_state"] + b["activations"] / accum_steps + b["gradients"]
    step = b["parameters"] + b["gradients"] + b["optimizer_state"] + b["step_scratch"]
    return (backward, "backward") if backward > step else (step, "optimizer.step")


# %% 3.4 the gradient buffer never counted in the backward pass (the SGD rise is missed)
def peak_at(breakdown, accum_steps):
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    b = breakdown
    backward = b["parameters"] + b["optimizer_state"] + b["activations"] / accum_steps
    step = b["parameters"] + b["gradients"] + b["optimizer_state"] + b["step_scratch"]
    return (backward, "backward") if backward > step else (step, "optimizer.step")


# %% 3.4 N divides the whole peak, not just the activations
def peak_at(breakdown, accum_steps):
    if accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {accum_steps}")
    b = breakdown
    gradient_buffer = b["gradients"] if accum_steps >= 2 else 0.0
    backward = (b["parameters"] + b["optimizer_state"] + b["activations"] + gradient_buffer) / accum_steps
    step = b["parameters"] + b["gradients"] + b["optimizer_state"] + b["step_scratch"]
    return (backward, "backward") if backward > step else (step, "optimizer.step")


# %% 3.5 one timeline's highest point, its activations and temporaries scaled by N0 / N (the weight gradients stay)
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(f"N must be >= 2, got {accum_steps}")
    total = first.total
    step_at = first.event_index("optimizer step")
    b = first.at(max(range(step_at), key=lambda i: total[i]))
    fixed = b["parameters"] + b["gradients"] + b["optimizer_state"] + b["other"]
    micro = fixed + (b["activations"] + b["temporaries"]) * first.accum_steps / accum_steps
    step = max(total[step_at:])
    return (micro, "micro-step") if micro > step else (step, "optimizer step")


# %% 3.5 one line through the two micro-steps' highest points (the operation at the peak changes with b)
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(f"N must be >= 2, got {accum_steps}")
    p1 = max(first.total[: first.event_index("optimizer step")])
    p2 = max(second.total[: second.event_index("optimizer step")])
    b1, b2 = first.micro_batch_size, second.micro_batch_size
    micro = p1 + (p2 - p1) / (b2 - b1) * (b1 * first.accum_steps / accum_steps - b1)
    step = max(first.total[first.event_index("optimizer step") :])
    return (micro, "micro-step") if micro > step else (step, "optimizer step")


# %% 3.5 the first micro-step's operations fitted (its gradient buffer is not full yet)
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(f"N must be >= 2, got {accum_steps}")

    def first_micro_step(timeline):
        return timeline.total[timeline.event_index("forward", 1) : timeline.event_index("forward", 2)]

    b1, b2 = first.micro_batch_size, second.micro_batch_size
    b = b1 * first.accum_steps / accum_steps
    points = zip(first_micro_step(first), first_micro_step(second), strict=True)
    micro = max(p1 + (p2 - p1) / (b2 - b1) * (b - b1) for p1, p2 in points)
    step = max(first.total[first.event_index("optimizer step") :])
    return (micro, "micro-step") if micro > step else (step, "optimizer step")


# %% 3.5 the optimizer step forgotten: the micro-steps' peak, always
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(f"N must be >= 2, got {accum_steps}")

    def last_micro_step(timeline):
        start = timeline.event_index("forward", timeline.accum_steps)
        return timeline.total[start : timeline.event_index("optimizer step")]

    b1, b2 = first.micro_batch_size, second.micro_batch_size
    b = b1 * first.accum_steps / accum_steps
    points = zip(last_micro_step(first), last_micro_step(second), strict=True)
    return max(p1 + (p2 - p1) / (b2 - b1) * (b - b1) for p1, p2 in points), "micro-step"


# %% 3.5 only the last micro-step's backward pass fitted (a frozen teacher's forward pass can hold the peak)
def peak_for_n(first, second, accum_steps):
    if accum_steps < 2 or min(first.accum_steps, second.accum_steps) < 2:
        raise ValueError(f"N must be >= 2, got {accum_steps}")

    def last_backward(timeline):
        start = timeline.event_index("backward", timeline.accum_steps)
        return timeline.total[start : timeline.event_index("optimizer step")]

    b1, b2 = first.micro_batch_size, second.micro_batch_size
    b = b1 * first.accum_steps / accum_steps
    points = zip(last_backward(first), last_backward(second), strict=True)
    micro = max(p1 + (p2 - p1) / (b2 - b1) * (b - b1) for p1, p2 in points)
    step = max(first.total[first.event_index("optimizer step") :])
    return (micro, "micro-step") if micro > step else (step, "optimizer step")
