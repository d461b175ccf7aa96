"""The baseline accelerator models, the energy arithmetic, the CPU roofline and ``moagcn sspmm
compare`` (counts derived by hand on tiny graphs; no wall-clock assertions)."""

import json
import math

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.hw.sspmm.config import PRESETS
from moagcn.sim.baselines import accelerators as b
from moagcn.sim.baselines import cpu as cpu_baseline
from moagcn.sim.baselines import energy

# row 0 -> {1, 3}, row 1 -> {0}, row 2 -> {}, row 3 -> {3, 3, 1}: 6 entries, 3 rows with work
TINY = (np.array([0, 2, 3, 3, 6]), np.array([1, 3, 0, 3, 3, 1]))
# 4 GB/s: 4 bytes per cycle at 1 GHz; buffers far larger than the graph (one tile)
TINY_MEM = b.MemorySystem(feature_buffer_bytes=1 << 20, output_buffer_bytes=1 << 20,
                          index_buffer_bytes=1 << 20, hbm_gb_per_s=4.0)


def test_hygcn_tiny_graph_by_hand():
    # F = 2 on SIMD2 cores: a vertex group is one core of 2 lanes, 4 lanes -> 2 groups
    cfg = b.HyGCNConfig(units=4, simd_width=2, pipeline=0, memory=TINY_MEM)
    r = b.hygcn(*TINY, 2, cfg)
    # one window: slides to source 0, shrinks to source 3 -> 4 rows of 8 B
    assert r["windows"] == 1 and r["feature_hbm_bytes"] == 4 * 8
    # loads: features 32 + 6 indices x 4 + 5 row pointers x 4 = 76; outputs 3 rows x 8 = 24
    assert r["hbm_bytes"] == 76 + 24
    # compute: max(ceil(6 edges / 2 groups), longest vertex 3) = 3 cycles
    assert r["cycles_compute"] == 3
    # timeline at 4 B/cycle: load 76 / 4 = 19, compute 3, write-back 24 / 4 = 6
    assert r["cycles"] == 19 + 3 + 6 and r["time_s"] == pytest.approx(28e-9)
    assert r["adds"] == 6 * 2 and r["mults"] == 0
    assert r["utilization_total"] == pytest.approx(12 / (4 * 28))
    # SRAM reads: 6 x (8 B features + 4 B index) + 20 B pointers + 24 B write-back
    assert r["sram_read_bytes"] == 72 + 20 + 24
    # writes: the 76 B loaded + one partial-sum row per (vertex, window): 3 x 8
    assert r["sram_write_bytes"] == 76 + 24


def test_awbgcn_tiny_graph_by_hand():
    cfg = b.AWBGCNConfig(pes=2, smoothing_hops=1, tune_rounds=1, pipeline=0, memory=TINY_MEM)
    t = b.awbgcn_tile(np.diff(TINY[0]), 2, cfg)
    # rows dealt round-robin: PE0 rows 0, 2 (2 entries), PE1 rows 1, 3 (1 + 3 = 4)
    assert t["base"] == 4
    # smoothing over 1 hop: the two PEs share 6 entries -> 3 per round
    assert t["smoothed"] == 3
    # tuned: LPT of rows 3, 2, 1 over 2 PEs -> {3}, {2, 1} -> 3; no row above ceil(6/2) = 3
    assert t["tuned"] == 3 and t["merge_adds"] == 0
    assert t["cycles"] == 3 + 3                       # 2 rounds (F = 2)
    r = b.awbgcn(*TINY, 2, cfg)
    # loads: 6 entries x 8 B + 5 pointers x 4 B + 3 distinct sources x 8 B = 92; outputs 24
    assert r["hbm_bytes"] == 92 + 24
    bpc = 4e9 / 330e6
    assert r["cycles"] == math.ceil(92 / bpc + 6 + 24 / bpc)
    assert r["adds"] == 12 and r["mults"] == 12
    # SRAM reads: 2 rounds x (6 x 8 B + 3 x 4 B) + 20 B pointers + 24 B write-back
    assert r["sram_read_bytes"] == 2 * (48 + 12) + 20 + 24
    assert r["sram_write_bytes"] == 92 + 24


def hub_graph(n=256, hub=2000, others=4, seed=0, hub_row=32):
    rng = np.random.default_rng(seed)
    deg = np.full(n, others)
    deg[hub_row] = hub
    indptr = np.concatenate([[0], np.cumsum(deg)])
    return indptr, rng.integers(0, n, int(indptr[-1]))


def test_awbgcn_rebalancing_reduces_cycles_on_a_hub_row():
    indptr, indices = hub_graph()
    mem = b.MemorySystem(hbm_gb_per_s=1024.0)

    def run(**kw):
        return b.awbgcn(indptr, indices, 16, b.AWBGCNConfig(pes=64, memory=mem, **kw))

    none = run(smoothing_hops=0, remote_switching=False, evil_rows=False)
    smooth = run(remote_switching=False, evil_rows=False)
    full = run()
    # without rebalancing a round lasts the hub's PE (32): rows 32, 96, 160, 224 = 2000 + 3 x 4
    assert none["cycles_compute"] == 16 * (2000 + 3 * 4) + 8
    # smoothing spreads the hub's PE over 2 neighbours each side (fluid sharing, the
    # neighbours' own work moving outwards in turn): ceil(2012 / 5) per round
    assert smooth["cycles_compute"] == 16 * math.ceil(2012 / 5) + 8
    # evil-row remapping splits the hub into pieces of the ideal load ceil(3020 / 64) = 48
    assert full["cycles_compute"] < smooth["cycles_compute"] / 3
    assert full["merge_adds"] > 0 and full["adds"] == full["mults"] + full["merge_adds"]
    assert none["cycles_compute_unbalanced"] == 16 * (2000 + 3 * 4)
    assert full["utilization_total"] > smooth["utilization_total"] > none["utilization_total"]


def test_smoothed_max_single_overloaded_pe():
    loads = np.array([0, 0, 10, 0, 0])
    assert b.smoothed_max(loads, 0) == 10
    assert b.smoothed_max(loads, 1) == 4              # ceil(10 / 3)
    assert b.smoothed_max(loads, 2) == 2              # 10 / 5
    assert b.smoothed_max(np.array([6, 0]), 1) == 3   # an edge PE shares with one neighbour


def test_hygcn_window_shrinking_loads_fewer_rows():
    # F = 4 (16 B rows); a 32,000 B feature buffer: windows of 32000 / 16 / 2 = 1000 rows
    n, sources = 3000, [10, 900, 1500, 2999]
    assert b.hygcn_windows(sources, 1000, n, "slide_shrink")[1].tolist() == [891, 1, 1]
    assert b.hygcn_windows(sources, 1000, n, "slide")[1].tolist() == [1000, 1000, 1]
    assert b.hygcn_windows(sources, 1000, n, "fixed")[1].tolist() == [1000, 1000, 1000]
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = len(sources)                         # row 0 holds every entry
    mem = b.MemorySystem(feature_buffer_bytes=32000, hbm_gb_per_s=1024.0)
    loaded = {w: b.hygcn(indptr, np.array(sources), 4,
                         b.HyGCNConfig(window=w, memory=mem))["feature_hbm_bytes"]
              for w in b.WINDOWS}
    assert loaded == {"slide_shrink": 16 * 893, "slide": 16 * 2001, "fixed": 16 * 3000}


def test_spu_counters_against_an_independent_count():
    indptr, indices = hub_graph(n=300, hub=600, others=5)
    rng = np.random.default_rng(1)
    unmasked = rng.binomial(128, 0.5, 300)
    cfg = PRESETS["paper"]
    r = b.spu(indptr, indices, 128, unmasked, cfg)
    deg = np.diff(indptr)
    assert r["adds"] == int(np.dot(deg, unmasked))
    # one group of W = 32: every entry fetches its row once per 32 unmasked features
    fetches = int(np.dot(deg, -(-unmasked // 32)))
    assert r["rows_fetched"] == fetches
    # one tile: reads = fetches x (512 B row + 4 B index) + per row (pointer + 16 B mask)
    # + write-back of the unmasked outputs
    out = 4 * int(unmasked.sum())
    assert r["sram_read_bytes"] == fetches * 516 + 300 * (4 + 16) + out
    assert r["sram_write_bytes"] == r["hbm_bytes"] - out + out
    # a narrower port (32 words per fetch) reads less
    assert r["sram_read_bytes_pass_words"] == fetches * (128 + 4) + 300 * 20 + out


def test_energy_arithmetic():
    m = energy.EnergyModel("t", add_pj=1.0, mul_pj=2.0, sram_read_pj_per_byte=3.0,
                           sram_write_pj_per_byte=4.0, hbm_pj_per_bit=5.0)
    e = energy.energy({"adds": 1e12, "mults": 1e12, "sram_read_bytes": 1e12,
                       "sram_write_bytes": 1e12, "hbm_bytes": 1e12}, m)
    assert e["compute_j"] == pytest.approx(3.0) and e["sram_j"] == pytest.approx(7.0)
    assert e["hbm_j"] == pytest.approx(40.0) and e["energy_j"] == pytest.approx(50.0)
    assert energy.energy({"adds": 10, "hbm_bytes": None}, m)["energy_j"] == pytest.approx(1e-11)
    with pytest.raises(ValueError):
        energy.energy({"adds": -1}, m)
    t = energy.TECH_28NM
    assert t.add_pj == pytest.approx(0.9 * 28 / 45) and t.mul_pj == pytest.approx(3.7 * 28 / 45)
    assert t.sram_read_pj_per_byte == pytest.approx(10 / 8 * 28 / 45)
    assert t.hbm_pj_per_bit == 3.9
    assert energy.average_power(2.0, 0.5) == 4.0 and energy.average_power(1.0, 0) is None


def test_cpu_roofline_formula():
    s = cpu_baseline.ServerCpu("t", sockets=1, cores_per_socket=2, clock_ghz=1.0,
                               adds_per_cycle=4, mem_gb_per_s=1.0, llc_mb=1.0, tdp_w=10.0)
    # fits the cache: 8 nnz + 8 (n+1) + 4 n F output + 4 n F features
    r = cpu_baseline.roofline(100, 1000, 8, server=s)
    bytes_ = 8 * 1000 + 8 * 101 + 4 * 100 * 8 * 2
    assert r["dram_bytes"] == bytes_ and r["llc_miss_fraction"] == 0
    assert r["time_memory_s"] == pytest.approx(bytes_ / 1e9)
    assert r["time_compute_s"] == pytest.approx(8000 / 8e9)
    assert r["time_s"] == pytest.approx(max(bytes_ / 1e9, 1e-6))
    assert r["energy_j"] == pytest.approx(10.0 * r["time_s"])
    # features of 2 MB against a 1 MB cache: half of the gathers miss
    big = cpu_baseline.roofline(62500, 1000, 8, server=s)
    assert big["llc_miss_fraction"] == pytest.approx(0.5)


def test_cpu_measure_runs_on_one_thread():
    m = cpu_baseline.measure(*TINY, 4, repeats=1, threads=1)
    assert m["threads"] == 1 and m["threads_used"] == 1 and m["adds"] == 24
    assert m["time_s"] == m["time_s_1thread"] and m["energy_j"] >= 0


def test_compare_cli_table_and_report(tmp_path, capsys):
    indptr, indices = hub_graph(n=400, hub=300, others=6)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    rc = main(["sspmm", "compare", "--graph", str(tmp_path / "g.npz"), "--width", "64",
               "--mask-density", "0.5", "--repeats", "1", "--threads", "1", "--quiet",
               "--report", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    assert rc == 0
    out = capsys.readouterr().out
    rep = json.loads((tmp_path / "r.json").read_text())
    names = [r["system"] for r in rep["rows"]]
    assert names == ["spu", "hygcn", "awbgcn", "cpu", "cpu-roofline"]
    for r in rep["rows"]:
        assert r["system"] in out
        for k in ("time_s", "energy_j", "speedup_vs_cpu", "speedup_vs_server", "spu_speedup",
                  "spu_energy_gain"):
            assert r[k] is not None and r[k] > 0, (r["system"], k)
    by = {r["system"]: r for r in rep["rows"]}
    assert by["spu"]["spu_speedup"] == 1.0 and by["cpu"]["speedup_vs_cpu"] == 1.0
    assert by["hygcn"]["spu_speedup"] == pytest.approx(by["hygcn"]["time_s"] /
                                                      by["spu"]["time_s"])
    # the baselines cannot skip masked outputs; the SPU does about half the adds
    assert by["hygcn"]["adds"] == int(indptr[-1]) * 64
    assert by["spu"]["adds"] < 0.6 * by["hygcn"]["adds"]
    assert (tmp_path / "p.png").stat().st_size > 0


@pytest.mark.parametrize("argv, message", [
    (["--systems", "spu,tpu"], "unknown system tpu"),
    (["--graph", "MISSING"], "no such file"),
    (["--preset", "default"], "needs an SPU configuration with HBM"),
    (["--repeats", "0"], "--repeats 0"),
])
def test_compare_cli_bad_input_is_one_line(tmp_path, capsys, argv, message):
    indptr, indices = TINY
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    args = {"--graph": str(tmp_path / "g.npz"), "--width": "8",
            "--report": str(tmp_path / "r.json")}
    for i in range(0, len(argv), 2):
        args[argv[i]] = argv[i + 1].replace("MISSING", str(tmp_path / "missing.npz"))
    rc = main(["sspmm", "compare", *[x for kv in args.items() for x in kv]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "r.json").exists()


def test_parse_systems_keeps_the_table_order():
    assert b.parse_systems("cpu, SPU") == ["spu", "cpu"]
    with pytest.raises(b.UserError, match="unknown system"):
        b.parse_systems("")


def test_fig12_experiment_writes_its_tables(tmp_path, capsys):
    rc = main(["experiment", "fig12", "--datasets", "reddit,orkut", "--scale", "0.0004",
               "--repeats", "1", "--threads", "1", "--quiet", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "paper 1.32-1.80x" in out and "paper 1.05-1.66x" in out
    rows = (tmp_path / "fig12.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 5
    table3 = (tmp_path / "table3.md").read_text()
    assert "paper: Ours" in table3 and "7.6" in table3      # Table 3, Reddit, the SPU
    doc = json.loads((tmp_path / "fig12.json").read_text())
    assert set(doc["summary"]["per_dataset"]) == {"reddit", "orkut"}
    assert (tmp_path / "fig12.png").stat().st_size > 0
