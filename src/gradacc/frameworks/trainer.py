"""Gradient accumulation in the Hugging Face ``Trainer``: probes that measure what it does (lesson 05).

Everything runs offline (``HF_HUB_OFFLINE=1`` is set before transformers is imported); the text task, tokenizer and
tiny models live in ``gradacc.frameworks.texttask`` and are re-exported here.

How ``Trainer`` accumulates (transformers 5.24, the pins, and 5.15, Colab's; read from ``transformers/trainer.py``):

* it collects the N micro-batches of a window first (``get_batch_samples``) and counts ``num_items_in_batch`` (the
  labels that are not -100, a causal LM's over ``labels[..., 1:]``, the positions the shifted loss predicts) only
  when the first micro-batch has a ``labels`` key AND it will pass the count on (next point); otherwise the count is
  ``None`` (a question-answering model's batch, whose labels are ``start_positions``/``end_positions``, gets ``None``);
* it decides whether the model normalizes the loss by that count itself from ``model.accepts_loss_kwargs`` or, if
  absent, from whether ``forward`` accepts ``**kwargs`` (``Trainer.model_accepts_loss_kwargs``); if a
  ``compute_loss_func`` is given, or the model accepts loss kwargs and the count is not ``None``, it passes
  ``num_items_in_batch`` and does NOT divide the loss by N;
* otherwise (no ``compute_loss_func``, and the model does not accept loss kwargs or the count is ``None``) it divides
  each micro-batch loss by the window's real number of micro-batches (``current_gradient_accumulation_steps``, so a
  short final window is divided by its real size);
* a ``Trainer`` subclass can say that its own loss is already divided over the window with the class attribute
  ``loss_is_scaled_for_ga = True`` (transformers 5.19 and later); 5.15 does not read it and still divides by N in
  the case above (no ``compute_loss_func``, and a model that does not accept loss kwargs or a count of ``None``).

A model whose ``forward`` takes ``**kwargs`` but ignores ``num_items_in_batch`` (``BertForSequenceClassification`` in
transformers 5; any model through ``takes_loss_kwargs``) therefore gets a loss and gradient N times too large.
``ProbeTrainer`` and ``first_step_probe`` measure it.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

import math
import tempfile
from collections.abc import Callable
from typing import Any

import torch

from ..i18n import _
from .texttask import (  # re-exported: lesson 05 imports the text task from here too
    FAMILY_NAMES,
    MODULE_FAMILIES,
    FamilySplit,
    classification_metrics,
    encode_dataset,
    family_of,
    family_split,
    quiet_transformers,
    tiny_bert_classifier,
    tiny_causal_lm,
    train_wordlevel_tokenizer,
)

# Also public: ``ProbeTrainer`` (a ``transformers.Trainer`` subclass built on first access, see ``__getattr__``).
__all__ = [
    "MODULE_FAMILIES",
    "FAMILY_NAMES",
    "family_of",
    "FamilySplit",
    "family_split",
    "train_wordlevel_tokenizer",
    "encode_dataset",
    "tiny_bert_classifier",
    "tiny_causal_lm",
    "classification_metrics",
    "quiet_transformers",
    "probe_args",
    "takes_loss_kwargs",
    "first_step_probe",
    "update_ratio",
    "batch_gradients",
    "run_trainer_ddp",
]


def _trainer_class():
    from transformers import Trainer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    class _Recorder(TrainerCallback):
        def __init__(self, owner) -> None:
            self.owner = owner

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if self.owner.keep_tensors:
                self.owner._weights_before = {k: v.detach().clone() for k, v in model.named_parameters()}

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            record: dict[str, Any] = {"optimizer_step": state.global_step + 1}
            if self.owner.keep_tensors:
                record["weights_before"] = self.owner._weights_before
                record["grads"] = {
                    k: v.grad.detach().clone() for k, v in model.named_parameters() if v.grad is not None
                }
            self.owner.optimizer_steps.append(record)

    class ProbeTrainer(Trainer):
        """A ``Trainer`` that records what its accumulation does, for lessons and tests.

        Records ``micro_steps`` (one dict per forward/backward: ``num_items_in_batch`` as an int or ``None``, the
        returned ``loss`` as a float, the micro-batch's ``samples``, and with ``keep_tensors`` its ``inputs``) and
        ``optimizer_steps`` (one dict per optimizer step; with ``keep_tensors`` the ``weights_before`` the window and
        the accumulated ``grads`` just before ``optimizer.step()``, after clipping). Removes the ``PrinterCallback``
        that ``disable_tqdm=True`` adds, so training prints nothing. With ``probe_args`` it reads the training set in
        order, so a window of N micro-batches of B holds the same samples as one batch of N*B.
        """

        def __init__(self, *args, keep_tensors: bool = False, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.keep_tensors = keep_tensors
            self.micro_steps: list[dict[str, Any]] = []
            self.optimizer_steps: list[dict[str, Any]] = []
            self._weights_before: dict[str, torch.Tensor] = {}
            self.remove_callback(PrinterCallback)
            self.add_callback(_Recorder(self))

        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = super().training_step(model, inputs, num_items_in_batch)
            record: dict[str, Any] = {
                "num_items_in_batch": None if num_items_in_batch is None else int(num_items_in_batch),
                "loss": float(loss),
                "samples": int(inputs["input_ids"].shape[0]),
            }
            if self.keep_tensors:
                record["inputs"] = {k: v.detach().cpu().clone() for k, v in inputs.items()}
            self.micro_steps.append(record)
            return loss

    return ProbeTrainer


def __getattr__(name: str):  # ProbeTrainer is built lazily so that importing gradacc.frameworks.trainer stays cheap
    if name == "ProbeTrainer":
        cls = _trainer_class()
        globals()["ProbeTrainer"] = cls
        return cls
    raise AttributeError(f"module 'gradacc.frameworks.trainer' has no attribute {name!r}")


def takes_loss_kwargs(model):
    """Give ``model`` a ``forward`` that takes ``**kwargs`` and ignores ``num_items_in_batch``: what
    ``BertForSequenceClassification.forward`` is in transformers 5 (``**kwargs`` for attention back-ends), for any
    model, and what many models of one's own look like. Trainer then concludes that the
    model divides by the window's count itself, passes the count and skips its own division by N, and nobody divides:
    the N-times-too-large update of lesson 05. Returns ``model``."""
    import inspect

    plain_forward = model.forward

    def forward(*args, num_items_in_batch=None, **kwargs):  # takes the count and ignores it
        return plain_forward(*args, **kwargs)

    # the plain forward's parameters plus **kwargs: Trainer keeps the dataset columns those parameters name
    plain = inspect.signature(plain_forward)
    params = [p for p in plain.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    forward.__signature__ = plain.replace(
        parameters=[*params, inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
    )
    model.forward = forward
    return model


def probe_args(output_dir: str, micro_batch_size: int, accum_steps: int, **overrides: Any):
    """``TrainingArguments`` for probing one or a few optimizer steps exactly.

    Plain SGD (``optim="sgd"``: no momentum, no weight decay) at a constant learning rate of 0.1, no clipping
    (``max_grad_norm=1e9``: the clipping factor is exactly 1 and the gradient norm is still logged), the training set
    read in order (``train_sampling_strategy="sequential"``, so a window of N micro-batches of B holds the samples of
    one batch of N*B), a log line every optimizer step, nothing saved or reported, no progress bars. ``overrides``
    replace any of these.

    Raises:
        ValueError: ``accum_steps`` or ``micro_batch_size`` < 1.
    """
    from transformers import TrainingArguments

    from ..foundations.data import check_accum_steps

    check_accum_steps(accum_steps)
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    settings: dict[str, Any] = {
        "output_dir": output_dir,
        "per_device_train_batch_size": micro_batch_size,
        "gradient_accumulation_steps": accum_steps,
        "optim": "sgd",
        "learning_rate": 0.1,
        "lr_scheduler_type": "constant",
        "weight_decay": 0.0,
        "max_grad_norm": 1e9,
        "train_sampling_strategy": "sequential",
        "max_steps": 1,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "seed": 0,
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_pin_memory": torch.cuda.is_available(),  # pinning without a GPU only warns
    }
    settings.update(overrides)
    return TrainingArguments(**settings)


def update_ratio(
    after_a: dict[str, torch.Tensor], after_b: dict[str, torch.Tensor], before: dict[str, torch.Tensor]
) -> float:
    """``||after_a - before|| / ||after_b - before||`` over all parameters (L2 norms): how much larger update a is.

    Raises:
        ValueError: different parameter names, or update b is zero.
    """
    if set(after_a) != set(after_b) or set(after_a) != set(before):
        raise ValueError("the three state dicts must hold the same parameter names")
    num = math.sqrt(sum(float((after_a[k] - before[k]).double().pow(2).sum()) for k in before))
    den = math.sqrt(sum(float((after_b[k] - before[k]).double().pow(2).sum()) for k in before))
    if den == 0:
        raise ValueError("update b is zero: nothing to compare with")
    return num / den


def first_step_probe(
    make_model: Callable[[], torch.nn.Module],
    train_dataset,
    micro_batch_size: int,
    accum_steps: int,
    *,
    data_collator=None,
    processing_class=None,
    compute_loss_func: Callable | None = None,
    accepts_loss_kwargs: bool | None = None,
    keep_tensors: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Train a fresh model for one optimizer step (``probe_args``) and report what Trainer did.

    Args:
        make_model: returns a fresh model with the same initial weights at every call.
        train_dataset: a ``datasets.Dataset``; the first ``micro_batch_size x accum_steps`` rows form the window.
        compute_loss_func: passed to ``Trainer`` (signature ``(outputs, labels, num_items_in_batch)``).
        accepts_loss_kwargs: if not ``None``, set ``model.accepts_loss_kwargs`` to it before building the Trainer.
        keep_tensors: keep inputs, pre-step weights and gradients (see ``ProbeTrainer``).
        overrides: more ``TrainingArguments`` (e.g. ``max_steps=3``).

    Returns:
        ``{"loss": first logged training loss, "grad_norm": first logged gradient norm, "weights_before",
        "weights_after": parameter dicts (CPU copies), "model_accepts_loss_kwargs": Trainer's decision,
        "micro_steps", "optimizer_steps": ProbeTrainer's records, "log_history": Trainer's}``.
    """
    model = make_model()
    if accepts_loss_kwargs is not None:
        model.accepts_loss_kwargs = accepts_loss_kwargs
    before = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
    with tempfile.TemporaryDirectory(prefix="gradacc-trainer-") as tmp:
        trainer = __getattr__("ProbeTrainer")(
            model=model,
            args=probe_args(tmp, micro_batch_size, accum_steps, **overrides),
            train_dataset=train_dataset,
            data_collator=data_collator,
            processing_class=processing_class,
            compute_loss_func=compute_loss_func,
            keep_tensors=keep_tensors,
        )
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    return {
        "loss": float(logs[0]["loss"]),
        "grad_norm": float(logs[0]["grad_norm"]),
        "weights_before": before,
        "weights_after": {k: v.detach().cpu().clone() for k, v in trainer.model.named_parameters()},
        "model_accepts_loss_kwargs": bool(trainer.model_accepts_loss_kwargs),
        "micro_steps": trainer.micro_steps,
        "optimizer_steps": trainer.optimizer_steps,
        "log_history": trainer.state.log_history,
    }


def batch_gradients(
    make_model: Callable[[], torch.nn.Module], weights: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Gradients of the model's own loss on ONE batch, at the given weights: the target accumulation must reproduce.

    Args:
        make_model: builds the architecture (its initial weights are replaced by ``weights``).
        weights: parameter name -> tensor, e.g. a ``ProbeTrainer`` record's ``weights_before``.
        batch: model inputs with ``labels`` (padded rows: labels -100 and ``attention_mask`` 0 at padding), e.g. the
            window's rows put through the Trainer's data collator at once.

    Returns:
        Parameter name -> gradient (detached, on the CPU) of ``model(**batch).loss``: the mean over the batch's items
        (samples for a classifier; predicted tokens, labels not -100 after the shift, for a causal LM).

    Raises:
        ValueError: ``weights`` do not name exactly the model's parameters.
    """
    model = make_model()
    names = [name for name, _ in model.named_parameters()]
    if set(names) != set(weights):
        raise ValueError("weights must name exactly the model's parameters")
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(weights[name])
    loss = model(**batch).loss
    grads = torch.autograd.grad(loss, [p for _, p in model.named_parameters()])
    return {name: g.detach().cpu() for name, g in zip(names, grads, strict=True)}


def run_trainer_ddp(*, timeout: float = 300.0, progress: bool = False) -> dict[str, Any]:
    """Launch ``gradacc.workers.trainer_ddp`` on 2 gloo processes with torchrun and return rank 0's JSON result.

    One optimizer step of lesson 05's causal LM, 1 sequence per micro-batch, N = 2, 2 ranks, with
    ``average_tokens_across_devices`` True and False (see the worker's docstring for every key).

    Returns:
        The worker's dict plus ``"launcher_s"`` (wall seconds of the launch, start-up included).

    Raises:
        WorkerError: a worker failed or the run took longer than ``timeout`` seconds.
    """
    from ..foundations.launch import run_torchrun_json

    return run_torchrun_json(
        "gradacc.workers.trainer_ddp",
        [],
        nproc_per_node=2,
        what=_("torchrun (2 Trainer workers)"),
        timeout=timeout,
        progress=progress,
    )
