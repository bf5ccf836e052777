"""Accumulation inside parallel and mixed-precision stacks (lesson 11, issue 32): what each stack counts, who divides
and by what, and when it syncs, measured on the installed torch and jax.

* ``pipeline_stage_module``: the digits MLP cut into pipeline stages (``torch.distributed.pipelining``).
* ``item_cross_entropy`` and ``padded_digit_sequences``: a loss over the items of a micro-batch (samples, or tokens
  that are not padding) and padded sequences of digit "tokens", for the unequal cases.
* ``trl_packed_micro_batches``: documents of digit "tokens" packed to one length and collated by TRL's own
  ``pack_dataset`` and ``DataCollatorForLanguageModeling`` (the first label of every document becomes ``-100``).
* ``run_parallel_lesson``: 2 gloo ranks of ``gradacc.workers.parallel_stacks`` (pipeline schedules' division, where
  the data-parallel sync happens, token counts across context-parallel ranks, FSDP2's mixed precision with an unused
  layer, DDP ``static_graph`` with ``no_sync()``).
* ``run_jax_sharding``: 4 JAX CPU devices of ``gradacc.workers.jax_sharding`` (where XLA puts the all-reduce).
* ``GatedMLP`` and ``fsdp_bf16_window``: FSDP2 with ``MixedPrecisionPolicy(bfloat16, reduce_dtype=float32)`` and a
  layer that some micro-steps do not use, in the root FSDP unit or as its own unit, on the ranks of the process group
  that exists (one gloo rank in this process if none does).
* ``fsdp_skipped_window``: a window that never uses ``extra``, after one that did, with AdamW: FSDP2 leaves its
  ``.grad`` None (the optimizer skips it) while the output-times-0 workaround gives zeros that AdamW applies.
* ``source_line``: where a library does something, read from its installed source (file and line).
* ``cudagraph_accumulation_check``: the check a learner runs on a CUDA GPU for ``torch.compile``'s CUDA graphs and
  accumulated ``.grad`` (nothing to see on a CPU: CUDA graphs are CUDA only).
* ``plot_pipeline_window``: the lesson's diagram of one optimizer step of a pipeline schedule over data-parallel ranks.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..foundations.data import load_digits_tensors
from ..foundations.launch import run_torchrun_json
from ..foundations.models import make_digits_model
from ..i18n import _
from .distributed import effective_batch_size, single_process_group
from .runs import case_label, run_jax_worker

__all__ = [
    "MODEL",
    "SEQ_LEN",
    "pipeline_stage_module",
    "item_cross_entropy",
    "padded_digit_sequences",
    "trl_packed_micro_batches",
    "trl_padded_micro_batches",
    "run_parallel_lesson",
    "case_label",
    "run_jax_sharding",
    "GatedMLP",
    "TOUCH_UNUSED",
    "fsdp_bf16_window",
    "fsdp_skipped_window",
    "source_line",
    "cudagraph_accumulation_check",
    "plot_pipeline_window",
]


SEQ_LEN = 6
"""Tokens per padded sequence in the token cases of ``run_parallel_lesson`` (each token one digit image)."""

MODEL: dict[str, int] = {"hidden": 32, "depth": 2}
"""The digits MLP of the lesson's pipeline and DDP runs: ``make_digits_model(seed=0, **MODEL)``, layers
``Linear(64, 32), ReLU, Linear(32, 32), ReLU, Linear(32, 10)``."""


def pipeline_stage_module(stage: int, num_stages: int, *, seed: int = 0) -> nn.Sequential:
    """Stage ``stage`` of ``make_digits_model(seed, **MODEL)`` cut into ``num_stages`` (1 or 2) pipeline stages:
    ``[B, 64] -> [B, 10]`` for one stage; ``[B, 64] -> [B, 32]`` (the first Linear and ReLU) and ``[B, 32] -> [B, 10]``
    (the rest) for two. Its parameters, stage 0's then stage 1's, are the whole model's in order.

    Raises:
        ValueError: ``num_stages`` not 1 or 2, or ``stage`` not in ``range(num_stages)``.
    """
    if num_stages not in (1, 2) or stage not in range(num_stages):
        raise ValueError(
            f"stage must be in range(num_stages) with num_stages 1 or 2, got stage {stage} of {num_stages}"
        )
    layers = list(make_digits_model(seed=seed, **MODEL).net)
    cut = [0, 2, len(layers)] if num_stages == 2 else [0, len(layers)]
    return nn.Sequential(*layers[cut[stage] : cut[stage + 1]])


def item_cross_entropy(output: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """The cross-entropy over the ITEMS of a micro-batch: samples (``output [B, 10]``, ``target [B]`` int64) or tokens
    (``output [B, T, 10]``, ``target [B, T]``). A target of ``-100`` is padding, not an item
    (``F.cross_entropy``'s default ``ignore_index``). ``reduction``: ``"mean"`` (over the micro-batch's items: a
    micro-batch with no item gives NaN) or ``"sum"``. Returns a scalar float tensor."""
    return F.cross_entropy(output.flatten(0, -2), target.flatten(), reduction=reduction)


def padded_digit_sequences(lengths: Sequence[int], seq_len: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of digit "tokens" padded to ``seq_len``: sequence ``i`` holds the digits ``start + i x seq_len`` to
    ``start + (i + 1) x seq_len - 1`` as its tokens (a model that treats each token on its own, such as the digits MLP,
    reads ``[S, T, 64]`` as it reads ``[B, 64]``), and the labels after its first ``lengths[i]`` tokens are ``-100``
    (padding: not loss items).

    Returns:
        ``(tokens [S, T, 64] float32, labels [S, T] int64)`` with ``S = len(lengths)``, ``T = seq_len``.

    Raises:
        ValueError: a length outside ``0..seq_len``, or more digits than the 1,797 there are.
    """
    if seq_len < 1 or any(not 0 <= n <= seq_len for n in lengths):
        raise ValueError(f"every length must be in 0..seq_len={seq_len}, got {list(lengths)}")
    stop = start + len(lengths) * seq_len
    x, y = load_digits_tensors()
    if start < 0 or stop > len(y):
        raise ValueError(f"these sequences read digits {start}..{stop - 1} but there are {len(y)}: lower start")
    tokens = x[start:stop].reshape(len(lengths), seq_len, -1)
    padding = torch.arange(seq_len) >= torch.tensor(list(lengths)).reshape(-1, 1)
    return tokens, y[start:stop].reshape(len(lengths), seq_len).masked_fill(padding, -100)


@functools.cache
def _trl_packs(document_lengths: tuple[int, ...], seq_length: int, packs_per_micro_batch: int, start: int) -> tuple:
    import datasets
    from trl.data_utils import pack_dataset
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    offsets = [start + sum(document_lengths[:k]) for k in range(len(document_lengths))]
    documents = [list(range(o, o + n)) for o, n in zip(offsets, document_lengths, strict=True)]
    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # no "Map: 100%" lines in a notebook's output
    try:
        packs = list(pack_dataset(datasets.Dataset.from_dict({"input_ids": documents}), seq_length, strategy="bfd"))
    finally:
        if shown:
            datasets.enable_progress_bars()
    collate = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    step = packs_per_micro_batch
    return tuple(collate(packs[k : k + step]) for k in range(0, len(packs), step))


def trl_packed_micro_batches(
    document_lengths: Sequence[int], seq_length: int, *, packs_per_micro_batch: int = 1, start: int = 0
) -> list[dict[str, Any]]:
    """Documents packed and collated by TRL's own code, as ``SFTTrainer(args=SFTConfig(packing=True))`` does: document
    ``k`` holds ``document_lengths[k]`` consecutive token ids, counted from ``start`` (each id the index of a digit of
    ``load_digits_tensors()``, so the digits MLP can read a token as a digit); ``trl.data_utils.pack_dataset``
    (``strategy="bfd"``, TRL's default) packs them into rows of at most ``seq_length`` tokens, and
    ``DataCollatorForLanguageModeling(padding_free=True)`` (packing with ``"bfd"`` turns ``padding_free`` on) collates
    ``packs_per_micro_batch`` packs into each micro-batch: one row, ``position_ids`` restarting at 0 for every
    document, and the label of every document's first token set to ``-100``. Computed once per argument set; every
    call returns fresh tensors.

    Returns:
        one dict per micro-batch, in TRL's pack order, with ``input_ids``, ``labels`` and ``position_ids``
        (``[1, T]`` int64) and TRL's other keys.
    """
    batches = _trl_packs(tuple(int(n) for n in document_lengths), int(seq_length), int(packs_per_micro_batch), start)
    return [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()} for batch in batches]


@functools.cache
def _trl_padded(document_lengths: tuple[int, ...], rows_per_micro_batch: int, start: int) -> tuple:
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    offsets = [start + sum(document_lengths[:k]) for k in range(len(document_lengths))]
    documents = [{"input_ids": list(range(o, o + n))} for o, n in zip(offsets, document_lengths, strict=True)]
    collate = DataCollatorForLanguageModeling(pad_token_id=0)
    step = rows_per_micro_batch
    return tuple(collate(documents[k : k + step]) for k in range(0, len(documents), step))


def trl_padded_micro_batches(
    document_lengths: Sequence[int], rows_per_micro_batch: int, *, start: int = 0
) -> list[dict[str, Any]]:
    """Documents collated without packing by TRL's own ``DataCollatorForLanguageModeling`` (its default,
    ``padding_free=False``), as ``SFTTrainer`` does on unpacked language-modeling data: ``rows_per_micro_batch``
    documents per micro-batch, each a row, padded on the right to the micro-batch's longest with labels ``-100``. The
    labels are the token ids (document ``k`` holds ``document_lengths[k]`` consecutive ids from ``start``); the first
    token of a row keeps its label, and a causal LM's loss shifts the labels, so it predicts ``labels[:, 1:]``.
    Computed once per argument set; every call returns fresh tensors.

    Returns:
        one dict per micro-batch with ``input_ids``, ``labels`` and ``attention_mask`` (``[rows, T]`` int64).
    """
    batches = _trl_padded(tuple(int(n) for n in document_lengths), int(rows_per_micro_batch), int(start))
    return [{k: v.clone() for k, v in batch.items()} for batch in batches]


def run_parallel_lesson(
    *,
    micro_batch_size: int = 8,
    n_microbatches: int = 4,
    accum_steps: int = 4,
    windows: int = 3,
    timeout: float = 180.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Every torch case of lesson 11 on 2 gloo ranks, in one torchrun launch (see ``gradacc.workers.parallel_stacks``
    for the cases and the keys of the result).

    Args:
        micro_batch_size: samples (or padded sequences of ``SEQ_LEN`` tokens) per micro-batch (all cases).
        n_microbatches: micro-batches per pipeline ``step()`` (M).
        accum_steps: micro-steps per window of the DDP ``static_graph`` cases (N).
        windows: optimizer steps of the ``static_graph`` cases.
        timeout: seconds before the launch is stopped.
        progress: show the elapsed time while the ranks run.

    Returns:
        Rank 0's JSON plus ``"launcher_s"`` (wall seconds, start-up included).

    Raises:
        ValueError: any size < 1, or more samples than the 1,797 digits hold.
        WorkerError: a rank failed or the launch ran past ``timeout``.
    """
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise ValueError(f"windows must be an int >= 1, got {windows!r}")
    need = max(  # digits read by
        effective_batch_size(micro_batch_size, 2 * n_microbatches, 2),  # the data-parallel cases' 2 x 2M micro-batches
        effective_batch_size(micro_batch_size, n_microbatches, 2) * SEQ_LEN,  # their 2 x M padded sequences
        effective_batch_size(micro_batch_size, accum_steps, 2) * windows,  # the static_graph cases' windows
        effective_batch_size(micro_batch_size, 4, 2),  # FSDP2's 4 micro-batches per rank
    )
    if need > 1797:
        raise ValueError(f"these sizes read {need} digits but there are 1797: lower micro_batch_size or the counts")
    return run_torchrun_json(
        "gradacc.workers.parallel_stacks",
        [
            f"--micro-batch-size={micro_batch_size}",
            f"--n-microbatches={n_microbatches}",
            f"--accum-steps={accum_steps}",
            f"--windows={windows}",
        ],
        nproc_per_node=2,
        what=_("torchrun (2 pipeline / DDP workers)"),
        timeout=timeout,
        progress=progress,
    )


def run_jax_sharding(
    *, devices: int = 4, micro_batch_size: int = 8, accum_steps: int = 4, hidden: int = 32, timeout: float = 180.0,
    progress: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The three accumulations of ``gradacc.parallel.jax_sharding`` compiled and run on ``devices`` JAX CPU devices in a
    fresh process (``gradacc.workers.jax_sharding``: the keys of the result), plus ``"launcher_s"``.

    Raises:
        ValueError: bad sizes (``effective_batch_size``).
        WorkerError: the worker failed or timed out.
    """
    effective_batch_size(micro_batch_size, accum_steps, devices)
    args = [f"--micro-batch-size={micro_batch_size}", f"--accum-steps={accum_steps}", f"--hidden={hidden}"]
    return run_jax_worker("gradacc.workers.jax_sharding", args, devices=devices, timeout=timeout, progress=progress)


class GatedMLP(nn.Module):
    """``[B, 64] -> [B, 10]`` logits: a digits MLP (``Linear(64, 32), ReLU, Linear(32, 10)``) plus an ``extra``
    ``Linear(64, 10)`` added only when ``forward(x, use_extra=True)``: a layer that some micro-batches do not use (an
    auxiliary head, an adapter or expert that only some batches reach). ``forward(x, zero_extra=True)`` runs
    ``extra`` but adds its output times 0: the same logits, and a zero gradient for ``extra``."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.body = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
            self.extra = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor, use_extra: bool = False, zero_extra: bool = False) -> torch.Tensor:
        out = self.body(x)
        if use_extra:
            return out + self.extra(x)
        return out + 0 * self.extra(x) if zero_extra else out


TOUCH_UNUSED = (None, "parameters", "output")
"""``fsdp_bf16_window``'s ways to give ``extra`` a gradient on the micro-steps that do not use it: none, ``0 x
sum(extra's parameters)`` added to the loss, or ``extra``'s forward run with its output weighted by 0."""


def fsdp_bf16_window(
    micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    *,
    extra_on: Sequence[int],
    sync_each: bool = False,
    touch_unused: str | None = None,
    extra_unit: bool = False,
    items: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """One accumulation window of ``GatedMLP`` under FSDP2 with ``MixedPrecisionPolicy(param_dtype=bfloat16,
    reduce_dtype=float32)``, on every rank of the process group that exists (a world of one gloo process in this
    process, ``single_process_group``, if none does); each rank passes its own ``micro_batches``.

    Micro-step ``k`` uses the ``extra`` layer when ``k in extra_on``. Each micro-batch's summed cross-entropy is
    divided by ``items`` (default: this rank's samples in the window) and multiplied by the world size, because
    FSDP2 averages the ranks' gradients. With ``sync_each=False`` the gradient sync is off
    (``set_requires_gradient_sync(False)``) on every micro-step but the last. ``extra_unit=True`` wraps ``extra`` in
    its own ``fully_shard`` before the root (the usual per-layer wrapping of an adapter or expert); otherwise it sits
    in the root unit. ``touch_unused`` (``TOUCH_UNUSED``) gives ``extra`` a gradient on the micro-steps that do not use
    it. FSDP2's own printout of a failed assertion is swallowed.

    Returns:
        ``{"outcome": "ok" | "error: <type>: <first line>", "grads": float32 [P] tensor (every parameter's full
        gradient, in ``parameters()`` order; zeros for a parameter no micro-step used) or None}``.

    Raises:
        ValueError: ``touch_unused`` not in ``TOUCH_UNUSED``.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if touch_unused not in TOUCH_UNUSED:
        raise ValueError(f"touch_unused must be one of {TOUCH_UNUSED}, got {touch_unused!r}")
    items = items or sum(len(labels) for _, labels in micro_batches)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    with single_process_group():
        world = torch.distributed.get_world_size()
        model = GatedMLP(seed)
        if extra_unit:
            fully_shard(model.extra, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        last = len(micro_batches) - 1
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                for k, (x, y) in enumerate(micro_batches):
                    model.set_requires_gradient_sync(sync_each or k == last)
                    used = k in extra_on
                    logits = model(x, use_extra=used, zero_extra=not used and touch_unused == "output")
                    loss = F.cross_entropy(logits.float(), y, reduction="sum") * world / items
                    if not used and touch_unused == "parameters":
                        loss = loss + 0 * sum(p.sum() for p in model.extra.parameters())
                    loss.backward()
        except (AssertionError, AttributeError, RuntimeError) as exc:
            return {"outcome": f"error: {type(exc).__name__}: " + str(exc).strip().splitlines()[0], "grads": None}
        grads = torch.cat(
            [torch.zeros(p.numel()) if p.grad is None else p.grad.full_tensor().flatten() for p in model.parameters()]
        )
    return {"outcome": "ok", "grads": grads}


def fsdp_skipped_window(
    touch_unused: str | None, *, lr: float = 0.01, weight_decay: float = 0.01, seed: int = 0
) -> dict[str, Any]:
    """Two accumulation windows of ``GatedMLP`` under FSDP2 (bfloat16 parameters, float32 reduction; the root unit;
    a sync on every micro-step, FSDP2's default), each of 2 micro-batches of 8 digits, then an AdamW step
    (``lr``, ``weight_decay``): window 1 uses ``extra`` on its first micro-step, window 2 never uses it.
    ``touch_unused="output"`` runs ``extra`` with its output weighted by 0 on the micro-steps that do not use it
    (``GatedMLP(..., zero_extra=True)``); ``None`` leaves it out. On one gloo rank in this process
    (``single_process_group``) unless a process group exists.

    Returns:
        ``{"grad_is_none": bool (extra's weight .grad after window 2's backward passes), "moved": float (the largest
        change of extra's weight in window 2's optimizer step), "body_moved": float (the same for the first layer)}``.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if touch_unused not in (None, "output"):
        raise ValueError(f"touch_unused must be None or 'output', got {touch_unused!r}")
    x, y = load_digits_tensors()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    with single_process_group():
        model = GatedMLP(seed)
        fully_shard(model, mp_policy=policy)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        windows = [[(x[0:8], y[0:8], True), (x[8:16], y[8:16], False)], [(x[16:24], y[16:24], False)] * 2]
        for window in windows:
            before = [p.full_tensor().detach().clone() for p in (model.extra.weight, model.body[0].weight)]
            for inputs, labels, used in window:
                logits = model(inputs, use_extra=used, zero_extra=not used and touch_unused == "output")
                (F.cross_entropy(logits.float(), labels, reduction="sum") / 16).backward()
            grad_is_none = model.extra.weight.grad is None
            optimizer.step()
            optimizer.zero_grad()
        after = [p.full_tensor().detach() for p in (model.extra.weight, model.body[0].weight)]
    moved = [float((a - b).abs().max()) for a, b in zip(after, before, strict=True)]
    return {"grad_is_none": grad_is_none, "moved": moved[0], "body_moved": moved[1]}


def source_line(obj: Any, needle: str) -> str:
    """``"<path under site-packages>:<line>"`` of the first line of ``obj``'s installed source (a function, class or
    module) that contains ``needle``: a citation that stays right on every installed version.

    Raises:
        ValueError: no line of ``obj``'s source contains ``needle``.
    """
    obj = inspect.unwrap(obj)  # through decorators such as torch.no_grad
    lines, first = inspect.getsourcelines(obj)
    first = first or 1  # a module's source starts at line 1 (inspect gives 0)
    for offset, line in enumerate(lines):
        if needle in line:
            path = Path(inspect.getsourcefile(obj) or "?")
            parts = path.parts
            short = Path(*parts[parts.index("site-packages") + 1 :]) if "site-packages" in parts else path
            return f"{short}:{first + offset}"
    raise ValueError(f"{needle!r} is not in the source of {getattr(obj, '__qualname__', obj)!r}")


def cudagraph_accumulation_check(
    *, accum_steps: int = 4, mode: str = "reduce-overhead", device: str = "cuda", compile_fn: Callable | None = None
) -> dict[str, Any]:
    """The check for ``torch.compile`` with CUDA graphs and accumulated gradients (pytorch/pytorch #169545,
    #96693): run ``accum_steps`` micro-steps of a small model compiled with ``mode`` and eagerly, and compare the
    last layer's bias gradient (each micro-step adds ``1 / accum_steps`` per output: the sum is 1.0).

    A CUDA graph replays into fixed output buffers; if ``.grad`` keeps a reference to such a buffer (the first
    micro-step's gradient is stolen, not copied), the next replay overwrites it: the reports show ``1 / accum_steps``
    instead of 1.0, or ``RuntimeError: ... accessing tensor output of CUDAGraphs that has been overwritten by a
    subsequent run``. Only a CUDA device has CUDA graphs (on a CPU, ``mode="reduce-overhead"`` compiles without
    them).

    Args:
        device: where to run; a non-CUDA device runs the same code without CUDA graphs.
        compile_fn: replaces ``torch.compile(model, mode=mode)`` (tests use a cheap backend).

    Returns:
        ``{"device", "torch_version", "mode", "accum_steps", "eager_bias_grad", "compiled_bias_grad" (None if it
        raised), "error" (None or the first line)}``.

    Raises:
        RuntimeError: ``device`` is CUDA and no CUDA device is available.
    """
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(
            "no CUDA device here: run this check on a GPU runtime (Colab: Runtime > Change runtime type)"
        )

    def make() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)

    def bias_grad(model: nn.Module, compiled: Callable, mark_steps: bool) -> float:
        for k in range(accum_steps):
            if mark_steps:
                torch.compiler.cudagraph_mark_step_begin()
            x = torch.randn(8, 16, device=device, generator=torch.Generator(device).manual_seed(k))
            (compiled(x).sum() / (8 * accum_steps)).backward()  # each micro-step: 1 / accum_steps per output
        return float(model[2].bias.grad.sum())

    eager = make()
    result: dict[str, Any] = {"device": device, "torch_version": torch.__version__, "mode": mode}
    result.update(accum_steps=accum_steps, eager_bias_grad=bias_grad(eager, eager, False), error=None)
    model = make()
    compiled = compile_fn(model) if compile_fn else torch.compile(model, mode=mode)
    try:
        result["compiled_bias_grad"] = bias_grad(model, compiled, device.startswith("cuda"))
    except RuntimeError as exc:
        result.update(compiled_bias_grad=None, error=str(exc).strip().splitlines()[0])
    return result


def plot_pipeline_window(ax, *, n_microbatches: int, step_calls: int, world_size: int, micro_batch_size: int) -> None:
    """One optimizer step of a pipeline schedule with accumulation outside it (lesson 11): one row of boxes per
    data-parallel rank, one box per micro-batch (``n_microbatches`` per ``step()``, ``step_calls`` calls), and at the
    end of every ``step()`` the two things the schedule does there: divide ``.grad`` by M (``scale_grads=True``) and
    let DDP all-reduce (the last micro-batch's backward). The title gives the effective batch size."""
    width = n_microbatches * step_calls
    for rank in range(world_size):
        for k in range(width):
            call = k // n_microbatches
            ax.add_patch(_box((k + 0.08 + 0.3 * call, rank + 0.15), 0.84, 0.7, ("#4c72b0", "#55a868")[call % 2]))
            ax.text(k + 0.5 + 0.3 * call, rank + 0.5, f"{micro_batch_size}", ha="center", va="center", fontsize=9,
                    color="white")  # fmt: skip
    for call in range(step_calls):
        x = (call + 1) * n_microbatches + 0.3 * call + 0.04
        ax.axvline(x, color="#c44e52", lw=1.5, ls="--")
        last = call == step_calls - 1
        ax.text(x - 0.1, world_size + 0.05, _("÷M, all-reduce") + (", optimizer.step()" if last else ""),
                ha="right", va="bottom", fontsize=9, color="#c44e52")  # fmt: skip
    ax.set_xlim(0, width + 0.3 * step_calls)
    ax.set_ylim(0, world_size + 0.45)
    ax.set_yticks(
        [r + 0.5 for r in range(world_size)], [_("rank {rank}").format(rank=r) for r in range(world_size)], fontsize=9
    )
    ax.set_xticks([])
    ax.set_xlabel(
        _("micro-batches in time order: {calls} step() calls of M = {m}").format(calls=step_calls, m=n_microbatches),
        fontsize=9,
    )
    total = micro_batch_size * n_microbatches * step_calls * world_size
    # TRANSLATORS: lesson 11's diagram title: micro-batch size x M x step() calls x data-parallel ranks
    title = _("effective batch = {b} x {m} x {a} x {dp} = {total} samples (micro-batch x M x step() calls x dp)")
    ax.set_title(
        title.format(b=micro_batch_size, m=n_microbatches, a=step_calls, dp=world_size, total=total), fontsize=9
    )
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _box(xy: tuple[float, float], width: float, height: float, color: str):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, width, height, color=color)
