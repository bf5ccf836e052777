"""Unit tests of gradacc.foundations.graphs: saved-tensor bytes held by autograd graphs, and graph node counts."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradacc.foundations.data import load_digits_tensors, split_micro_batches
from gradacc.foundations.graphs import SavedTensorMeter, count_graph_nodes
from gradacc.foundations.models import make_digits_model


def test_meter_counts_the_saved_activations_and_frees_them_at_backward():
    torch.manual_seed(0)
    w = torch.randn(64, 128, requires_grad=True)
    x = torch.randn(32, 64)
    with SavedTensorMeter(exclude=[w]) as meter:
        h = x @ w  # saves x (32*64 floats; w is excluded)
        out = torch.relu(h)  # saves its result, 32*128 floats
        loss = out.sum()
    assert meter.live_bytes == (32 * 64 + 32 * 128) * 4
    assert meter.peak_bytes == meter.live_bytes
    loss.backward()
    assert meter.live_bytes == 0 and meter.peak_bytes == (32 * 64 + 32 * 128) * 4
    assert meter.peak_mib == meter.peak_bytes / 2**20


def test_dropping_an_unused_graph_frees_its_saved_tensors():
    model = make_digits_model(seed=0)
    x, y = load_digits_tensors()
    with SavedTensorMeter(exclude=model.parameters()) as meter:
        loss = F.cross_entropy(model(x[:16]), y[:16])
    assert meter.live_bytes > 0
    del loss
    assert meter.live_bytes == 0


def test_one_backward_on_the_summed_window_holds_n_times_the_activations():
    model = make_digits_model(seed=0, hidden=64)
    x, y = load_digits_tensors()
    micro = split_micro_batches(x[:128], y[:128], 4)
    held_anyway = [*model.parameters(), x, y]  # micro-batches are views of x and y, which exist anyway
    with SavedTensorMeter(exclude=held_anyway) as per_micro:
        for inputs, labels in micro:
            (F.cross_entropy(model(inputs), labels) / 4).backward()
    with SavedTensorMeter(exclude=held_anyway) as summed:
        window = sum(F.cross_entropy(model(inputs), labels) / 4 for inputs, labels in micro)
        window.backward()
    assert per_micro.live_bytes == summed.live_bytes == 0
    assert summed.peak_bytes == 4 * per_micro.peak_bytes


def test_graph_nodes_kept_by_a_logged_loss_tensor():
    model = make_digits_model(seed=0)
    x, y = load_digits_tensors()
    running, logged = torch.zeros(()), 0.0
    per_step = []
    for inputs, labels in split_micro_batches(x[:64], y[:64], 4):
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        per_step.append(count_graph_nodes(loss))
        running = running + loss
        logged += loss.item()
    assert count_graph_nodes(torch.tensor(logged)) == 0
    assert len(set(per_step)) == 1 and per_step[0] > 5
    # the running sum reaches every step's graph; the AccumulateGrad nodes of the parameters are shared
    n_params = len(list(model.parameters()))
    assert count_graph_nodes(running) == 4 * (per_step[0] - n_params) + n_params + 4
    assert count_graph_nodes(running.detach()) == 0


def test_host_read_counter_counts_every_kind_of_value_read():
    from gradacc.foundations.graphs import HostReadCounter

    t = torch.ones(3).sum()
    with HostReadCounter() as reads:
        t.item(), float(t), int(t), bool(t > 0), t.tolist(), t.numpy()
        u = t * 2 + 1  # arithmetic stays on the device: no read
    assert reads.count == 6 and reads.calls == dict.fromkeys(["item", "float", "int", "bool", "tolist", "numpy"], 1)
    assert float(u) == 7.0 and reads.count == 6  # outside the block: not counted


def test_train_accumulated_reads_the_device_once_per_window_for_its_loss():
    from gradacc.foundations.accumulation import train_accumulated
    from gradacc.foundations.data import digits_loader
    from gradacc.foundations.graphs import HostReadCounter
    from gradacc.foundations.models import make_digits_model

    model = make_digits_model(seed=0)
    batches = list(digits_loader(16, seed=0, n_samples=160))  # 10 micro-batches, N = 4: 3 windows
    with HostReadCounter() as reads:
        history = train_accumulated(model, torch.optim.SGD(model.parameters(), lr=0.1), batches, 4)
    print(f"{len(batches)} micro-batches, {len(history)} optimizer steps: {reads.calls}")
    # per window: the loss and the gradient norm; per micro-batch: its label count (count_items; CPU labels in a real
    # GPU loop, read before they are moved, so no wait)
    assert len(history) == 3 and reads.calls == {"item": 3, "float": 3, "int": 10}
