"""The course's pytest plugin, loaded by every ``pytest`` of an environment where ``gradacc`` is installed (entry point
``pytest11``), so a learner's ``pytest --nbval exercises/02_pytorch.ipynb`` gets it as well as the test suite.

It gives nbval's wait for each output message of a cell the same patience on a busy machine as the cell itself.
nbval 0.11 waits for the cell's reply up to ``--nbval-cell-timeout`` seconds, then reads the cell's outputs with a
FIXED 5 s limit per message (``IPyNbCell.output_timeout = 5`` in ``nbval/plugin.py``); on a loaded 2-core machine the
kernel's output thread can be descheduled for longer, and nbval then fails a correct cell with "Timeout of 5 seconds
exceeded waiting for output". Here each nbval cell waits up to ``OUTPUT_TIMEOUT_S`` seconds (or the cell timeout,
whichever is smaller) for each output message. A kernel that really stopped answering still fails the cell, after that
limit.
"""

from __future__ import annotations

OUTPUT_TIMEOUT_S = 60.0
"""Seconds nbval waits for each output message after a cell's reply (nbval's own value is 5)."""


def pytest_collection_modifyitems(session, config, items) -> None:
    cell_timeout = float(getattr(config.option, "nbval_cell_timeout", OUTPUT_TIMEOUT_S) or OUTPUT_TIMEOUT_S)
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval.plugin.IPyNbCell
            item.output_timeout = max(item.output_timeout, min(OUTPUT_TIMEOUT_S, cell_timeout))
