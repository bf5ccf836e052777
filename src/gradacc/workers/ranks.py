"""Start the ranks of one machine as torchrun does, without torchrun's agent: the launcher of the exercise checks that
run a learner's function on real ranks (``gradacc.course.checks.lesson07.epoch_on_ranks``)::

    python -m gradacc.workers.ranks --nproc-per-node=2 --master-port=PORT -m gradacc.workers.ddp_answer ARGS

starts ``python -m gradacc.workers.ddp_answer ARGS`` once per rank with the variables torchrun gives its workers
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``;
``init_process_group`` reads them), waits for all of them, and exits with the first failing rank's status after
stopping the others (SIGTERM, then SIGKILL after 5 s), as torchrun stops a group when one worker fails. SIGTERM to
this process stops every rank.

Why not torchrun: its agent process imports torch. A check's launch of 2 ranks took 5.4 s of CPU under torchrun and
4.4 s under this launcher, which imports only the standard library (the course's 2-core machine, loaded, 3 launches
each, 2026-12-03), and grading one submission of exercise 07 launches 4 to 8 times (visible and hidden checks of 7.2
and 7.3). Lessons launch with torchrun itself (``gradacc.foundations.launch.torchrun_command``): it is what they teach.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], usage="%(prog)s --nproc-per-node=N --master-port=PORT -m MODULE [ARGS]"
    )
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, required=True)
    cut = argv.index("-m") if "-m" in argv else len(argv)  # as torchrun: what follows the module belongs to it
    args = parser.parse_args(argv[:cut])
    if cut >= len(argv) - 1:
        parser.error("name the module every rank runs: -m MODULE [ARGS] (everything after it is the module's)")
    module, module_args = argv[cut + 1], argv[cut + 2 :]
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be >= 1, got {args.nproc_per_node}")
    world = args.nproc_per_node
    ranks = []
    for rank in range(world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0",
            "MASTER_ADDR": args.master_addr,
            "MASTER_PORT": str(args.master_port),
        }
        ranks.append(subprocess.Popen([sys.executable, "-m", module, *module_args], env=env))

    def stop() -> None:
        for proc in ranks:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 5
        for proc in ranks:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(143)))
    running = {proc.pid: proc for proc in ranks}
    while running:
        pid, status = os.wait()  # the next rank to exit
        proc = running.pop(pid, None)
        if proc is None:
            continue
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            stop()
            print(f"gradacc.workers.ranks: rank {ranks.index(proc)} of {module} exited with status "
                  f"{proc.returncode}", file=sys.stderr)  # fmt: skip
            return proc.returncode if proc.returncode > 0 else 128 - proc.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
