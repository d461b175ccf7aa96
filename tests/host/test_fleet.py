"""Mixed fleets and non-uniform splits (host/vgnn/fleet.py and the runtimes' ``shares``)."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import rmat, sbm
from moagcn.host.graphs.partition import partition_nodes, weighted_ranges, work_ranges
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train
from moagcn.host.vgnn.fleet import fleet, work_shares

FLEET = "sspmm:lanes=32,sspmm:lanes=8,sspmm:lanes=8:clock_mhz=100"


def test_weighted_ranges_are_proportional_and_cover_everything():
    assert weighted_ranges(10, [1, 1]) == [(0, 5), (5, 10)]
    assert weighted_ranges(10, [3, 1]) == [(0, 8), (8, 10)]       # 7.5 / 2.5: the first rounds up
    r = weighted_ranges(1001, [0.5, 0.3, 0.2])
    sizes = [b - a for a, b in r]
    assert sum(sizes) == 1001 and r[0][0] == 0 and r[-1][1] == 1001
    assert all(abs(s - 1001 * w) < 1 for s, w in zip(sizes, [0.5, 0.3, 0.2]))
    assert weighted_ranges(3, [1, 0, 1]) == [(0, 2), (2, 2), (2, 3)]
    for bad in ([], [0, 0], [-1, 2]):
        with pytest.raises(UserError, match="shares"):
            weighted_ranges(5, bad)


def test_work_ranges_cut_at_the_work_shares():
    assert work_ranges([1] * 10, [1, 1]) == [(0, 5), (5, 10)]
    assert work_ranges([9, 1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1]) == [(0, 1), (1, 10)]
    assert work_ranges([1, 1, 1, 1], [1, 0, 1]) == [(0, 2), (2, 2), (2, 4)]
    r = work_ranges(np.arange(1, 101), [0.25, 0.25, 0.5])
    assert r[0][0] == 0 and r[-1][1] == 100 and all(a <= b for a, b in r)


def test_fleet_specs_become_one_choice_per_worker():
    specs, choices = fleet(FLEET + ",cpu", "model")
    assert [c.device for c in choices] == ["model", "model", "model", "cpu"]
    assert choices[0].config().lanes == 32 and choices[2].config().clock_mhz == 100
    with pytest.raises(UserError, match="unknown design"):
        fleet("sspmm,gpu9000", "model")
    with pytest.raises(UserError, match="--device cpu"):
        fleet("sspmm", "cpu")


def test_spec_shares_follow_lanes_times_clock():
    specs, _ = fleet(FLEET, "model")
    s = work_shares("spec", specs, sbm(n_nodes=50, seed=0).graph, [16], "mop")
    clock = specs[0].config().clock_mhz
    cap = np.array([32 * clock, 8 * clock, 8 * 100.0])
    assert np.allclose(s, cap / cap.sum())
    assert np.allclose(work_shares("uniform", specs, None, [16], "mop"), 1 / 3)
    with pytest.raises(UserError, match="perfmodel fit"):
        work_shares("vgnn", specs, None, [16], "mop")


@pytest.mark.parametrize("method", ["contiguous", "rcm", "metis"])
def test_partitions_honour_target_weights(method):
    """With shares, the parts' aggregation work Σ (deg + 1) follows them (not node counts): on
    a power-law graph with many isolated nodes the two differ a lot."""
    from moagcn.host.graphs.generators import rmat
    for g in (load_dataset("cora").graph, rmat(scale=11, seed=0).graph):
        shares = [0.6, 0.3, 0.1]
        parts = partition_nodes(g, 3, method, shares)
        assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(g.n_nodes))
        work = g.degrees() + 1
        frac = np.array([work[p].sum() for p in parts]) / work.sum()
        tol = work.max() / work.sum() if method != "metis" else 0.05   # one row / METIS's ~3-5 %
        assert np.all(np.abs(frac - shares) <= tol), (method, frac)
    with pytest.raises(UserError, match="kway balances equal parts only"):
        partition_nodes(g, 3, "kway", shares)


@pytest.mark.parametrize("parallelism", ["mop", "partition"])
def test_balancing_changes_who_computes_not_what(parallelism):
    """Same seed: the losses of uniform and spec splits agree; the work (and the device time)
    moves to the bigger device; the makespan is the slowest device's time."""
    d = sbm(n_nodes=300, n_classes=3, seed=1)
    runs = {}
    for balance in ("uniform", "spec"):
        cfg = TrainConfig(device="model", workers=3, devices=FLEET, balance=balance,
                          parallelism=parallelism, epochs=3, hidden=12,
                          partition="contiguous")
        runs[balance] = train(d, cfg).report()
    u, s = runs["uniform"], runs["spec"]
    assert np.allclose(u["train_loss"], s["train_loss"], rtol=1e-5, atol=1e-6)
    assert u["shares"] is None and abs(sum(s["shares"]) - 1) < 1e-9
    adds = [w["spmm_adds"] for w in s["worker_ops"]]
    assert adds[0] > adds[1] and adds[0] > adds[2]          # the 32-lane device does the most
    for r in (u, s):
        assert r["makespan_s"] == max(r["device_time_s"]) > 0
        for t, dev in zip(r["device_time_s"], r["sim_cycles"]["devices"]):
            assert t == pytest.approx(dev["cycles_total"] / (dev["clock_mhz"] * 1e6))
    assert s["makespan_s"] < u["makespan_s"]


def test_fleet_size_must_match_workers():
    with pytest.raises(UserError, match="names 3 devices but --workers is 2"):
        TrainConfig(device="model", workers=2, devices=FLEET).validate()
    with pytest.raises(UserError, match="perf-model"):
        TrainConfig(device="model", workers=3, devices=FLEET, balance="vgnn").validate()


def test_distributed_fleet_equals_in_process():
    from moagcn.host.training.distributed import train_distributed
    d = sbm(n_nodes=200, n_classes=3, seed=2)
    cfg = TrainConfig(device="model", workers=2, devices="sspmm:lanes=32,sspmm:lanes=8",
                      balance="spec", parallelism="partition", epochs=2, hidden=8)
    a = train(d, cfg).report()
    b = train_distributed(d, cfg).report()
    assert a["shares"] == b["shares"]
    assert np.allclose(a["train_loss"], b["train_loss"], rtol=1e-5)
    assert a["device_time_s"] == pytest.approx(b["device_time_s"])


def _bf16_by_bits(x):
    """float32 -> bfloat16 (round to nearest, ties to even) -> float32, on the bits."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_bf16_cpu_device_rounds_inputs_and_outputs():
    from moagcn.core.device import CpuDevice
    from moagcn.host.graphs.ops import CSRGraph
    rng = np.random.default_rng(0)
    g = CSRGraph.from_edges(rng.integers(0, 30, 120), rng.integers(0, 30, 120), 30)
    H = rng.standard_normal((30, 7)).astype(np.float32)
    A = g.to_scipy(np.float64)
    want = _bf16_by_bits((A @ _bf16_by_bits(H).astype(np.float64)).astype(np.float32))
    got = CpuDevice("bf16").sspmm(g, H)
    # equal but where fp32 summation order moves a result across a bf16 rounding boundary
    assert np.mean(got == want) > 0.95
    assert np.abs(got - want).max() <= np.abs(want).max() * 2 ** -7      # one bf16 ulp
    assert not np.array_equal(CpuDevice("fp32").sspmm(g, H), got)
    specs, choices = fleet("cpu,cpu:format=bf16", "model")
    assert [c.make().name for c in choices] == ["cpu", "cpu:bf16"]
    with pytest.raises(UserError, match="fp32 or bf16"):
        fleet("cpu:format=fp16", "model")


def test_eq7_shift_moves_share_by_the_fitted_factor():
    from moagcn.host.vgnn.fleet import bf16_shift, bf16_weight, calibrate_bf16
    assert bf16_weight(0, 0.5, 0.1, 1.0) == pytest.approx(1.5)
    assert bf16_weight(1e6, 0.5, 0.1, 1.0) == pytest.approx(1.0)
    specs, _ = fleet("cpu,cpu:format=bf16", "model")
    g = sbm(n_nodes=120, seed=0).graph
    cal = {"n0": 1.0, "lambda": 0.0, "b": 1.0}                 # BF16 twice as fast
    shares, factor, _ = bf16_shift([0.5, 0.5], specs, g, cal)
    assert factor == pytest.approx(2.0) and shares == pytest.approx([1 / 3, 2 / 3])
    plain, _ = fleet("cpu,sspmm", "model")
    assert list(bf16_shift([0.4, 0.6], plain, g)[0]) == [0.4, 0.6]
    measured = calibrate_bf16(g, sizes=[20, 60, 120], width=8, repeats=2)
    assert all(r > 0 for r in measured["ratio"]) and np.isfinite(measured["b"])


class _CountingModel:
    """A stand-in perf model that records what it is asked (the solver's inputs, not a
    prediction under test): one second per stored entry and column."""

    def __init__(self):
        self.asked, self.keeps = [], []

    def predict(self, graph, width, spec, keep=1.0):
        self.asked.append((graph.shape, graph.nnz, width))
        self.keeps.append((graph.shape, width, keep))
        return float(graph.nnz * width + 1)


def test_predicted_step_is_forward_plus_backward_on_the_workers_blocks():
    """Partition: each worker's block (its rows by the columns they read) at every layer width,
    and its transpose at the widths after the first; MoP: the whole graph at the worker's
    column slice, and its transpose for the second layer."""
    from moagcn.host.devices.select import parse_devices
    from moagcn.host.vgnn.fleet import predicted_times
    g = rmat(scale=7, seed=3).graph
    specs = parse_devices("sspmm:lanes=32,sspmm:lanes=8")
    m = _CountingModel()
    t = predicted_times(m, specs, g, [20, 6], "partition", [0.7, 0.3], "metis")
    parts = partition_nodes(g, 2, "metis", [0.7, 0.3])
    for i, rows in enumerate(parts):
        used = np.unique(g.to_scipy()[rows].indices)
        cols = np.union1d(rows, used).size
        nnz = int(g.degrees()[rows].sum())
        assert t[i] == (nnz * 20 + 1) + (nnz * 6 + 1) + (nnz * 6 + 1)
        assert ((rows.size, cols), nnz, 20) in m.asked and ((cols, rows.size), nnz, 6) in m.asked
    t = predicted_times(m, specs, g, [20, 6], "mop", [0.75, 0.25])
    # the columns MoPRuntime gives: 0.75 x (20, 6) -> 15, 5 and 0.25 x (20, 6) -> 5, 1 (6 x
    # 0.75 = 4.5 and 6 x 0.25 = 1.5 round by largest remainder, the tie to the first device;
    # the prediction used to round each on its own, to 4 and 2)
    assert list(t) == [(g.nnz * 15 + 1) + 2 * (g.nnz * 5 + 1),
                       (g.nnz * 5 + 1) + 2 * (g.nnz * 1 + 1)]
    from moagcn.host.mixgcn.mop import MoPRuntime
    from moagcn.host.nn.models import GNN
    rt = MoPRuntime(GNN("gcn", 20, 6, 3), g, np.zeros((g.n_nodes, 20), np.float32), 2, "model",
                    shares=[0.75, 0.25])
    assert [[b - a for a, b in fr] for fr in rt.feat_ranges] == [[15, 5], [5, 1]]
    # a device whose share rounds to no columns is predicted to do nothing there
    m2 = _CountingModel()
    t = predicted_times(m2, specs, g, [3], "mop", [0.9, 0.1])
    assert list(t) == [g.nnz * 3 + 1, 0.0]
    # the solver's smooth variant: each share of each width rounded on its own, at least one
    t = predicted_times(m2, specs, g, [20, 6], "mop", [0.75, 0.25], exact=False)
    assert list(t) == [(g.nnz * 15 + 1) + 2 * (g.nnz * 4 + 1),
                       (g.nnz * 5 + 1) + 2 * (g.nnz * 2 + 1)]


def test_predicted_step_runs_the_operator_with_the_training_masks():
    """The blocks come from the operator the devices run (GCN's A + I, cut by a partition of
    the graph), the forward aggregations are predicted under the dropout mask and the backward
    ones under the ReLU mask."""
    from moagcn.host.devices.select import parse_devices
    from moagcn.host.graphs.partition import partition_nodes
    from moagcn.host.nn.models import aggregation_op
    from moagcn.host.vgnn.fleet import RELU_KEEP, predicted_times, step_keeps
    specs = parse_devices("sspmm:lanes=32,sspmm:lanes=8")
    g = rmat(scale=8, seed=5).graph
    op = aggregation_op("gcn", g).adj
    assert op.nnz > g.nnz
    keep, back = step_keeps(0.3)
    assert (keep, back) == (pytest.approx(0.7), RELU_KEEP)
    assert step_keeps(0.3, "input") == (1.0, pytest.approx(0.7 * RELU_KEEP))
    assert step_keeps(0.0) == (1.0, RELU_KEEP)
    assert step_keeps(0.3, relu=False) == (pytest.approx(0.7), 1.0)
    m = _CountingModel()
    t = predicted_times(m, specs, g, [20, 6], "partition", [0.7, 0.3], "metis", operator=op,
                        keep=keep, back_keep=back)
    for i, rows in enumerate(partition_nodes(g, 2, "metis", [0.7, 0.3])):
        a = op.to_scipy()[rows]
        cols = np.union1d(rows, np.unique(a.indices)).size
        assert t[i] == (a.nnz * 20 + 1) + 2 * (a.nnz * 6 + 1)
        assert ((rows.size, cols), 20, keep) in m.keeps
        assert ((rows.size, cols), 6, keep) in m.keeps
        assert ((cols, rows.size), 6, back) in m.keeps
    with pytest.raises(UserError, match="operator"):
        predicted_times(m, specs, g, [20], "mop", None,
                        operator=aggregation_op("gcn", rmat(scale=7, seed=5).graph).adj)
