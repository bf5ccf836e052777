"""The JAX worker of lesson 07: data parallelism over several CPU devices, with accumulation inside each device.

Run it in a fresh process whose environment sets the number of CPU devices BEFORE JAX starts (JAX reads
``XLA_FLAGS`` once, when its CPU backend initialises), usually through ``gradacc.parallel.runs.run_jax_devices``::

    XLA_FLAGS=--xla_force_host_platform_device_count=4 JAX_PLATFORMS=cpu \\
        python -m gradacc.workers.jax_dp --out result.json --devices 4 --micro-batch-size 8 --accum-steps 4

What it computes, on ``make_digits_model(seed=0, hidden=H)``'s weights (``gradacc.frameworks.jaxacc.params_from_torch``)
and the first ``micro_batch_size x accum_steps x devices`` digits:

* the full-batch gradient of the mean cross-entropy, on one device (``gradacc.frameworks.jaxacc.full_batch_grads``);
* the data-parallel gradient (``gradacc.parallel.jax_sharding.accumulate_shard_map``): ``jax.shard_map`` over a 1-D mesh
  of the devices (axis ``"data"``) gives each device its ``micro_batch_size x accum_steps`` rows; each device
  accumulates its ``accum_steps`` micro-batches with ``jax.lax.scan``
  (``gradacc.frameworks.jaxacc.accumulate_grads_scan``), turns its mean back into a sum, and ``jax.lax.psum`` adds the
  sums and the item counts across devices once per window; the total is divided by the global count.
  (``check_vma=False``: the explicit ``psum`` is the only reduction; with JAX's varying-axes checking on, the gradient
  of replicated parameters would be summed automatically and the scan's zero carry would need a ``pcast``.)

It writes JSON: ``"jax_version"``, ``"devices"`` (their names), ``"device_count"``, ``"micro_batch_size"``,
``"accum_steps"``, ``"effective_batch_size"``, ``"rows_per_device"`` (list), ``"loss_full"``, ``"loss_data_parallel"``,
``"max_abs_diff"`` (largest gradient difference), ``"grad_scale"`` (largest absolute full-batch gradient entry),
``"hlo_all_reduces"`` (all-reduce instructions in the compiled data-parallel program) and
``"all_reduce_in_loop"`` (whether one sits inside the scan's loop body: it must not).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradacc.workers.jax_dp", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON result file")
    parser.add_argument("--devices", type=int, default=4, help="CPU devices expected (set by XLA_FLAGS)")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="samples per micro-batch per device")
    parser.add_argument("--accum-steps", type=int, default=4, help="micro-batches per device per window (N)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden width of the MLP")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import jax
    import jax.numpy as jnp

    from ..foundations.models import make_digits_model
    from ..frameworks.jaxacc import digits_arrays, full_batch_grads, max_abs_diff, params_from_torch
    from ..parallel.distributed import effective_batch_size
    from ..parallel.hlo import count_instructions, loop_bodies
    from ..parallel.jax_sharding import accumulate_shard_map, data_mesh, shard_rows

    if jax.device_count() != args.devices:
        raise RuntimeError(
            f"JAX sees {jax.device_count()} device(s), expected {args.devices}: start this process with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={args.devices} (JAX reads it only at start-up)"
        )
    n = args.accum_steps
    total = effective_batch_size(args.micro_batch_size, n, args.devices)
    params = params_from_torch(make_digits_model(seed=0, hidden=args.hidden))
    x, y = digits_arrays(total)

    loss_full, grads_full = jax.jit(full_batch_grads)(params, x, y)

    mesh = data_mesh(args.devices)
    data_parallel = accumulate_shard_map(mesh, n)  # each device's scan, one psum of sums and counts after it
    x_sharded, y_sharded = shard_rows(mesh, x, y)
    loss_dp, grads_dp = data_parallel(params, x_sharded, y_sharded)
    hlo = data_parallel.lower(params, x_sharded, y_sharded).compile().as_text()
    in_loop = any(count_instructions(body, "all-reduce") for body in loop_bodies(hlo))

    result = {
        "jax_version": jax.__version__,
        "devices": [f"{d.platform}:{d.id}" for d in jax.devices()],  # str(d) is "TFRT_CPU_0" on jax 0.7, "cpu:0" later
        "device_count": jax.device_count(),
        "micro_batch_size": args.micro_batch_size,
        "accum_steps": n,
        "effective_batch_size": total,
        "rows_per_device": [int(s.data.shape[0]) for s in x_sharded.addressable_shards],
        "loss_full": float(loss_full),
        "loss_data_parallel": float(loss_dp),
        "max_abs_diff": max_abs_diff(grads_full, grads_dp),
        "grad_scale": float(max(jnp.max(jnp.abs(g)) for g in jax.tree_util.tree_leaves(grads_full))),
        "hlo_all_reduces": count_instructions(hlo, "all-reduce"),
        "all_reduce_in_loop": in_loop,
    }
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
