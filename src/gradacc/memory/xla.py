"""JAX's side: XLA's compiled memory analysis of a jitted function (argument + output - alias + temp bytes, in MiB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .tracker import MIB

__all__ = [
    "jax_memory_analysis",
    "jax_compiled_memory",
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
