"""Programs that run as processes of their own, started by the launchers of ``gradacc.distributed``, ``gradacc.sharded``,
``gradacc.parallel_stacks`` and ``gradacc.stacks.moe``: ``ddp`` (torchrun, one process per rank), ``jax_dp`` (one process with several XLA
CPU devices), ``accelerate_train`` (lesson 04's loop under ``accelerate launch``), and lesson 11's
``parallel_stacks`` (torchrun: pipeline schedules, DDP ``static_graph``) and ``jax_sharding`` (XLA CPU devices),
lesson 10's ``moe_trainer`` (torchrun: ``Trainer`` and ``SFTTrainer`` with a Mixture-of-Experts auxiliary loss);
``ddp_answer`` runs a learner's function on the ranks that ``ranks`` starts for exercise 7's checks (torchrun's
variables without its agent process). Run them with ``python -m gradacc.workers.NAME --help``.

They import the teaching modules; nothing imports them (``tests/test_layout.py``): what a launcher needs to read their
results lives in the teaching module (``gradacc.accelerate.read_result``).
"""
