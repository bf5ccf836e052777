"""Every program that runs as a process of its own: a rank of torchrun or ``accelerate launch``, or one process with
several XLA CPU devices. The rule: such a program lives here, one module per program, named after what it runs; the
room module that launches it names it as ``"gradacc.workers.NAME"`` and reads its result back; nothing imports it
(``tests/test_layout.py``). Lessons print these command lines, so the names stay stable. Worker: launched by (lesson).

* ``ddp``: ``gradacc.parallel.runs.run_ddp_lesson``, torchrun, one process per rank (07);
* ``ddp_checkpoint``: ``gradacc.parallel.runs.run_checkpoint_lesson`` (07);
* ``accelerate_train``: lesson 04's loop under ``accelerate launch``, ``gradacc.parallel.runs.run_accelerate_lesson``
  (04, 07);
* ``accelerate_state``: what each process's ``Accelerator`` makes of an ``accelerate launch`` (with or without
  ``cpu=True``), ``gradacc.parallel.runs.run_accelerator_state`` (07);
* ``jax_dp``: one process with several XLA CPU devices, ``gradacc.parallel.runs.run_jax_devices`` (07);
* ``ranks`` and ``ddp_answer``: a learner's function on 2 ranks started with torchrun's variables but without its
  agent process, ``gradacc.course.checks.lesson07`` through ``gradacc.foundations.launch.ranks_command`` (exercise 7);
* ``trainer_ddp``: ``gradacc.frameworks.trainer.run_trainer_ddp`` (05);
* ``fsdp_accum``: ``gradacc.parallel.sharded.run_fsdp_window`` (09, and ``gradacc bench --fsdp``);
* ``moe_trainer``: ``Trainer`` and ``SFTTrainer`` with a Mixture-of-Experts auxiliary loss,
  ``gradacc.stacks.moe.run_trainer_on_ranks`` (10);
* ``parallel_stacks``: pipeline schedules, DDP ``static_graph``,
  ``gradacc.parallel.parallel_stacks.run_parallel_lesson`` (11);
* ``jax_sharding``: XLA CPU devices, ``gradacc.parallel.parallel_stacks.run_jax_sharding`` (11).

Run any of them with ``python -m gradacc.workers.NAME --help``. What a launcher needs to read a result lives in its
room (``gradacc.frameworks.accelerate.read_result``).
"""
