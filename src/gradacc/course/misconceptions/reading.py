"""Misconceptions that the questions in the lessons ask about ("Check your understanding", `gradacc.course.quiz`)
and that no exercise's check recognises: each a wrong option of a question, sent back to the section that fixes it."""

from __future__ import annotations

from ...i18n import N_
from . import Misconception

BACKWARD_REPLACES_GRAD = Misconception(
    id="backward-replaces-grad",
    name=N_("`backward()` taken to replace `.grad`"),
    why=N_(
        "`backward()` adds the new gradient into `.grad`; it never replaces what is there, so after N micro-steps "
        "`.grad` holds the sum of the N gradients. That is what accumulation relies on, and why `zero_grad()` runs "
        "once per window."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("The idea in one picture"),
    cell="theory-04-idea-md",
)

PEAK_DIVIDED_BY_N = Misconception(
    id="peak-divided-by-n",
    name=N_("N taken to divide the whole peak"),
    why=N_(
        "Accumulation shrinks only what one micro-batch holds, its activations and temporaries; the parameters and "
        "the optimizer state stay the same size for every N, and the gradient buffer is alive at the peak for "
        "every N >= 2. The peak therefore never falls below parameters + gradients + optimizer state."
    ),
    lesson="lessons/03_memory.ipynb",
    section=N_("2. Memory against N: activations shrink as 1/N"),
    cell="memory-09",
)

N_ALWAYS_LOWERS_PEAK = Misconception(
    id="n-always-lowers-peak",
    name=N_("a larger N taken to lower the peak always"),
    why=N_(
        "N only lowers the peak when one micro-batch's activations hold it; when the peak sits in "
        "`optimizer.step()` (a small effective batch with Adam), N changes nothing, and with SGD the gradient buffer "
        "that N >= 2 keeps can even raise it. Measure where the peak sits before choosing N."
    ),
    lesson="lessons/03_memory.ipynb",
    section=N_("3. The other regime: a small effective batch"),
    cell="memory-14",
)

LIBRARY_SIZES_SHORT_WINDOW = Misconception(
    id="library-sizes-short-window",
    name=N_("the library taken to divide a short last window by its real size"),
    why=N_(
        "Accelerate's `accelerator.backward()` and Lightning divide every micro-batch's loss by N, the last window "
        "too, so a short window of k micro-batches gets k / N of the window's gradient (with SGD, of its update). "
        "Divide the summed loss by the window's real number of items and multiply by N to undo the library's "
        "division, or keep every window full."
    ),
    lesson="lessons/04_accelerate.ipynb",
    section=N_("4. The last incomplete window"),
    cell="accelerate-17",
)

TRAINER_ALWAYS_DIVIDES = Misconception(
    id="trainer-always-divides",
    name=N_("Trainer taken to divide every model's loss by N"),
    why=N_(
        "Trainer skips its division by N when it decides that the model divides by `num_items_in_batch` itself "
        "(in transformers 5, a `forward()` that takes `**kwargs` is enough); a model that then ignores the count "
        "gets an N times too large loss and gradient. Compare with one big batch, and fix it with a "
        "`compute_loss_func`."
    ),
    lesson="lessons/05_trainer.ipynb",
    section=N_("3. Batch 32 vs batch 8 x 4: loss, gradient norm, update"),
    cell="trainer-17",
)

APPLY_EVERY_ACCUMULATES = Misconception(
    id="apply-every-accumulates",
    name=N_("`optax.apply_every` taken for gradient accumulation"),
    why=N_(
        "`optax.apply_every(k)` sums the updates that the optimizer before it in the chain makes on every call, so "
        "SGD moves k times as far and Adam's count and moments advance on every micro-batch. Use `optax.MultiSteps`, which accumulates the "
        "gradients and steps the inner optimizer once per window."
    ),
    lesson="lessons/06_jax.ipynb",
    section=N_("6. `optax.apply_every` is not gradient accumulation"),
    cell="jax-28",
)

LOOP_COMPILED_ONCE = Misconception(
    id="loop-compiled-once",
    name=N_("a Python loop inside `jit` taken to compile one micro-step"),
    why=N_(
        "`jit` traces a Python for loop by running it, so the compiled program holds N copies of the micro-step and "
        "grows, with its compile time, with N. With `jax.lax.scan` the micro-step compiles once and runs N times."
    ),
    lesson="lessons/06_jax.ipynb",
    section=N_("3. The same accumulation with `jax.lax.scan`"),
    cell="jax-11",
)

ACCUM_STEPS_FORGOTTEN = Misconception(
    id="accum-steps-forgotten",
    name=N_("the micro-steps left out of the effective batch"),
    why=N_(
        "One optimizer step follows `accum_steps` micro-batches on each rank, and all their gradients are in it. "
        "The effective batch size is `micro_batch_size` x `accum_steps` x `world_size`, not `micro_batch_size` x "
        "`world_size`."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("1. Two processes, one optimizer step"),
    cell="l07-s1",
)


NO_SYNC_EVERY_MICRO_STEP = Misconception(
    id="no-sync-every-micro-step",
    name=N_("`no_sync()` on every micro-step, the last one too"),
    why=N_(
        "If no micro-step of the window synchronizes, the gradients never cross the ranks, and each replica steps "
        "with its own gradient: the replicas drift apart. Leave the window's last micro-step outside `no_sync()`."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("2. `no_sync()`: one all-reduce per window"),
    cell="l07-s2",
)

NO_SYNC_BACKWARD_ONLY = Misconception(
    id="no-sync-backward-only",
    name=N_("`no_sync()` around `backward()` alone"),
    why=N_(
        "DDP's default reducer decides in its `forward()` whether the coming `backward()` will all-reduce (the "
        "Python reducer of compiled autograd reads the flag at backward time), so a `no_sync()` entered after the "
        "forward pass skips nothing; the weights are right and only a count of all-reduces shows it. Put the "
        "forward and backward pass inside the context."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("2. `no_sync()`: one all-reduce per window"),
    cell="l07-s2",
)

EVERY_LAYER_LIKE_BIG_BATCH = Misconception(
    id="every-layer-like-big-batch",
    name=N_("every layer taken to give the big batch's gradient under accumulation"),
    why=N_(
        "Accumulation equals the big batch only when each sample's loss does not depend on the other samples of "
        "its batch. BatchNorm in training mode (batch statistics) and in-batch negatives couple the samples, so "
        "their accumulated gradient differs; LayerNorm and GroupNorm work per sample."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("1. BatchNorm"),
    cell="l08-s1",
)

NEGATIVES_FROM_WHOLE_BATCH = Misconception(
    id="negatives-from-whole-batch",
    name=N_("in-batch negatives taken from the whole effective batch"),
    why=N_(
        "A contrastive loss with in-batch negatives compares each sample only with the others of its forward "
        "pass, so with the lesson's InfoNCE a micro-batch of b samples gives b - 1 negatives, not effective batch "
        "- 1 (SimCLR's NT-Xent: 2(b - 1)). The loss and the gradient change; GradCache restores the big batch "
        "exactly, a memory bank approximates it, and gathering across ranks adds only the other ranks' current "
        "micro-batches."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("3. Contrastive losses with in-batch negatives"),
    cell="l08-s3",
)

SUMMED_LOSSES_FREE = Misconception(
    id="summed-losses-free",
    name=N_("summing the window's losses before one `backward()` taken to cost nothing"),
    why=N_(
        "Each loss keeps its micro-batch's graph and saved activations until `backward()` runs, so summing N losses "
        "first holds N graphs at once. The gradient is the same, but the memory is N times one micro-batch's: "
        "call `backward()` on each micro-batch."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("4. Summing the losses: N graphs alive"),
    cell="l08-replay-after",
)


REDUCE_SCATTERS_ONLY = Misconception(
    id="reduce-scatters-only",
    name=N_("FSDP's traffic taken to be its reduce-scatters"),
    why=N_(
        "Syncing at the window boundary cuts the reduce-scatters from N to 1 per optimizer step, but FSDP still "
        "all-gathers the parameters in every micro-step's forward pass, and again in its backward pass where it "
        "reshards after the forward (the default). With the default resharding the traffic falls, but never "
        "N-fold; `set_reshard_after_backward(False)` also saves the all-gathers of each next forward pass, at the "
        "cost of the unsharded parameters' memory."
    ),
    lesson="lessons/09_at_scale.ipynb",
    section=N_("2. Two ranks: what the sync setting changes"),
    cell="l09-s2",
)

BOUNDARY_ONE_MORE_SHARD = Misconception(
    id="boundary-one-more-shard",
    name=N_("the boundary setting's extra memory taken as one more shard"),
    why=N_(
        "A rank that does not reduce-scatter between micro-steps keeps the whole unsharded gradient, P bytes, "
        "where the default keeps its shard, P / W. The extra is (W - 1) / W x P, the missing part of the gradient, "
        "not one more shard."
    ),
    lesson="lessons/09_at_scale.ipynb",
    section=N_("2. Two ranks: what the sync setting changes"),
    cell="l09-s2",
)

COMPILE_WHOLE_MICRO_STEP = Misconception(
    id="compile-whole-micro-step",
    name=N_("`backward()` and `.item()` inside the compiled micro-step"),
    why=N_(
        "`torch.compile` (torch 2.13) breaks the graph at a Python branch on a tensor's value, at `Tensor.backward()` "
        "and at `.item()`, so a micro-step that holds them compiles into several graphs. Compile the forward pass and the "
        "loss, and keep `backward()`, the finite check and the logging outside."
    ),
    lesson="lessons/09_at_scale.ipynb",
    section=N_("5. `torch.compile` and the micro-step"),
    cell="l09-s5",
)

LIBRARY_AS_OWN_LOOP = Misconception(
    id="library-as-own-loop",
    name=N_("a library's accumulation taken to be your own loop's"),
    why=N_(
        "A library decides what it counts, who divides and by what, and when it steps; Lightning and Keras count "
        "micro-batches and divide each micro-batch's mean by N, which weighs unequal micro-batches equally. "
        "Measure it (the weight probe) before you trust it."
    ),
    lesson="lessons/10_stacks.ipynb",
    section=N_("1. Three questions for any stack"),
    cell="l10-s1",
)

ADAM_HIDES_EVERY_ERROR = Misconception(
    id="adam-hides-every-error",
    name=N_("Adam taken to make a wrong loss scale harmless"),
    why=N_(
        "Adam divides each gradient by its own running scale, so a factor that multiplies every window's gradient "
        "alike leaves the update almost unchanged; but the logged loss, `grad_norm` and a clipping threshold still "
        "see the factor, and a factor that differs between windows or micro-batches (a short last window, a mean of "
        "micro-batch means) still changes the update. Fix the division, whatever the optimizer."
    ),
    lesson="lessons/05_trainer.ipynb",
    section=N_("3. Batch 32 vs batch 8 x 4: loss, gradient norm, update"),
    cell="trainer-17",
)

ADAM_UPDATE_SCALES = Misconception(
    id="adam-update-scales",
    name=N_("Adam's update taken to grow with the gradient, as SGD's does"),
    why=N_(
        "SGD's update is the learning rate times the gradient, so a gradient N times too large moves the weights N "
        "times as far; Adam divides by the square root of its running mean of squared gradients, so a factor shared "
        "by every step cancels, up to epsilon. With Adam the same bug shows in the logged loss, `grad_norm` and "
        "clipping, and in the update only on the steps where clipping engages (Trainer clips at "
        "`max_grad_norm=1.0` by default)."
    ),
    lesson="lessons/05_trainer.ipynb",
    section=N_("3. Batch 32 vs batch 8 x 4: loss, gradient norm, update"),
    cell="trainer-17",
)

PER_SAMPLE_NORM_COUPLED = Misconception(
    id="per-sample-norm-coupled",
    name=N_("LayerNorm or GroupNorm taken to mix the samples of a batch"),
    why=N_(
        "LayerNorm and GroupNorm normalize each sample with statistics of its own features (or groups of channels), "
        "so a sample's output does not depend on the others of its batch and accumulation gives the full batch's "
        "gradient with them. Among normalization layers only those with batch statistics (BatchNorm in training "
        "mode, SyncBatchNorm) couple the samples, and they also update their running statistics once per micro-batch, "
        "N times per window (exercise 8.1); any other batch-level computation couples them too (in-batch negatives, "
        "MoE capacity, load-balancing losses)."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("1. BatchNorm"),
    cell="l08-s1",
)
