"""A learner's ``train_epoch_ddp`` on real ranks: the worker behind exercise 7.3's check (issue 13).

In a one-process group every rank holds the whole window, so an epoch that never all-reduces the sample count (or
forgets to multiply by the world size) gives the right weights there. Here each rank holds micro-batches of its own
size, so the count differs per rank and only an answer that all-reduces it matches one process accumulating the same
windows. Started through ``gradacc.course.checks.lesson07.epoch_on_ranks`` by ``gradacc.workers.ranks``, which
sets torchrun's variables (``torchrun`` itself runs it the same way)::

    python -m gradacc.workers.ranks --nproc-per-node=2 --master-port=PORT \\
        -m gradacc.workers.ddp_answer --spec spec.json --out result.pt

``spec.json`` holds the learner's code (``"sources"``: the function's source and those of the notebook functions it
calls, in any order; ``"imports"``: ``{name: [module, attribute or null]}``; ``"constants"``) and the
``"cases"``: ``{"accum_steps", "seed", "lr", "sizes": [[micro-batch sizes of rank 0], [of rank 1], ...]}``. Rank r
reads its micro-batches from the digits in order, after every lower rank's. Rank r saves ``OUT.r``: per case,
``"weights"`` (list of tensors) and ``"allreduces"``; an exception in the learner's code is saved as ``"error"``
instead, and that rank stops.
"""

from __future__ import annotations

import argparse
import importlib
import json
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..foundations.launch import exit_worker
from ..foundations.models import make_digits_model
from ..parallel.distributed import AllReduceCounter, rank_batches


def learner_function(spec: dict):
    """Rebuild the learner's function from ``spec`` (see the module docstring) in a namespace of its own."""
    namespace: dict = {"__name__": "__learner__"}
    for name, (module, attribute) in spec["imports"].items():
        value = importlib.import_module(module)
        for part in attribute.split(".") if attribute else ():
            value = getattr(value, part)
        namespace[name] = value
    namespace.update(spec["constants"])
    for source in spec["sources"]:
        exec(compile(source, "<learner>", "exec"), namespace)
    return namespace[spec["function"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    results = []
    train_epoch_ddp = learner_function(spec)
    for case in spec["cases"]:
        model = make_digits_model(seed=case["seed"], hidden=16)
        ddp = DistributedDataParallel(model)
        counter = AllReduceCounter()
        ddp.register_comm_hook(state=None, hook=counter.hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=case["lr"])
        try:
            train_epoch_ddp(ddp, optimizer, rank_batches(case["sizes"], rank), case["accum_steps"])
        except Exception as error:  # the learner's mistake, reported by the check (a hang ends at the timeout)
            results.append({"error": f"{type(error).__name__}: {error}"})
            break
        results.append({"weights": [p.detach().clone() for p in model.parameters()], "allreduces": counter.calls})
    torch.save(results, f"{args.out}.{rank}")  # every rank: a rank's own error may only show as a lost peer elsewhere
    exit_worker(0)  # see gradacc.foundations.launch.exit_worker: no teardown of the gloo group (its threads) at exit


if __name__ == "__main__":
    main()
