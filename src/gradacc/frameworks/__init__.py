"""Accumulation in the frameworks of lessons 04-06: ``accelerate`` (Hugging Face Accelerate, lesson 04), ``trainer``
and its offline text task ``texttask`` (the Hugging Face ``Trainer``, lesson 05), ``jaxacc`` (JAX and optax, lesson
06).

It imports ``foundations`` only (``tests/test_layout.py``); importing this package imports none of the frameworks.
"""
