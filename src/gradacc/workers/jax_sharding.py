"""The JAX worker of lesson 11: accumulation under automatic sharding over several CPU devices, read from the compiled
programs.

Run it in a fresh process whose environment sets the number of CPU devices BEFORE JAX starts, usually through
``gradacc.parallel.parallel_stacks.run_jax_sharding``::

    XLA_FLAGS=--xla_force_host_platform_device_count=4 JAX_PLATFORMS=cpu \\
        python -m gradacc.workers.jax_sharding --out result.json --devices 4 --micro-batch-size 8 --accum-steps 4

On ``make_digits_model(seed=0, hidden=H)``'s weights and the first ``micro_batch_size x accum_steps x devices`` digits,
it computes the one-device full-batch gradient, compiles the three accumulations of ``gradacc.parallel.jax_sharding``
(the batch's rows sharded over the devices), runs them, and writes JSON: ``"jax_version"``, ``"device_count"``,
``"micro_batch_size"``, ``"accum_steps"``, ``"effective_batch_size"``, ``"grad_scale"`` (largest full-batch gradient
entry), and ``"variants"``: for ``"contiguous"``, ``"strided"`` and ``"shard_map"``, ``{"max_abs_diff"`` (largest
difference from the full-batch gradient), ``"loss"``, ``"collectives"`` (``gradacc.parallel.hlo.collective_counts``:
instructions, in the loop, per call, result shapes) and ``"source"`` (the function's code)``}``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.jax_sharding", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON result file")
    parser.add_argument("--devices", type=int, default=4, help="CPU devices expected (set by XLA_FLAGS)")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples per micro-batch per device")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-batches per optimizer step (N)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden width of the MLP")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import jax
    import jax.numpy as jnp

    from ..foundations.models import make_digits_model
    from ..frameworks.jaxacc import digits_arrays, full_batch_grads, max_abs_diff, params_from_torch
    from ..parallel.distributed import effective_batch_size
    from ..parallel.hlo import collective_counts
    from ..parallel.jax_sharding import compile_accumulations

    if jax.device_count() != args.devices:
        raise RuntimeError(
            f"JAX sees {jax.device_count()} device(s), expected {args.devices}: start this process with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={args.devices} (JAX reads it only at start-up)"
        )
    n = args.accum_steps
    total = effective_batch_size(args.micro_batch_size, n, args.devices)
    params = params_from_torch(make_digits_model(seed=0, hidden=args.hidden))
    x, y = digits_arrays(total)
    _, grads_full = full_batch_grads(params, x, y)
    variants = {}
    for name, (compiled, call_args, function) in compile_accumulations(params, x, y, args.devices, n).items():
        loss, grads = compiled(*call_args)
        variants[name] = {
            "max_abs_diff": max_abs_diff(grads_full, grads),
            "loss": float(loss),
            "collectives": collective_counts(compiled.as_text()),
            "source": inspect.getsource(getattr(function, "__wrapped__", function)),
        }
    result = {
        "jax_version": jax.__version__,
        "device_count": jax.device_count(),
        "micro_batch_size": args.micro_batch_size,
        "accum_steps": n,
        "effective_batch_size": total,
        "grad_scale": float(max(jnp.max(jnp.abs(g)) for g in jax.tree_util.tree_leaves(grads_full))),
        "variants": variants,
    }
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
