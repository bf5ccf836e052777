"""Misconceptions about memory, ranks, BatchNorm and the libraries' own division (lessons 03, 07, 08, 10)."""

from __future__ import annotations

from ...i18n import N_
from . import Misconception

WHOLE_BATCH_ACTIVATIONS = Misconception(
    id="whole-batch-activations",
    name=N_("the whole effective batch's activations kept at once"),
    why=N_(
        "With accumulation, a micro-batch's activations are freed by its backward pass before the next micro-batch "
        "runs, so the activations alive at once are those of effective_batch_size / N samples. That is why "
        "activation memory falls as 1/N while the parameters, gradients and optimizer state stay."
    ),
    lesson="lessons/03_memory.ipynb",
    section=N_("2. Memory against N: activations shrink as 1/N"),
    cell="memory-09",
)

RANK_OWN_TOKENS = Misconception(
    id="rank-own-tokens",
    name=N_("each rank divides by its own tokens"),
    why=N_(
        "Each rank's mean over its own tokens, averaged by DDP, weighs the ranks equally, so a token on a rank with "
        "fewer tokens counts more. Divide each rank's summed loss by the tokens of all ranks (an all-reduced count) "
        "and multiply by the world size to undo DDP's average."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("3. Token counts across ranks"),
    cell="l07-s3",
)

DDP_AVERAGE_FORGOTTEN = Misconception(
    id="ddp-average-forgotten",
    name=N_("DDP's average over the ranks forgotten"),
    why=N_(
        "DDP averages the gradients over the ranks, which divides them by the world size once more. A loss already "
        "divided by the tokens of all ranks must be multiplied by the world size, or the gradient is world_size "
        "times too small (with SGD the update too; Adam hides a constant factor, but not a clipping threshold)."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("3. Token counts across ranks"),
    cell="l07-s3",
)

BIASED_RUNNING_VAR = Misconception(
    id="biased-running-var",
    name=N_("BatchNorm's running variance updated with the biased variance"),
    why=N_(
        "PyTorch's BatchNorm normalises a batch with its biased variance (divided by n), but it updates "
        "running_var with the unbiased one (divided by n - 1; Keras 3 uses the biased one for both). The biased "
        "one makes running_var too small, the more so the smaller the micro-batch."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("1. BatchNorm"),
    cell="l08-s1",
)

WINDOW_STATISTICS = Misconception(
    id="window-statistics",
    name=N_("BatchNorm taken to see the whole window as one batch"),
    why=N_(
        "Under accumulation BatchNorm sees each micro-batch alone: it updates its running statistics once per "
        "micro-batch, with that micro-batch's mean and variance. Accumulating gradients does not accumulate "
        "BatchNorm's statistics."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("1. BatchNorm"),
    cell="l08-s1",
)

LIBRARY_DIVISION_FORGOTTEN = Misconception(
    id="library-division-forgotten",
    name=N_("a library's own division forgotten"),
    why=N_(
        "Accelerate, Lightning and Keras divide each micro-batch's loss by N, and Trainer, when it decides that the "
        "model takes no loss keyword arguments and no compute_loss_func is given, by the window's number of "
        "micro-batches, before the gradients add up. A loss already divided by the window's items is then divided "
        "again: ask who divides, and by what, before dividing yourself."
    ),
    lesson="lessons/10_stacks.ipynb",
    section=N_("1. Three questions for any stack"),
    cell="l10-s1",
)

SUM_TREATED_AS_MEAN = Misconception(
    id="sum-treated-as-mean",
    name=N_("a summed loss treated as a mean"),
    why=N_(
        "A mean loss is already divided by its micro-batch's items and a summed loss is not, so weighting them by "
        "their share of the window needs different factors: n_k / items for a mean, 1 / items for a sum. Read the "
        "loss's reduction before choosing the factor."
    ),
    lesson="lessons/01_theory.ipynb",
    section=N_("4. Mean or sum: what each reduction needs"),
    cell="theory-19",
)

AUTOCAST_AROUND_THE_LOOP = Misconception(
    id="autocast-around-the-loop",
    name=N_("one autocast context around the optimizer steps"),
    why=N_(
        "Inside one autocast context, PyTorch caches the low-precision copy of each weight it casts and reuses it "
        "until the context exits, so after optimizer.step() the forward passes still use the old weights. Enter "
        "autocast around each forward pass and its loss (or pass cache_enabled=False)."
    ),
    lesson="lessons/11_parallel.ipynb",
    section=N_("3. One autocast context around the loop: stale weights"),
    cell="l11-s3",
)

ONE_RANK_EFFECTIVE_BATCH = Misconception(
    id="one-rank-effective-batch",
    name=N_("the effective batch of one rank"),
    why=N_(
        "Under data parallelism every rank runs its own micro-batches, and one optimizer step averages all of "
        "them, so the effective batch is micro_batch_size x N x world_size. Leaving out the ranks makes it "
        "world_size times too small."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("1. Two processes, one optimizer step"),
    cell="l07-s1",
)

DDP_DIVIDES_ALREADY = Misconception(
    id="ddp-divides-already",
    name=N_("the loss divided by the world size by hand under DDP"),
    why=N_(
        "DDP already averages the gradients over the ranks, which divides them by world_size. Dividing the loss "
        "by world_size as well makes the gradient world_size times too small (with SGD the update too; Adam hides "
        "a constant factor, but not a clipping threshold)."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("3. Token counts across ranks"),
    cell="l07-s3",
)

SCHEDULE_DIVIDES_ALREADY = Misconception(
    id="schedule-divides-already",
    name=N_("the loss divided by the micro-batches although the pipeline schedule divides"),
    why=N_(
        "With scale_grads=True (its default) a torch.distributed.pipelining schedule divides the summed gradient "
        "of its M micro-batches by M itself. A loss function that also divides by M, as a hand-written loop does, "
        "is divided twice: M times too small."
    ),
    lesson="lessons/11_parallel.ipynb",
    section=N_("2. A pipeline schedule divides for you"),
    cell="l11-diagram-after",
)

SCALE_GRADS_DIVIDES_ALL = Misconception(
    id="scale-grads-divides-all",
    name=N_("scale_grads taken to divide only the new gradients"),
    why=N_(
        "With scale_grads=True every step() divides ALL of .grad by M, the gradients that earlier step() calls left "
        "there included, so with two or more calls before `optimizer.step()` (and M >= 2) the earlier micro-batches "
        "weigh less: a moving average, not a mean. No constant fixes it: set scale_grads=False and divide the "
        "summed loss by the items of the whole optimizer step."
    ),
    lesson="lessons/11_parallel.ipynb",
    section=N_("2. A pipeline schedule divides for you"),
    cell="l11-diagram-after",
)

NUM_ITEMS_IGNORED = Misconception(
    id="num-items-ignored",
    name=N_("Trainer's num_items_in_batch ignored"),
    why=N_(
        "Trainer passes num_items_in_batch, the predicted tokens of the whole window, so that each micro-batch's "
        "summed token loss is divided by the window's count; for a compute_loss_func, or a model whose forward takes "
        "loss keyword arguments, it then does not divide by the number of micro-batches. A mean over the micro-batch's own tokens weighs a token of a short micro-batch "
        "more, and the window's loss comes out about N times too large."
    ),
    lesson="lessons/05_trainer.ipynb",
    section=N_("5. Causal LM with variable-length sequences: the October 2024 bug"),
    cell="trainer-30",
)

NO_LABEL_SHIFT = Misconception(
    id="no-label-shift",
    name=N_("the labels of a causal LM not shifted"),
    why=N_(
        "A causal language model predicts the token at position t + 1 from the tokens up to t, so the logits at t "
        "are scored against the label at t + 1 (logits[:, :-1] against labels[:, 1:]). Without the shift each "
        "position is scored on the token it already reads."
    ),
    lesson="lessons/05_trainer.ipynb",
    section=N_("5. Causal LM with variable-length sequences: the October 2024 bug"),
    cell="trainer-30",
)

LIBRARY_SHORT_WINDOW = Misconception(
    id="library-short-window",
    name=N_("the short last window taken to be handled the same by every library"),
    why=N_(
        "Trainer (transformers 5) divides a short last window by the micro-batches it really holds, Accelerate "
        "(1.x) and Lightning divide it by N as if it were full, and Keras (3.x) leaves it in its accumulator: "
        "applied with the next epoch's first micro-batches, or lost at the end of training. Only each library's "
        "own code says which, so read it before you scale the loss."
    ),
    lesson="lessons/10_stacks.ipynb",
    section=N_("1. Three questions for any stack"),
    cell="l10-s1",
)

SYNC_EVERY_MICRO_STEP = Misconception(
    id="sync-every-micro-step",
    name=N_("the gradients all-reduced on every micro-step"),
    why=N_(
        "Unless the forward pass and backward() of a micro-step both run inside no_sync(), DDP all-reduces the "
        "gradients (bucket by bucket) during every backward(), N times per window, where one all-reduce at the "
        "window's last micro-step gives the same averaged gradient. Run the forward and backward pass of every "
        "micro-step of a window but the last inside ddp_model.no_sync()."
    ),
    lesson="lessons/07_distributed.ipynb",
    section=N_("2. `no_sync()`: one all-reduce per window"),
    cell="l07-s2",
)

CHUNK_LOCAL_NEGATIVES = Misconception(
    id="chunk-local-negatives",
    name=N_("in-batch negatives taken from each micro-batch only"),
    why=N_(
        "A contrastive loss such as InfoNCE compares each sample with every other sample of the batch, so computing "
        "it per micro-batch gives each sample fewer negatives: a different, easier loss, not the same one "
        "accumulated. Embed the whole batch without a graph, compute the loss once, and back-propagate its cached "
        "gradients chunk by chunk (GradCache)."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("3. Contrastive losses with in-batch negatives"),
    cell="l08-s3",
)

NO_RNG_REPLAY = Misconception(
    id="no-rng-replay",
    name=N_("the dropout masks not replayed in GradCache's re-run"),
    why=N_(
        "GradCache's loss is computed with the first pass's dropout masks, so a re-run that draws new masks "
        "back-propagates the cached gradient through another function. Save each chunk's random-number state "
        "before its first forward pass and restore it before that chunk's re-run."
    ),
    lesson="lessons/08_pitfalls.ipynb",
    section=N_("3. Contrastive losses with in-batch negatives"),
    cell="l08-s3",
)
