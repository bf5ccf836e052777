"""Every lesson's "Check your understanding" questions, in one place: lessons 01-05 here, 06-11 in ``bank_scale``.

Each wrong option names a misconception of ``gradacc.course.misconceptions``; each right option's ``why`` says why it
is right and, where it holds only in a case, which. ``tests/test_quiz.py`` checks every id against the catalogue and
every number against what the lesson computes (its stored outputs)."""

from __future__ import annotations

from ...i18n import N_
from .model import choice, number

LESSON_01 = [
    choice(
        "01",
        "after-n-backwards",
        N_(
            "Four micro-batches of 8 samples each. Each micro-batch's loss is summed over its 8 samples and divided "
            "by 32, the samples of the whole window, then `backward()`. What does `.grad` hold after the fourth "
            "`backward()`?"
        ),
        N_("The gradient of the mean loss over all 32 samples"),
        N_(
            "`backward()` adds into `.grad`: the 4 gradients of sum / 32 add up to the gradient of the 32 losses' sum "
            "/ 32, their mean, whatever the micro-batch sizes; the lesson measures a difference of about 1e-8 in "
            "float32."
        ),
        (N_("The gradient of the fourth micro-batch only"), "backward-replaces-grad"),
        (N_("A quarter of that mean's gradient, until `.grad` is divided by N = 4"), "divided-twice"),
    ),
    choice(
        "01",
        "unequal-sizes",
        N_(
            "A window holds micro-batches of 10 and 22 samples, and m1, m2 are their mean losses. Which window loss "
            "has the gradient of the mean over the 32 samples?"
        ),
        N_("(10 x m1 + 22 x m2) / 32"),
        N_(
            "10 x m1 + 22 x m2 is the sum of the 32 sample losses; divided by the 32 items of the window it is their "
            "mean. This holds for any sizes."
        ),
        (N_("(m1 + m2) / 2"), "mean-of-means"),
        (N_("(10 x m1 + 22 x m2) / 2"), "divided-by-micro-batches"),
    ),
    number(
        "01",
        "padding-ratio",
        N_(
            "Two sequences hold 10 and 100 real label tokens, padded to 100. The loss is the mean of the two sequence "
            "means. How many times more does one token of the short sequence weigh than one token of the long one?"
        ),
        10,
        N_(
            "Each sequence mean weighs 1/2, shared by its own tokens: 1/20 for a token of the short one, 1/200 for one "
            "of the long one, 10 times less. Summing the token losses and dividing by the 110 real tokens gives "
            "every token 1/110."
        ),
        (1, "mean-of-means"),
    ),
    choice(
        "01",
        "padding-divisor",
        N_("Padded positions carry the label -100. What should the window's summed token loss be divided by?"),
        N_("The number of labels that are not -100 in the whole window (after the shift, for a causal LM)"),
        N_(
            "The padded positions add nothing to the summed loss, so they must add nothing to the count either; "
            "one count for the whole window gives every real token the same weight, whichever micro-batch holds it."
        ),
        (N_("Every position of the padded window, padding included"), "padding-counted"),
        (N_("Each micro-batch by its own real tokens, then the results averaged"), "mean-of-means"),
    ),
]

LESSON_02 = [
    choice(
        "02",
        "where-step",
        N_("Where do `optimizer.step()` and `optimizer.zero_grad()` go in the accumulation loop?"),
        N_("Both once per window, after the window's last `backward()`"),
        N_(
            "The window's N `backward()` calls add their gradients into `.grad`; one step then uses their sum, and "
            "`zero_grad()` empties `.grad` for the next window."
        ),
        (N_("Both after every micro-batch's `backward()`"), "step-every-micro-batch"),
        (N_("`zero_grad()` before every micro-batch, `step()` once per window"), "zero-grad-every-micro-step"),
    ),
    number(
        "02",
        "short-window-ratio",
        N_(
            "The last window holds 2 micro-batches of 16 samples, and every micro-batch's mean loss is divided by "
            "N = 4. How large is that window's gradient (and, with plain SGD, its update), as a fraction of the "
            "correct one?"
        ),
        0.5,
        N_(
            "Each of the 2 micro-batches weighs 1/4 instead of 1/2, so the gradient is 2/4 = 0.5 of the window's mean "
            "gradient (SGD's update too; Adam's would be off by less, but still off): divide by the window's real "
            "number of samples (32) instead."
        ),
        (1, "full-window-divisor"),
        digits=2,
    ),
    choice(
        "02",
        "scheduler",
        N_(
            "A learning-rate schedule is sized for 25 optimizer steps, and the epoch has 100 micro-batches at N = 4. "
            "When should `scheduler.step()` run?"
        ),
        N_("Once per optimizer step: 25 times"),
        N_(
            "A schedule counts updates. Stepped per micro-batch it runs N times too fast: in the lesson the learning "
            "rate reached 0 and 13 of the 25 updates used it."
        ),
        (N_("After every micro-batch: 100 times"), "scheduler-every-micro-step"),
    ),
    choice(
        "02",
        "clipping",
        N_("When should `clip_grad_norm_` run?"),
        N_("Once per window, after the last `backward()` and before `step()`"),
        N_(
            "Clipping bounds the norm of the gradient the optimizer uses, the window's sum; clipped at the boundary "
            "it equals the clipped full-batch gradient (cosine 1.0 in the lesson)."
        ),
        (N_("After every micro-batch's `backward()`"), "clip-each-micro-batch"),
    ),
    choice(
        "02",
        "grad-scaler",
        N_(
            "Float16 autocast with `GradScaler`, 8 micro-batches per window, clipping at the boundary. One micro-batch "
            "overflows. What should the window's end do?"
        ),
        N_(
            "`unscale_` once, clip, `scaler.step` (it skips the update), `scaler.update()`, and no `scheduler.step()` "
            "for this window"
        ),
        N_(
            "The window's gradients share one `.grad`, so one inf skips the whole window's update; `unscale_` runs once "
            "per window before clipping (a second call raises), and a scheduler stepped anyway runs ahead of the "
            "weights (lr 0.450 instead of 0.500 in the lesson)."
        ),
        (N_("The same, and `scheduler.step()` as after every window"), "scheduler-steps-skipped-window"),
        (N_("`unscale_` after every micro-batch's `backward()`, then clip and step"), "unscale-per-micro-batch"),
    ),
]

LESSON_03 = [
    choice(
        "03",
        "what-n-divides",
        N_("At the same effective batch, what does a larger N make smaller?"),
        N_("What one micro-batch holds: its activations and temporaries"),
        N_(
            "Parameters and the optimizer state keep their size for every N, and the gradient buffer for every "
            "N >= 2, so the peak falls towards their sum and never below it (58.5 MiB at N = 1, 19.6 MiB at N = 8 in the lesson)."
        ),
        (N_("The whole peak, parameters and optimizer state included"), "peak-divided-by-n"),
        (N_("Always the peak, whatever holds it"), "n-always-lowers-peak"),
    ),
    number(
        "03",
        "saved-activations",
        N_(
            "At N = 1 a step saves 32.2 MiB of activations. About how many MiB does one micro-step save at N = 8, "
            "with the same effective batch?"
        ),
        4.0,
        N_(
            "A micro-step runs effective batch / N samples, so its saved activations are 32.2 / 8 = 4.0 MiB (the "
            "lesson measures 4.0 MiB, 0.125x)."
        ),
        (32.2, "whole-batch-activations"),
        digits=2,
    ),
    choice(
        "03",
        "adam-small-batch",
        N_(
            "A small effective batch (128) trained with Adam: the lesson's peak sits in `optimizer.step()`. What does "
            "a larger N do to that peak?"
        ),
        N_("Nothing: the peak is Adam's step, which N does not touch"),
        N_(
            "N shrinks one micro-batch's activations; when they do not hold the peak, N changes nothing (0.0 % in "
            "the lesson). Find where the peak sits first."
        ),
        (N_("It lowers it, as for a large effective batch"), "n-always-lowers-peak"),
        (N_("It divides it by N"), "peak-divided-by-n"),
    ),
]

LESSON_04 = [
    choice(
        "04",
        "divide-by-n",
        N_(
            "Inside `with accelerator.accumulate(model):`, should you divide the loss by N before "
            "`accelerator.backward(loss)`?"
        ),
        N_("No: `accelerator.backward()` divides by `gradient_accumulation_steps` already"),
        N_(
            "Accelerate divides the loss by N inside `backward()`; dividing it yourself too makes the gradient N times "
            "too small (with SGD the update too)."
        ),
        (N_("Yes, as in the plain loop"), "accelerate-divides-already"),
    ),
    number(
        "04",
        "scheduler-steps",
        N_(
            "One process, a prepared dataloader of 10 batches, `gradient_accumulation_steps = 4`, and a prepared "
            "scheduler whose `step()` the loop calls on every micro-step: how many times does the scheduler advance?"
        ),
        3,
        N_(
            "The prepared scheduler advances only when the optimizer steps, once per window: at micro-steps 4, 8 and "
            "10, the short last window included (the prepared dataloader's end closes it). On several processes it "
            "advances `num_processes` times per window, unless `split_batches=True`."
        ),
        (10, "prepared-scheduler-counts-calls"),
        (2, "last-window-dropped"),
        digits=2,
    ),
    number(
        "04",
        "short-window",
        N_(
            "The last window holds 2 of N = 4 micro-batches and the loss is the micro-batch's mean. With Accelerate's "
            "default, what fraction of the correct gradient does that window get?"
        ),
        0.5,
        N_(
            "`accelerator.backward()` divides every loss by N = 4, the short window's too, so its 2 micro-batches add "
            "up to 2/4 of the window's mean gradient (with SGD, half the update)."
        ),
        (1, "library-sizes-short-window"),
        digits=2,
    ),
    choice(
        "04",
        "clip",
        N_("When should the Accelerate loop call `accelerator.clip_grad_norm_`?"),
        N_("Only when `accelerator.sync_gradients` is True: once per window"),
        N_("`sync_gradients` is True at the window's last micro-step, when `.grad` holds the whole window's gradient."),
        (N_("On every micro-step"), "clip-every-micro-step"),
    ),
]

LESSON_05 = [
    number(
        "05",
        "bert-ratio",
        N_(
            "The lesson's `BertForSequenceClassification` on transformers 5, batch 8 with "
            "`gradient_accumulation_steps=4` against one batch of 32, with the lesson's plain SGD: how many times "
            "larger is the accumulated update?"
        ),
        4,
        N_(
            "Trainer decided the model divides by `num_items_in_batch` (its forward takes `**kwargs`) and skipped its "
            "own division by N; the model ignores the count, so the update is 4.000x."
        ),
        (1, "trainer-always-divides"),
        (0.25, "divided-twice"),
        digits=2,
    ),
    choice(
        "05",
        "right-fix",
        N_("Which fix gives one big batch's gradient also when the micro-batches hold different numbers of items?"),
        N_("A `compute_loss_func` that returns the summed loss / `num_items_in_batch`"),
        N_(
            "`num_items_in_batch` is the window's item count, so every item weighs 1 / (the window's items) whatever "
            "the micro-batch sizes."
        ),
        (
            N_("`model.accepts_loss_kwargs = False`, so that Trainer divides each micro-batch's mean by N"),
            "mean-of-means",
        ),
        (N_("A `compute_loss_func` that returns the summed loss / `num_items_in_batch` / N"), "divided-twice"),
    ),
    number(
        "05",
        "one-token",
        N_(
            "A causal LM's 4 micro-batches predict 3, 9, 1 and 15 tokens. With the mean of the micro-batch means, how "
            "many times too much does the 1-token micro-batch weigh?"
        ),
        7,
        N_("Its right weight is 1/28 of the window; the mean of means gives it 1/4, which is 28/4 = 7 times as much."),
        (1, "mean-of-means"),
        digits=2,
    ),
    choice(
        "05",
        "adam-hides",
        N_(
            "Here every window's loss, and so its gradient, is 4 times too large. With AdamW, Trainer's default, "
            "instead of the probe's plain SGD, what is still off?"
        ),
        N_(
            "The logged loss, `grad_norm` and what clipping compares with its threshold; without clipping, the update "
            "itself hardly changes"
        ),
        N_(
            "Adam divides each gradient by its own running scale, so a factor shared by every step cancels up to "
            "epsilon; anything that reads the raw gradient or loss still sees 4x, and a factor that differs between "
            "windows or micro-batches (a short last window, a mean of micro-batch means) changes Adam's update too, "
            "as does clipping on the steps where it engages (Trainer clips at `max_grad_norm=1.0` by default)."
        ),
        (N_("Nothing: Adam makes the loss's scale harmless"), "adam-hides-every-error"),
        (N_("The update, 4 times too large, as with SGD"), "adam-update-scales"),
    ),
]

QUESTIONS_0105 = LESSON_01 + LESSON_02 + LESSON_03 + LESSON_04 + LESSON_05
