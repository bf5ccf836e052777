"""MLX is lazy: accumulate a window's gradients with ``mx.eval`` after each micro-step, or one graph spans the window.

Taught in lessons/12_per_window.ipynb, section 7 (optional). Needs MLX (``pip install "mlx[cpu]"`` on Linux; the
plain ``mlx`` wheel on Linux lacks the CPU backend's library).

An MLX operation records a node and computes nothing until ``mx.eval`` (or ``.item()``, printing, ...) asks for its
value. Accumulating ``grads = tree_map(mx.add, grads, new)`` over the micro-steps of a window without evaluating
therefore builds ONE graph over all of them, and its peak memory grows with the window: measured on MLX 0.32.4's CPU
backend (``window_peak_mib``), 1, 2, 4, 8 and 16 micro-steps peak at about 5, 10, 18-19, 26 and 36 MiB: about 4.5 MiB
more per micro-step up to 4, then about 1.5, so not every intermediate result stays alive (Metal may differ). The memory accumulation was meant to save (ml-explore/mlx#2840
reports memory growing with the accumulation steps; Goekdeniz-Guelmez/mlx-lm-lora#47, merged, fixed an un-evaluated
metrics sum: 14.2 -> 25.8 GB over 400 steps, 12.3 GB after). ``mx.eval(grads)`` after each micro-step keeps the peak
flat (about 7 MiB at every window size).

Sources: MLX's lazy evaluation (https://ml-explore.github.io/mlx/build/html/usage/lazy_evaluation.html);
``mx.get_peak_memory``, ``mx.reset_peak_memory``, ``mx.get_active_memory``, ``mx.clear_cache`` (MLX 0.32.4, also on
the CPU device).
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map

__all__ = ["window_peak_mib", "mean_of_means_gap", "mlx_lm_trainer_gaps"]


def _model(width: int) -> nn.Module:
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
    mx.eval(model.parameters())
    return model


def window_peak_mib(
    accum_steps: int, eval_each_micro_step: bool, width: int = 512, micro_batch_size: int = 256
) -> tuple[float, dict]:
    """Peak MLX memory (MiB, above what was allocated before) of accumulating one window's gradients.

    A ``Linear(width) -> ReLU -> Linear(width)`` model, ``accum_steps`` micro-batches of ``micro_batch_size`` random
    rows (made and evaluated before the measurement), squared-output loss summed and divided by the window's rows;
    ``nn.value_and_grad`` per micro-step, ``tree_map(mx.add, ...)`` to accumulate, ``mx.eval`` of the sum after each
    micro-step if ``eval_each_micro_step``, and once at the end in any case.

    Returns:
        ``(peak MiB, the accumulated gradients as {name: mx.array}, flattened)``.

    Raises:
        ValueError: a size < 1.
    """
    if min(accum_steps, width, micro_batch_size) < 1:
        raise ValueError(f"sizes must be >= 1, got {accum_steps}, {width}, {micro_batch_size}")
    model = _model(width)
    mx.random.seed(1)
    inputs = [mx.random.normal((micro_batch_size, width)) for _ in range(accum_steps)]
    mx.eval(inputs)
    rows = accum_steps * micro_batch_size

    def loss_fn(model, x):
        return (model(x) ** 2).sum() / rows

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    mx.clear_cache()
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    grads = None
    for x in inputs:
        _, new = loss_and_grad(model, x)
        grads = new if grads is None else tree_map(mx.add, grads, new)
        if eval_each_micro_step:
            mx.eval(grads)
    mx.eval(grads)
    return (mx.get_peak_memory() - before) / 2**20, dict(tree_flatten(grads))


def mean_of_means_gap(token_counts: list[int], width: int = 16) -> dict[str, float]:
    """mlx-lm's accumulation before its proposed fix (ml-explore/mlx-lm#1413, #1544, both closed unmerged): each
    micro-batch's loss is its own token mean, and the window divides the summed gradients by the number of
    micro-batches. Against the token mean over the whole window (the full batch), on a linear model with one random
    token row per count.

    Returns:
        ``{"mean_of_means": largest |difference| from the full batch's gradient, "token_weighted": the same for
        each micro-batch's summed loss divided by the window's tokens}`` (floats; float32).
    """
    mx.random.seed(2)
    model = nn.Linear(width, 1)
    mx.eval(model.parameters())
    batches = [(mx.random.normal((n, width)), mx.random.normal((n, 1))) for n in token_counts]
    total = sum(token_counts)

    def summed(model, x, y):
        return ((model(x) - y) ** 2).sum()

    grad = nn.value_and_grad(model, summed)
    full = grad(model, mx.concatenate([x for x, _ in batches]), mx.concatenate([y for _, y in batches]))[1]
    full = tree_map(lambda g: g / total, full)
    means = weighted = None
    for (x, y), n in zip(batches, token_counts, strict=True):
        g = grad(model, x, y)[1]
        mean = tree_map(lambda v, n=n: v / n / len(token_counts), g)
        share = tree_map(lambda v: v / total, g)
        means = mean if means is None else tree_map(mx.add, means, mean)
        weighted = share if weighted is None else tree_map(mx.add, weighted, share)
        mx.eval(means, weighted)

    def gap(tree) -> float:
        return max(
            float(mx.abs(a - b).max()) for (_, a), (_, b) in zip(tree_flatten(tree), tree_flatten(full), strict=True)
        )

    return {"mean_of_means": gap(means), "token_weighted": gap(weighted)}


class _TinyLM(nn.Module):
    """Token embedding -> linear logits: the smallest model mlx-lm's ``default_loss`` accepts (``model(inputs)``
    returns ``[B, T, vocab]`` logits)."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def __call__(self, tokens: mx.array) -> mx.array:
        return self.out(self.embed(tokens))


def mlx_lm_trainer_gaps(token_counts: list[int], vocab: int = 11, learning_rate: float = 0.5) -> dict[str, float]:
    """mlx-lm's own trainer (``mlx_lm.tuner.trainer.train`` with its ``default_loss``, mlx-lm 0.32.2) on one window
    of micro-batches of one sequence each, ``token_counts`` tokens apiece, ``grad_accumulation_steps =
    len(token_counts)``, SGD (its progress display silenced): its loss is each micro-batch's token mean (``sum() / ntoks``) and its window divides the
    summed gradients by ``grad_accum_steps``, a mean of means; it updates only when ``it % grad_accum_steps == 0``, so
    the micro-batches after the last full window are never applied.

    Returns:
        ``{"mean_of_means": largest |w - w_full| after the window (the full batch: one SGD step on ``default_loss`` of
        all the sequences at once, the window's token mean), "equal": the same with equal token counts, "dropped":
        largest |w - w_window| after one more micro-batch (a partial window of 1) than the window}`` (float32).
    """
    import contextlib
    import io
    import tempfile
    from pathlib import Path
    from unittest import mock

    import mlx.optimizers as optim
    from mlx_lm.tuner import trainer
    from mlx_lm.tuner.trainer import TrainUI

    class _QuietUI(TrainUI):
        """mlx-lm's own progress UI as a rank other than 0 draws it: nothing (``TrainUI(..., rank=)``)."""

        def __init__(self, total_iters: int, rank: int = 0) -> None:
            super().__init__(total_iters, rank=1)

    def fresh() -> nn.Module:
        mx.random.seed(0)
        model = _TinyLM(vocab, 8)
        mx.eval(model.parameters())
        return model

    def sequences(counts: list[int]) -> list[mx.array]:
        mx.random.seed(3)
        return [mx.random.randint(0, vocab, (1, max(counts) + 1)).astype(mx.int32) for _ in counts]

    def run(counts: list[int], window: int) -> nn.Module:
        """``train()`` over ``counts`` micro-batches (``iters = len(counts)``), windows of ``window``."""
        model, seqs = fresh(), sequences(counts)

        def batches(dataset, batch_size, max_seq_length, loop=False, comm_group=None, **_):
            for seq, n in zip(seqs, counts, strict=True):  # one sequence; its first n targets are counted
                yield seq, mx.array([[1, n]])

        with (
            tempfile.TemporaryDirectory() as folder,
            contextlib.redirect_stdout(io.StringIO()),
            mock.patch.object(trainer, "TrainUI", _QuietUI),  # its progress table: timings, and widgets in Jupyter
        ):
            args = trainer.TrainingArgs(
                batch_size=1,
                iters=len(counts),
                grad_accumulation_steps=window,
                steps_per_report=10**6,
                steps_per_save=10**6,
                adapter_file=str(Path(folder) / "adapters.safetensors"),
            )
            trainer.train(
                model, optim.SGD(learning_rate=learning_rate), [None] * len(counts), args=args, iterate_batches=batches
            )
        return model

    def full_batch(counts: list[int]) -> nn.Module:
        model, seqs = fresh(), sequences(counts)
        lengths = mx.array([[1, n] for n in counts])
        _, grads = nn.value_and_grad(model, trainer.default_loss)(model, mx.concatenate(seqs), lengths)
        optim.SGD(learning_rate=learning_rate).update(model, grads)
        mx.eval(model.parameters())
        return model

    def gap(a: nn.Module, b: nn.Module) -> float:
        pairs = zip(tree_flatten(a.parameters()), tree_flatten(b.parameters()), strict=True)
        return max(float(mx.abs(x - y).max()) for (_, x), (_, y) in pairs)

    window = run(token_counts, len(token_counts))
    equal = [max(token_counts)] * len(token_counts)
    return {
        "mean_of_means": gap(window, full_batch(token_counts)),
        "equal": gap(run(equal, len(equal)), full_batch(equal)),
        "dropped": gap(run([*token_counts, 3], len(token_counts)), window),
    }
