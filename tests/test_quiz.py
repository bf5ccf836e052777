"""The "Check your understanding" questions (``gradacc.course.quiz``, issue 53 part 3): the answer key is tested.

* every question has one right option and wrong options that each name a catalogued misconception, whose section
  heading is in the lesson it names; lessons 01-12 ask 3-5 questions (lesson 02 six: its optional mixed-precision
  section adds one), lesson 00 (the setup) none;
* every number a question or an explanation states agrees with what the lesson computes: its stored outputs (the
  lessons' own asserts hold them; tests/test_notebooks.py re-runs every lesson), and the rules behind the right
  answers hold beyond the lesson's case (``test_the_right_answers_hold_in_general``);
* every lesson stores the quiz the package makes now, in its core path, just before "You can now"; the pt-BR edition
  stores it in Portuguese.

No notebook runs here: the file reads notebooks and computes a few small numbers (about 2 s of CPU).
"""

from __future__ import annotations

import json
import math
import re
from functools import cache

import nbformat
import pytest
from conftest import ROOT

from gradacc.course.misconceptions import catalogue
from gradacc.course.notebooks import core_path_cells
from gradacc.course.quiz import QUIZ_KEY, all_questions, questions, quiz_bundle, quiz_data
from gradacc.i18n import translate

LESSONS = {p.name[:2]: p for p in sorted((ROOT / "lessons").glob("*.ipynb"))}
QUESTIONS = {(q.lesson, q.id): q for q in all_questions()}


@cache
def _notebook(lesson: str, edition: str = "") -> nbformat.NotebookNode:
    return nbformat.read(ROOT / edition / "lessons" / LESSONS[lesson].name, as_version=4)


def out(lesson: str, cell: str) -> str:
    """The text a lesson's cell printed (stored outputs: stream text and text/plain)."""
    (found,) = [c for c in _notebook(lesson).cells if c.get("id") == cell]
    return "".join(o.get("text", o.get("data", {}).get("text/plain", "")) for o in found.outputs)


def num(lesson: str, cell: str, pattern: str) -> float:
    """The number ``pattern``'s group 1 finds in what ``cell`` printed."""
    text = out(lesson, cell)
    match = re.search(pattern, text)
    assert match, f"lesson {lesson}, cell {cell}: {pattern!r} not in {text[:300]!r}"
    return float(match.group(1))


def value(lesson: str, key: str, misconception: str | None = None) -> float:
    """A number question's right value (or the wrong value of ``misconception``)."""
    return next(o.value for o in QUESTIONS[lesson, key].options if o.misconception == misconception)


def test_every_lesson_but_the_setup_asks_three_to_five_questions():
    counts = {lesson: len(questions(lesson)) for lesson in LESSONS if lesson != "00"}
    print("questions per lesson:", counts, "in all", sum(counts.values()))
    assert set(counts) == {f"{n:02d}" for n in range(1, 13)} and all(3 <= n <= 5 for lesson, n in counts.items()), (
        counts
    )
    with pytest.raises(KeyError, match="has no questions"):
        questions("00")
    assert len(QUESTIONS) == len(all_questions())  # ids unique within a lesson


def test_every_wrong_option_is_a_catalogued_misconception_and_its_section_is_in_the_lesson():
    entries = catalogue()
    for q in all_questions():
        assert sum(o.misconception is None for o in q.options) == 1, q.id
        assert len(q.wrong) >= 1, q.id
        for option in q.wrong:
            assert option.misconception in entries, (q.lesson, q.id, option.misconception)
        if q.digits is None:
            assert all(o.text.strip() for o in q.options) and len({o.text for o in q.options}) == len(q.options)
        else:  # a number question: distinct values, still distinct at the digits the learner's answer is rounded to
            shown = [f"{o.value:.{q.digits}g}" for o in q.options]
            assert len(set(shown)) == len(shown), (q.id, shown)
    used = {o.misconception for q in all_questions() for o in q.wrong}
    for m in (entries[i] for i in used):
        nb = nbformat.read(ROOT / m.lesson, as_version=4)
        (cell,) = [c for c in nb.cells if c.get("id") == m.cell]
        assert re.search(rf"^#+ {re.escape(m.section)}$", cell.source, re.M), (m.id, m.section, m.cell)


def test_a_wrong_choice_shows_its_misconceptions_name_why_and_section_and_the_right_one_says_why():
    data = {(q.lesson, q.id): d for lesson in {q.lesson for q in all_questions()}
            for q, d in zip(questions(lesson), quiz_data(lesson, lambda t: t), strict=True)}  # fmt: skip
    for key, q in QUESTIONS.items():
        answers = [a for a in data[key]["answers"] if a.get("type") != "default"]
        for option, answer in zip(q.options, answers, strict=True):
            assert answer["correct"] == (option.misconception is None)
            if option.misconception is None:
                assert answer["feedback"].startswith("Right. ")
            else:
                m = catalogue()[option.misconception]
                plain = re.sub(r"</?code>", "`", answer["feedback"]).replace("&gt;", ">").replace("&lt;", "<")
                assert plain.startswith(f"Not quite: {m.name}. {m.why} ") and m.section in plain, key


# each question's numbers against the lesson's stored outputs: (lesson, question id) -> a check
def _01_after_n_backwards():
    found = re.search(r"gradient of the whole window\|: \['(\S+)', '(\S+)'\]", out("01", "theory-04-idea"))
    assert found and max(float(v) for v in found.groups()) < 1e-7  # "about 1e-8", summed losses / the window's items
    assert num("01", "theory-20", r"after dividing by 32: max abs error (\S+)") < 1e-7
    assert num("01", "theory-13", r"max \|g\| = (\S+)") > 1e-2


def _01_unequal_sizes():
    assert num("01", "theory-17", r"weighted by counts \(10/32, 22/32\): +max abs error (\S+)") < 1e-6
    assert num("01", "theory-17", r"plain mean of micro-batch gradients: +max abs error (\S+)") > 1e-3


def _01_padding_ratio():
    assert num("01", "theory-27", r"mean of sequence means: .*ratio (\S+)") == value("01", "padding-ratio")
    assert num("01", "theory-27", r"mean over real tokens: .*ratio (\S+)") == value(
        "01", "padding-ratio", "mean-of-means"
    )
    assert "real label tokens per sequence: [10, 100], in all 110" in out("01", "theory-25")


def _01_padding_divisor():
    assert num("01", "theory-29", r"sum of token losses / 110: max abs error (\S+)") < 1e-6
    assert num("01", "theory-29", r"mean of per-sequence means:  max abs error (\S+)") > 1e-2


def _02_where_step():
    assert num("02", "pytorch-08", r"max \|accumulated - full batch\| = (\S+)") < 1e-6


def _02_short_window_ratio():
    assert num("02", "pytorch-13", r"last update / correct update: (\S+)") == value("02", "short-window-ratio")
    assert num("02", "pytorch-15", r"last update / correct update: (\S+)") == 1  # the fix: the window's samples


def _02_scheduler():
    text = out("02", "pytorch-17")
    assert "after 100 micro-batches = 25 optimizer steps" in text and "13 of 25 updates used lr 0" in text
    assert num("02", "pytorch-17", r"scheduler stepped per micro-batch: lr (\S+)") == 0


def _02_clipping():
    assert num("02", "pytorch-19", r"clip at the boundary : .*cosine with the clipped full-batch gradient (\S+)") == 1.0
    assert (
        num("02", "pytorch-19", r"clip every micro-batch: .*cosine with the clipped full-batch gradient (\S+)") < 0.99
    )


def _02_grad_scaler():
    assert "a second unscale_ in the same window: refused" in out("02", "pytorch-29")
    text = out("02", "pytorch-29-overflow")
    assert "scheduler stepped always: scale 65536 -> 32768, update skipped True" in text and "lr now 0.450" in text
    assert "scheduler stepped only if the optimizer stepped: scale 65536 -> 32768" in text and "lr now 0.500" in text


def _memory_table() -> dict[int, dict[str, float]]:
    lines = [line.split() for line in out("03", "memory-10").splitlines() if re.match(r"^\s*\d+\s+\d+\s", line)]
    names = ("N", "micro", "params", "grads", "opt", "acts", "temps", "other", "peak", "saved")
    return {int(row[0]): dict(zip(names, map(float, row), strict=True)) for row in lines}


def _03_what_n_divides():
    table = _memory_table()
    assert (table[1]["peak"], table[8]["peak"]) == (58.5, 19.6)  # the numbers the explanation quotes
    assert len({(r["params"], r["opt"]) for r in table.values()}) == 1  # N moves neither
    assert len({r["grads"] for n, r in table.items() if n >= 2}) == 1
    assert all(r["peak"] >= r["params"] + r["grads"] + r["opt"] for r in table.values())


def _03_saved_activations():
    table = _memory_table()
    assert table[1]["saved"] == 32.2 and table[8]["saved"] == value("03", "saved-activations") == 4.0
    assert value("03", "saved-activations", "whole-batch-activations") == table[1]["saved"]
    assert num("03", "memory-10", r"saved activations, N=8 / N=1: (\S+)") == 0.125


def _03_adam_small_batch():
    assert num("03", "memory-15", r"Adam: the peak varies by (\S+)% across N") == 0.0


def _04_divide_by_n():
    assert num("04", "accelerate-19-logged", r"max \|4 x \.grad - gradient of the logged loss\| = (\S+)") == 0.0


def _04_scheduler_steps():
    text = out("04", "accelerate-13")
    assert "sync steps at micro-steps [4, 8, 10]; optimizer steps 3; scheduler steps 3" in text
    assert value("04", "scheduler-steps") == 3


def _04_short_window():
    assert "['1.000', '1.000', '0.500']" in out("04", "accelerate-18") and value("04", "short-window") == 0.5


def _04_clip():
    assert num("04", "accelerate-16", r"with clipping = (\S+)") == 0.0


def _05_bert_ratio():
    assert num("05", "trainer-19", r"update ratio\s+(\S+)") == value("05", "bert-ratio") == 4


def _05_right_fix():
    assert num("05", "trainer-27", r"compute_loss_func: .*update ratio (\S+)") == 1.0
    assert num("05", "trainer-33", r"single batch's: max \|difference\| = (\S+)") < 1e-6  # uneven tokens 3, 9, 1, 15
    assert num("05", "trainer-35", r"max \|difference\| = (\S+)") > 0.1


def _05_one_token():
    assert "label tokens per micro-batch: [3, 9, 1, 15]" in out("05", "trainer-31")
    assert num("05", "trainer-36", r"the 1-token sequence counts (\d+)x too much") == value("05", "one-token")


def _05_adam_hides():
    assert "the logged training loss is N = 4 times too large" in out("05", "trainer-16")
    assert num("05", "trainer-19", r"grad_norm ratio\s+(\S+)") == 4
    (md,) = [c.source for c in _notebook("05").cells if c.get("id") == "trainer-20"]
    assert "With Adam a 4x gradient would give an update" in md and "clipping" in md


def _06_apply_every():
    assert num("06", "jax-29", r"\|MultiSteps update\| = (\S+)") == 4.0
    assert "Adam count 4 (MultiSteps: 1)" in out("06", "jax-30")


def _06_short_micro_batch():
    assert "real samples per micro-batch: [64, 64, 64, 16] (window: 208)" in out("06", "jax-32")
    assert num("06", "jax-32", r"\((\S+)x too heavy\)") == value("06", "short-micro-batch")


def _06_python_loop():
    assert "at N=8: Python loop 40, lax.scan 5" in out("06", "jax-14")


def _07_effective_batch():
    assert "effective batch = 8 x 4 x 2 = 64 samples" in out("07", "l07-effective")
    assert value("07", "effective-batch") == 64


def _07_all_reduces():
    assert num("07", "l07-counts", r"no_sync on the first N-1 micro-steps: (\d+)") == value("07", "all-reduces")
    assert num("07", "l07-counts", r"synchronizing every micro-step: +(\d+)") == value(
        "07", "all-reduces", "sync-every-micro-step"
    )


def _07_forward_inside():
    assert num("07", "l07-forward", r"no_sync\(\) around backward\(\) only: +(\d+)") == 4


def _07_token_divisor():
    assert "5 tokens in its window" in out("07", "l07-tokens") and "15 tokens in its window" in out("07", "l07-tokens")
    assert num("07", "l07-token-grad", r"all-reduced token count: max \|g_DDP - g_sum/20\| = (\S+)") < 1e-6
    assert num("07", "l07-token-grad", r"per-rank token counts: +max \|g_DDP - g_sum/20\| = (\S+)") > 1e-3


def _08_which_norm():
    text = out("08", "l08-norms-check")
    for norm, same in (("batch", False), ("layer", True), ("group", True)):
        assert f"norm={norm:<6} accumulation equals the full batch (< 1e-6): {same}" in text


def _08_negatives():
    assert "negatives per sample: 63 (full batch) vs 15 (micro-batch)" in out("08", "l08-infonce-check")


def _08_summed_losses():
    assert num("08", "l08-graphs", r"max difference = (\S+)") < 1e-6
    assert num("08", "l08-graphs-check", r"= (\S+) x one micro-batch") == 4.0


def _08_gradcache():
    assert num("08", "l08-replay", r"with RandContext, (\S+) without") == 0.81


def _09_traffic():
    assert "reduce-scatters per optimizer step: 20 vs 5" in out("09", "l09-counts")
    assert re.search(r"^\s*4\s+\|\s+20\s+40 \|\s+5\s+40$", out("09", "l09-counts"), re.M)  # 40 all-gathers either way


def _09_memory_cost():
    text = out("09", "l09-grad-bytes")
    assert re.search(r"sync each micro-step +rank 0: +1\.58", text) and re.search(
        r"sync at the boundary +rank 0: +3\.15", text
    )


def _09_compile():
    assert "forward + loss only (gradacc.foundations.accumulation.sum_cross_entropy): 1 graph, 0 breaks" in out(
        "09", "l09-breaks"
    )
    assert num("09", "l09-compare", r"max \|w_eager - w_compiled\| = (\S+)") < 1e-6


def _10_lightning_weight():
    assert "item_counts, N = [6, 2, 5, 3, 4, 1], 4" in "".join(
        c.source for c in _notebook("10").cells if c.get("id") == "l10-loop"
    )
    assert num("10", "l10-loop", r"update: \[(\S+),") == value("10", "lightning-weight", "library-as-own-loop")
    assert num("10", "l10-probe-check", r"Lightning: \[(\S+),") == value("10", "lightning-weight")


def _10_keras_short():
    shares = re.search(r"right / Lightning / Keras: (\S+) (\S+) (\S+)", out("10", "l10-probe-check")).groups()
    assert [float(s) for s in shares] == [
        value("10", "keras-short", "library-as-own-loop"),
        value("10", "keras-short", "library-short-window"),
        value("10", "keras-short"),
    ]
    _10_keras_carries_over()


def _10_keras_carries_over():
    """The explanation's "applied with the next epoch's first micro-batches": Keras itself, run by the lesson (its
    asserts hold it; tests/test_notebooks.py re-runs it), leaves the short window in its accumulators at an epoch's
    end and completes it in the next epoch."""
    text = out("10", "l10-keras-short")
    assert re.search(r"1 epoch: 1 update from 6 batches, 0\.\d+ of gradient norm left in the accumulators", text)
    assert "2 epochs: 3 updates from 12 batches" in text and "the second window takes 2 batches of each epoch" in text


def _10_three_questions():
    (md,) = [c.source for c in _notebook("10").cells if c.get("id") == "l10-s1"]
    assert all(
        words in md for words in ("**what it counts**", "**who divides the loss, and by what**", "**when it steps")
    )


def _11_schedule_divides():
    text = out("11", "l11-pipeline")
    assert re.search(r"scale_grads=True \(default\), mean loss +\|g\| / \|g_full\| = 1\.000", text)
    assert re.search(r"scale_grads=True, mean loss / M +\|g\| / \|g_full\| = 0\.250", text)


def _11_unequal_items():
    text = out("11", "l11-unequal")
    assert "items per micro-batch [8, 8, 8, 6], 30 in all" in text
    assert num("11", "l11-unequal", r"scale_grads=True, mean loss +\|g - g_full\| / \|g_full\| = (\S+)") == 0.16
    assert num("11", "l11-unequal", r"sum / 30 items +\|g - g_full\| / \|g_full\| = (\S+)") < 1e-6


def _11_autocast():
    text = out("11", "l11-autocast")
    assert re.search(r"autocast around the (?:whole )?loop +outputs -0\.143, -0\.143, -0\.143, -0\.143", text)
    assert re.search(r"autocast around each forward(?: pass)? +outputs -0\.143, -0\.084", text)


def _12_in_backward_steps():
    text = out("12", "l12-inbwd-wrong")
    assert "_apply_optimizer_in_backward: Adam steps per parameter [4, 4], update off by 1.97" in text
    assert value("12", "in-backward-steps") == 4
    assert "Adam steps per parameter [1, 1]" in out("12", "l12-inbwd-fix")  # deferred: one step per window
    assert value("12", "in-backward-steps", "in-backward-accumulates") == 1


def _12_muon():
    assert num("12", "l12-muon-source", r"scaling the input by 1/4 changes the output by ([\d.]+),") == 0.0
    assert num("12", "l12-muon-wrong", r"\[\[16, 16, 16, 16\]\]: a Muon step per micro-batch is off by (\S+)") == 2.34
    assert all(float(v) == 0 for v in re.findall(r"max \|w - w_full\| = (\S+)", out("12", "l12-muon-fix")))


def _12_progress():
    assert "multipliers [-127.0, -254.0]" in out("12", "l12-progress-wrong")
    assert "optimizer steps: multipliers [1.0, 0.0]" in out("12", "l12-progress-wrong")
    assert value("12", "progress") == 1 and value("12", "progress", "progress-in-micro-batches") == -127
    assert value("12", "progress", "progress-clamped") == max(0, -127)


def _12_accountant():
    text = out("12", "l12-dp-epsilon")
    assert "batch 4 x 256, counted per optimizer step: epsilon 3.8732 (45 updates)" in text
    assert re.search(r"batch 1024 x 1: +epsilon 3\.8732", text)
    assert "counted per micro-batch:    epsilon 0.4918" in text
    assert "0.99 (optimizer steps) vs 8.26 (micro-batches)" in out("12", "l12-dp-noise")


def _12_amax():
    assert num("12", "l12-amax-toy", r"right: window amax (\S+)") == value("12", "amax") == 9
    assert math.isclose(
        num("12", "l12-amax-toy", r"mean : window amax (\S+)"), value("12", "amax", "amax-averaged"), rel_tol=1e-4
    )
    assert num("12", "l12-amax-toy", r"last : window amax (\S+)") == value("12", "amax", "amax-last")
    assert "[8, 8, 7, 7]: full batch amax 0.7926; right 0.7926, mean 0.6895" in out("12", "l12-amax-real")


AGREES = {key: globals()[f"_{key[0]}_{key[1].replace('-', '_')}"] for key in QUESTIONS}


@pytest.mark.parametrize("key", sorted(AGREES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_each_answer_agrees_with_the_numbers_the_lesson_computes(key):
    AGREES[key]()


def test_the_right_answers_hold_in_general():
    """The rules behind the right answers, beyond the lesson's case: unequal sizes, short windows, other N."""
    from gradacc.stacks import right_weights

    # the window's mean is sum / items for any sizes; the mean of means equals it only for equal sizes
    for sizes in ([10, 22], [8, 8, 7, 7], [1, 5, 26], [3, 9, 1, 15]):
        losses = [[(7 * i + 3 * k) % 11 / 10 for i in range(n)] for k, n in enumerate(sizes)]
        means = [sum(ls) / len(ls) for ls in losses]
        window = sum(map(sum, losses)) / sum(sizes)
        assert math.isclose(sum(n * m for n, m in zip(sizes, means, strict=True)) / sum(sizes), window)
        assert math.isclose(sum(means) / len(means), window) == (len(set(sizes)) == 1)
        # the mean of means over-weights micro-batch k by (1 / M) / (n_k / W): 7 for the 1-token one of lesson 05
        assert math.isclose((1 / len(sizes)) / (min(sizes) / sum(sizes)), sum(sizes) / (len(sizes) * min(sizes)))
    assert (1 / 4) / (1 / 28) == 7 and (1 / 4 / 16) / (1 / 208) == 3.25 and (1 / 2 / 10) / (1 / 2 / 100) == 10
    # steps per epoch: ceil(micro-batches / N); a short window of k divided by N gets k / N of its update
    for micro_batches, n in ((10, 4), (7, 3), (8, 4), (1, 5)):
        windows = [min(n, micro_batches - s) for s in range(0, micro_batches, n)]
        assert len(windows) == math.ceil(micro_batches / n)
        assert [k / n for k in windows][-1] == (1.0 if micro_batches % n == 0 else (micro_batches % n) / n)
    # the weight every item should get: its share of its window, the short window's included (lesson 10's probe)
    weights = right_weights([6, 2, 5, 3, 4, 1], 4)
    assert weights[0] == 6 / 16 and math.isclose(sum(weights[4:]), 1.0)
    # effective batch = micro x N x world; DDP's average over W ranks times a count / W restores 1 / count
    assert 8 * 4 * 2 == 64 and all(math.isclose((1 / w) * w / 20, 1 / 20) for w in (1, 2, 8))
    # FSDP at the boundary keeps P where the default keeps P / W: the extra is (W - 1) / W x P
    for world in (2, 4, 8):
        assert math.isclose(1 - 1 / world, (world - 1) / world)
    # lesson 12: progress counted in optimizer steps ends at 1; counted in micro-batches it reaches 1 after about
    # 1 / N of the run, then the unclamped multiplier turns negative
    from gradacc.stacks.window_clocks import (
        nanochat_lr_multiplier,
        optimizer_steps,
        progress_per_micro_batch,
        progress_per_optimizer_step,
    )

    for micro_batches, n in ((256, 128), (70, 4), (9, 4), (40, 8)):
        iterations = optimizer_steps(micro_batches, n)  # the run asks for the steps it makes
        right = progress_per_optimizer_step(micro_batches, n, iterations)
        wrong = progress_per_micro_batch(micro_batches, n, iterations)
        assert all(0 < p <= 1 for p in right) and right[-1] == 1 and min(map(nanochat_lr_multiplier, right)) >= 0
        assert next(s for s, p in enumerate(wrong) if p >= 1) <= math.ceil(iterations / n)
        assert min(map(nanochat_lr_multiplier, wrong)) < 0
    # an amax: the maximum of the micro-batches' maxima is the window's; the mean and the last fall below it unless
    # every micro-batch (or the last) holds the largest value
    for values in ([[3.0], [9.0], [1.0]], [[0.5, 2.0], [1.5], [2.0, 0.1]], [[1.0, 4.0], [4.0]], [[7.0], [7.0]]):
        maxima = [max(v) for v in values]
        assert max(maxima) == max(x for v in values for x in v)
        assert (sum(maxima) / len(maxima) == max(maxima)) == (len(set(maxima)) == 1)
        assert (maxima[-1] == max(maxima)) == (max(maxima) in values[-1])
    # Muon: its orthogonalization divides out any power-of-two scale exactly (others up to bfloat16 rounding) and
    # is not additive, for other matrices than the lesson's
    import torch

    from gradacc.stacks.window_optimizers import orthogonalize

    for seed, shape in ((2, (16, 32)), (3, (48, 24)), (4, (8, 8))):
        g, h = torch.randn(2, *shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(orthogonalize(g), orthogonalize(g / 4)) and torch.equal(
            orthogonalize(g), orthogonalize(8 * g)
        )
        assert float((orthogonalize(g).double() - orthogonalize(g / 3).double()).abs().max()) < 0.05
        gap = (orthogonalize(g).double() + orthogonalize(h).double() - orthogonalize(g + h).double()).norm()
        assert gap > 0.3 * orthogonalize(g + h).double().norm(), (seed, float(gap))


def test_the_libraries_behave_as_the_explanations_say():
    """What the quiz's explanations say beyond one case, run on the pinned libraries themselves (under 1 s of CPU):
    Adam hides a factor shared by every step but not one that varies (SGD shows both); Accelerate's prepared
    scheduler advances only on a synchronizing step, num_processes times unless split_batches=True."""
    import torch

    def updates(optimizer_class, factors, **kwargs):
        torch.manual_seed(0)
        weight = torch.nn.Parameter(torch.zeros(5))
        optimizer = optimizer_class([weight], lr=0.1, **kwargs)
        moves, grads = [], torch.randn(len(factors), 5)
        for grad, factor in zip(grads, factors, strict=True):
            before = weight.detach().clone()
            weight.grad = grad * factor
            optimizer.step()
            moves.append(float((weight.detach() - before).norm()))
        return moves

    right = updates(torch.optim.AdamW, [1, 1, 1, 1])
    constant = [a / b for a, b in zip(updates(torch.optim.AdamW, [4, 4, 4, 4]), right, strict=True)]
    varying = [a / b for a, b in zip(updates(torch.optim.AdamW, [1, 1, 1, 0.5]), right, strict=True)]
    sgd = [
        a / b for a, b in zip(updates(torch.optim.SGD, [4, 4, 4, 4]), updates(torch.optim.SGD, [1] * 4), strict=True)
    ]
    assert all(math.isclose(r, 1, rel_tol=1e-5) for r in constant), constant  # hidden, up to epsilon
    assert varying[-1] < 0.99, varying  # a short last window at 0.5: Adam's update still too small
    assert all(math.isclose(r, 4, rel_tol=1e-6) for r in sgd), sgd

    from types import SimpleNamespace

    import accelerate.scheduler

    for processes, split_batches, expected in ((1, False, 1), (2, False, 2), (2, True, 1)):
        weight = torch.nn.Parameter(torch.zeros(1))
        optimizer = torch.optim.SGD([weight], lr=1.0)
        scheduler = accelerate.scheduler.AcceleratedScheduler(
            torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=10),
            [SimpleNamespace(step_was_skipped=False)],
            split_batches=split_batches,
        )
        state = SimpleNamespace(num_processes=processes)
        original = accelerate.scheduler.AcceleratorState
        accelerate.scheduler.AcceleratorState = lambda state=state: state
        try:
            for sync in (False, False, False, True):  # one window of N = 4 micro-steps, step() on each
                scheduler.gradient_state = SimpleNamespace(sync_gradients=sync, adjust_scheduler=False)
                if sync:
                    optimizer.step()
                scheduler.step()
        finally:
            accelerate.scheduler.AcceleratorState = original
        assert scheduler.scheduler.last_epoch == expected, (processes, split_batches)


def _quiz_cells(lesson: str, edition: str = "") -> list[nbformat.NotebookNode]:
    return [c for c in _notebook(lesson, edition).cells if c.cell_type == "code" and "show_quiz" in c.source]


@pytest.mark.parametrize("lesson", [n for n in LESSONS if n != "00"])
def test_the_lesson_stores_the_current_quiz_in_its_core_path_before_you_can_now(lesson):
    nb = _notebook(lesson)
    (cell,) = _quiz_cells(lesson)
    assert cell.source == f'from gradacc.course.quiz import show_quiz\n\nshow_quiz("{lesson}")'
    data, metadata = quiz_bundle(lesson, lambda t: t, "en")
    stale = f"lessons/{LESSONS[lesson].name} stores another quiz: re-run its quiz cell (or gradacc execute the lesson)"
    assert [dict(o) for o in cell.outputs] == [{"output_type": "display_data", "data": data, "metadata": metadata}], (
        stale
    )
    assert any(c.get("id") == cell.id for c in core_path_cells(nb))
    at = [c.get("id") for c in nb.cells].index(cell.id)
    assert nb.cells[at - 1].source.startswith("## Check your understanding")
    assert nb.cells[at + 1].source.startswith("## You can now")
    html = data["text/html"]
    assert f'id="gradaccQuiz{lesson}en"' in html and "<script>" in html
    # for a viewer that runs no script (GitHub, a notebook not yet run): the questions and options, not the answers
    static = html.split(f'<div id="gradaccQuiz{lesson}en-static">', 1)[1].split("</div>", 1)[0]
    assert static.count("<li>") == sum(1 + (len(q.options) if q.digits is None else 0) for q in questions(lesson))
    assert "Right." not in static and "Not quite" not in static
    assert _stored_questions(html, lesson) == quiz_data(lesson, lambda t: t)


def test_the_quiz_names_no_address_to_load():
    """JupyterQuiz 2.9.6.4 loads MathJax 3 from cdn.jsdelivr.net where a page defines a MathJax 3 without ``typeset``
    (JupyterLab 4.6 does); ``quiz_html`` removes both loaders, so the quiz holds no URL at all (tests/test_browser.py
    checks that JupyterLab fetches nothing for it, tests/test_site.py the same on the website)."""
    for lang in ("en", "pt_BR"):
        html = quiz_bundle("01", lambda t, lang=lang: translate(t, lang), lang)[0]["text/html"]
        assert re.findall(r"https?://", html) == [] and html.count("gradacc: no MathJax from a CDN") == 2


def _stored_questions(html: str, lesson: str) -> list[dict]:
    found = re.search(rf"var questionsgradaccQuiz{lesson}(?:en|pt_BR)=(.*?);\n\nif \(typeof Question", html, re.S)
    return json.loads(found.group(1))


def test_the_pt_br_edition_asks_in_portuguese():
    """The pt-BR lessons store the quiz their own run shows: every question, answer and explanation in Portuguese
    (the catalog's), the number label too; English nowhere."""
    for lesson in [n for n in LESSONS if n != "00"]:
        (cell,) = _quiz_cells(lesson, "pt-BR")
        html = cell.outputs[0]["data"]["text/html"]
        assert cell.outputs[0]["metadata"] == {QUIZ_KEY: lesson}
        stored = _stored_questions(html, lesson)
        assert stored == quiz_data(lesson, lambda t: translate(t, "pt_BR"))
        for q, said in zip(questions(lesson), stored, strict=True):
            assert said["question"] != quiz_data(lesson, lambda t: t)[questions(lesson).index(q)]["question"]
        assert (
            "Digite um número (com ponto decimal, não vírgula) e tecle Enter:" in html
            and "Type numeric answer here:" not in html
        )
