"""How the course is made and checked: ``notebooks`` (exercise generation, execution, nbval runs), ``badges`` (Colab
and Binder badges, navigation), ``environment`` (what lesson 00 reports), ``checks/`` (what exercise check cells call),
``pytest_plugin`` (nbval's patience on a busy machine, loaded by every ``pytest``), ``release`` (``gradacc release``:
what students are handed, without the answers) and ``cli`` (``gradacc exercises``, ``gradacc execute``).

It may import the teaching rooms of ``gradacc`` (``foundations``, ``memory``, ``frameworks``, ``parallel``,
``stacks``); they never import it. ``gradacc.grading`` imports it, never the other way (``tests/test_layout.py``).
"""
