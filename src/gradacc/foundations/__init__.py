"""What every lesson uses (lessons 01, 02 and 08, and every later one): ``data`` (real datasets that ship offline,
seeded loaders, micro-batch splitting, ``docstrings.json``), ``models`` (the models the lessons share),
``accumulation`` (the plain-PyTorch reference loop), ``launch`` (starting real processes under a time limit),
``graphs`` (what autograd graphs keep alive) and ``pitfalls`` (lesson 08's cases).

It imports no other room of ``gradacc`` (``tests/test_layout.py``); importing this package imports none of its
modules.
"""
