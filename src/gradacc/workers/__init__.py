"""Programs that run as processes of their own, started by ``gradacc.distributed``'s launchers: ``ddp`` (torchrun, one
process per rank), ``jax_dp`` (one process with several XLA CPU devices) and ``accelerate_train`` (lesson 04's loop
under ``accelerate launch``). Run them with ``python -m gradacc.workers.NAME --help``.

They import the teaching modules; nothing imports them (``tests/test_layout.py``): what a launcher needs to read their
results lives in the teaching module (``gradacc.accelerate.read_result``).
"""
