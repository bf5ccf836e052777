"""What the memory explorer knows, without any widget: its options, and per model configuration the measured steps,
the predictor's profile, the timelines and what **Measure** did; from them, the rows a view shows (measured where
measured, predicted elsewhere, or one rank's prediction under data parallelism) and its "fits" sentence.

``gradacc.memory.widgets.MemoryExplorer`` holds the controls and asks this module what to show; the panels are drawn
by ``gradacc.memory.explorer_draw``. Units: MiB; N = accumulation steps; batch sizes in samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..i18n import _
from . import (
    MemoryProfile,
    StepConfig,
    StepMemory,
    StepTimeline,
    measure_config,
    predict_parallel,
    predict_step,
    predict_timeline,
    profile_config,
    timeline_config,
)
from .explorer_draw import view_unit
from .parallel import largest_unit_bytes
from .plots import fits_summary

__all__ = [
    "ACCUM_OPTIONS",
    "BATCH_OPTIONS",
    "WIDTH_OPTIONS",
    "DEPTH_OPTIONS",
    "WORLD_OPTIONS",
    "check_options",
    "model_label",
    "ExplorerState",
]


ACCUM_OPTIONS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
"""Accumulation steps N the explorer offers (powers of two, so every effective batch below divides)."""


BATCH_OPTIONS: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
"""Effective batch sizes (samples) the explorer offers."""


WIDTH_OPTIONS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


DEPTH_OPTIONS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


WORLD_OPTIONS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
"""Ranks (world size) the explorer's data-parallel choice offers."""


def check_options(config: StepConfig, accum_steps: int) -> None:
    """Raises ``ValueError`` when ``config`` or ``accum_steps`` is not among the explorer's options."""
    for name, value, options in (
        ("accum_steps", accum_steps, ACCUM_OPTIONS),
        ("effective_batch_size", config.effective_batch_size, BATCH_OPTIONS),
        ("width", config.width, WIDTH_OPTIONS),
        ("depth", config.depth, DEPTH_OPTIONS),
    ):
        if value not in options:
            raise ValueError(f"{name}={value!r} is not one of the explorer's options {list(options)}")
    if config.optimizer not in ("sgd", "adam"):
        raise ValueError(f"the explorer offers optimizers 'sgd' and 'adam', got {config.optimizer!r}")


def model_label(config: StepConfig) -> str:
    """The explorer's name for ``config`` in the learner's language (``"mlp, width 512, depth 4, adam, fp32, effective
    batch 4096"``: ``config.label()``'s words, which lesson 03 prints in English, set apart by commas so that no printed
    ``label()`` line is taken for this message): the title, the sentence and the saved figures' headings."""
    template = _("{arch}, width {width}, depth {depth}, {optimizer}, {precision}, effective batch {batch}")
    text = template.format(arch=config.arch, width=config.width, depth=config.depth, optimizer=config.optimizer,
                           precision=config.precision, batch=config.effective_batch_size)  # fmt: skip
    return text + (_(", checkpointed") if config.checkpoint else "")


class ExplorerState:
    """The explorer's cache and its measurements.

    Args:
        method: how ``measure`` measures real steps (``gradacc.memory.METHODS``).
        real_limit_mib, real_limit_flops: steps whose predicted peak (MiB) or estimated work (6 x parameters x
            effective batch) exceed these run on fake tensors.
    """

    def __init__(self, method: str, real_limit_mib: float, real_limit_flops: float) -> None:
        self.method = method
        self.real_limit_mib = real_limit_mib
        self.real_limit_flops = real_limit_flops
        self._measured: dict[StepConfig, dict[int, StepMemory]] = {}
        self._profiles: dict[StepConfig, MemoryProfile] = {}
        self._timelines: dict[tuple[StepConfig, int], StepTimeline] = {}
        self.notes: dict[StepConfig, str] = {}
        """What ``measure`` did, per configuration (shown only with that configuration)."""

    @staticmethod
    def _profile_key(config: StepConfig) -> StepConfig:
        return config.with_(effective_batch_size=1)

    def add_measurements(self, config: StepConfig, results: Sequence[StepMemory]) -> None:
        """Cache measured ``StepMemory`` results of ``config`` (one per N)."""
        for r in results:
            if r.effective_batch_size != config.effective_batch_size:
                raise ValueError(
                    f"a result for effective batch {r.effective_batch_size} does not belong to {config.label()}"
                )
            self._measured.setdefault(config, {})[r.accum_steps] = r

    def add_profile(self, config: StepConfig, profile: MemoryProfile) -> None:
        """Cache the predictor's ``MemoryProfile`` of ``config`` (any effective batch)."""
        self._profiles[self._profile_key(config)] = profile

    def add_timelines(self, config: StepConfig, timelines: Sequence[StepTimeline]) -> None:
        """Cache measured ``StepTimeline`` s of ``config`` (one per N)."""
        for t in timelines:
            if t.accum_steps * t.micro_batch_size != config.effective_batch_size:
                raise ValueError(
                    f"a timeline for effective batch {t.accum_steps * t.micro_batch_size} does not belong to "
                    f"{config.label()}"
                )
            self._timelines[(config, t.accum_steps)] = t

    def timeline(self, config: StepConfig, accum_steps: int) -> StepTimeline | None:
        """The timeline of ``config`` at N = ``accum_steps``: measured if cached, else predicted from the profile
        (``None`` without one)."""
        if (config, accum_steps) not in self._timelines:
            profile = self._profiles.get(self._profile_key(config))
            if profile is None or not profile.timeline_activations:
                return None
            timeline = predict_timeline(profile, config.effective_batch_size, accum_steps)
            self._timelines[(config, accum_steps)] = timeline
        return self._timelines[(config, accum_steps)]

    def rows(
        self, config: StepConfig, mode: str = "none", world_size: int = 1
    ) -> tuple[list[StepMemory], list[StepMemory] | None]:
        """``(rows, predicted)``: one ``StepMemory`` per N of ``ACCUM_OPTIONS`` that has a number (measured where
        measured, else predicted) and the predictor's rows (``None`` without a profile). Under data parallelism
        (``mode`` other than ``"none"``) both are one rank's predicted memory (``predict_parallel``), for the N whose
        N x ``world_size`` divides the effective batch: the one-process measurements do not apply."""
        measured = self._measured.get(config, {})
        profile = self._profiles.get(self._profile_key(config))
        if mode != "none":
            if profile is None:
                return [], None
            import torch

            with torch.device("meta"):
                unit = largest_unit_bytes(config.build_model())
            eff = config.effective_batch_size
            rows = [predict_parallel(profile, eff, n, world_size=world_size, mode=mode, largest_unit_bytes=unit)
                    for n in ACCUM_OPTIONS if eff % (n * world_size) == 0]  # fmt: skip
            return rows, rows
        predicted = [predict_step(profile, config.effective_batch_size, n) for n in ACCUM_OPTIONS] if profile else None
        rows = []
        for i, n in enumerate(ACCUM_OPTIONS):
            if n in measured:
                rows.append(measured[n])
            elif predicted is not None:
                rows.append(predicted[i])
        return rows, predicted

    def summary(
        self,
        config: StepConfig,
        accum_steps: int,
        rows: list[StepMemory],
        capacity: tuple[str, float],
        world_size: int = 1,
    ) -> dict[str, Any]:
        """``{"sentence", "fits", "smallest_accum_steps"}`` at N = ``accum_steps`` for the capacity
        ``(name, MiB)`` (``gradacc.memory.plots.fits_summary``, in the view's unit; the sentence names the capacity
        without its size, which its menu gives: one size per card, one unit per view)."""
        label, capacity_mib = capacity
        n = accum_steps
        current = next((r for r in rows if r.accum_steps == n), None)
        if current is None and rows:  # data parallel: N x ranks does not divide the effective batch
            text = _("N = {n} on {ranks} ranks does not divide the effective batch {batch}.").format(
                n=n, ranks=world_size, batch=config.effective_batch_size
            )
            return {"sentence": text, "fits": None, "smallest_accum_steps": None}
        if current is None:
            text = _("N = {n}: nothing measured yet for {model}. Press Measure (a probe for the predictor, then one "
                     "step per N).").format(n=n, model=model_label(config))  # fmt: skip
            return {"sentence": text, "fits": None, "smallest_accum_steps": None}
        b = current.breakdown_mib
        summary = fits_summary(
            {r.accum_steps: r.peak_mib for r in rows},
            n,
            capacity_mib,
            _(label),
            micro_batch_size=current.micro_batch_size,
            persistent_mib=2 * b["parameters"] + b["optimizer_state"],  # the gradient buffer matches the parameters
            source=current.source,
            unit=view_unit(rows),
        )
        return {"sentence": summary.pop("text"), **summary}

    def runs_for_real(self, config: StepConfig, profile: MemoryProfile) -> bool:
        """Whether a step of ``config`` is small enough for this machine (else it runs on fake tensors)."""
        peak = predict_step(profile, config.effective_batch_size, 1).peak_mib
        work = 6.0 * profile.n_params * config.effective_batch_size
        return peak <= self.real_limit_mib and work <= self.real_limit_flops

    def measure(
        self,
        config: StepConfig,
        accum_steps: Sequence[int] | None = None,
        report: Callable[[str, int, int], None] = lambda text, done, total: None,
    ) -> list[StepMemory]:
        """Measure ``config``, cache the results and return them.

        First the probe for the predictor (``profile_config`` on fake tensors: fast at any size), then one step per N
        in ``accum_steps`` (default: 1, 2, 4, 8, 16 for real, 1, 4, 16 on fake tensors; the predictor covers the
        rest, exactly on the course's models), and for real steps the measured timeline too. ``report(text, done,
        total)`` is called before each part (``done`` parts of ``total`` finished). ``notes[config]`` says what was
        done, or why it failed (the exception is raised again).
        """
        results: list[StepMemory] = []
        try:
            probing = _("probing {model} for the predictor...").format(model=model_label(config))
            report(f"<i>{probing}</i>", 0, len(ACCUM_OPTIONS) + 1)
            profile = profile_config(config, fake=True)
            self.add_profile(config, profile)
            real = self.runs_for_real(config, profile)
            values = list(accum_steps or ((1, 2, 4, 8, 16) if real else (1, 4, 16)))
            values = [n for n in values if config.effective_batch_size % n == 0]
            for i, n in enumerate(values):
                doing = (_("measuring N = {n} for real...") if real
                         else _("measuring N = {n} on fake tensors (too large to run here)...")).format(n=n)  # fmt: skip
                report(f"<i>{doing}</i>", i + 1, len(values) + 1)
                result = measure_config(config, n, method=self.method) if real else measure_config(config, n, fake=True)
                results.append(result)
                self.add_measurements(config, [result])
                if real:  # the timeline panel's measured timeline (one more step on the counter)
                    self.add_timelines(config, [timeline_config(config, n)])
            report("", len(values) + 1, len(values) + 1)
            done = (_("measured N = {ns} for real; the rest is predicted") if real
                    else _("measured N = {ns} on fake tensors (too large to run here); the rest is predicted"))  # fmt: skip
            self.notes[config] = done.format(ns=", ".join(map(str, values)))
        except Exception as exc:
            failed = _("measuring failed:")
            self.notes[config] = f"<b>{failed}</b> {type(exc).__name__}: {exc}"
            raise
        return results
