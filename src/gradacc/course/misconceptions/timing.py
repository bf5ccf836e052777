"""Misconceptions about when things happen in a window: the optimizer step, zero_grad, the scheduler, clipping, the
short last window (lessons 02 and 04), and what else must advance once per window (lesson 12: an optimizer inside
backward(), Muon, a schedule's progress, a privacy accountant, an FP8 amax)."""

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

IN_BACKWARD_ACCUMULATES = Misconception(
    id="in-backward-accumulates",
    name=N_("an optimizer inside `backward()` taken to wait for the window"),
    why=N_(
        "An optimizer run inside `backward()` (`_apply_optimizer_in_backward`, a post-accumulate-grad hook) steps "
        "and frees the gradient on every `backward()`, so with N micro-batches it makes N steps per window and "
        "nothing accumulates. Defer the step to the window's boundary, or step inside `backward()` only when the "
        "effective batch fits in one micro-batch."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("2. An optimizer inside `backward()` cannot accumulate"),
    cell="l12-s2",
)

MUON_SCALED_PER_MICRO_BATCH = Misconception(
    id="muon-scaled-per-micro-batch",
    name=N_("a Muon step per micro-batch taken for a scaled step per window"),
    why=N_(
        "Muon orthogonalizes its momentum, which divides out the gradient's scale and does not add up: dividing the "
        "loss by N leaves each step as large, and N orthogonalized micro-batch updates differ from the "
        "orthogonalized window. Accumulate the window's gradient and make one Muon step, as for any optimizer that "
        "normalizes its update."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("3. Muon is not linear in the gradient"),
    cell="l12-s3",
)

PROGRESS_IN_MICRO_BATCHES = Misconception(
    id="progress-in-micro-batches",
    name=N_("a schedule's progress counted in micro-batches"),
    why=N_(
        "A progress fraction whose numerator counts micro-batches and whose denominator counts optimizer steps runs "
        "N times too fast, so the schedule ends after 1/N of the run and an unclamped warmdown turns the learning "
        "rate negative. Count optimizer steps, short last window included, and progress stays in [0, 1]."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("4. A schedule's progress counted in micro-batches"),
    cell="l12-s4",
)

PROGRESS_CLAMPED = Misconception(
    id="progress-clamped",
    name=N_("a clamp at 0 taken to fix a schedule that counts micro-batches"),
    why=N_(
        "Clamping the multiplier at 0 hides the negative learning rate but not the wrong clock: the schedule still "
        "ends N times too early and the rest of the run trains at a learning rate of 0. Count optimizer steps "
        "instead, and no clamp is needed."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("4. A schedule's progress counted in micro-batches"),
    cell="l12-s4",
)

ACCOUNTANT_MICRO_BATCH_RATE = Misconception(
    id="accountant-micro-batch-rate",
    name=N_("a privacy accountant stepped per micro-batch at the micro-batch's rate"),
    why=N_(
        "DP-SGD adds noise once per window, so each noisy update samples the window's examples, not one "
        "micro-batch's; counting N steps at the micro-batch's sampling rate reports less privacy spent than the "
        "training spends (about 8 times less in the lesson). Step the accountant once per optimizer step, at the "
        "window's sampling rate."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("5. A privacy accountant counts noisy updates *(optional on a first reading)*"),
    cell="l12-s5",
)

ACCOUNTANT_MICRO_BATCHES_WINDOW_RATE = Misconception(
    id="accountant-micro-batches-window-rate",
    name=N_("a privacy accountant given micro-batches as steps at the window's rate"),
    why=N_(
        "At the window's sampling rate the accountant must count noisy updates, one per window; giving it the "
        "number of micro-batches counts every update N times, so it over-reports epsilon, and a noise calibrated "
        "from it is too large (8.26 instead of 0.99 in the lesson). Count optimizer steps, short last window "
        "included."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("5. A privacy accountant counts noisy updates *(optional on a first reading)*"),
    cell="l12-s5",
)

AMAX_AVERAGED = Misconception(
    id="amax-averaged",
    name=N_("an FP8 amax averaged over the window's micro-batches like a gradient"),
    why=N_(
        "The amax is the largest absolute value the window saw, so the window's value is the maximum over its "
        "micro-batches, not their mean: the mean is below it whenever they differ, and a scale computed from it "
        "overflows FP8's range. Give each leaf of the carried tree its own rule: sum for a gradient, max for an amax."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("6. State carried through the gradient tree: an FP8 amax *(optional on a first reading)*"),
    cell="l12-s6",
)

AMAX_LAST = Misconception(
    id="amax-last",
    name=N_("the last micro-batch's FP8 amax kept for the window"),
    why=N_(
        "Keeping the last micro-batch's amax forgets the larger values the earlier micro-batches saw, so the window's "
        "amax is too small unless the last one happens to hold the largest value. Combine the amaxes with a maximum "
        "over the window."
    ),
    lesson="lessons/12_per_window.ipynb",
    section=N_("6. State carried through the gradient tree: an FP8 amax *(optional on a first reading)*"),
    cell="l12-s6",
)
