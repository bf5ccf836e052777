"""What else must advance once per optimizer step, not once per micro-batch (lesson 12).

One module per concern:

* ``optimizers``: optimizers run inside ``backward()`` (PyTorch's ``register_post_accumulate_grad_hook`` and
  ``torch.distributed.optim._apply_optimizer_in_backward``), and ``torch.optim.Muon``, against the full batch;
* ``clocks``: progress and privacy counted in micro-batches instead of optimizer steps (nanochat's learning-rate
  multiplier, Opacus's RDP accountant);
* ``jaxstate``: state carried through JAX's gradient tree (an FP8 amax history) accumulated by ``lax.scan`` with a
  per-leaf rule;
* ``mlxlazy``: MLX's lazy graphs across the micro-steps of a window (``mx.eval`` per micro-step).

``jaxstate`` and ``mlxlazy`` import JAX and MLX; import them only where those are installed.
"""
