"""gradacc: the helper package of the gradient-accumulation course.

One module per concern (see ../../README.md): ``data`` (real datasets that ship offline, seeded loaders, micro-batch
splitting), ``models`` (the small models the lessons share), ``accumulation`` (reference accumulation code),
``checks`` (what exercise check cells call), ``notebooks`` (exercise generation, execution, nbval runs) and ``cli``.
Heavy optional libraries (jax, transformers, accelerate) are imported only by the modules that need them.
"""

__version__ = "0.1.0"
