"""TRL's ``SFTTrainer`` with padding-free batches and completion-only labels, measured (lesson 10, section 2).

How it accumulates (trl 1.16.0 on transformers 5.24.0, the pins; transformers 5.15.0, Colab's, counts the same way):

* **padding-free**: ``SFTConfig(padding_free=True)`` (or ``packing=True``) makes TRL's
  ``DataCollatorForLanguageModeling`` concatenate a micro-batch's sequences into ONE row, with ``position_ids`` that
  restart at 0 for every sequence and the label of every sequence's first token set to -100
  (``trl/trainer/sft_trainer.py:189-208``); transformers builds the block-diagonal attention mask from those
  ``position_ids`` when there is no ``attention_mask`` and no cache (``masking_utils.py:862-870``);
* **what it counts**: ``Trainer`` counts ``num_items_in_batch``, the labels of the whole window that are not -100,
  over ``labels[..., 1:]`` for a causal LM (``trainer.py:2330-2343``): with completion-only labels, the completion
  tokens of every sequence of the window;
* **who divides**: TRL's loss is the summed token NLL divided by ``num_items_in_batch`` (``sft_trainer.py:1616-1618``)
  and ``Trainer`` does not divide again, provided the model "accepts loss kwargs"; a model that sets
  ``accepts_loss_kwargs = False`` gets no count: TRL divides by the micro-batch's own tokens and ``Trainer`` by the
  number of micro-batches, the per-micro-batch weighting of old. Many trainable classes do
  (``opted_out_classes`` lists them from the installed source), for example ``Qwen2_5_VLForConditionalGeneration``,
  ``Qwen3VLForConditionalGeneration``, ``Glm4vForConditionalGeneration``, ``Gemma3nForConditionalGeneration``,
  ``Gemma4ForConditionalGeneration`` and ``Qwen3_5ForConditionalGeneration`` in transformers 5.15 and 5.24, and
  ``Gemma3ForConditionalGeneration`` in 5.15, not in 5.24;
* ``SFTConfig`` defaults to ``bf16=True`` (``trl/trainer/base_config.py:108``): the runs here set ``bf16=False`` so
  that gradients compare in float32.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

import re
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..foundations.data import function_docstring

__all__ = [
    "SFT_SOURCES",
    "sft_tokenizer",
    "sft_examples",
    "padding_free_batch",
    "padded_batch",
    "batch_gradient",
    "per_sequence_gradient",
    "SFTRun",
    "check_window",
    "run_sft",
    "opted_out_classes",
]

SFT_SOURCES: tuple[tuple[str, int, int], ...] = (
    ("itertools.chain", 4, 20),
    ("random.gauss", 3, 4),
    ("shutil.copyfile", 5, 12),
    ("itertools.count", 2, 6),
)
"""(function whose docstring is the text, prompt tokens, completion tokens): 4 prompt-completion examples of real text
whose micro-batches of 2 hold 24 and 18 completion tokens."""


def sft_tokenizer():
    """A word-level tokenizer (``gradacc.frameworks.texttask.train_wordlevel_tokenizer``) trained on the docstrings of
    ``SFT_SOURCES``, id 0 for padding."""
    from ..frameworks.texttask import train_wordlevel_tokenizer

    return train_wordlevel_tokenizer([function_docstring(name) for name, _, _ in SFT_SOURCES], vocab_size=400)


def sft_examples(tokenizer, sources: Sequence[tuple[str, int, int]] = SFT_SOURCES) -> list[dict[str, list[int]]]:
    """Tokenized prompt-completion examples: ``{"input_ids": [...], "completion_mask": [0] * prompt + [1] *
    completion}`` from the first ``prompt + completion`` words of each docstring.

    Raises:
        ValueError: a docstring shorter than the tokens asked for.
    """
    examples = []
    for name, prompt, completion in sources:
        ids = tokenizer(function_docstring(name))["input_ids"][1:-1]  # without [CLS] and [SEP]
        if len(ids) < prompt + completion:
            raise ValueError(f"{name}'s docstring has {len(ids)} tokens, fewer than {prompt} + {completion}")
        examples.append({"input_ids": ids[: prompt + completion], "completion_mask": [0] * prompt + [1] * completion})
    return examples


def _with_labels(examples: Sequence[dict]) -> list[dict]:
    return [
        {
            "input_ids": e["input_ids"],
            "labels": [t if m else -100 for t, m in zip(e["input_ids"], e["completion_mask"], strict=True)],
        }
        for e in examples
    ]


def padding_free_batch(examples: Sequence[dict]) -> dict[str, Any]:
    """The examples in one padding-free row, as TRL's collator makes it (``padding_free=True``): ``input_ids``,
    ``labels`` (completion-only, -100 at every sequence start), ``position_ids`` and the varlen keys."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(_with_labels(examples))


def padded_batch(examples: Sequence[dict]) -> dict[str, Any]:
    """The examples right-padded into ``[B, T]`` with an ``attention_mask`` (TRL's collator without padding-free)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(pad_token_id=0)(_with_labels(examples))


def batch_gradient(model: torch.nn.Module, batch: dict[str, Any], *, position_ids: bool = True) -> list[torch.Tensor]:
    """The gradient of the model's own causal-LM loss (mean NLL over the labels that are not -100) on ``batch``
    (``use_cache=False``, so packed ``position_ids`` give the block-diagonal mask); without ``position_ids`` the
    packed sequences attend to each other."""
    keys = {"input_ids", "labels", "attention_mask"} | ({"position_ids"} if position_ids else set())
    loss = model(**{k: v for k, v in batch.items() if k in keys}, use_cache=False).loss
    return [g.detach() for g in torch.autograd.grad(loss, list(model.parameters()))]


def per_sequence_gradient(model: torch.nn.Module, examples: Sequence[dict]) -> list[torch.Tensor]:
    """The gradient of the mean over sequences of each sequence's mean token NLL (every sequence weighs the same,
    whatever its length): the other way to average, which no setting of ``SFTTrainer`` computes."""
    losses = [model(**{k: v for k, v in padding_free_batch([e]).items() if k in ("input_ids", "labels", "position_ids")},
                    use_cache=False).loss for e in examples]  # fmt: skip
    loss = torch.stack(losses).mean()
    return [g.detach() for g in torch.autograd.grad(loss, list(model.parameters()))]


@dataclass
class SFTRun:
    """One optimizer step of a real ``SFTTrainer``: per micro-step the ``num_items_in_batch`` it was given (``None``
    when not counted) and the completion tokens it held; the accumulated gradient just before ``optimizer.step()``."""

    num_items: list[int | None] = field(default_factory=list)
    micro_tokens: list[int] = field(default_factory=list)
    grads: list[torch.Tensor] = field(default_factory=list)
    global_step: int = 0


def _trainer_class():
    from transformers import TrainerCallback
    from trl import SFTTrainer

    class Recorder(TrainerCallback):
        def __init__(self, run: SFTRun) -> None:
            self.run = run

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.run.grads = [p.grad.detach().clone() for p in model.parameters()]

    class RecordingSFTTrainer(SFTTrainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            self.run.num_items.append(None if num_items_in_batch is None else int(num_items_in_batch))
            self.run.micro_tokens.append(int((inputs["labels"][..., 1:] != -100).sum()))
            return super().training_step(model, inputs, num_items_in_batch)

    return RecordingSFTTrainer, Recorder


def check_window(examples: Sequence[dict], accum_steps: int, micro_batch_size: int) -> int:
    """The processes of this run (``WORLD_SIZE``, 1 outside ``torchrun``), after checking that ``examples`` fill
    exactly one window on every one of them: ``accum_steps x micro_batch_size x world_size`` examples.

    Raises:
        ValueError: another number of examples.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if len(examples) != accum_steps * micro_batch_size * world_size:
        raise ValueError(
            f"give exactly one window: accum_steps x micro_batch_size x world_size = {accum_steps} x "
            f"{micro_batch_size} x {world_size} examples, got {len(examples)}"
        )
    return world_size


def run_sft(
    model: torch.nn.Module,
    tokenizer,
    examples: Sequence[dict],
    *,
    accum_steps: int,
    micro_batch_size: int,
    compute_loss_func=None,
) -> SFTRun:
    """One optimizer step of ``trl.SFTTrainer`` on ``examples`` in order (padding-free, completion-only loss,
    float32, no clipping, SGD-like: the gradient is read before the step), on the CPU, silently. On each rank of a
    ``torchrun`` launch every rank passes the window of all ranks, as in ``gradacc.stacks.moe.run_trainer``.
    ``compute_loss_func``: passed to ``SFTTrainer`` (``None``: TRL's own loss).

    Raises:
        ValueError: the examples do not fill exactly one window of ``accum_steps`` micro-batches on every rank.
    """
    from datasets import Dataset
    from torch.utils.data import SequentialSampler
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig

    from ..frameworks.texttask import quiet_transformers

    world_size = check_window(examples, accum_steps, micro_batch_size)
    quiet_transformers()
    trainer_class, recorder = _trainer_class()
    run = SFTRun()
    with tempfile.TemporaryDirectory(prefix="gradacc-sft-") as out, warnings.catch_warnings():
        # transformers 5.24 warns that a field TRL's config still sets (gradient_checkpointing) is renamed
        warnings.simplefilter("ignore", FutureWarning)
        args = SFTConfig(
            output_dir=out,
            per_device_train_batch_size=micro_batch_size,
            gradient_accumulation_steps=accum_steps,
            max_steps=1,
            learning_rate=1e-3,
            max_grad_norm=0.0,
            padding_free=True,
            max_length=None,
            completion_only_loss=True,
            bf16=False,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            use_cpu=True,
            ddp_backend="gloo" if world_size > 1 else None,
            seed=0,
        )
        trainer = trainer_class(
            model=model,
            args=args,
            train_dataset=Dataset.from_list([dict(e) for e in examples]),
            processing_class=tokenizer,
            callbacks=[recorder(run)],
            compute_loss_func=compute_loss_func,
        )
        trainer.run = run
        trainer.remove_callback(PrinterCallback)
        trainer._get_train_sampler = lambda *args, **kwargs: SequentialSampler(trainer.train_dataset)  # in order
        trainer.train()
        run.global_step = trainer.state.global_step
    return run


_CLASS = re.compile(r"^class (\w+)\(([^)]*)\):", re.MULTILINE)
_FLAG = re.compile(r"^    accepts_loss_kwargs = (True|False)\b", re.MULTILINE)


def opted_out_classes(transformers_dir: str | Path | None = None) -> dict[str, str]:
    """The trainable classes of transformers (a name ending in ``For...``: ``...ForConditionalGeneration``,
    ``...ForCausalLM``, ...) whose ``accepts_loss_kwargs`` is False, so that ``Trainer`` passes them no
    ``num_items_in_batch`` (``trainer.py:517-523``, transformers 5.24): class name -> ``models/.../modeling_x.py:line``
    where the flag is set, in the class's own body or in a base class's (a base found by name among all models).

    It reads the ``models/*/modeling_*.py`` files of ``transformers_dir`` (the installed package by default) with
    regular expressions: under 1 s of CPU for the 538 files of 5.24, where importing the classes takes seconds each.
    """
    if transformers_dir is None:
        import importlib.util

        transformers_dir = Path(importlib.util.find_spec("transformers").origin).parent
    root = Path(transformers_dir)
    classes: dict[str, tuple[list[str], bool | None, str]] = {}  # name -> (bases, its own flag, where)
    for path in sorted(root.glob("models/*/modeling_*.py")):
        text = path.read_text(encoding="utf-8")
        heads = list(_CLASS.finditer(text))
        for head, end in zip(heads, [h.start() for h in heads[1:]] + [len(text)], strict=True):
            flag = _FLAG.search(text, head.start(), end)
            line = text.count("\n", 0, (flag or head).start()) + 1
            bases = [b.strip().split(".")[-1] for b in head[2].split(",")]
            own = None if flag is None else flag[1] == "True"
            classes.setdefault(head[1], (bases, own, f"{path.relative_to(root)}:{line}"))

    def where_false(name: str, seen: frozenset = frozenset()) -> str | None:
        bases, flag, where = classes[name]
        if flag is not None:
            return None if flag else where
        inherited = (where_false(b, seen | {name}) for b in bases if b in classes and b not in seen)
        return next((w for w in inherited if w), None)

    found = {name: where_false(name) for name in classes if re.search(r"For[A-Z]\w*$", name)}
    return {name: where for name, where in sorted(found.items()) if where}
