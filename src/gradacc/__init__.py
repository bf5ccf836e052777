"""gradacc: the helper package of the gradient-accumulation course. Its top level reads like the lesson table.

Teaching rooms (lessons import them; they never import ``course``, ``grading`` or ``workers``):

* ``foundations/`` (what every lesson uses; lessons 01, 02, 08): ``data``, ``models``, ``accumulation`` (the
  plain-PyTorch reference loop), ``launch`` (real processes under a time limit), ``graphs``, ``pitfalls``.
* ``memory/`` (lesson 03): measuring and predicting a step's memory (``from gradacc.memory import ...``), the memory
  explorer (``widgets``, ``explorer_state``, ``explorer_draw``), ``capacity``, ``plots``, ``bench`` and
  ``bench_report`` (``gradacc bench``).
* ``frameworks/`` (lessons 04-06): ``accelerate``, ``trainer`` and ``texttask``, ``jaxacc``.
* ``parallel/`` (lessons 07, 09, 11): ``distributed`` (what a rank does), ``runs`` (the launches), ``tokens``,
  ``sharded`` and ``compiled`` (09), ``parallel_stacks``, ``jax_sharding`` and ``hlo`` (11).
* ``stacks/`` (lesson 10): TRL, PEFT, Lightning and Keras 3 measured, one module per library.

A room imports ``foundations`` and the rooms before it in ``frameworks < parallel < memory``, and ``stacks`` imports
``frameworks``: ``memory`` sits on top because it measures the others (``bench``, ``step_memory``).

Rooms that make and grade the course: ``course/`` (notebooks, badges, environment, the exercise checks, the pytest
plugin, the website, the translation) may import every teaching room; ``grading/`` (the classroom grader) imports only
``course``. ``workers/`` holds every program that runs as a process of its own (``python -m gradacc.workers.NAME``),
each launched by name from one room; nothing imports it. Shared at the top: ``cli`` (wires each room's sub-commands)
and ``i18n`` (learner-facing messages). ``tests/test_layout.py`` enforces these rules; ``docs/maintainers.md`` has
the map. Heavy optional libraries (jax, transformers, accelerate, trl, peft, pytorch-lightning, keras) are imported
only by the modules that need them.
"""

__version__ = "0.1.0"
