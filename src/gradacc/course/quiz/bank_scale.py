"""The "Check your understanding" questions of lessons 06-12 (``bank`` holds 01-05; ``model`` the helpers)."""

from __future__ import annotations

from ...i18n import N_
from .model import choice, number

LESSON_06 = [
    choice(
        "06",
        "apply-every",
        N_(
            "`optax.chain(optax.sgd(lr), optax.apply_every(4))` against `optax.MultiSteps(optax.sgd(lr), 4)`: what does "
            "`apply_every` add up over the 4 calls?"
        ),
        N_("The updates: SGD's step on each micro-batch, so 4 times the `MultiSteps` update"),
        N_(
            "`apply_every` sums what the chain before it returns, the updates, and the optimizer runs on every call "
            "(the lesson: 4.000x with SGD, Adam's count 4 after one window). `MultiSteps` adds the gradients and "
            "steps once."
        ),
        (N_("The gradients, as `optax.MultiSteps` does"), "apply-every-accumulates"),
    ),
    number(
        "06",
        "short-micro-batch",
        N_(
            "Micro-batches hold 64, 64, 64 and 16 real samples (208 in all). `optax.MultiSteps` averages the micro-batch "
            "means: how many times too heavy is a sample of the short micro-batch?"
        ),
        3.25,
        N_(
            "It weighs 1/4 x 1/16 = 1/64 instead of 1/208: 208 / 64 = 3.25 times too much. Sum the gradients and the "
            "counts, and divide once."
        ),
        (1, "mean-of-means"),
    ),
    choice(
        "06",
        "python-loop",
        N_("Inside `jax.jit`, what does a Python for loop over N micro-batches compile to?"),
        N_("N copies of the micro-step: the program grows with N"),
        N_(
            "`jit` traces the loop by running it, so each iteration is written into the program (40 matrix products "
            "at N = 8 in the lesson, 5 with `lax.scan`)."
        ),
        (N_("One micro-step, run N times, as `lax.scan` does"), "loop-compiled-once"),
    ),
]

LESSON_07 = [
    number(
        "07",
        "effective-batch",
        N_("`micro_batch_size = 8`, `accum_steps = 4`, 2 DDP processes: how many samples does one optimizer step see?"),
        64,
        N_(
            "`micro_batch_size` x `accum_steps` x `world_size` = 8 x 4 x 2 = 64; the lesson's two processes match one "
            "process's full-batch step of 64 digits."
        ),
        (32, "one-rank-effective-batch"),
        (16, "accum-steps-forgotten"),
        digits=2,
    ),
    number(
        "07",
        "all-reduces",
        N_(
            "With `no_sync()` around the forward and backward pass of the first N - 1 micro-steps, N = 4, how many "
            "micro-steps of a window all-reduce the gradients?"
        ),
        1,
        N_(
            "Only the window's last micro-step synchronizes (its `backward()` all-reduces the gradients, bucket by "
            "bucket); the weights are the same as when all 4 synchronize."
        ),
        (4, "sync-every-micro-step"),
        (0, "no-sync-every-micro-step"),
        digits=2,
    ),
    choice(
        "07",
        "forward-inside",
        N_("What must be inside the `no_sync()` context for DDP to skip the all-reduce?"),
        N_("The forward pass and `backward()`"),
        N_(
            "DDP prepares its all-reduce in `forward()`, so a forward pass outside the context still synchronizes; "
            "in the lesson, `backward()` alone inside left 4 all-reduces per window."
        ),
        (N_("`backward()` alone"), "no-sync-backward-only"),
    ),
    choice(
        "07",
        "token-divisor",
        N_(
            "Rank 0 holds 5 label tokens and rank 1 holds 15. What should each rank divide its summed token loss by "
            "before `backward()`?"
        ),
        N_("20 / `world_size` = 10, from the all-reduced count: DDP averages the ranks"),
        N_(
            "DDP's average divides the summed gradients by `world_size` again, so dividing by 20 / 2 leaves every "
            "token weighing 1/20."
        ),
        (N_("Its own token count: 5 on rank 0, 15 on rank 1"), "rank-own-tokens"),
        (N_("20, the all-reduced count"), "ddp-average-forgotten"),
    ),
]

LESSON_08 = [
    choice(
        "08",
        "which-norm",
        N_("In training mode, which of these layers makes the accumulated gradient differ from the full batch's?"),
        N_("BatchNorm"),
        N_(
            "BatchNorm normalizes with its micro-batch's statistics, so a sample's loss depends on the others of its "
            "micro-batch (4.0e-02 in the lesson); LayerNorm and GroupNorm work per sample and match."
        ),
        (N_("None: accumulation always gives the full batch's gradient"), "every-layer-like-big-batch"),
        (N_("LayerNorm"), "per-sample-norm-coupled"),
        (N_("GroupNorm"), "per-sample-norm-coupled"),
    ),
    number(
        "08",
        "negatives",
        N_(
            "The lesson's InfoNCE loss with in-batch negatives, an effective batch of 64 in micro-batches of 16: how "
            "many negatives does each sample see?"
        ),
        15,
        N_("The negatives are the other samples of the same forward pass: 16 - 1 = 15, not 63."),
        (63, "negatives-from-whole-batch"),
        digits=2,
    ),
    choice(
        "08",
        "summed-losses",
        N_(
            "Summing the window's 4 losses and calling `backward()` once: what changes against `backward()` on each "
            "micro-batch?"
        ),
        N_("The same gradient, with 4 micro-batches' activations alive at once"),
        N_(
            "Each loss keeps its graph until `backward()`; the lesson measures 4.00 x one micro-batch's saved "
            "activations."
        ),
        (N_("Nothing: the same gradient and the same memory"), "summed-losses-free"),
    ),
    choice(
        "08",
        "gradcache",
        N_(
            "GradCache re-runs each chunk to back-propagate the cached gradients. With dropout, what must the re-run "
            "do?"
        ),
        N_("Replay the first pass's random numbers"),
        N_(
            "Only the same masks give the gradient of the loss that was reported; in the lesson a re-run without "
            "`RandContext` was 81 % off."
        ),
        (N_("Nothing special: the reported loss is right"), "no-rng-replay"),
    ),
]

LESSON_09 = [
    choice(
        "09",
        "traffic",
        N_(
            "FSDP2 with N = 4: `set_requires_gradient_sync(False)` until the last micro-step. What does it save per "
            "optimizer step?"
        ),
        N_("N - 1 of the N reduce-scatters; the all-gathers stay"),
        N_(
            "The parameters are still all-gathered in every micro-step (40 all-gathers either way in the lesson), so "
            "with the default resharding the traffic falls, but never N-fold; `set_reshard_after_backward(False)` "
            "also saves the next forward's all-gathers, at the cost of memory."
        ),
        (N_("N - 1 of every N collectives: N times less traffic"), "reduce-scatters-only"),
    ),
    choice(
        "09",
        "memory-cost",
        N_("What does the boundary setting hold between micro-steps that the default does not?"),
        N_("The rest of the unsharded gradient: (W - 1) / W of it"),
        N_(
            "It keeps the whole gradient (3.15 MiB in the lesson) where the default keeps its shard (1.58 MiB at "
            "W = 2)."
        ),
        (N_("One more shard of the gradient"), "boundary-one-more-shard"),
    ),
    choice(
        "09",
        "compile",
        N_("Which part of the micro-step should `torch.compile` compile?"),
        N_("The forward pass and the loss; `backward()`, the check and the logging outside"),
        N_("Compiled that way the lesson's micro-step gives 1 graph and 0 breaks, and the eager loop's weights."),
        (N_("The whole micro-step, `backward()` and `loss.item()` included"), "compile-whole-micro-step"),
    ),
]

LESSON_10 = [
    number(
        "10",
        "lightning-weight",
        N_(
            "Micro-batches of 6, 2, 5 and 3 items in a window of N = 4, each loss the micro-batch's mean. What weight "
            "does Lightning give the first micro-batch in the update?"
        ),
        0.25,
        N_(
            "Lightning counts micro-batches and divides each mean by N, so every micro-batch weighs 1/4, where its "
            "items say 6/16 = 0.375."
        ),
        (0.375, "library-as-own-loop"),
        digits=3,
    ),
    number(
        "10",
        "keras-short",
        N_(
            "Six micro-batches at N = 4 with Keras's `optimizer(gradient_accumulation_steps=4)`, in a one-epoch run "
            "(or the last epoch): what weight does the short last window of 2 micro-batches get in an update?"
        ),
        0,
        N_(
            "Keras applies the accumulated gradient on every 4th call only and keeps the rest across epochs: the 2 "
            "micro-batches stay in the accumulator, applied with the next epoch's first micro-batches (1/4 each), or "
            "never when training ends (right: 1, Lightning: 0.5)."
        ),
        (0.5, "library-short-window"),
        (1, "library-as-own-loop"),
        digits=2,
    ),
    choice(
        "10",
        "three-questions",
        N_("Before trusting a library's accumulation, what should you measure?"),
        N_("What it counts, who divides and by what, and when it steps"),
        N_("Each bug of the lesson is one of these choices made wrongly; the weight probe shows all three."),
        (N_("Nothing: a library's knob does what your loop does"), "library-as-own-loop"),
    ),
]

LESSON_11 = [
    choice(
        "11",
        "schedule-divides",
        N_(
            "A pipeline schedule with M = 4 micro-batches and `scale_grads=True` (the default). Should `loss_fn` divide "
            "the mean loss by M?"
        ),
        N_("No: `step()` divides all of `.grad` by M at its end"),
        N_(
            "With equal micro-batches the schedule's division already gives the full batch's gradient; `loss / M` "
            "gave 0.250x in the lesson."
        ),
        (N_("Yes, as in the hand-written loop"), "schedule-divides-already"),
    ),
    choice(
        "11",
        "unequal-items",
        N_(
            "The micro-batches of a pipeline schedule hold 8, 8, 8 and 6 items. Does `scale_grads=True` with a mean "
            "loss give the full batch's gradient?"
        ),
        N_("No: it is a mean of micro-batch means; sum the loss, divide by the 30 items, `scale_grads=False`"),
        N_(
            "Dividing by M is right only when every micro-batch holds the same number of items (16 % off here in "
            "the lesson)."
        ),
        (N_("Yes: the schedule divides by M for you"), "mean-of-means"),
    ),
    choice(
        "11",
        "autocast",
        N_("Where should the autocast context go in an accumulation loop?"),
        N_("Around each forward pass and its loss (or the whole loop with `cache_enabled=False`)"),
        N_(
            "A context that outlives `optimizer.step()` keeps computing with its cached low-precision weights: in the "
            "lesson the output stayed at its first value for 4 steps."
        ),
        (N_("Around the whole training loop, entered once, with the default cache"), "autocast-around-the-loop"),
    ),
]

LESSON_12 = [
    number(
        "12",
        "in-backward-steps",
        N_(
            "PyTorch's `_apply_optimizer_in_backward` attaches Adam to every parameter, and the loop accumulates "
            "`accum_steps = 4` micro-batches per window. How many Adam steps does each parameter take in one window?"
        ),
        4,
        N_(
            "Its hook steps the optimizer and sets `.grad` to `None` on every `backward()`, so nothing accumulates "
            "(the lesson: 4 Adam steps per parameter, the update off by 1.97 times the full batch's). Step at the "
            "window's boundary, or step inside `backward()` only when the effective batch fits in one micro-batch."
        ),
        (1, "in-backward-accumulates"),
        digits=2,
    ),
    choice(
        "12",
        "muon",
        N_(
            "A loop divides each micro-batch's loss by `accum_steps = 4` and calls `torch.optim.Muon`'s `step()` "
            "after every micro-batch. Is that a scaled-down version of one Muon step per window?"
        ),
        N_("No: Muon divides out the gradient's scale and is not additive; accumulate, then one `step()` per window"),
        N_(
            "Orthogonalizing g / 4 gives the same matrix as g, and O(g) + O(h) is not O(g + h): a step per "
            "micro-batch was off by 2.34 times the update in the lesson, one step per window matched the full batch "
            "exactly (float64)."
        ),
        (N_("Yes: each step is a quarter of the window's step"), "muon-scaled-per-micro-batch"),
    ),
    number(
        "12",
        "progress",
        N_(
            "nanochat's learning-rate multiplier is 1 for the first half of the run, then falls linearly to 0 at "
            "progress 1, unclamped. The run asks for 2 optimizer steps with `accum_steps = 128`, and its loop "
            "computes progress = it / 2 where `it` counts micro-batches (129 at the first step). What multiplier "
            "should the first optimizer step get?"
        ),
        1,
        N_(
            "Counted in optimizer steps, progress is 1/2 after the first step, still in the flat half: 1 (then 0 "
            "at the end). Counting micro-batches gives progress 64.5 and a multiplier of -127; a clamp at 0 would "
            "hide the sign but still end the schedule 128 times too early."
        ),
        (-127, "progress-in-micro-batches"),
        (0, "progress-clamped"),
        digits=3,
    ),
    choice(
        "12",
        "accountant",
        N_(
            "DP-SGD with 4 examples per micro-batch and `accum_steps = 256` adds noise once per window. What should "
            "its privacy accountant count?"
        ),
        N_("One step per window, at the window's sampling rate (1,024 examples / dataset size)"),
        N_(
            "The accountant counts noisy updates: counted per window, 4 x 256 spends the same epsilon as one batch "
            "of 1,024 (3.8732 in the lesson), where micro-batches at their own rate reported 0.4918."
        ),
        (
            N_("One step per micro-batch, at the micro-batch's sampling rate (4 / dataset size)"),
            "accountant-micro-batch-rate",
        ),
        (N_("One step per micro-batch, at the window's sampling rate"), "accountant-micro-batches-window-rate"),
    ),
    number(
        "12",
        "amax",
        N_(
            "FP8 delayed scaling: the three micro-batches of a window record an amax of 3, 9 and 1. What amax "
            "should the window carry into the next step's scale?"
        ),
        9,
        N_(
            "The amax is the largest absolute value seen, so the window's is the maximum over its micro-batches, "
            "the full batch's value: the mean (4.33) or the last (1) is too small and the next scale overflows FP8."
        ),
        (13 / 3, "amax-averaged"),
        (1, "amax-last"),
        digits=3,
    ),
]

QUESTIONS_0612 = LESSON_06 + LESSON_07 + LESSON_08 + LESSON_09 + LESSON_10 + LESSON_11 + LESSON_12
