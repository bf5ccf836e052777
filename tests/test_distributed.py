"""Unit tests of gradacc.parallel.distributed, gradacc.workers.ddp, gradacc.workers.jax_dp and the checks of lesson 07.

The tests marked ``slow`` start real processes (torchrun + 2 gloo workers, accelerate launch, a JAX process with 4
CPU devices): 10-30 s each on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from gradacc.course.checks import lesson07
from gradacc.course.misconceptions import lookup
from gradacc.foundations.accumulation import count_items, full_batch_gradients, max_abs_diff, sum_cross_entropy
from gradacc.foundations.data import IGNORE_INDEX, load_digits_tensors, split_micro_batches
from gradacc.foundations.launch import (
    WorkerError,
    accelerate_launch_command,
    free_port,
    ranks_command,
    run_processes,
    torchrun_command,
)
from gradacc.foundations.models import TinyLM, make_digits_model
from gradacc.parallel.distributed import (
    AllReduceCounter,
    effective_batch_size,
    single_process_group,
)
from gradacc.parallel.runs import (
    run_accelerate_lesson,
    run_accelerator_state,
    run_checkpoint_lesson,
    run_ddp_lesson,
    run_jax_devices,
)
from gradacc.parallel.sharded import run_fsdp_window
from gradacc.parallel.tokens import (
    TOKEN_LABEL_COUNTS,
    token_vocab_size,
    token_windows,
)

# ---------------------------------------------------------------------------------------------- small pieces


def test_free_port_can_be_bound_on_loopback():
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))  # free right after: the launcher can take it


def test_effective_batch_size_and_its_errors():
    assert effective_batch_size(8, 4, 2) == 64
    assert effective_batch_size(16, 1, 1) == 16
    assert effective_batch_size(3, 5, 7) == 105
    with pytest.raises(ValueError, match="accum_steps must be >= 1, got 0"):
        effective_batch_size(8, 0, 2)
    with pytest.raises(ValueError, match="world_size must be an int >= 1, got 0"):
        effective_batch_size(8, 4, 0)
    with pytest.raises(ValueError, match="micro_batch_size must be an int >= 1"):
        effective_batch_size(2.5, 4, 2)


def test_launch_commands_use_the_given_port_and_the_right_launcher():
    cmd = torchrun_command("gradacc.workers.ddp", ["--out", "x"], nproc_per_node=2, port=41234)
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--master-port=41234" in cmd and "--master-addr=127.0.0.1" in cmd and "--nproc-per-node=2" in cmd
    assert cmd[-4:] == ["-m", "gradacc.workers.ddp", "--out", "x"]
    two = accelerate_launch_command("gradacc.workers.accelerate_train", [], num_processes=2, port=41235)
    assert "--multi_gpu" in two and "--cpu" not in two  # --cpu would start ONE process (accelerate 1.15)
    assert "--main_process_port=41235" in two and "--num_processes=2" in two
    one = accelerate_launch_command("gradacc.workers.accelerate_train", [], num_processes=1, port=41236)
    assert "--cpu" in one and "--multi_gpu" not in one
    with pytest.raises(ValueError, match="nproc_per_node must be >= 1, got 0"):
        torchrun_command("m", [], nproc_per_node=0, port=1)
    with pytest.raises(ValueError, match="num_processes must be >= 1, got 0"):
        accelerate_launch_command("m", [], num_processes=0, port=1)


def test_token_windows_hold_5_and_15_label_tokens():
    windows = token_windows()
    assert len(windows) == 2
    per_micro_batch = [[count_items(b) for b in window] for window in windows]
    assert per_micro_batch == [[2, 3], [7, 8]]
    assert [sum(c) for c in per_micro_batch] == [5, 15]
    for window, counts in zip(windows, TOKEN_LABEL_COUNTS, strict=True):
        for (inputs, labels), seq_counts in zip(window, counts, strict=True):
            assert inputs.shape == labels.shape and inputs.dtype == torch.int64
            assert ((labels != IGNORE_INDEX).sum(1).tolist()) == list(seq_counts)
            assert int(inputs.max()) < token_vocab_size()
    with pytest.raises(ValueError, match="label counts must be >= 1"):
        token_windows((((0,),),))


# ---------------------------------------------------------------------------------------------- run_processes


def test_a_failing_command_raises_with_its_stderr():
    code = "import sys; print('some output'); sys.stderr.write('boom: the worker broke\\n'); sys.exit(3)"
    with pytest.raises(WorkerError, match="exit status 3") as info:
        run_processes([sys.executable, "-c", code], timeout=60, what="the test worker")
    assert "boom: the worker broke" in str(info.value)
    assert info.value.returncode == 3 and "some output" in info.value.stdout


def test_a_timeout_kills_the_launcher_and_workers_in_their_own_sessions(tmp_path):
    """torchrun starts its workers with start_new_session=True: killing the launcher's group would orphan them."""
    pid_file = tmp_path / "worker.pid"
    launcher = textwrap.dedent(
        f"""
        import subprocess, sys, time
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        open({str(pid_file)!r}, "w").write(str(worker.pid))
        time.sleep(300)
        """
    )
    with pytest.raises(WorkerError, match="the sleepy launcher: ran past the 3 s limit") as info:
        run_processes([sys.executable, "-c", launcher], timeout=3, what="the sleepy launcher")
    assert info.value.returncode is None  # stopped by the limit, not by its own exit
    worker = int(pid_file.read_text())
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE


_RANK_MODULE = """
import os, sys, time
rank, folder = int(os.environ["RANK"]), sys.argv[1]
names = "RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT".split()
with open(os.path.join(folder, f"rank{rank}.tmp"), "w") as f:
    f.write(" ".join(os.environ[n] for n in names) + f" {'colorsys' in sys.modules} {os.getpid()}")
os.rename(os.path.join(folder, f"rank{rank}.tmp"), os.path.join(folder, f"rank{rank}"))
while len([n for n in os.listdir(folder) if n.startswith("rank") and "." not in n]) < 3:
    time.sleep(0.05)  # every rank has started (and written its pid)
if sys.argv[2] == "fail" and rank == 1:
    sys.exit(3)
if sys.argv[2] != "ok":
    time.sleep(300)
"""


def _ranks(folder, mode: str, timeout: float = 120, preload: tuple[str, ...] = ()):
    folder.mkdir(exist_ok=True)
    (folder / "rank_module.py").write_text(_RANK_MODULE)
    cmd = ranks_command("rank_module", [str(folder), mode], nproc_per_node=3, port=29999, preload=preload)
    return run_processes(cmd, timeout=timeout, env={"PYTHONPATH": str(folder)}, what=f"ranks ({mode})")


def _rank_pids(tmp_path) -> list[int]:
    return [int((tmp_path / f"rank{r}").read_text().split()[-1]) for r in range(3)]


def test_the_checks_launcher_gives_each_rank_torchruns_variables(tmp_path):
    """gradacc.workers.ranks (the launcher of exercise 7's checks) sets what torchrun sets for a one-machine job; the
    ranks, forked from it, find the ``--preload`` modules imported already (a module nothing else here imports)."""
    _ranks(tmp_path, "ok", preload=("colorsys",))
    seen = [(tmp_path / f"rank{r}").read_text().split()[:-1] for r in range(3)]
    assert seen == [[str(r), str(r), "3", "3", "127.0.0.1", "29999", "True"] for r in range(3)]
    assert len(set(_rank_pids(tmp_path))) == 3


def test_the_checks_launcher_refuses_a_command_without_a_module_or_ranks(capsys):
    from gradacc.workers.ranks import main

    for argv, message in (
        (["--nproc-per-node=2", "--master-port=1"], "name the module every rank runs: -m MODULE"),
        (["--nproc-per-node=2", "--master-port=1", "-m"], "name the module every rank runs: -m MODULE"),
        (["--nproc-per-node=0", "--master-port=1", "-m", "x"], "--nproc-per-node must be >= 1, got 0"),
        (["--master-port=1", "-m", "x"], "the following arguments are required: --nproc-per-node"),
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2 and message in capsys.readouterr().err, argv


def test_the_checks_launcher_stops_every_rank_when_one_fails_or_on_timeout(tmp_path):
    """As torchrun: a rank that exits with an error ends the launch with its status and stops the other ranks (they
    would wait for it in a collective until gloo's timeout); the time limit of run_processes stops them all too."""
    with pytest.raises(WorkerError, match="exit status 3"):
        _ranks(tmp_path / "fail", "fail")
    with pytest.raises(WorkerError, match="ran past the 10 s limit"):
        _ranks(tmp_path / "hang", "hang", timeout=10)
    for folder in ("fail", "hang"):
        pids = _rank_pids(tmp_path / folder)
        assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids)


def test_run_processes_refuses_bad_arguments():
    with pytest.raises(ValueError, match="timeout must be > 0 seconds, got 0"):
        run_processes(["true"], timeout=0)
    with pytest.raises(ValueError, match="empty command"):
        run_processes([], timeout=1)


# ---------------------------------------------------------------------------------------------- DDP in one process

# A DDP run on a busy machine aborted (SIGABRT) or hung (issue 11). The cause, found with py-spy on a hung test: a
# Python callback on a gloo future (DDP's default Python hooks attach one with ``Future.then``) runs and is freed on a
# gloo worker thread, which needs the GIL for that. If the thread is late (descheduled) and meanwhile the main thread
# frees the DistributedDataParallel of a destroyed group (``~Reducer`` -> ``~ProcessGroupGloo`` joins its workers with
# the GIL held), both wait forever; if the process exits meanwhile, the late thread meets a finalizing interpreter and
# the process aborts. The script makes the late thread certain: it attaches a callback that sleeps (releasing the GIL)
# to all-reduces until one is still pending, so that it runs on the gloo worker thread, and then lets the process end.
_LATE_GLOO_THREAD = textwrap.dedent(
    """
    import sys, threading, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from gradacc.parallel.distributed import AllReduceCounter

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    main, ran_on = threading.get_ident(), []

    def late(future):
        ran_on.append(threading.get_ident())
        if ran_on[-1] != main:
            time.sleep(1.0)  # a descheduled worker thread; it needs the GIL back to return
        return future.value()

    if sys.argv[1] == "then":
        for attempt in range(1, 1001):
            future = dist.all_reduce(torch.ones(1), async_op=True).get_future()
            before = len(ran_on)
            future.then(late)
            if len(ran_on) == before:  # not run at once: it runs on the gloo worker thread when the sum is done
                break
        print("pending", len(ran_on) < attempt, flush=True)
    else:
        ddp = DDP(torch.nn.Linear(4, 2))
        counter = AllReduceCounter()
        ddp.register_comm_hook(state=None, hook=counter.hook)
        for _ in range(50):
            ddp(torch.rand(3, 4)).sum().backward()
        print("calls", counter.calls, flush=True)
    """
)


def _exit_right_after(collectives: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-c", _LATE_GLOO_THREAD, collectives], capture_output=True, text=True, timeout=120, env=env
    )


def test_torch_still_aborts_when_a_gloo_thread_runs_python_at_exit():
    """Pins the torch bug that ``AllReduceCounter`` works around. If this fails, torch no longer aborts: the counter
    may go back to ``default_hooks.allreduce_hook`` (asynchronous, with its ``Future.then`` callback)."""
    run = _exit_right_after("then")
    assert run.stdout == "pending True\n", run.stderr[-2000:]
    assert run.returncode == -signal.SIGABRT, (run.returncode, run.stderr[-2000:])
    # the GIL is asked for by a thread of a finalizing interpreter: one of these two messages, then abort()
    assert "terminate called without an active exception" in run.stderr or "finalizing" in run.stderr, run.stderr


def test_allreduce_counter_leaves_no_python_work_on_gloo_threads():
    run = _exit_right_after("counter")
    assert (run.returncode, run.stdout) == (0, "calls 50\n"), run.stderr[-2000:]


def test_single_process_group_is_made_and_removed():
    assert not dist.is_initialized()
    with single_process_group():
        assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_rank() == 0
        with single_process_group():  # nested: uses the existing group, leaves it alone
            assert dist.is_initialized()
        assert dist.is_initialized()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="backend='gloo' only"):
        with single_process_group("nccl"):
            pass


def test_allreduce_counter_sees_one_call_per_synchronizing_backward():
    from gradacc.parallel.distributed import accumulate_window

    x, y = load_digits_tensors()
    micro_batches = split_micro_batches(x[:40], y[:40], 4)
    with single_process_group():
        for use_no_sync, calls in ((True, 1), (False, 4)):
            model = make_digits_model(seed=0)
            reference = full_batch_gradients(make_digits_model(seed=0), (x[:40], y[:40]))
            ddp = DDP(model)
            counter = AllReduceCounter()
            ddp.register_comm_hook(state=None, hook=counter.hook)
            info = accumulate_window(ddp, None, micro_batches, use_no_sync=use_no_sync)
            assert counter.calls == calls
            assert counter.elements == calls * sum(p.numel() for p in model.parameters())
            assert isinstance(counter.seconds, float)
            assert info["local_items"] == info["global_items"] == 40
            assert max_abs_diff([p.grad for p in model.parameters()], reference) < 1e-6
        # the forward outside no_sync(), only backward() inside: DDP syncs every micro-step, same gradient (issue 59)
        ddp, counter = DDP(make_digits_model(seed=0)), AllReduceCounter()
        ddp.register_comm_hook(state=None, hook=counter.hook)
        for i, batch in enumerate(micro_batches):
            loss = sum_cross_entropy(ddp, batch) / 40
            with contextlib.nullcontext() if i == 3 else ddp.no_sync():
                loss.backward()
        assert counter.calls == 4
        assert max_abs_diff([p.grad for p in ddp.module.parameters()], reference) < 1e-6
        with pytest.raises(ValueError, match="weighting must be one of"):
            accumulate_window(ddp, None, micro_batches, weighting="mean")
        with pytest.raises(ValueError, match="needs a DistributedDataParallel model"):
            accumulate_window(make_digits_model(), None, micro_batches)


# ---------------------------------------------------------------------------------------------- real processes


@pytest.mark.slow
def test_ddp_workers_reproduce_the_full_batch_and_count_allreduces():
    result = run_ddp_lesson(timing_windows=3)
    assert result["world_size"] == 2 and result["backend"] == "gloo"
    assert result["effective_batch_size"] == result["samples_total"] == 64
    assert result["samples_per_rank"] == [32, 32]
    assert result["rank0_indices"] == list(range(0, 64, 2))
    # the single-process full-batch SGD step on the same 64 digits
    x, y = load_digits_tensors()
    model = make_digits_model(seed=0, hidden=32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    F.cross_entropy(model(x[:64]), y[:64]).backward()
    optimizer.step()
    # no_sync() around backward() only: DDP's forward already prepared the all-reduce (issue 59)
    for key, calls in (("no_sync", 1), ("sync_every_micro_step", 4), ("no_sync_backward_only", 4)):
        run = result[key]
        assert run["allreduce_calls"] == calls
        assert run["max_rank_weight_diff"] == 0.0
        assert max_abs_diff(run["weights"], model.parameters()) < 1e-6
    # the reverse mistake, every forward inside no_sync() and every backward outside: no all-reduce, replicas drift
    forward_only = result["no_sync_forward_only"]
    assert forward_only["allreduce_calls"] == 0 and forward_only["max_rank_weight_diff"] > 1e-4
    timing = result["timing"]
    assert timing["no_sync_calls"] == 1 and timing["sync_calls"] == 4 and timing["windows"] == 3
    assert isinstance(timing["no_sync_s"], float) and isinstance(timing["sync_s"], float)  # printed, not compared
    # tokens: 5 and 15 on two ranks; the all-reduced count gives sum / 20, the per-rank means do not
    tokens = result["tokens"]
    assert tokens["tokens_per_rank"] == [5, 15]
    lm = TinyLM(token_vocab_size(), dim=16, seed=0)
    total = sum(sum_cross_entropy(lm, b) for window in token_windows() for b in window) / 20
    want = torch.autograd.grad(total, list(lm.parameters()))
    assert max_abs_diff(tokens["grads_global_items"], want) < 1e-6
    assert max_abs_diff(tokens["grads_local_items"], want) > 1e-3
    assert abs(sum(tokens["loss_sum_per_rank"]) / 20 - float(total.detach())) < 1e-5
    assert psutil.Process().children(recursive=True) == []  # nothing left behind


@pytest.mark.slow
def test_reentrant_checkpointing_fails_only_at_the_synchronizing_micro_step():
    # N = 3 here, 4 in lesson 07: the failure follows the last micro-step, not a fixed index. When PyTorch makes DDP
    # accept reused weights in reentrant checkpoints (or static_graph with no_sync), this test fails: update lesson 07.
    result = run_checkpoint_lesson(accum_steps=3)
    outcome = {name: s["micro_steps"] for name, s in result["settings"].items()}
    assert result["world_size"] == 2 and result["accum_steps"] == 3
    for name in ("reentrant", "reentrant, find_unused_parameters"):
        assert outcome[name][:2] == ["ok", "ok"] and len(outcome[name]) == 3
        assert outcome[name][2].startswith("error: Expected to mark a variable ready only once")
    assert len(outcome["reentrant, static_graph"]) == 1 and "INTERNAL ASSERT" in outcome["reentrant, static_graph"][0]
    for name in ("no checkpointing", "use_reentrant=False", "use_reentrant=False, find_unused_parameters"):
        assert outcome[name] == ["ok"] * 3
        assert result["settings"][name]["grad_diff"] == 0.0
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.slow
def test_fsdp2_accumulation_trades_gradient_memory_for_reduce_scatters():
    """Issue 16, FSDP2 on 2 gloo ranks, N = 3: the default reduce-scatters on every micro-step and keeps only each
    rank's gradient shard; set_requires_gradient_sync(False) keeps the whole unsharded gradient on every rank until
    the last micro-step and reduce-scatters N times less; both give the one-process full-batch weights. A root unit
    that holds parameters (the last Linear) is gathered N times per optimizer step, 2N with reshard_after_forward=True
    (issue 43: FSDP2 keeps the root's parameters from its forward pass to its backward pass, then reshards them)."""
    result = run_fsdp_window(accum_steps=3, micro_batch_size=8, hidden=32, depth=2)
    n, full_bytes = 3, result["parameter_bytes"]  # float32 gradients: one per parameter
    groups = 2 + 1  # fully_shard on each of the 3 Linear layers; the root holds no parameters of its own
    each, boundary = (result["modes"][m] for m in ("sync each micro-step", "sync at the boundary"))
    assert result["world_size"] == 2
    assert [m["reduce_scatter"] for m in each["micro_steps"]] == [groups * k for k in range(1, n + 1)]
    assert [m["reduce_scatter"] for m in boundary["micro_steps"]] == [0] * (n - 1) + [groups]
    # the all-gathers do not change: each micro-step gathers every group for its forward and again for its backward
    assert [m["all_gather"] for m in each["micro_steps"]] == [2 * groups * k for k in range(1, n + 1)]
    assert [m["all_gather"] for m in boundary["micro_steps"]] == [2 * groups * k for k in range(1, n + 1)]
    # bytes held between micro-steps, on both ranks: a shard (half) vs the whole gradient (2x the shard)
    shard = sum(each["micro_steps"][0][k] for k in ("sharded_grad_bytes", "unsharded_grad_bytes"))
    assert each["rank_grad_bytes"] == [[shard] * n] * 2 and sum([shard] * 2) == full_bytes
    assert boundary["rank_grad_bytes"] == [[full_bytes] * (n - 1) + [shard]] * 2
    for mode in (each, boundary):
        assert mode["weight_diff"] < 1e-6, mode["weight_diff"]
    assert result["units"] == groups
    root_gathers = {"root reshard_after_forward: default": n, "root reshard_after_forward=True": 2 * n}
    for mode in ("sync each micro-step", "sync at the boundary"):  # the other units: 2 N each, as above
        assert result["root_all_gathers"][mode] == {k: 2 * n * (groups - 1) + v for k, v in root_gathers.items()}
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.slow
def test_a_failing_ddp_worker_surfaces_its_error():
    cmd = torchrun_command(
        "gradacc.workers.ddp", ["--out=/nonexistent/x.pt", "--accum-steps=0"], nproc_per_node=2, port=free_port()
    )
    with pytest.raises(WorkerError) as info:
        run_processes(cmd, timeout=120, env={"OMP_NUM_THREADS": "1"}, what="torchrun (2 DDP workers)")
    assert "torchrun (2 DDP workers): failed with exit status" in str(info.value)
    assert "accum_steps must be >= 1, got 0" in str(info.value)
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.slow
def test_jax_on_four_cpu_devices_matches_the_full_batch():
    result = run_jax_devices()
    assert result["device_count"] == 4 and len(result["devices"]) == 4
    assert result["rows_per_device"] == [32, 32, 32, 32] and result["effective_batch_size"] == 128
    assert result["max_abs_diff"] < 1e-6 < result["grad_scale"]
    assert abs(result["loss_full"] - result["loss_data_parallel"]) < 1e-5
    assert result["hlo_all_reduces"] >= 1 and result["all_reduce_in_loop"] is False


@pytest.mark.slow
def test_accelerate_launch_on_two_cpu_processes_matches_one_process():
    from gradacc.frameworks.accelerate import reset_accelerate_state, train_with_accelerate

    result = run_accelerate_lesson()
    assert result["num_processes"] == 2 and result["optimizer_steps"] == 2
    assert result["command"].startswith("accelerate launch --multi_gpu --num_processes=2")
    one = train_with_accelerate(4, micro_batch_size=32, n_samples=256, lr=0.1, seed=0, split_batches=True, cpu=True)
    reset_accelerate_state()
    assert one.num_processes == 1 and one.optimizer_steps == 2
    assert max_abs_diff(result["weights"].values(), one.state_dict.values()) < 1e-6
    # unequal samples on the 2 processes: the summed count needs the loss x num_processes (issue 59)
    unequal = result["unequal_items"]
    assert unequal["items_per_process"] == [8, 16]
    assert unequal["gap_times_processes"] < 1e-6 and unequal["gap_without"] > 1e-3
    with pytest.raises(ValueError, match="must be divisible by num_processes"):
        run_accelerate_lesson(micro_batch_size=33)
    with pytest.raises(ValueError, match="must be >= 2 for a --multi_gpu launch"):
        run_accelerator_state(num_processes=1)


# ---------------------------------------------------------------------------------------------- lesson 07's checks


def _token_weighted_loss(loss_sum, local_tokens, global_tokens, world_size):
    return loss_sum * world_size / global_tokens


def test_check_7_1_passes_the_answer_and_fails_plausible_mistakes(capsys):
    lesson07.check_token_weighted_loss(_token_weighted_loss)
    assert capsys.readouterr().out == "Exercise 7.1: correct\n"
    for wrong, named in (  # issue 53: each mistake's hint, none for the float
        (lambda s, local, total, world: s / local, "rank-own-tokens"),  # the mean of per-rank means
        (lambda s, local, total, world: s / total, "ddp-average-forgotten"),  # forgets that DDP divides by world_size
        (lambda s, local, total, world: (s / total).item(), None),  # a float: no gradient
    ):
        lesson07.check_token_weighted_loss(wrong)
        line, _, hint = capsys.readouterr().out.partition("\n")
        assert line.startswith("Exercise 7.1: incorrect - ")
        assert hint == (lookup(named).hint() + "\n" if named else ""), (named, hint)


def _train_epoch_ddp(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        items = torch.tensor([float(sum(count_items(b) for b in window))])
        dist.all_reduce(items)
        scale = dist.get_world_size() / float(items)
        for i, batch in enumerate(window):
            with ddp_model.no_sync() if i < len(window) - 1 else contextlib.nullcontext():
                (sum_cross_entropy(ddp_model, batch) * scale).backward()
        optimizer.step()
        optimizer.zero_grad()


def _mean_over_accum_steps(ddp_model, optimizer, batches, accum_steps):
    batches = list(batches)
    for start in range(0, len(batches), accum_steps):
        window = batches[start : start + accum_steps]
        for i, (x, y) in enumerate(window):
            with ddp_model.no_sync() if i < len(window) - 1 else contextlib.nullcontext():
                (F.cross_entropy(ddp_model(x), y) / accum_steps).backward()
        optimizer.step()
        optimizer.zero_grad()


def _no_step(ddp_model, optimizer, batches, accum_steps):
    for i, batch in enumerate(batches):
        with ddp_model.no_sync() if (i + 1) % accum_steps else contextlib.nullcontext():
            sum_cross_entropy(ddp_model, batch).backward()


@pytest.mark.slow
def test_checks_7_2_and_7_3_pass_the_answer_and_fail_plausible_mistakes(capsys):
    lesson07.check_allreduces_per_window(_train_epoch_ddp)
    lesson07.check_epoch_weights(_train_epoch_ddp)
    assert capsys.readouterr().out == "Exercise 7.2: correct\nExercise 7.3: correct\n"
    # (7.2 passes, 7.3 passes); 7.3 runs on 2 real ranks with unequal micro-batches. The corpus's four mistakes of 7.2
    # and 7.3 (no no_sync, sync on multiples only, the rank's own count, the count without W) are run by
    # tests/test_wrong_answers.py on the check each targets, visible and hidden: here only the two it lacks
    expected = {
        _mean_over_accum_steps: (True, False),
        _no_step: (False, False),
    }
    for wrong, (ok_72, ok_73) in expected.items():
        lesson07.check_allreduces_per_window(wrong)
        lesson07.check_epoch_weights(wrong)
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if line.startswith("Exercise ")]
        assert lines[0].startswith("Exercise 7.2: correct" if ok_72 else "Exercise 7.2: incorrect - "), lines
        assert lines[1].startswith("Exercise 7.3: correct" if ok_73 else "Exercise 7.3: incorrect - "), lines
        # issue 53: neither is a catalogued mistake (_no_step's 2 all-reduces instead of 3 are also what a short
        # window never synced gives: that count names no misconception), so neither check names one
        assert "misconception" not in out, out
    assert not dist.is_initialized()  # the checks leave no process group behind


def test_workers_do_not_see_fewer_gpus_than_ranks(monkeypatch):
    """On a machine with fewer GPUs than ranks (a one-GPU Colab runtime) rank 1 asked for cuda:1 and died with "invalid
    device ordinal" (seen on a one-GPU H200 machine): the workers then get no GPU and run on the CPU with gloo."""
    import torch

    from gradacc.foundations.launch import _worker_env

    for gpus, processes, hidden in ((0, 2, True), (1, 2, True), (2, 2, False), (8, 2, False), (1, 1, False)):
        monkeypatch.setattr(torch.cuda, "device_count", lambda gpus=gpus: gpus)
        env = _worker_env(processes)
        assert (env.get("CUDA_VISIBLE_DEVICES") == "") == hidden, (gpus, processes, env)
        assert env["OMP_NUM_THREADS"] == "1"


def test_every_gloo_worker_ends_without_finalizing_python():
    """A gloo worker that returns normally can abort in interpreter finalization after writing its result
    ("terminate called without an active exception", SIGABRT; gradacc.foundations.launch.exit_worker): seen for
    gradacc.workers.fsdp_accum in 1 of 8 launches on the Colab replica (torch 2.11, Python 3.13). Every worker that
    starts a gloo group leaves through exit_worker."""
    from conftest import ROOT

    workers = sorted((ROOT / "src" / "gradacc" / "workers").glob("*.py"))
    gloo = [p for p in workers if "init_process_group(" in p.read_text(encoding="utf-8")]  # a call, not a mention
    assert len(gloo) >= 4, [p.name for p in gloo]  # ddp, ddp_answer, ddp_checkpoint, fsdp_accum
    missing = [p.name for p in gloo if "exit_worker(" not in p.read_text(encoding="utf-8")]
    assert missing == [], f"these workers end by finalizing Python: {missing}"
