"""gradacc: the helper package of the gradient-accumulation course, in three rooms.

1. **What the lessons teach and measure** (this folder's modules): ``data`` (real datasets that ship offline, seeded
   loaders, micro-batch splitting), ``models`` (every model the lessons share), ``accumulation`` (the plain-PyTorch
   reference loop), ``memory/`` (measuring and predicting a step's memory), the frameworks ``accelerate``,
   ``trainer``, ``jaxacc``, ``distributed`` (DDP accumulation, the lesson-07 runs), ``launch`` (starting real
   processes under a time limit), ``pitfalls``, ``graphs``, ``plots`` (the memory figures), ``widgets``, ``bench``,
   ``stacks/`` (lesson 10: TRL, PEFT, Lightning and Keras 3 measured, one module per library), and lesson 11's
   ``parallel_stacks`` (pipeline schedules, FSDP2 mixed precision, the launches), ``jax_sharding`` (accumulation
   under JAX's automatic sharding) and ``hlo`` (collectives read from compiled XLA programs).
   Lessons import these. They never import ``course``, ``grading`` or ``workers``.
2. **How the course is made and checked**: ``course/`` (``notebooks``: exercise generation, execution, nbval runs;
   ``badges``; ``environment``; ``checks/``: what exercise check cells call; ``pytest_plugin``; ``cli``). It may
   import the teaching modules; nothing teaching imports it (exercises and lesson 00 do, as notebooks).
3. **How a class is graded**: ``grading/``. It may import ``course`` (never the other way) and no teaching module.

``workers/`` holds the programs that run as processes of their own (``python -m gradacc.workers.ddp`` ...); they
import teaching modules, and nothing imports them. ``cli`` only wires the sub-commands each room defines.
``tests/test_layout.py`` enforces these rules. Heavy optional libraries (jax, transformers, accelerate, trl, peft,
pytorch-lightning, keras) are imported only by the modules that need them.
"""

__version__ = "0.1.0"
