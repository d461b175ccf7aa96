"""MoP's executed fine-grain pipeline (host/mixgcn/pipeline_exec.py)."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.mixgcn.pipeline import batch_dependencies, prop35_holds, stages_prop35
from moagcn.host.mixgcn.pipeline_exec import default_stages, schedule
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train


def test_schedule_by_hand():
    """Two batches, two layers, one dense worker; batch k of layer 1 needs batch dep[k]."""
    dep = [1, 1]
    sparse, dense, owner = [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [0, 0, 0, 0]

    def ready(t, de):
        layer, k = divmod(t, 2)
        return de[(layer - 1) * 2 + dep[k]] if layer else 0.0

    ss, se, ds, de = schedule(sparse, dense, owner, ready, overlap=True)
    assert ss == [0, 1, 5, 6] and ds == [1, 3, 6, 8] and de[-1] == 10
    ss, se, ds, de = schedule(sparse, dense, owner, ready, overlap=False)
    assert ss == [0, 3, 6, 9] and de[-1] == 12          # every task after the one before


def banded(n, b):
    """Every node linked to the nodes within distance b: bandwidth exactly b."""
    src, dst = [], []
    for d in range(1, b + 1):
        src += list(range(n - d)) + list(range(d, n))
        dst += list(range(d, n)) + list(range(n - d))
    return CSRGraph.from_edges(np.array(src), np.array(dst), n)


@pytest.mark.parametrize("b", [10, 40, 70])
def test_prop35_by_the_schedule_with_equal_batch_costs(b):
    """Equal sparse and dense batch times on one worker: the sparse unit never waits iff
    (n - b) / 2n >= 1 / s (Prop. 3.5)."""
    n, L = 120, 3
    g = banded(n, b)
    assert g.bandwidth() == b
    for s in (2, 3, 4, 6, 8, 12):
        dep = batch_dependencies(g, s)

        def ready(t, de, s=s, dep=dep):
            layer, k = divmod(t, s)
            return de[(layer - 1) * s + dep[k]] if layer else 0.0

        cost = [1.0] * (L * s)
        ss, se, ds, de = schedule(cost, cost, [0] * (L * s), ready)
        stall = sum(max(0.0, y - x) for x, y in zip(se[:-1], ss[1:]))
        if prop35_holds(n, b, s):
            assert stall == 0, (b, s)
        elif s >= 2:
            assert stall > 0, (b, s)
    assert stages_prop35(n, b) == int(np.ceil(2 * n / (n - b)))


def test_off_and_natural_give_identical_losses_and_the_plain_runtime_too():
    d = sbm(n_nodes=300, n_classes=3, seed=4)
    runs = {p: train(d, TrainConfig(device="model", workers=2, pipeline=p, stages=6, epochs=3,
                                    hidden=8)).report()
            for p in ("none", "off", "natural")}
    assert runs["off"]["train_loss"] == runs["natural"]["train_loss"]
    assert runs["none"]["train_loss"] == runs["natural"]["train_loss"]
    p = runs["natural"]["pipeline"]
    assert p["stages"] == 6 and p["pipelined_makespan_s"] <= p["off_makespan_s"]
    assert p["pipeline_speedup"] >= 1.0 and 0.0 <= p["idle_fraction"] < 1.0
    assert p["backward_sparse_busy_s"] > 0
    # per sparse device: busy within the makespan; the unit's batch takes the slowest device
    assert len(p["device_busy_s"]) == 2 and all(0 < b <= p["makespan_s"]
                                                for b in p["device_busy_s"])
    assert max(p["device_busy_s"]) <= p["sparse_busy_s"] <= sum(p["device_busy_s"])
    assert all(i == pytest.approx(p["makespan_s"] - b)
               for i, b in zip(p["device_idle_s"], p["device_busy_s"]))
    assert p["backward_pipelined_makespan_s"] <= p["backward_off_makespan_s"]
    assert p["step_pipeline_speedup"] >= 1.0
    # the blocks that cross between workers are MoP's all-to-alls, batch by batch (Prop. 3.4)
    assert runs["natural"]["comm_bytes"] == runs["none"]["comm_bytes"] \
        == runs["natural"]["comm_bytes_analytic"] > 0
    rcm = train(d, TrainConfig(device="model", workers=2, pipeline="rcm", stages=6, epochs=3,
                               hidden=8)).report()
    assert abs(rcm["train_loss"][-1] - runs["natural"]["train_loss"][-1]) < 1e-4
    assert rcm["pipeline"]["bandwidth"] < p["bandwidth"]


def test_default_stages_and_bad_input():
    assert default_stages(2000, 1143, 2) == 6
    assert default_stages(2000, 1999, 4) == 64
    d = sbm(n_nodes=200, seed=0)
    with pytest.raises(UserError, match="needs --parallelism mop"):
        TrainConfig(device="model", workers=2, parallelism="partition",
                    pipeline="natural").validate()
    with pytest.raises(UserError, match="multiple of --workers 4"):
        train(d, TrainConfig(device="model", workers=4, pipeline="natural", stages=6,
                             epochs=1))


def awkward_dataset():
    """The DEAL tests' graph (hub, isolated nodes, a doubled self loop, a repeated edge) with
    13 random features, 3 random labels and small splits."""
    from moagcn.host.graphs.data import Dataset

    from .test_deal import awkward
    g = awkward(64, seed=5)
    rng = np.random.default_rng(0)
    n = g.n_rows
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][:40], masks[1][40:50], masks[2][50:] = True, True, True
    return Dataset("awkward", g, rng.random((n, 13), dtype=np.float32),
                   rng.integers(0, 3, n), *masks)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_pipeline_on_an_awkward_graph(kind):
    """Hub, isolated nodes, self loops, widths 13/11 that 2 workers do not divide: off and
    natural still compute the same batches."""
    d = awkward_dataset()
    runs = {p: train(d, TrainConfig(device="model", workers=2, pipeline=p, stages=4,
                                    hidden=11, epochs=3, model=kind)).report()
            for p in ("off", "natural")}
    assert runs["off"]["train_loss"] == runs["natural"]["train_loss"]
    p = runs["natural"]["pipeline"]
    assert p["pipelined_makespan_s"] <= p["off_makespan_s"]


@pytest.mark.parametrize("kind,dropout_at", [("gcn", "aggregate"), ("sage", "input"),
                                             ("gin", "aggregate"), ("sage", "aggregate")])
def test_pipelined_backward_gives_the_reference_gradients(kind, dropout_at):
    """The executed backward pipeline (dense unit: update back-propagation batch by batch;
    sparse unit: each batch's pull of the transposed aggregation) against plain torch autograd
    through torch.sparse, on the awkward graph with 3 layers and widths 13 / 11 / 3 that 2
    workers do not divide: every parameter's gradient agrees to float rounding, and `off`
    (the same tasks, run one after another) gives bit-identical gradients."""
    import torch
    import torch.nn.functional as F

    from moagcn.host.mixgcn.pipeline_exec import PipelinedMoP
    from moagcn.host.nn.models import GNN, DropoutMasks, reference_forward
    d = awkward_dataset()
    y = torch.from_numpy(d.labels)
    drop = DropoutMasks(0.5, 3, None)
    masks = [drop.mask(0, l, (d.n_nodes, w)) for l, w in enumerate([13, 11, 11])]

    def grads(pipeline):
        torch.manual_seed(1)
        model = GNN(kind, d.n_features, 11, 3, layers=3)
        if pipeline is None:
            out = reference_forward(model, model.aggregation(d.graph), torch.from_numpy(
                d.features), masks, drop.scale, dropout_at)
            loss = F.cross_entropy(out, y, reduction="sum")
        else:
            rt = PipelinedMoP(model, d.graph, d.features, 2, "model", pipeline=pipeline,
                              stages=4, dropout_at=dropout_at)
            out = rt.forward(lambda l, shape: masks[l], drop.scale)
            loss = sum(F.cross_entropy(out[j], y[rt.rows(j)], reduction="sum") for j in out)
            loss.backward()
            # every batch of every layer went back through its update, and every batch of the
            # layers after the first through its own transposed product on the devices
            assert {key[1:] for key in rt._dense_best if key[0] == "backward"} \
                == {(l, k) for l in range(3) for k in range(4)}
            pulled = {(l, j) for (ph, l, j, i) in rt._cycles if ph == "backward"}
            assert pulled == {(l, j) for l in (1, 2) for j in range(4) if rt.users[j]}
            return [p.grad.clone() for p in model.parameters()]
        loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    ref, nat, off = grads(None), grads("natural"), grads("off")
    for r, g in zip(ref, nat):
        assert torch.allclose(g, r, rtol=1e-4, atol=1e-5 * float(r.abs().max()))
    assert all(torch.equal(a, b) for a, b in zip(nat, off))


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_an_error_in_one_unit_ends_the_step_with_that_error(where, monkeypatch):
    """A unit that fails (here the dense unit, on layer 1) stops the other one, which would
    otherwise wait for its blocks, and the step raises the failure."""
    import torch

    from moagcn.host.mixgcn.pipeline_exec import PipelinedMoP
    from moagcn.host.nn.models import GNN
    d = awkward_dataset()
    model = GNN("gcn", d.n_features, 11, 3, layers=3)
    rt = PipelinedMoP(model, d.graph, d.features, 2, "model", pipeline="natural", stages=4)
    if where == "forward":
        real = model.update

        def update(layer, Z, hs):
            if layer == 1:
                raise ValueError("update failed on layer 1")
            return real(layer, Z, hs)
        monkeypatch.setattr(model, "update", update)
        with pytest.raises(ValueError, match="layer 1"):
            rt.forward()
    else:
        out = rt.forward()

        def grad(*args, **kwargs):
            raise ValueError("backward failed")
        monkeypatch.setattr(torch.autograd, "grad", grad)
        with pytest.raises(ValueError, match="backward failed"):
            sum(o.sum() for o in out.values()).backward()
