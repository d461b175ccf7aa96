"""HyScale-GNN's performance model (Eq. 5-13): every equation against hand-computed values,
the (+) semantics, the u250 preset, and smoke runs of the calibration and the predictions on a
small real graph. No wall-clock assertions."""

import dataclasses
import math
import os
import time

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.benches import hyscale_model as hbench
from moagcn.host.graphs.generators import sbm
from moagcn.host.hyscale import (calibrate as hcal, paper as hpaper, perf as hp,
                                 shared_host as hsh, split as hsplit)
from moagcn.host.hyscale.train import HybridConfig, _Splitter
from moagcn.sim.hyscale import model as hm

# A tiny hand-checkable configuration: two layers, f = [4, 3, 2], round rates.
DIMS = [4, 3, 2]
PLAT = hp.Platform(name="t", bw_ddr=100.0, bw_pcie=10.0, cpu_agg_bw=50.0, cpu_macs=20.0,
                   accel_agg_bw=200.0, accel_macs=40.0, combine_cpu="sum", combine_accel="max",
                   sampling={"basis": "edges", "intercept_s": 1.0, "slope_s": 0.5},
                   sampler_threads=2)
# V^0 = 10, V^1 = 5, V^2 = 2 targets; E^1 = 8, E^2 = 4
SIZES = hp.BatchSizes([10, 5, 2], [8, 4])


def test_eq11_eq12_by_hand():
    assert hm.t_aggregate(8, 4, 50.0) == pytest.approx(8 * 4 * 4 / 50)      # 2.56
    assert hm.t_update(5, 4, 3, 20.0) == pytest.approx(5 * 4 * 3 / 20)      # 3.0
    assert hm.update_width("gcn", 4) == 4 and hm.update_width("sage", 4) == 8
    with pytest.raises(UserError):
        hm.update_width("gin", 4)


def test_eq10_sum_and_max():
    agg, upd = [2.0, 1.0], [0.5, 3.0]
    # sum: forward (2 + .5) + (1 + 3) = 6.5; backward upd^1 .5 + (1 + 3) = 4.5
    assert hm.t_trainer(agg, upd, "sum") == pytest.approx(11.0)
    # max: forward max(2, .5) + max(1, 3) = 5; backward .5 + max(1, 3) = 3.5
    assert hm.t_trainer(agg, upd, "max") == pytest.approx(8.5)
    # one layer: forward (+)(a, u), backward only the update
    assert hm.t_trainer([2.0], [0.5], "sum") == pytest.approx(3.0)
    assert hm.t_trainer([2.0], [0.5], "max") == pytest.approx(2.5)
    assert hm.combine(1.0, 2.0, "sum") == 3.0 and hm.combine(1.0, 2.0, "max") == 2.0
    with pytest.raises(UserError):
        hm.combine(1.0, 2.0, "min")


def test_eq13_sync():
    # GCN: model size 4*3 + 3*2 = 18 values, 72 bytes, twice over 10 B/s = 14.4 s
    assert hm.t_sync(DIMS, 10.0, "gcn") == pytest.approx(2 * 18 * 4 / 10)
    # SAGE's update multiplies [h || a]: weights (2*4)*3 + (2*3)*2 = 36 values
    assert hm.t_sync(DIMS, 10.0, "sage") == pytest.approx(2 * 36 * 4 / 10)


def test_eq7_eq8():
    other = hp.BatchSizes([6, 3, 1], [5, 2])
    assert hm.t_load([SIZES.V[0], other.V[0]], 4, 100.0) == pytest.approx((10 + 6) * 4 * 4 / 100)
    assert hm.t_trans(10, 4, 10.0) == pytest.approx(10 * 4 * 4 / 10)


def test_predict_by_hand():
    """One CPU trainer (sum) and one accelerator trainer (max) on the same mini-batch."""
    p = hp.predict([SIZES, SIZES], ["cpu", "accel"], DIMS, PLAT, "gcn")
    cpu, acc = p["trainers"]
    # Eq. 11: layer 1 reads f^0 = 4 over E^1 = 8, layer 2 f^1 = 3 over E^2 = 4
    assert cpu["t_aggregate"] == pytest.approx([8 * 4 * 4 / 50, 4 * 3 * 4 / 50])
    assert acc["t_aggregate"] == pytest.approx([8 * 4 * 4 / 200, 4 * 3 * 4 / 200])
    # Eq. 12: layer 1 updates V^1 = 5 rows 4 -> 3, layer 2 V^2 = 2 rows 3 -> 2
    assert cpu["t_update"] == pytest.approx([5 * 4 * 3 / 20, 2 * 3 * 2 / 20])
    assert acc["t_update"] == pytest.approx([5 * 4 * 3 / 40, 2 * 3 * 2 / 40])
    a1, a2 = 2.56, 0.96
    u1, u2 = 3.0, 0.6
    assert cpu["T_trainer"] == pytest.approx((a1 + u1) + (a2 + u2) + u1 + (a2 + u2))
    b1, b2, v1, v2 = 0.64, 0.24, 1.5, 0.3
    assert acc["T_trainer"] == pytest.approx(max(b1, v1) + max(b2, v2) + v1 + max(b2, v2))
    sync = 2 * 18 * 4 / 10
    assert p["T_sync"] == pytest.approx(sync)
    assert p["T_prop"] == pytest.approx(cpu["T_trainer"] + sync)      # Eq. 9
    # T_samp: 1 + 0.5 * 12 edges = 7 s each, two of them on two threads
    assert p["t_samp"] == pytest.approx([7.0, 7.0]) and p["T_samp"] == pytest.approx(7.0)
    assert p["T_load"] == pytest.approx(20 * 4 * 4 / 100)                # Eq. 7: both
    assert p["T_trans"] == pytest.approx(10 * 4 * 4 / 10)                # Eq. 8: one accel
    stages = [p["T_samp"], p["T_load"], p["T_trans"], p["T_prop"]]
    assert p["T_execution"] == pytest.approx(max(stages))                # Eq. 6
    assert p["bottleneck"] == "T_prop"
    # Eq. 5 and NVTPS
    assert p["edges"] == 24 and p["vertices"] == 34
    assert p["MTEPS"] == pytest.approx(24 / p["T_execution"] / 1e6)
    assert p["NVTPS"] == pytest.approx(34 / p["T_execution"])
    assert p["targets_per_s"] == pytest.approx(4 / p["T_execution"])


def test_predict_stage_bottlenecks_and_epoch():
    slow_link = dataclasses.replace(PLAT, bw_pcie=0.1)
    p = hp.predict([SIZES, SIZES], ["cpu", "accel"], DIMS, slow_link, "gcn", n_train=9)
    assert p["bottleneck"] == "T_trans" and p["T_execution"] == pytest.approx(160 / 0.1)
    assert p["MTEPS"] == pytest.approx(24 / p["T_execution"] / 1e6)
    assert p["iterations_per_epoch"] == 3                               # ceil(9 / 4)
    assert p["epoch_s"] == pytest.approx(3 * p["T_execution"])
    # no accelerator: no transfer; sampling shared by the threads when share_batches
    q = hp.predict([SIZES], ["cpu"], DIMS, dataclasses.replace(PLAT, sampler_threads=4,
                                                               share_batches=True), "gcn")
    assert q["T_trans"] == 0.0 and q["T_samp"] == pytest.approx(7.0 / 4)
    # given aggregation times replace Eq. 11 for that trainer only
    r = hp.predict([SIZES, SIZES], ["cpu", "accel"], DIMS, PLAT, "gcn",
                   agg_seconds={1: [9.0, 0.0]})
    assert r["trainers"][1]["t_aggregate"] == [9.0, 0.0]
    assert r["trainers"][1]["agg_from"] == "given" and r["trainers"][0]["agg_from"] == "eq11"
    with pytest.raises(UserError):
        hp.predict([SIZES], ["cpu", "accel"], DIMS, PLAT)


def test_sage_doubles_update_width():
    g = hp.predict([SIZES], ["cpu"], DIMS, PLAT, "gcn")["trainers"][0]["t_update"]
    s = hp.predict([SIZES], ["cpu"], DIMS, PLAT, "sage")["trainers"][0]["t_update"]
    assert s == pytest.approx([2 * x for x in g])


def test_analytic_sizes_by_hand():
    # 100 nodes, mean degree 5, fanouts (input first) [3, 10], 4 targets
    s = hp.analytic_sizes(100, 4, [3, 10], mean_degree=5.0)
    assert s.V[2] == 4
    assert s.E[1] == pytest.approx(4 * 5)                  # min(10, 5) neighbours each
    v1 = 4 + 96 * (1 - math.exp(-20 / 100))
    assert s.V[1] == pytest.approx(v1)
    assert s.E[0] == pytest.approx(v1 * 3)                 # min(3, 5)
    assert s.V[0] == pytest.approx(v1 + (100 - v1) * (1 - math.exp(-3 * v1 / 100)))
    # with a degree array: targets uniform, lower layers degree-weighted
    deg = np.array([1, 1, 2, 8])
    t = hp.analytic_sizes(4, 2, [2, 4], degrees=deg)
    assert t.E[1] == pytest.approx(2 * np.mean([1, 1, 2, 4]))
    w = (np.array([1, 1, 2, 2]) * deg).sum() / deg.sum()
    assert t.E[0] == pytest.approx(t.V[1] * w)
    with pytest.raises(UserError):
        hp.analytic_sizes(10, 2, [2])


def test_processor_sharing_by_hand():
    # one core, threads of 1 s and 2 s: both at half speed until t = 2, then the second alone
    spans = hsh.processor_sharing([[1.0], [2.0]], 1.0)
    assert spans[0][0] == pytest.approx((0.0, 2.0, 2.0))
    assert spans[1][0] == pytest.approx((0.0, 3.0, 2.0))
    # two cores: no slow-down; segments in sequence (the third number: seconds shared)
    spans = hsh.processor_sharing([[1.0, 0.5], [2.0]], 2.0)
    assert spans[0][0] == pytest.approx((0.0, 1.0, 1.0))
    assert spans[0][1] == pytest.approx((1.0, 1.5, 0.5))
    assert spans[1][0] == pytest.approx((0.0, 2.0, 1.5))
    # a zero-length segment
    spans = hsh.processor_sharing([[0.0, 1.0]], 1.0)
    assert spans[0][0] == pytest.approx((0.0, 0.0, 0.0))
    assert spans[0][1] == pytest.approx((0.0, 1.0, 0.0))
    # measured speeds per mix: A at half speed beside T, T at full speed
    speeds = {"A": {"AT": 0.5}, "T": {"AT": 1.0}}
    log = []
    spans = hsh.processor_sharing([[1.0], [1.0]], 1.0, ["A", "T"], speeds, log)
    assert spans[1][0] == pytest.approx((0.0, 1.0, 1.0))
    assert spans[0][0] == pytest.approx((0.0, 1.5, 1.0))       # 0.5 done by t = 1, then alone
    assert log[0][0] == pytest.approx({"AT": 1.0, "A": 0.5}) and log[1][0] == {"AT": 1.0}
    assert hsh.mix_rate("A", "TA", 1.0, speeds) == 0.5           # mix order does not matter
    assert hsh.mix_rate("A", "AAT", 1.5, speeds) == 0.5          # unmeasured: fair share
    assert hsh.mix_rate("T", "T", 0.1, speeds) == 1.0


def test_host_replay_queues_the_trainers_on_shared_stage_a_workers():
    """Two CPU trainers, ample cores (every worker at full speed): one stage-A worker each
    runs their sampling, loading and copy side by side; one shared worker runs them one after
    the other (trainer 0's first), two shared workers side by side again. Each stage keeps its
    own length (the stage times), the replay's wall is what changes."""
    pred = {"kinds": ["cpu", "cpu"], "trainers": [{}, {}], "t_samp": [1.0, 2.0], "T_sync": 0.0}
    pipe = {"A": [1.5, 2.5], "B": [0.25, 0.25], "T": [1.0, 1.0]}
    walls = {}
    for w in (None, 1, 2):
        r = hsh.host_shared(pred, pipe, cores=8.0, stage_a_workers=w)
        assert r["stage_s"]["T_SC"] == pytest.approx(3.0)
        assert r["stage_s"]["T_Load"] == pytest.approx(1.0)
        walls[w] = r["wall_s"]
    assert walls[None] == pytest.approx(2.75) and walls[2] == pytest.approx(2.75)
    assert walls[1] == pytest.approx(1.75 + 2.75)


def test_expected_max():
    assert hsh.expected_max([(2.0, 0.0), (3.0, 0.0)]) == {"median": 3.0, "mean": 3.0}
    one = hsh.expected_max([(2.0, 0.2)])
    assert one["mean"] == pytest.approx(2.0, rel=0.02)          # log-normal of mean 2
    two = hsh.expected_max([(2.0, 0.2), (2.0, 0.2)])
    assert two["median"] > 2.0 and two["mean"] > one["mean"]
    assert hsh.expected_max([(2.0, 0.2)]) == one                 # a fixed seed


def test_split_sizes_match_the_trainer():
    kinds = ["cpu", "cpu", "accel"]
    for batch, share in ((1024, 0.3), (17, 0.5), (100, 0.9)):
        sp = _Splitter([np.arange(batch)], kinds,
                       lambda k, i, s=share: s / 2 if k != "accel" else 1 - s)
        assert hsplit.split_sizes(batch, kinds, share) == [p.size for p in sp.parts(0)]


def test_u250_preset_from_the_paper():
    u = hp.u250_platform()
    assert u.accel_agg_bw == 77e9 and u.accel_macs == 2048 * 300e6
    assert u.bw_ddr == 2 * 205e9 and u.cpu_macs == 2 * 3.6e12 / 2
    assert u.combine_accel == "max" and u.combine_cpu == "sum"
    assert "ASSUMED" in u.sources["bw_pcie"]
    assert u.sampling == {}                       # no calibration: no sampling term
    rows = hpaper.paper_predictions(u, hidden_sizes=(256,), models=("gcn",))
    assert {r["dataset"] for r in rows} == set(hpaper.PAPER_DATASETS)
    for r in rows:
        assert r["T_execution"] > 0 and r["epoch_s"] > 0 and r["T_samp"] == 0.0
    prod = [r for r in rows if r["dataset"] == "ogbn-products" and r["split"] == "even"][0]
    assert prod["paper_epoch_s"] == 0.27 and prod["parts"] == [1024] * 5
    best = [r for r in rows if r["dataset"] == "ogbn-products" and r["split"] == "eq6"][0]
    assert best["T_execution"] <= prod["T_execution"] + 1e-12
    # with a calibration: sampling per sampled edge, even where the targets fitted better here
    fits = {"edges": {"intercept_s": 0.002, "slope_s": 4e-7, "rel_rms": 0.2},
            "targets": {"intercept_s": 0.003, "slope_s": 7e-6, "rel_rms": 0.1}}
    u = hp.u250_platform({"sampling": {"basis": "targets", "fits": fits}}, sampler_threads=32)
    assert u.sampling == dict(fits["edges"], basis="edges")
    sizes = hp.BatchSizes(V=[3000.0, 1100.0, 100.0], E=[2500.0, 1000.0])
    assert u.t_samp(sizes) == pytest.approx(0.002 + 4e-7 * sizes.edges)


@pytest.fixture(scope="module")
def small():
    d = sbm(n_nodes=300, n_classes=3, seed=2)
    return dataclasses.replace(d, train_mask=(d.labels >= 0) & ~d.val_mask & ~d.test_mask)


@pytest.fixture(scope="module")
def cal(small):
    return hcal.calibrate(small, [5, 3], "sage", 16, batch_sizes=(16, 48), repeats=2,
                        trainer_steps=1)


def test_calibration_is_positive_and_finite(cal):
    import json
    json.dumps(cal)                                           # JSON-able
    for k in ("bw_ddr", "bw_pcie", "cpu_macs", "cpu_agg_bw", "cores_effective", "sync_s"):
        assert math.isfinite(cal[k]) and cal[k] > 0, k
    inter = cal["interference"]
    assert set(inter["speeds"]["A"]) == {"AA", "AT", "AAT"} and set(inter["speeds"]["T"]) == {
        "AT", "AAT"}
    assert all(v > 0 for c in inter["speeds"].values() for v in c.values())
    assert set(inter["cv"]["A"]) == {"A", "AA", "AT", "AAT"}
    assert all(v >= 0 for c in inter["cv"].values() for v in c.values())
    s = cal["sampling"]
    assert s["basis"] in s["fits"] and len(s["points"]) == 4
    assert all(p["seconds"] > 0 and p["edges"] > 0 for p in s["points"])
    a = cal["accel"]
    assert a["nominal_bw"] == a["lanes"] * 4 * a["clock_mhz"] * 1e6
    assert math.isfinite(a["cycle_model_bw"]) and a["cycle_model_bw"] > 0
    for kind in ("cpu", "accel"):
        f = cal["trainer_overhead"][kind]
        assert min(f["a_s"], f["per_element_s"], f["per_edge_s"]) >= 0
    plat = hp.local_platform(cal)
    assert plat.combine_accel == "sum" and plat.accel_macs == cal["cpu_macs"]


def test_interference_runs_the_process_classes_in_forked_processes(tmp_path):
    """Stage-A units in forked processes (the trainer's default): each A worker of a mix is a
    process of its own (its pid differs from this one), the T workers are threads here; a unit
    that fails is reported, not waited for."""
    import os
    me = os.getpid()

    def a():
        (tmp_path / f"A-{os.getpid()}").touch()
        sum(range(3000))

    def t():
        (tmp_path / f"T-{os.getpid()}").touch()
        sum(range(3000))
    r = hcal.interference({"A": a, "T": t}, window_s=0.05, alone_reps=2, processes="A")
    pids = {p.name.split("-")[0]: set() for p in tmp_path.iterdir()}
    for p in tmp_path.iterdir():
        kind, pid = p.name.split("-")
        pids[kind].add(int(pid))
    # alone in this process; in the mixes AA, AT, AAT: five forked processes
    assert pids["T"] == {me} and me in pids["A"] and len(pids["A"] - {me}) == 5
    assert r["processes"] == "A" and set(r["speeds"]["A"]) == {"AA", "AT", "AAT"}
    assert all(v > 0 for c in r["speeds"].values() for v in c.values())

    calls = []

    def breaks():
        calls.append(1)
        if len(calls) > 3:
            raise ValueError("unit broke")
    with pytest.raises(RuntimeError, match="class A failed in mix AA: ValueError: unit broke"):
        hcal.interference({"A": breaks}, window_s=0.05, alone_reps=2)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="binding to cores needs Linux and two cores")
def test_interference_binds_the_mixes_as_the_training_run_does(tmp_path):
    """``pin``: in a mix where the forked workers leave the trainers a core (AT on two cores)
    the stage-A process runs on the last core and the trainer's thread (and stage B beside it)
    on the others, as ``StageAProcesses(pin=True)`` binds them; in the mixes with as many
    workers as cores (AA, AAT on two) and alone nothing is bound."""
    import threading
    cores = sorted(os.sched_getaffinity(0))
    n = len(cores)

    def unit(kind):
        def run():
            here = "_".join(map(str, sorted(os.sched_getaffinity(0))))
            (tmp_path / f"{kind}-{os.getpid()}-{threading.get_native_id()}-{here}").touch()
            sum(range(2000))
        return run
    beside = []
    r = hcal.interference({"A": unit("A"), "T": unit("T")}, window_s=0.05, alone_reps=2,
                        processes="A", pin=True,
                        beside_t=lambda: beside.append(sorted(os.sched_getaffinity(0))))
    seen = {}
    for p in tmp_path.iterdir():
        kind, pid, tid, here = p.name.split("-")
        seen.setdefault(kind, set()).add((int(pid), int(tid), here))
    def name(cs):
        return "_".join(map(str, cs))
    two = [[cores[-2]], [cores[-1]]] if n > 2 else [cores, cores]     # AA and AAT's workers
    want_a = two + [[cores[-1]]] + two                                # AA, AT, AAT
    want_t = [cores[:-1], cores[:-2] if n > 2 else cores]             # AT, AAT
    a = [here for pid, _, here in seen["A"] if pid != os.getpid()]
    t = [here for _, tid, here in seen["T"] if tid != threading.get_native_id()]
    assert sorted(a) == sorted(map(name, want_a))
    assert sorted(t) == sorted(map(name, want_t)) and r["pinned"] is True
    assert cores[:-1] in beside                     # stage B beside the trainer in AT


def test_interference_runs_stage_b_beside_the_trainer_in_its_mixes():
    """``beside_t``: a thread of the trainer's process runs stage B's unit about once per trainer
    step (alone time) in every mix with a trainer, never without one, and ends with the mix."""
    import threading
    calls = []

    def a():
        time.sleep(0.002)

    def t():
        time.sleep(0.004)
    r = hcal.interference({"A": a, "T": t}, window_s=0.2, alone_reps=2,
                        beside_t=lambda: calls.append(threading.current_thread().name))
    # AT and AAT: about one transfer per 4 ms trainer step in each 0.2 s window
    assert 0.5 * 2 * 0.2 / 0.004 <= len(calls) <= 1.5 * 2 * 0.2 / 0.004
    assert set(calls) == {"moagcn-calibration-stage-b"} and r["stage_b_beside"] is True
    assert not [th for th in threading.enumerate() if th.name == "moagcn-calibration-stage-b"]
    calls.clear()
    r = hcal.interference({"A": a}, window_s=0.05, alone_reps=2, beside_t=lambda: calls.append(1))
    assert calls == [] and set(r["speeds"]["A"]) == {"AA"}


def test_predict_on_a_small_graph(small, cal):
    ids = np.nonzero(small.train_mask)[0]
    s = hp.sampled_sizes(small.graph, [5, 3], 20, ids, samples=2)
    assert s.V[2] == 20 and s.V[0] >= s.V[1] >= s.V[2] and s.E[1] <= 20 * 3
    cfg = HybridConfig(model="sage", hidden=16, fanouts="5,3", batch=40, cpu_share=0.4,
                       drm=False)
    r = hsplit.predict_run(small, cfg, cal, samples=2)
    full = r["batches"][0]
    assert full["parts"] == hsplit.split_sizes(40, ["cpu", "accel"], 0.4)
    for name in ("eq11", "cycles"):
        v = full["variants"][name]
        e6 = v["eq6"]
        assert e6["T_execution"] == max(e6["T_samp"], e6["T_load"], e6["T_trans"], e6["T_prop"])
        assert e6["MTEPS"] == pytest.approx(e6["edges"] / e6["T_execution"] / 1e6)
        assert v["pipeline"]["iteration_s"] >= e6["T_sync"]
        h = v["host"]
        assert h["iteration_s"] > 0
        # the median of the slowest stage bounds the median of the max from below: a
        # log-normal stage of mean t and spread cv has median t / sqrt(1 + cv^2) (the spreads
        # come from the calibration's measurements, large on a loaded machine)
        cv = max([0.0, *h["stage_cv"]["A"], *h["stage_cv"]["T"]])
        floor = (h["iteration_s"] - e6["T_sync"]) / math.sqrt(1 + cv * cv) + e6["T_sync"]
        assert h["iteration_median_s"] >= 0.99 * floor and h["iteration_mean_s"] > 0
    # the cycle-model variant's accelerator aggregation is the device's figure
    assert full["variants"]["cycles"]["eq6"]["trainers"][1]["agg_from"] == "given"
    assert all(math.isfinite(x) and x > 0 for x in r["epoch_s"].values())
    assert r["iterations_per_epoch"] == -(-ids.size // 40)


def test_prediction_names_every_stage_a_run_measures(small, cal):
    """The benchmark's table compares each stage ``train_hybrid`` measures with the model's
    figure: every measured stage has one (G_C and G_A, the groups' own iteration times, too)."""
    from moagcn.host.hyscale.train import train_hybrid
    cfg = HybridConfig(model="sage", hidden=16, fanouts="5,3", batch=40, cpu_share=0.7,
                       drm=False, epochs=1)
    runs = [train_hybrid(small, cfg) for _ in range(3)]
    measured = hbench.measured_runs(runs)
    one = [hbench.measured_summary(r) for r in runs]
    assert measured["runs"] == 3
    for k in ("iteration_s", "epoch_s"):
        assert measured[f"{k}_range"] == [min(x[k] for x in one), max(x[k] for x in one)]
        assert measured[k] == sorted(x[k] for x in one)[1]
    pred = hsplit.predict_run(small, cfg, cal, samples=2)
    res = {"prediction": pred, "prediction_no_prefetch": pred,
           "measured": {"prefetch": measured, "no_prefetch": measured}}
    rows = hbench._table(res)
    for view in ("pipeline", "host"):
        v = pred["batches"][0]["variants"]["cycles"][view]
        assert set(measured["stage_s"]) <= set(v["stage_s"]), view
        # a group's share of the iteration is its slowest trainer's slowest stage
        assert v["stage_s"]["G_C"] <= v["iteration_s"] and v["stage_s"]["G_A"] > 0
        assert max(v["stage_s"]["G_C"], v["stage_s"]["G_A"]) + pred["batches"][0][
            "variants"]["cycles"]["eq6"]["T_sync"] == pytest.approx(v["iteration_s"])
    assert {k for _, k, _, _ in rows} >= set(measured["stage_s"])


def test_the_load_is_timed_on_every_calibration_batch_as_stage_a_makes_it(small, cal):
    # BW_DDR comes from the load right after each batch is sampled (the rows are not in the
    # cache then), with stage A's own gather: numpy in processes (the default), torch in
    # threads; one timed load per sampled batch, of that batch's input rows
    thread = hcal.calibrate(small, [5, 3], "sage", 16, batch_sizes=(16, 48), repeats=2,
                          trainer_steps=0, stage_a="thread")
    for c in (cal, thread):
        points = c["sampling"]["points"]
        assert len(c["gathers"]) == len(points)
        for (nbytes, seconds), p in zip(c["gathers"], points):
            assert nbytes == p["V"][0] * small.n_features * hm.S_FEAT and seconds > 0
        assert c["bw_ddr"] == pytest.approx(sum(b for b, _ in c["gathers"])
                                            / sum(t for _, t in c["gathers"]))


def _pred(pf_epoch, nopf_epoch):
    """A stand-in for one calibration's predictions: only the headline epochs are read."""
    return {True: {"epoch_s": {"cycles/host": pf_epoch}},
            False: {"epoch_s": {"cycles/pipeline": nopf_epoch}}}


def test_bracketed_judges_each_round_against_the_calibrations_on_either_side():
    # four calibrations around three rounds; hand-computed means, errors and medians
    cals = [(None, None, _pred(p, q)) for p, q in ((1.0, 2.0), (3.0, 4.0), (2.0, 2.0),
                                                   (4.0, 6.0))]
    measured = {"prefetch": {"per_run": [{"epoch_s": 2.0}, {"epoch_s": 2.0}, {"epoch_s": 4.0}]},
                "no_prefetch": {"per_run": [{"epoch_s": 3.0}, {"epoch_s": 3.0},
                                            {"epoch_s": 3.0}]}}
    b = hbench.bracketed(cals, measured)
    pf = b["prefetch"]
    assert [r["predicted_epoch_s"] for r in pf["rounds"]] == [2.0, 2.5, 3.0]
    assert [r["before_s"] for r in pf["rounds"]] == [1.0, 3.0, 2.0]
    assert [r["after_s"] for r in pf["rounds"]] == [3.0, 2.0, 4.0]
    assert [r["epoch_error"] for r in pf["rounds"]] == pytest.approx([0.0, 0.25, -0.25])
    assert pf["within_15"] == 1
    assert pf["epoch_s"] == 2.5 and pf["measured_epoch_s"] == 2.0
    assert pf["epoch_error"] == pytest.approx(0.25)
    assert pf["pooled_epoch_s"] == 2.5 and pf["pooled_error"] == pytest.approx(0.25)
    assert pf["variant"] == "cycles/host"
    nf = b["no_prefetch"]
    assert [r["predicted_epoch_s"] for r in nf["rounds"]] == [3.0, 3.0, 4.0]
    assert nf["within_15"] == 2 and nf["epoch_s"] == 3.0 and nf["epoch_error"] == 0.0
    assert nf["calibrations_epoch_s"] == [2.0, 4.0, 2.0, 6.0] and nf["pooled_epoch_s"] == 3.0


def test_stage_a_unit_samples_a_new_batch_each_time_and_packs_it_in_a_process(small, monkeypatch):
    # the interference unit of a stage-A process: a new salt per call, the batch prepared,
    # loaded with numpy alone and packed (what the process sends back); in threads not
    from moagcn.host.graphs.minibatch import NeighborSampler
    from moagcn.host.hyscale.stage_a import FeatureLoader
    from moagcn.host.parallel import ipc
    seen = []

    class Recorder(NeighborSampler):
        def sample(self, targets, salt=None):
            seen.append(salt)
            return super().sample(targets, salt)

    class Loads(FeatureLoader):
        def load(self, mb, labels=True, numpy=False):
            seen.append(("numpy", numpy))
            return super().load(mb, labels, numpy)
    ids = np.nonzero(small.train_mask)[0][:8]
    prepared = []
    dumps = []
    real = ipc.pack
    monkeypatch.setattr(ipc, "pack", lambda obj: dumps.append(obj) or real(obj))
    for process in (True, False):
        seen.clear()
        dumps.clear()
        unit = hcal._stage_a_unit(Recorder(small.graph, [3, 2]),
                                Loads(small.features, small.labels),
                                lambda mb: prepared.append(mb) or "ops", ids, process)
        unit()
        unit()
        salts = [s for s in seen if s[0] != "numpy"]
        assert len(salts) == 2 and salts[0] != salts[1]
        assert [s for s in seen if s[0] == "numpy"] == [("numpy", process)] * 2
        assert len(dumps) == (2 if process else 0)
        if process:
            mb, x, y, _, ops = dumps[0]
            assert isinstance(x, np.ndarray) and ops == "ops"
            assert x.shape == (mb.input_nodes.size, small.n_features)


def test_bench_calibrates_around_every_round_and_reports_each(tmp_path, capsys):
    # the whole bench on a small R-MAT graph: a calibration before the first round and after
    # each, every measured run judged against the two around it, the JSON and the verdicts
    import json
    rc = hbench.main(["--rmat-scale", "9", "--batch-size", "64", "--epochs", "1",
                      "--repeats", "1", "--measure-repeats", "2", "--samples", "1",
                      "--out", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "hyscale_model.json").read_text())
    for key in ("prefetch", "no_prefetch"):
        b = res["bracketed"][key]
        assert len(b["calibrations_epoch_s"]) == 3 and len(b["rounds"]) == 2
        runs = res["measured"][key]["per_run"]
        for k, r in enumerate(b["rounds"]):
            assert r["measured_epoch_s"] == runs[k]["epoch_s"]
            assert r["before_s"] == b["calibrations_epoch_s"][k] > 0
            assert r["after_s"] == b["calibrations_epoch_s"][k + 1] > 0
        # the first calibration is the one the stage-wise tables use
        assert b["calibrations_epoch_s"][0] == res["summary"][key]["epoch_s"]
    assert len(res["calibrations"]) == 3
    assert res["calibrations"][0]["cpu_macs"] == res["calibration"]["cpu_macs"]
    out = capsys.readouterr().out
    assert out.count("bracketed, ") == 2 and out.count("pooled, ") == 2
    # one verdict per variant, on the bracketed line
    assert out.count("target (epoch) <= 15 %") == 2
    assert out.count("the verdict is the bracketed line") == 2
    # calibrated where the trainers work: every part of the full batch, and half the smaller
    parts = res["prediction"]["batches"][0]["parts"]
    assert set(parts) | {min(parts) // 2} <= set(res["calibration"]["batch_sizes"])


def test_calibration_sizes_cover_the_run_s_parts():
    # 64 targets at CPU share 0.3: the CPU trainer floor(0.3 * 64) = 19, the accelerator 45
    cfg = HybridConfig(batch=64, cpu_share=0.3, trainers="cpu:1,accel:1")
    assert hsplit.calibration_sizes(cfg, 4000) == [9, 19, 45, 128, 256, 512, 1024]
    # the default run at an even split needs nothing more than the defaults
    cfg = HybridConfig(batch=1024, cpu_share=0.5, trainers="cpu:1,accel:1")
    assert hsplit.calibration_sizes(cfg, 4000) == [128, 256, 512, 1024]
    # a training set smaller than the batch: its one batch is what is split (30 / 70)
    cfg = HybridConfig(batch=1024, cpu_share=0.3, trainers="cpu:1,accel:1")
    assert hsplit.calibration_sizes(cfg, 100) == [15, 30, 70, 128, 256, 512, 1024]


def test_predictions_share_the_run_s_sampling_across_calibrations(small, cal):
    # what depends on the run alone (sampled sizes, the cycle model's seconds) is kept in the
    # memo: a second prediction from it, and one with a prefetching change, equal fresh ones
    cfg = HybridConfig(model="sage", hidden=16, fanouts="5,3", batch=40, cpu_share=0.4,
                       drm=False)
    memo = {}
    first = hsplit.predict_run(small, cfg, cal, samples=2, memo=memo)
    parts = {p for b in first["batches"] for p in b["parts"]}
    assert {k[0] for k in memo} == parts
    # the accelerator's aggregation is the cycle model's, kept per part
    for b in first["batches"]:
        i = first["kinds"].index("accel")
        kept = memo[(b["parts"][i], i, True)][1]
        assert kept and min(kept) > 0
        assert b["variants"]["cycles"]["eq6"]["trainers"][i]["t_aggregate"] == kept
    again = hsplit.predict_run(small, cfg, cal, samples=2, memo=memo)
    assert again == first == hsplit.predict_run(small, cfg, cal, samples=2)
    nopf = dataclasses.replace(cfg, prefetch=False)
    assert hsplit.predict_run(small, nopf, cal, samples=2, memo=memo) == \
        hsplit.predict_run(small, nopf, cal, samples=2)


def test_model_split_gives_a_slow_accelerator_less_of_each_batch(small, cal):
    """The design-time mapping: an epoch predicted at every share of the grid, the shortest
    taken. Where one group's time dominates, the split leaves it the least the grid allows:
    an accelerator so slow that its cycles dominate (10 kHz) gets the smallest part of each
    batch; a CPU whose measured rates were ten thousand times lower (the same calibration
    with its CPU products slowed) a small part (its fitted fixed costs, which stay, decide
    how small). On this small job the two groups are otherwise close, and which of the
    middle shares wins follows the calibration's noise.
    One group alone has nothing to split."""
    from moagcn.host.hyscale.train import HybridConfig
    base = HybridConfig(model="sage", hidden=16, fanouts="5,3", batch=60, drm=False)
    slow_cpu = dict(cal, cpu_macs=cal["cpu_macs"] / 1e4, cpu_agg_bw=cal["cpu_agg_bw"] / 1e4)
    got = {}
    for name, mhz, c in (("slow accelerator", 0.01, cal), ("slow cpu", 200.0, slow_cpu)):
        cfg = dataclasses.replace(base, params={"clock_mhz": mhz})
        r = hsplit.model_split(small, cfg, cal=c)
        by = r["predicted_epoch_s_by_share"]
        assert sorted(by) == list(hsplit.SPLIT_SHARES) and r["variant"] == "cycles/host"
        assert by[r["cpu_share"]] == min(by.values()) == r["predicted_epoch_s"]
        got[name] = r["cpu_share"]
    assert got["slow accelerator"] == max(hsplit.SPLIT_SHARES)
    assert got["slow cpu"] <= 0.25
    nopf = hsplit.model_split(small, dataclasses.replace(base, prefetch=False), cal=cal)
    assert nopf["variant"] == "cycles/pipeline"
    alone = hsplit.model_split(small, dataclasses.replace(base, trainers="cpu:2"))
    assert alone["cpu_share"] == 1.0 and alone["predicted_epoch_s"] is None
