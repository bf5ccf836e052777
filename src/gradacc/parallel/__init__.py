"""Accumulation across processes and devices (lessons 07, 09 and 11): ``distributed`` (what a rank does: DDP's
``no_sync`` window, the all-reduce counter, a one-process group) and ``runs`` (the multi-process runs a notebook
starts), ``tokens`` (lesson 07's token windows); ``sharded`` (FSDP2 on real ranks) and ``compiled``
(``torch.compile``) of lesson 09; ``parallel_stacks`` (pipeline schedules, FSDP2 mixed precision, DDP
``static_graph``), ``jax_sharding`` and ``hlo`` (the collectives in a compiled XLA program) of lesson 11.

The programs the ranks run are ``gradacc.workers``. It imports ``foundations`` and ``frameworks`` only
(``tests/test_layout.py``); importing this package imports none of its modules.
"""
