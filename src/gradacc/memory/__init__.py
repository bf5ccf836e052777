"""Lesson 03's room: measuring and predicting the memory of a training step, with one API used by every lesson
(``from gradacc.memory import ...``), and what lesson 03 builds on it.

One optimizer step made of N micro-steps (accumulation steps) is run for real and its peak memory is reported with a
breakdown at the moment of the peak: parameters, gradients, optimizer state, activations (tensors the forward pass
keeps for the backward pass), temporaries (backward and optimizer-step scratch) and other (inputs, buffers, allocator
slack). Units: MiB (2**20 bytes) and seconds; batch sizes in samples.

The API (this package re-exports it), one concern per module:

* ``tracker``: the categories, ``StepMemory`` and ``LiveStorageCounter`` (live tensor storages by category);
* ``options``: optimizers and their state bytes, precisions, measuring methods, argument checks;
* ``measure``: ``measure_run`` / ``measure_step`` (CUDA allocator, PyTorch's ``MemTracker`` or the counter),
  ``time_step``, ``count_step_work``;
* ``config``: the lessons' setups (``StepConfig``), ``measure_config`` and ``measure_sweep`` (real or fake tensors);
* ``predict``: ``MemoryProfile``, ``profile_model``, ``predict_step``, ``smallest_fitting_accum_steps``, ``smallest_n_line``;
* ``timeline``: ``StepTimeline``, ``record_timeline``, ``timeline_config``: every category after every operation of
  one step, with the micro-steps marked; ``predict_timeline`` draws the same from a profile;
* ``spans``: ``measure_spans``, ``spans_config``: what a tracker started around one micro-step reports against one
  around the whole window (the gradient buffer that micro-step 1 allocated);
* ``parallel``: ``predict_parallel``, one rank's peak under DDP or FSDP2 (gradient sync each micro-step or at the
  boundary), from the one-process profile;
* ``xla``: XLA's compiled memory analysis for JAX, and ``step_memory`` (one JAX training step of lesson 06's loops).

Imported by name (importing this package imports none of them): the memory explorer (``widgets``: its controls;
``explorer_state``: what it knows and measures; ``explorer_draw``: its panels; ``explorer_access``: its tooltips,
screen-reader names and text alternatives), ``capacity`` (what a GPU can hold),
``plots`` (the memory figures), ``bench`` and ``bench_report`` (``gradacc bench``: five implementations side by side).

The room imports ``foundations``, and ``frameworks`` and ``parallel`` where it measures them (``bench``,
``step_memory``), inside the functions that do (``tests/test_layout.py``).
"""

from .config import StepConfig, measure_config, measure_sweep
from .measure import count_step_work, measure_run, measure_step, time_step
from .options import (
    METHODS,
    OPTIMIZERS,
    PRECISIONS,
    STATE_BYTES_PER_PARAM,
    check_budget,
    check_divisible,
    make_optimizer,
    optimizer_state_bytes,
)
from .parallel import PARALLEL_MODES, predict_parallel, setting_label
from .predict import (
    MemoryProfile,
    predict_step,
    profile_config,
    profile_model,
    smallest_fitting_accum_steps,
    smallest_n_line,
)
from .spans import WindowSpans, measure_spans, spans_config
from .timeline import StepTimeline, predict_timeline, record_timeline, timeline_config
from .tracker import CATEGORIES, MIB, LiveStorageCounter, StepMemory, format_breakdown
from .xla import jax_compiled_memory, jax_memory_analysis, step_memory

__all__ = [
    "MIB",
    "CATEGORIES",
    "OPTIMIZERS",
    "PRECISIONS",
    "STATE_BYTES_PER_PARAM",
    "METHODS",
    "StepMemory",
    "format_breakdown",
    "LiveStorageCounter",
    "MemoryProfile",
    "StepConfig",
    "make_optimizer",
    "optimizer_state_bytes",
    "check_divisible",
    "check_budget",
    "measure_step",
    "measure_run",
    "measure_config",
    "measure_sweep",
    "profile_model",
    "profile_config",
    "predict_step",
    "smallest_fitting_accum_steps",
    "smallest_n_line",
    "time_step",
    "count_step_work",
    "jax_compiled_memory",
    "jax_memory_analysis",
    "step_memory",
    "WindowSpans",
    "measure_spans",
    "spans_config",
    "StepTimeline",
    "record_timeline",
    "timeline_config",
    "predict_timeline",
    "PARALLEL_MODES",
    "predict_parallel",
    "setting_label",
]
