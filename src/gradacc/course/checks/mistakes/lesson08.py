"""Reference implementations of the misconceptions check 8.1 recognises (``gradacc.course.checks.mistakes``)."""

from __future__ import annotations

import torch

from . import mistake


@mistake("8.1", "biased-running-var")
def running_var_biased(running_var, micro_batches, momentum):
    for batch in micro_batches:
        biased = ((batch - batch.mean(dim=0)) ** 2).mean(dim=0)
        running_var = running_var + momentum * (biased - running_var)
    return running_var


@mistake("8.1", "window-statistics")
def running_var_of_the_window(running_var, micro_batches, momentum):
    window = torch.cat(list(micro_batches))
    return running_var + momentum * (window.var(dim=0) - running_var)
