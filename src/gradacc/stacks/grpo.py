"""TRL's ``GRPOTrainer`` with ``loss_type="dapo"``: which token count divides a window's loss (lesson 10, section 3).

GRPO generates completions for a **generation batch** of ``per_device_train_batch_size x steps_per_generation``
prompts-times-generations at once and trains on it in ``steps_per_generation`` micro-batches; the optimizer steps every
``gradient_accumulation_steps`` micro-batches. DAPO's loss is a token mean over the optimizer's window: the summed
per-token loss of the window's completion tokens divided by their number. TRL counts ``num_items_in_batch`` once, over
the GENERATION batch (``trl/trainer/grpo_trainer.py:2497-2498``), and divides each micro-batch's summed loss by

* before PR huggingface/trl#6024 (and #5890, which carried it to the Liger path; issue #5619): that count, the
  generation batch's tokens: when ``steps_per_generation = 4`` and ``gradient_accumulation_steps = 2`` a window holds
  half of them and its loss is half the token mean on average (``normalizer_before_fix``);
* in trl 1.16.0 (``grpo_trainer.py:3168-3173``): that count times ``gradient_accumulation_steps /
  steps_per_generation``, the token count of an AVERAGE window (``normalizer_trl``). Exact only when every window of the
  generation batch holds the same number of completion tokens; a window with more tokens than the average is scaled
  up by (its tokens / the average), one with fewer scaled down.

``run_grpo`` runs a real ``GRPOTrainer`` (a tiny random Llama generating on the CPU, a reward that counts characters)
and records every micro-batch's inputs and every window's accumulated gradient; ``window_gradient`` recomputes a
window's gradient with TRL's own per-token log-probabilities (``GRPOTrainer._get_per_token_logps_and_entropies``) and
``dapo_token_loss``, the course's re-implementation of TRL's per-token DAPO loss (clipped importance ratio times the
advantage; ``grpo_trainer.py:3112-3119``), divided by any normalizer.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the course may download; set before transformers loads

import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from ..foundations.data import function_docstring

__all__ = [
    "GRPO_SOURCES",
    "grpo_tokenizer",
    "normalizer_before_fix",
    "normalizer_trl",
    "dapo_token_loss",
    "GRPORun",
    "run_grpo",
    "window_gradient",
]

GRPO_SOURCES: tuple[str, ...] = (
    "textwrap.dedent",
    "json.dumps",
    "heapq.heappush",
    "heapq.heappop",
    "string.capwords",
    "shutil.copyfile",
    "textwrap.wrap",
    "itertools.chain",
)
"""Functions whose docstrings give the prompts (their first three words) and the tokenizer's tiny vocabulary."""


def grpo_tokenizer():
    """A word-level tokenizer of 12 tokens (``[SEP]`` doubles as end-of-sequence): with so few tokens a random model
    ends its completions at many different lengths, so the windows hold different token counts."""
    from ..frameworks.texttask import train_wordlevel_tokenizer

    tokenizer = train_wordlevel_tokenizer([function_docstring(name) for name in GRPO_SOURCES], vocab_size=12)
    tokenizer.eos_token = "[SEP]"
    return tokenizer


def normalizer_before_fix(generation_tokens: float) -> float:
    """What divided each micro-batch's summed DAPO loss before huggingface/trl#6024: the completion tokens of the whole
    generation batch (``num_items_in_batch`` on one process)."""
    return float(generation_tokens)


def normalizer_trl(generation_tokens: float, accum_steps: int, steps_per_generation: int) -> float:
    """What divides it in trl 1.16.0: the generation batch's tokens times ``accum_steps / steps_per_generation``
    (``grpo_trainer.py:3170-3172``), the tokens of an average window."""
    return float(generation_tokens) * accum_steps / steps_per_generation


def dapo_token_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
) -> torch.Tensor:
    """The course's re-implementation of TRL's per-token DAPO loss (token-level importance sampling, no KL term):
    ``-min(r * A, clip(r, 1 - epsilon_low, 1 + epsilon_high) * A)`` with ``r = exp(logps - old_logps)`` (``old_logps``
    ``None``: the detached ``logps``, so ``r = 1`` with gradient ``d logps``). Shapes ``[B, T]``; ``advantages``
    ``[B]``."""
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    advantages = advantages.unsqueeze(1)
    return -torch.min(ratio * advantages, clipped * advantages)


@dataclass
class GRPORun:
    """A real ``GRPOTrainer`` run: ``micro_inputs`` every micro-batch's inputs (prompt and completion ids, masks,
    advantages, ``num_items_in_batch``, old log-probabilities), ``windows`` the micro-batch indices of each optimizer
    step, ``grads`` each window's accumulated gradient before ``optimizer.step()``, ``weights`` the weights each window
    started from; ``trainer`` the trainer (its ``_get_per_token_logps_and_entropies`` serves ``window_gradient``)."""

    micro_inputs: list[dict[str, Any]] = field(default_factory=list)
    windows: list[list[int]] = field(default_factory=list)
    grads: list[list[torch.Tensor]] = field(default_factory=list)
    weights: list[dict[str, torch.Tensor]] = field(default_factory=list)
    trainer: Any = None

    def window_tokens(self) -> list[int]:
        """Completion tokens of each window."""
        return [sum(int(self.micro_inputs[k]["completion_mask"].sum()) for k in w) for w in self.windows]

    def generation_tokens(self, window: int) -> int:
        """``num_items_in_batch`` of the window's generation batch."""
        return int(self.micro_inputs[self.windows[window][0]]["num_items_in_batch"])


def _trainer_class():
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    class Recorder(TrainerCallback):
        def __init__(self, run: GRPORun) -> None:
            self.run = run
            self.first = 0

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            self.run.weights.append({k: v.detach().clone() for k, v in model.named_parameters()})
            self.first = len(self.run.micro_inputs)

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.run.grads.append([p.grad.detach().clone() for p in model.parameters()])
            self.run.windows.append(list(range(self.first, len(self.run.micro_inputs))))

    class RecordingGRPOTrainer(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            self.run.micro_inputs.append(
                {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()}
            )
            return super()._compute_loss(model, inputs)

    return RecordingGRPOTrainer, Recorder


def _reward(completions, **kwargs) -> list[float]:
    """Longer completions score more: some reward to rank the group's completions by (its value is not the point)."""
    return [float(len(completion)) for completion in completions]


def run_grpo(*, steps_per_generation: int, accum_steps: int, optimizer_steps: int, seed: int = 0) -> GRPORun:
    """Train a tiny random ``LlamaForCausalLM`` with ``trl.GRPOTrainer(loss_type="dapo")`` on the CPU for
    ``optimizer_steps`` optimizer steps: micro-batches of 4 completions (one prompt, ``num_generations=4``), up to 8
    completion tokens, ``beta=0`` (no reference model), float32, no clipping; everything recorded (``GRPORun``).

    Raises:
        ValueError: ``steps_per_generation`` or ``accum_steps`` < 1.
    """
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig

    from ..frameworks.texttask import quiet_transformers, tiny_causal_lm

    if steps_per_generation < 1 or accum_steps < 1:
        raise ValueError(
            f"steps_per_generation and accum_steps must be >= 1, got {steps_per_generation}, {accum_steps}"
        )
    quiet_transformers()
    tokenizer = grpo_tokenizer()
    prompts = [" ".join(function_docstring(name).split()[:3]) for name in GRPO_SOURCES]
    model = tiny_causal_lm(tokenizer.vocab_size, seed=seed)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    trainer_class, recorder = _trainer_class()
    run = GRPORun()
    with tempfile.TemporaryDirectory(prefix="gradacc-grpo-") as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # generation-config and deprecation notices, not the point here
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=4,
            num_generations=4,
            steps_per_generation=steps_per_generation,
            gradient_accumulation_steps=accum_steps,
            max_completion_length=8,
            max_steps=optimizer_steps,
            loss_type="dapo",
            beta=0.0,
            learning_rate=1e-2,
            max_grad_norm=0.0,
            bf16=False,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            use_cpu=True,
            seed=seed,
        )
        trainer = trainer_class(
            model=model,
            reward_funcs=_reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=tokenizer,
            callbacks=[recorder(run)],
        )
        trainer.run = run
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    run.trainer = trainer
    return run


def window_gradient(run: GRPORun, window: int, normalizer: float) -> list[torch.Tensor]:
    """The gradient of window ``window``'s DAPO loss divided by ``normalizer``, recomputed from its recorded inputs
    at the weights it started from: TRL's per-token log-probabilities (``_get_per_token_logps_and_entropies``) and the
    course's ``dapo_token_loss``, summed over the window's completion tokens. With ``normalizer`` = the window's own
    tokens it is the token mean DAPO defines."""
    trainer = run.trainer
    model = trainer.model
    saved = {k: v.detach().clone() for k, v in model.named_parameters()}
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(run.weights[window][name])
    try:
        total = 0.0
        for k in run.windows[window]:
            inputs = run.micro_inputs[k]
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
            mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
            logps, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, inputs["completion_ids"].size(1))
            per_token = dapo_token_loss(
                logps,
                inputs.get("old_per_token_logps"),
                inputs["advantages"],
                trainer.epsilon_low,
                trainer.epsilon_high,
            )
            total = total + (per_token * inputs["completion_mask"]).sum()
        grads = torch.autograd.grad(total / normalizer, list(model.parameters()), allow_unused=True)
    finally:
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(saved[name])
    return [torch.zeros_like(p) if g is None else g.detach() for g, p in zip(grads, model.parameters(), strict=True)]
