"""Start the ranks of one machine as torchrun does, without torchrun's agent: the launcher of the exercise checks that
run a learner's function on real ranks (``gradacc.course.checks.lesson07.epoch_on_ranks``)::

    python -m gradacc.workers.ranks --nproc-per-node=2 --master-port=PORT [--preload=torch,...] \\
        -m gradacc.workers.ddp_answer ARGS

runs ``gradacc.workers.ddp_answer ARGS`` as ``__main__`` (``python -m``) in one process per rank, with the variables
torchrun gives its workers (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``; ``init_process_group`` reads them), waits for all of them, and exits with the first failing rank's
status after stopping the others (SIGTERM, then SIGKILL after 5 s), as torchrun stops a group when one worker fails.
SIGTERM to this process stops every rank.

The ranks are forked from this process after it imported the ``--preload`` modules, so they share that work
instead of each importing them again: importing torch takes about 2 s of CPU per process, and
``DistributedDataParallel``'s constructor imports ``torch._dynamo`` (torch 2.13, ``torch/nn/parallel/distributed.py``
line 842), about 1.7 s more. A check's launch of 2 DDP ranks took 6.1 s of CPU when each rank started a Python of
its own and 4.2 s forked after ``--preload=gradacc.workers.ddp_answer,torch._dynamo`` (the course's 2-core machine,
load 4-8, 3 launches each, 2026-12-03). Importing starts no thread of its own: with ``OMP_NUM_THREADS=1``, which the
checks' launches set (``gradacc.foundations.launch._worker_env``; otherwise OpenBLAS starts idle workers), this process
runs one thread when it forks, as a fork must.

Why not torchrun: its agent process imports torch and starts each rank as a new Python (5.4 s of CPU per launch
against 4.4 s with one Python per rank without the agent, measured as above), and grading one submission of exercise
07 launches 4 to 8 times (visible and hidden checks of 7.2 and 7.3). Lessons launch with torchrun itself
(``gradacc.foundations.launch.torchrun_command``): it is what they teach.
"""

from __future__ import annotations

import argparse
import importlib
import os
import runpy
import signal
import sys
import time
import traceback


def _run_rank(module: str, module_args: list[str], env: dict[str, str]) -> int:
    """In a forked rank: ``module`` as ``__main__`` with ``module_args``, as ``python -m`` runs it; its exit status."""
    os.environ.update(env)
    sys.argv = [module, *module_args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:  # sys.exit(code) in the rank: the status Python itself would exit with
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - an uncaught error ends the rank as it ends a Python: traceback, status 1
        traceback.print_exc()
        return 1
    return 0


def _fork_rank(module: str, module_args: list[str], env: dict[str, str]) -> int:
    """Fork one rank; returns its pid. The rank never returns here: it ends with ``os._exit`` (no atexit handler or
    ``finally`` of this launcher runs in it)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the rank would write this process's buffered output a second time
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = _run_rank(module, module_args, env)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed stream must not change the rank's status
                pass
        os._exit(code)


def _status(pid: int, flags: int = 0) -> int | None:
    """The exit status of child ``pid`` (as ``subprocess``: ``-N`` for a signal), or ``None`` while it runs."""
    done, status = os.waitpid(pid, flags)
    return os.waitstatus_to_exitcode(status) if done else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s --nproc-per-node=N --master-port=PORT [--preload=MODULE,...] -m MODULE [ARGS]",
    )
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument(
        "--preload", default="", help="modules to import once, comma-separated, before the ranks are forked"
    )
    cut = argv.index("-m") if "-m" in argv else len(argv)  # as torchrun: what follows the module belongs to it
    args = parser.parse_args(argv[:cut])
    if cut >= len(argv) - 1:
        parser.error("name the module every rank runs: -m MODULE [ARGS] (everything after it is the module's)")
    module, module_args = argv[cut + 1], argv[cut + 2 :]
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be >= 1, got {args.nproc_per_node}")
    for name in filter(None, args.preload.split(",")):
        importlib.import_module(name)
    world = args.nproc_per_node
    ranks = []
    for rank in range(world):
        env = {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0",
            "MASTER_ADDR": args.master_addr,
            "MASTER_PORT": str(args.master_port),
        }
        ranks.append(_fork_rank(module, module_args, env))
    running = set(ranks)

    def stop() -> None:
        for pid in running:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while running and time.monotonic() < deadline:
            running.difference_update(pid for pid in list(running) if _status(pid, os.WNOHANG) is not None)
            time.sleep(0.05)
        for pid in running:
            os.kill(pid, signal.SIGKILL)
            _status(pid)
        running.clear()

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(143)))
    while running:
        pid, status = os.wait()  # the next rank to exit
        if pid not in running:
            continue
        running.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            stop()
            print(f"gradacc.workers.ranks: rank {ranks.index(pid)} of {module} exited with status {code}",
                  file=sys.stderr)  # fmt: skip
            return code if code > 0 else 128 - code
    return 0


if __name__ == "__main__":
    sys.exit(main())
