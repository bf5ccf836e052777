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
        "leaves its samples out of the epoch (unless you drop them on purpose, as `drop_last` does, the same in "
        "every epoch). Make an optimizer step on the short window too, divided by the samples it holds."
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
        "Clipping after each backward() bounds a partial sum, not the window's gradient, so once an earlier partial "
        "sum is clipped the update can differ (and in general does) from the full batch's. Clip once per window, when "
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
        "accelerator.backward() already divides every loss by gradient_accumulation_steps (Accelerate 1.x; under "
        "DeepSpeed the engine divides instead). Dividing by N again makes the gradient N times too small (with SGD "
        "the update too; Adam hides a constant factor, but not a clipping threshold)."
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

PREPARED_SCHEDULER_COUNTS_CALLS = Misconception(
    id="prepared-scheduler-counts-calls",
    name=N_("Accelerate's prepared scheduler taken to advance on every call"),
    why=N_(
        "A scheduler passed to accelerator.prepare() steps only when the optimizer really stepped (inside "
        "accelerator.accumulate(), with the default step_scheduler_with_optimizer=True), so calling "
        "scheduler.step() on every micro-step is right under Accelerate: on one process it advances once per window "
        "(num_processes times per window on several, unless split_batches=True). A plain PyTorch scheduler has no "
        "such guard: there, step it once per optimizer step."
    ),
    lesson="lessons/04_accelerate.ipynb",
    section=N_("2. Under the hood: `sync_gradients`, the optimizer and the scheduler"),
    cell="accelerate-11",
)

CLIP_EACH_MICRO_BATCH = Misconception(
    id="clip-each-micro-batch",
    name=N_("the gradient clipped after every micro-batch's backward()"),
    why=N_(
        "Clipping after each backward() bounds a partial sum, not the window's gradient, so once an earlier partial "
        "sum is clipped the update can differ (and in general does) from the full batch's. Clip once per window, after the "
        "window's last backward() and before optimizer.step()."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("4. Flaw (c): clipping each micro-batch"),
    cell="pytorch-18",
)

SCHEDULER_STEPS_SKIPPED_WINDOW = Misconception(
    id="scheduler-steps-skipped-window",
    name=N_("the scheduler stepped for a window that GradScaler skipped"),
    why=N_(
        "When a gradient of the window is inf or NaN, scaler.step() skips the update and scaler.update() lowers the "
        "scale; a scheduler stepped anyway counts an update that never happened, and the schedule runs ahead of "
        "the weights. Step the scheduler only when the optimizer stepped (a skipped step shows as a smaller scale "
        "after update())."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("6. Flaw (e): mixed precision *(optional on a first reading)*"),
    cell="pytorch-24",
)

UNSCALE_PER_MICRO_BATCH = Misconception(
    id="unscale-per-micro-batch",
    name=N_("GradScaler's unscale_() called after every micro-batch"),
    why=N_(
        "scaler.unscale_(optimizer) divides the whole .grad by the scale and marks the optimizer as unscaled until "
        "scaler.update(): a second call in the same window raises, and the micro-batches added after it would stay "
        "scaled. Call it once per window, after the last backward() and before clipping."
    ),
    lesson="lessons/02_pytorch.ipynb",
    section=N_("6. Flaw (e): mixed precision *(optional on a first reading)*"),
    cell="pytorch-24",
)
