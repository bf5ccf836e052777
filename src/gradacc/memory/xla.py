"""JAX's side: XLA's compiled memory analysis of a jitted function (argument + output - alias + temp bytes, in MiB),
and of one training step of lesson 06's JAX loops (``step_memory``: lesson 03's and lesson 06's JAX rows).

JAX, optax and ``gradacc.frameworks.jaxacc`` are imported when a function runs: ``gradacc.memory`` itself needs none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..foundations.data import check_accum_steps
from .tracker import MIB

if TYPE_CHECKING:
    import optax

__all__ = [
    "jax_memory_analysis",
    "jax_compiled_memory",
    "step_memory",
]


# --------------------------------------------------------------------------------------------------------------------
# JAX


def jax_memory_analysis(compiled: Any) -> dict[str, float]:
    """The memory of an already compiled JAX executable (``jax.jit(f).lower(*args).compile()``), in MiB.

    Returns:
        ``{"argument_mib", "output_mib", "alias_mib", "temp_mib", "total_mib"}`` with ``total = argument + output -
        alias + temp`` (see ``jax_compiled_memory``).
    """
    stats = compiled.memory_analysis()
    argument, output = stats.argument_size_in_bytes, stats.output_size_in_bytes
    alias, temp = stats.alias_size_in_bytes, stats.temp_size_in_bytes
    return {
        "argument_mib": argument / MIB,
        "output_mib": output / MIB,
        "alias_mib": alias / MIB,
        "temp_mib": temp / MIB,
        "total_mib": (argument + output - alias + temp) / MIB,
    }


def jax_compiled_memory(
    fn: Callable, *args: Any, donate_argnums: tuple[int, ...] = (), platform: str | None = "cpu", **kwargs: Any
) -> dict[str, float]:
    """Memory XLA plans for ``fn(*args, **kwargs)``, from the compiled executable's memory analysis (MiB).

    ``jax.jit(fn).lower(*args).compile().memory_analysis()`` reports argument, output, alias (outputs that reuse a
    donated argument's buffer) and temporary sizes. ``temp_size_in_bytes`` alone misleads: XLA reuses output buffers as
    scratch, so temporaries can drop to 0 while the step still needs the memory. The total the step needs at once is
    ``argument + output - alias + temp`` (measured in FACTS.md: it tracks activations as N grows, temp alone does not).

    Args:
        fn: a function or an already ``jax.jit``-ed function; it is jitted with ``donate_argnums`` if it is not.
        args, kwargs: example arguments (arrays or ``jax.ShapeDtypeStruct``; nothing is executed).
        platform: the backend to compile for (``"cpu"``, ``"gpu"``, ...; ``None``: JAX's default backend). Default
            ``"cpu"``: the same plan on every machine, a GPU runtime included, whose plan also reserves workspace
            for its libraries and does not shrink the same way with N (seen on an H200: lesson 06's scan total at
            N = 16 stayed above half of N = 1's).

    Returns:
        ``{"argument_mib", "output_mib", "alias_mib", "temp_mib", "total_mib"}`` as floats.

    Source: JAX "Ahead-of-time lowering and compilation" docs (``Compiled.memory_analysis``).
    """
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn, donate_argnums=donate_argnums)
    if platform is None:
        return jax_memory_analysis(jitted.lower(*args, **kwargs).compile())
    device = jax.devices(platform)[0]
    sharding = jax.sharding.SingleDeviceSharding(device)

    def on_device(leaf: Any) -> Any:  # every array argument committed to the device: the program compiles for it
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        return leaf

    args, kwargs = jax.tree_util.tree_map(on_device, (args, kwargs))
    with jax.default_device(device):
        return jax_memory_analysis(jitted.lower(*args, **kwargs).compile())


def step_memory(
    method: Literal["scan", "loop", "multisteps"],
    sizes: Sequence[int],
    effective_batch_size: int,
    accum_steps: int,
    optimizer: optax.GradientTransformation | None = None,
    *,
    donate: bool = False,
    dtype: Any = None,
) -> dict[str, float]:
    """Compiled memory (MiB) of one training step of an MLP, from XLA's memory analysis; nothing is executed.

    The step is built by lesson 06's ``gradacc.frameworks.jaxacc``:

    * ``"scan"`` / ``"loop"``: ``make_train_step`` on the whole effective batch (one call = one optimizer step).
    * ``"multisteps"``: ``make_micro_step(multisteps(optimizer, N))`` on ONE micro-batch of
      ``effective_batch_size // N`` samples (one call = one micro-step; its state holds ``acc_grads``).

    Args:
        sizes: MLP layer widths, e.g. ``(64, 1024, 1024, 1024, 10)``.
        effective_batch_size: samples per optimizer step (divisible by ``accum_steps``).
        optimizer: optax optimizer (default ``optax.adam(1e-3)``).
        donate: donate parameters and optimizer state (see ``make_micro_step``).
        dtype: the parameters' and inputs' dtype (default ``jnp.float32``).

    Returns:
        ``jax_compiled_memory``'s dict (``total_mib = argument + output - alias + temp``) plus
        ``"params_mib"`` and ``"opt_state_mib"`` (the optimizer state, MultiSteps' included).

    Raises:
        ValueError: bad ``method`` or ``accum_steps``, or ``effective_batch_size`` not divisible by it.
    """
    check_accum_steps(accum_steps)
    if effective_batch_size % accum_steps:
        raise ValueError(
            f"effective_batch_size={effective_batch_size} is not divisible by accum_steps={accum_steps}; "
            "choose a multiple"
        )
    if method not in ("scan", "loop", "multisteps"):
        raise ValueError(f"method must be 'scan', 'loop' or 'multisteps', got {method!r}")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from ..frameworks.jaxacc import make_micro_step, make_train_step, mlp_init, multisteps

    dtype = jnp.float32 if dtype is None else dtype
    optimizer = optax.adam(1e-3) if optimizer is None else optimizer
    params = jax.eval_shape(lambda: mlp_init(jax.random.key(0), sizes, dtype))
    if method == "multisteps":
        optimizer = multisteps(optimizer, accum_steps)
        step = make_micro_step(optimizer, donate=donate)
        batch = effective_batch_size // accum_steps
    else:
        step = make_train_step(optimizer, accum_steps, method, donate=donate)
        batch = effective_batch_size
    opt_state = jax.eval_shape(optimizer.init, params)
    x = jax.ShapeDtypeStruct((batch, sizes[0]), dtype)
    y = jax.ShapeDtypeStruct((batch,), jnp.int32)
    mem = jax_compiled_memory(step, params, opt_state, x, y)

    def mib(tree):
        return sum(leaf.size * np.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(tree)) / 2**20

    return {**mem, "params_mib": mib(params), "opt_state_mib": mib(opt_state)}
