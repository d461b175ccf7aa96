"""The HyScale system model's per-iteration pipeline on this host (host/hyscale/shared_host.py's
``pipeline_times``) and the host overhead of a trainer step (host/hyscale/calibrate.py's
``dropout_elements`` and ``overhead_seconds``), against values worked out here by hand.

The rule (shared_host.py's docstring, docs/hyscale.md's pipeline): per trainer ``i``, stage A
is its sampling plus the load of its ``X'`` from host memory (Eq. 7: ``|V^0| f^0 S_feat /
BW_DDR``), stage B the copy of ``X'`` over the link (Eq. 8: ``|V^0| f^0 S_feat / BW_PCIe``),
and its training Eq. 10 plus the fitted host overhead; with prefetching the iteration is
``max_i max(A_i, B_i, T_i)``, without ``max_i (A_i + B_i + T_i)``, plus ``T_sync`` (Eq. 9)."""

import pytest

from moagcn.host.hyscale.calibrate import dropout_elements, overhead_seconds
from moagcn.host.hyscale.perf import BatchSizes, Platform
from moagcn.host.hyscale.shared_host import pipeline_times

#: 1 GB/s host memory, 0.25 GB/s link: a 1000 x 100 fp32 X' (400 kB) loads in 0.4 ms and
#: crosses in 1.6 ms
PLATFORM = Platform("hand", bw_ddr=1e9, bw_pcie=2.5e8, cpu_agg_bw=1e9, cpu_macs=1e9,
                    accel_agg_bw=1e9, accel_macs=1e9)
DIMS = [100, 16, 4]


def sizes(v0):
    return BatchSizes([v0, 200, 50], [900, 150])


def prediction(t_samp, t_trainer, t_sync=0.0005):
    return {"dims": DIMS, "kinds": ["cpu", "accel", "accel"], "t_samp": t_samp,
            "trainers": [{"T_trainer": t} for t in t_trainer], "T_sync": t_sync}


# trainer i: |V^0| = 1000, 500, 2000 -> loads 0.4, 0.2, 0.8 ms; copies 1.6, 0.8, 3.2 ms
V0 = [1000, 500, 2000]
LOAD = [0.0004, 0.0002, 0.0008]
COPY = [0.0016, 0.0008, 0.0032]


@pytest.mark.parametrize("bottleneck", ["A", "B", "T"])
def test_the_iteration_is_the_slowest_stage_of_the_slowest_trainer(bottleneck):
    """Each case makes one stage of one trainer the slowest of all (so leaving that stage out
    of the maximum changes the answer): A of the CPU trainer (sampling 5 ms), B of the big
    accelerator trainer (3.2 ms, everything else below), T of the small one (6 ms)."""
    samp = {"A": [0.005, 0.001, 0.001], "B": [0.001, 0.001, 0.0005],
            "T": [0.001, 0.001, 0.001]}[bottleneck]
    train = {"A": [0.002, 0.002, 0.002], "B": [0.002, 0.001, 0.002],
             "T": [0.002, 0.006, 0.002]}[bottleneck]
    got = pipeline_times(prediction(samp, train), [sizes(v) for v in V0], PLATFORM)
    A = [s + l for s, l in zip(samp, LOAD)]
    assert got["A"] == pytest.approx(A, rel=1e-12)
    assert got["B"] == pytest.approx(COPY, rel=1e-12)
    assert got["T"] == pytest.approx(train, rel=1e-12)
    slowest = {"A": A[0], "B": COPY[2], "T": train[1]}[bottleneck]
    assert slowest == pytest.approx({"A": 0.0054, "B": 0.0032, "T": 0.006}[bottleneck])
    assert got["iteration_s"] == pytest.approx(slowest + 0.0005, rel=1e-12)
    per = [max(a, b, t) for a, b, t in zip(A, COPY, train)]
    assert got["stage_s"]["G_C"] == pytest.approx(per[0], rel=1e-12)
    assert got["stage_s"]["G_A"] == pytest.approx(max(per[1:]), rel=1e-12)


def test_stage_names_and_the_sum_without_prefetching():
    """Stage times under the training's names, and without prefetching each trainer's stages
    one after another, with the host overhead added to the training."""
    samp, train, over = [0.003, 0.001, 0.002], [0.002, 0.004, 0.001], [0.0005, 0.0, 0.001]
    got = pipeline_times(prediction(samp, train), [sizes(v) for v in V0], PLATFORM,
                         prefetch=False, overhead=over)
    T = [0.0025, 0.004, 0.002]
    assert got["T"] == pytest.approx(T, rel=1e-12)
    st = got["stage_s"]
    assert st["T_SC"] == pytest.approx(0.003) and st["T_SA"] == pytest.approx(0.003)
    assert st["T_Load"] == pytest.approx(0.0014)                  # 0.4 + 0.2 + 0.8 ms
    assert st["T_Tran"] == pytest.approx(0.004)                   # accelerators only: 0.8 + 3.2
    assert st["T_TC"] == pytest.approx(0.0025) and st["T_TA"] == pytest.approx(0.004)
    # sums: 0.0034 + 0.0016 + 0.0025 = 0.0075; 0.0012 + 0.0008 + 0.004 = 0.006;
    # 0.0028 + 0.0032 + 0.002 = 0.008
    assert st["G_C"] == pytest.approx(0.0075) and st["G_A"] == pytest.approx(0.008)
    assert got["iteration_s"] == pytest.approx(0.008 + 0.0005)
    assert got["prefetch"] is False and got["overhead"] == over


def test_host_overhead_by_hand():
    """Elements every layer reads: |V^0| f^0 + |V^1| f^1 = 1000 x 100 + 200 x 16 = 103,200 (not
    the targets' f^2); overhead a + b x elements + c x edges, 0 without a fit, never below 0."""
    s = sizes(1000)
    assert dropout_elements(s, DIMS) == 103200.0
    fit = {"a_s": 0.001, "per_element_s": 1e-8, "per_edge_s": 2e-6}
    # 0.001 + 0.001032 + 2e-6 x 1050 = 0.004132
    assert overhead_seconds(fit, s, DIMS) == pytest.approx(0.004132, rel=1e-12)
    assert overhead_seconds(None, s, DIMS) == 0.0
    assert overhead_seconds({"a_s": -0.01, "per_element_s": 0.0, "per_edge_s": 0.0}, s,
                            DIMS) == 0.0
