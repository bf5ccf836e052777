"""Misconceptions about when things happen in a window: the optimizer step, zero_grad, the scheduler, clipping, the
short last window (lessons 02 and 04)."""

from __future__ import annotations

from ...i18n import N_
from . import Misconception

STEP_EVERY_MICRO_BATCH = Misconception(
    id="step-every-micro-batch",
    name=N_("an optimizer step after every micro-batch"),
    why=N_(
        "Stepping after each micro-batch makes N small updates, each from one micro-batch's gradient, instead of "
        "one update from the whole window: that is training with the small batch, not accumulation. Call "
        "`optimizer.step()` once, after the window's last backward()."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("1. The plain loop"),
    cell="pytorch-05",
)

ZERO_GRAD_EVERY_MICRO_STEP = Misconception(
    id="zero-grad-every-micro-step",
    name=N_("the gradients zeroed on every micro-step"),
    why=N_(
        "Accumulation relies on backward() adding into .grad, so zeroing it before each micro-batch throws away "
        "the gradient of every micro-batch but the last. Zero the gradients once per window, after "
        "`optimizer.step()`."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("1. The plain loop"),
    cell="pytorch-05",
)

LAST_WINDOW_DROPPED = Misconception(
    id="last-window-dropped",
    name=N_("the short last window dropped"),
    why=N_(
        "When the number of micro-batches is not a multiple of N, the last window is shorter, and skipping it "
        "leaves its samples out of the epoch. Make an optimizer step on the short window too, divided by the "
        "samples it holds."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("2. Flaw (a): the last window"),
    cell="pytorch-09",
)

FULL_WINDOW_DIVISOR = Misconception(
    id="full-window-divisor",
    name=N_("a short window divided as if it were full"),
    why=N_(
        "The last window can hold fewer micro-batches, or smaller ones, than a full window, so dividing its summed "
        "loss by a full window's count makes its update too small. Divide each window by the items it really "
        "holds."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("2. Flaw (a): the last window"),
    cell="pytorch-09",
)

SCHEDULER_EVERY_MICRO_STEP = Misconception(
    id="scheduler-every-micro-step",
    name=N_("the scheduler stepped on every micro-step"),
    why=N_(
        "A learning-rate schedule counts optimizer steps, so stepping it after every micro-batch runs it N times "
        "too fast. Call scheduler.step() once per optimizer step, right after optimizer.step()."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("3. Flaw (b): the scheduler counts micro-steps"),
    cell="pytorch-16",
)

CLIP_EVERY_MICRO_STEP = Misconception(
    id="clip-every-micro-step",
    name=N_("the gradient clipped on every micro-step"),
    why=N_(
        "Clipping after each backward() bounds a partial sum, not the window's gradient, so the update can differ "
        "from the full batch's whenever an earlier partial sum is above the threshold. Clip once per window, when "
        "accelerator.sync_gradients is true, before the optimizer step."
    ),
    lesson="lessons/04_accelerate.ipynb",
    section=N_("3. Clipping at the window boundary"),
    cell="accelerate-15",
)

ACCELERATE_DIVIDES_ALREADY = Misconception(
    id="accelerate-divides-already",
    name=N_("the loss divided by N by hand under Accelerate"),
    why=N_(
        "Inside accelerator.accumulate(), accelerator.backward() already divides the loss by "
        "gradient_accumulation_steps. Dividing by N again makes every update N times too small."
    ),
    lesson="lessons/04_accelerate.ipynb",
    section=N_("1. The lesson-02 loop, rewritten for Accelerate"),
    cell="accelerate-05",
)

FULL_MICRO_BATCH_DIVISOR = Misconception(
    id="full-micro-batch-divisor",
    name=N_("every micro-batch counted as full"),
    why=N_(
        "The last micro-batch of an epoch can be smaller than the others, so the number of micro-batches times the "
        "first one's size counts too many items for a window that holds it. Count the labels of every micro-batch "
        "of the window."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("2. Flaw (a): the last window"),
    cell="pytorch-09",
)
