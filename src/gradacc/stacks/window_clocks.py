"""Clocks that must count optimizer steps, not micro-batches: a schedule's progress and a privacy accountant.

Taught in lessons/12_per_window.ipynb, sections 4 and 5.

Sources:

* nanochat's SFT schedule (karpathy/nanochat, ``scripts/chat_sft.py`` at commit 00255c1): ``get_lr_multiplier(progress)``
  (linear warmup, constant, linear warmdown to ``final_lr_frac``, no clamp) with ``progress = it / num_iterations``,
  where ``it`` counts the micro-batches the data generator yielded; karpathy/nanochat#775 (open) reports the
  multiplier -127 at progress 64.5, then NaN, and makes ``it`` count optimizer steps;
* Opacus 1.6.0's Rényi DP accountant (``opacus.accountants.RDPAccountant``: ``step(noise_multiplier=,
  sample_rate=)`` once per noisy update, ``get_epsilon(delta)``) and ``opacus.accountants.utils.get_noise_multiplier``;
  google-deepmind/jax_privacy#234 (noise multiplier 7.69 instead of 3.92 when its ``train_steps`` counted
  micro-batches; fix proposed in jax_privacy#372, with #288);
* Opacus 1.6.0's own engine: ``PrivacyEngine.make_private`` (Poisson sampling, ``sample_rate = 1 / len(data_loader)``)
  and ``opacus.utils.batch_memory_manager.BatchMemoryManager`` (physical batches, one noisy step per logical batch);
  ``GradSampleModule`` raises "Poisson sampling is not compatible with grad accumulation" on a second backward
  before ``optimizer.step()`` (``opacus/grad_sample/grad_sample_module.py``).
"""

from __future__ import annotations

import math
import warnings

from ..i18n import _

__all__ = [
    "nanochat_lr_multiplier",
    "progress_per_micro_batch",
    "progress_per_optimizer_step",
    "optimizer_steps",
    "dp_epsilon",
    "dp_noise_multiplier",
    "opacus_engine_run",
    "opacus_manual_accumulation_error",
    "plot_window_clocks",
]


def nanochat_lr_multiplier(
    progress: float, warmup_ratio: float = 0.0, warmdown_ratio: float = 0.5, final_lr_frac: float = 0.0
) -> float:
    """nanochat's SFT learning-rate multiplier (``get_lr_multiplier`` of ``scripts/chat_sft.py``, commit 00255c1),
    with its arguments as parameters: linear warmup over ``warmup_ratio``, 1.0, then a linear warmdown over the last
    ``warmdown_ratio`` of the run to ``final_lr_frac`` at ``progress`` = 1. It does not clamp: past 1 the line goes on
    below ``final_lr_frac``, and below 0 (karpathy/nanochat#775: -127 at progress 64.5 with these defaults).

    Args:
        progress: the fraction of the run done (0 to 1 when counted right).
    """
    if progress < warmup_ratio:
        return (progress + 1e-8) / warmup_ratio
    if progress <= 1.0 - warmdown_ratio:
        return 1.0
    decay = (progress - (1.0 - warmdown_ratio)) / warmdown_ratio
    return (1 - decay) * 1.0 + decay * final_lr_frac


def optimizer_steps(micro_batches: int, accum_steps: int, drop_last: bool = False) -> int:
    """Optimizer steps made from ``micro_batches`` micro-batches, ``accum_steps`` per window: the short last window
    makes a step too unless ``drop_last``.

    Raises:
        ValueError: ``micro_batches`` < 0 or ``accum_steps`` < 1.
    """
    if micro_batches < 0 or accum_steps < 1:
        raise ValueError(f"need micro_batches >= 0 and accum_steps >= 1, got {micro_batches}, {accum_steps}")
    return micro_batches // accum_steps if drop_last else math.ceil(micro_batches / accum_steps)


def progress_per_micro_batch(micro_batches: int, accum_steps: int, num_iterations: int) -> list[float]:
    """nanochat's progress before #775, read at each optimizer step: ``it / num_iterations`` where ``it`` counts the
    micro-batches yielded so far, the next step's first micro-batch included (the loop prefetches it).

    ``num_iterations`` is the number of OPTIMIZER steps asked for (``--num-iterations``: "number of optimization
    steps"). Returns one float per optimizer step (short last window included).
    """
    steps = optimizer_steps(micro_batches, accum_steps)
    return [min(micro_batches, (s + 1) * accum_steps + 1) / num_iterations for s in range(steps)]


def progress_per_optimizer_step(micro_batches: int, accum_steps: int, num_iterations: int) -> list[float]:
    """The fix: progress counts optimizer steps, ``(step + 1) / num_iterations`` after each step (one float per
    step, the short last window's included)."""
    return [(s + 1) / num_iterations for s in range(optimizer_steps(micro_batches, accum_steps))]


def dp_epsilon(
    noise_multiplier: float,
    batch_size: int,
    accum_steps: int,
    dataset_size: int,
    epochs: int,
    delta: float,
    drop_last: bool = False,
) -> dict[str, float]:
    """Epsilon of DP-SGD spent by ``epochs`` passes over ``dataset_size`` samples, by Opacus 1.6.0's RDP accountant,
    counted two ways: per optimizer step (right: each noisy update samples ``batch_size * accum_steps`` examples at
    most; one accountant step per update, the short last window's included unless ``drop_last``) and per micro-batch
    (the mistake: sample rate ``batch_size / dataset_size``, one accountant step per micro-batch).

    A short last window is counted at the full rate ``batch_size * accum_steps / dataset_size``: an upper bound on
    what it spends. (Opacus's own DP-SGD samples each example independently, Poisson sampling, so its batches vary in
    size anyway; the accountant needs the expected rate and the number of noisy updates.)

    Each count is fed through the accountant's own ``step()``, once per update (it merges repeated identical steps
    into one history entry, so 10^4 steps take milliseconds).

    Returns:
        ``{"per_optimizer_step": epsilon, "per_micro_batch": epsilon, "optimizer_steps": n, "micro_batches": n}``.

    Raises:
        ValueError: a size < 1 or ``delta`` outside (0, 1).
    """
    from opacus.accountants import RDPAccountant

    if min(batch_size, accum_steps, dataset_size, epochs) < 1 or not 0 < delta < 1:
        raise ValueError("batch_size, accum_steps, dataset_size and epochs must be >= 1, delta in (0, 1)")
    effective = batch_size * accum_steps
    per_epoch = dataset_size // batch_size if drop_last else math.ceil(dataset_size / batch_size)
    updates = epochs * optimizer_steps(per_epoch, accum_steps, drop_last)
    micro = epochs * per_epoch
    result: dict[str, float] = {"optimizer_steps": updates, "micro_batches": micro}
    for name, rate, count in (
        ("per_optimizer_step", effective / dataset_size, updates),
        ("per_micro_batch", batch_size / dataset_size, micro),
    ):
        accountant = RDPAccountant()
        for _step in range(count):
            accountant.step(noise_multiplier=noise_multiplier, sample_rate=rate)
        with warnings.catch_warnings():  # "Optimal order is the largest alpha": a looser bound, not an error
            warnings.simplefilter("ignore")
            result[name] = float(accountant.get_epsilon(delta=delta))
    return result


def dp_noise_multiplier(
    target_epsilon: float, delta: float, sample_rate: float, steps: int, epsilon_tolerance: float = 0.01
) -> float:
    """The noise multiplier Opacus 1.6.0 calibrates for ``steps`` noisy updates at ``sample_rate`` to spend
    ``target_epsilon`` (``opacus.accountants.utils.get_noise_multiplier``, RDP accountant; a bisection to
    ``epsilon_tolerance``)."""
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(
            get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=delta,
                sample_rate=sample_rate,
                steps=steps,
                accountant="rdp",
                epsilon_tolerance=epsilon_tolerance,
            )
        )


def _private_linear(dataset_size: int, batch_size: int, noise_multiplier: float, seed: int):
    """A ``Linear(8, 2)`` classifier, SGD and a loader of ``dataset_size`` random points made private by Opacus's
    ``PrivacyEngine`` (RDP accountant, clipping norm 1.0). Returns ``(engine, model, optimizer, loader)``."""
    import torch
    from opacus import PrivacyEngine

    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(dataset_size, 8, generator=generator)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.Linear(8, 2)
    with warnings.catch_warnings():  # "secure RNG turned off": fine for a demonstration
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp")
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=1.0,
        )
    return engine, model, optimizer, loader


def opacus_engine_run(
    dataset_size: int = 1000,
    logical_batch: int = 40,
    physical_batch: int | None = 10,
    noise_multiplier: float = 1.0,
    delta: float = 1e-5,
    seed: int = 0,
) -> dict:
    """One epoch of Opacus 1.6.0's own DP-SGD engine on a small dataset: ``PrivacyEngine.make_private`` with logical
    batches of ``logical_batch`` (Poisson-sampled at rate ``1 / len(loader)``), split by ``BatchMemoryManager`` into
    physical batches of at most ``physical_batch`` (``None``: no split, one backward per noisy step).

    Returns:
        ``{"history": the accountant's history [(noise, rate, steps)], "epsilon": its epsilon at ``delta``,
        "physical_batches": backward passes, "noisy_steps": optimizer steps that were not skipped}``.
    """
    import torch
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    engine, model, optimizer, loader = _private_linear(dataset_size, logical_batch, noise_multiplier, seed)
    counts = {"physical_batches": 0}

    def epoch(batches) -> None:
        for inputs, labels in batches:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()  # skipped by BatchMemoryManager until the logical batch's last physical one
            counts["physical_batches"] += 1

    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):  # the Poisson draws and noise: from seed
        warnings.simplefilter("ignore")  # the full backward hook's "no inputs require gradients"
        torch.manual_seed(seed)
        if physical_batch is None:
            epoch(loader)
        else:
            with BatchMemoryManager(
                data_loader=loader, max_physical_batch_size=physical_batch, optimizer=optimizer
            ) as m:
                epoch(m)
        epsilon = float(engine.get_epsilon(delta))
    history = [tuple(entry) for entry in engine.accountant.history]
    return {
        "history": history,
        "epsilon": epsilon,
        "physical_batches": counts["physical_batches"],
        "noisy_steps": sum(steps for _, _, steps in history),
    }


def opacus_manual_accumulation_error(micro_batches: int = 4, batch_size: int = 10, seed: int = 0) -> tuple[int, str]:
    """Lesson 02's loop (``backward()`` on ``micro_batches`` batches, then one step) on a model Opacus 1.6.0 made
    private. Returns ``(the backward pass that raised, its ValueError's message)``.

    Raises:
        AssertionError: no ValueError (the installed Opacus accepts manual accumulation under Poisson sampling).
    """
    import torch

    _, model, _, loader = _private_linear(1000, batch_size, 1.0, seed)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")  # the full backward hook's "no inputs require gradients"
        torch.manual_seed(seed)
        for count, (inputs, labels) in enumerate(loader, start=1):
            try:
                torch.nn.functional.cross_entropy(model(inputs), labels).backward()
            except ValueError as exc:
                return count, str(exc)
            if count == micro_batches:
                break
    raise AssertionError(f"Opacus accepted {micro_batches} backward passes before a step")


def plot_window_clocks(ax, sizes: list[list[int]]) -> None:
    """The lesson's diagram: micro-batches in time order (one box each, its samples written in it, a window per
    colour) and, below, what advances once per micro-step (the gradient adds up) and once per window (the
    optimizer step, the schedule, the privacy accountant, the FP8 amax history).

    Args:
        ax: a matplotlib Axes.
        sizes: samples per micro-batch, one list per window (e.g. ``[[8, 8, 8, 8], [8, 8, 8, 8], [6]]``).
    """
    from matplotlib.patches import Rectangle

    rows = ["", "backward(): .grad += ...", "optimizer.step()", ""]  # the middle two are code
    # TRANSLATORS: the diagram's top row: the micro-batches in time order
    rows[0] = _("micro-batches")
    # TRANSLATORS: the diagram's bottom row: what advances once per window besides the optimizer step
    rows[3] = _("schedule, accountant, amax history")
    k = 0
    for w, window in enumerate(sizes):
        color = ("#4c72b0", "#55a868")[w % 2]
        for n in window:
            ax.add_patch(Rectangle((k + 0.08, 3.15), 0.84, 0.7, color=color))
            ax.text(k + 0.5, 3.5, str(n), ha="center", va="center", fontsize=9, color="white")
            ax.plot(k + 0.5, 2.5, "o", color=color)
            k += 1
        ax.axvline(k, color="#c44e52", lw=1, ls="--")
        for row in (1.5, 0.5):
            ax.plot(k - 0.5, row, "s", color="#c44e52", ms=9)
    ax.set_xlim(0, k + 0.1)
    ax.set_ylim(0, 4)
    ax.set_yticks([3.5, 2.5, 1.5, 0.5], rows, fontsize=9)
    ax.set_xticks([])
    ax.set_xlabel(
        _("{steps} micro-steps, {windows} windows: dots once per micro-step, squares once per window").format(
            steps=k, windows=len(sizes)
        ),
        fontsize=9,
    )
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
