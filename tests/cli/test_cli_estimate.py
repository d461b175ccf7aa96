"""`moagcn graph synth` and `moagcn sspmm estimate`: shapes, the HBM traffic of the 2-D tiling
against a plain loop, and one-line errors."""

import json

import numpy as np
import pytest

from .test_cli import moagcn


@pytest.fixture(scope="module")
def orkut_like(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    out = moagcn("graph", "synth", "--like", "orkut", "--scale", "0.002", "--seed", "3",
                 "--out", d / "g.npz", "--report", d / "g.json")
    assert out.returncode == 0, out.stderr
    return d


def test_graph_synth_has_the_dataset_shape(orkut_like):
    g = np.load(orkut_like / "g.npz")
    info = json.loads((orkut_like / "g.json").read_text())
    n = g["indptr"].size - 1
    assert n == round(3_072_441 * 0.002) and g["indices"].size == round(117_185_083 * 0.002)
    assert g["indptr"][-1] == g["indices"].size and g["indices"].max() < n
    deg = np.diff(g["indptr"])
    # skewed: hubs far above the median, most rows short
    assert deg.max() > 50 * np.median(deg) and np.median(deg) < deg.mean()
    assert info["max_degree"] == deg.max()


def hbm_reference(indptr, indices, width, unmasked, dst_rows, src_rows):
    """Bytes of the output-stationary 2-D tiling, entry by entry with Python sets."""
    n = len(indptr) - 1
    total = 0
    for r0 in range(0, n, dst_rows):
        r1 = min(n, r0 + dst_rows)
        per_src = {}
        for v in range(r0, r1):
            for u in indices[indptr[v]:indptr[v + 1]]:
                per_src.setdefault(int(u) // src_rows, []).append(int(u))
        for k, (src, cols) in enumerate(sorted(per_src.items())):
            total += 4 * (len(cols) + (r1 - r0 + 1)) + 4 * width * len(set(cols))
            if k == 0:
                total += -(-width // 8) * (r1 - r0)
        total += 4 * sum(int(unmasked[v]) for v in range(r0, r1) if indptr[v + 1] > indptr[v])
    return total


def test_estimate_tiles_through_hbm_as_documented(tmp_path):
    rng = np.random.default_rng(0)
    n, width = 700, 24
    deg = rng.integers(0, 12, n)
    deg[5] = 300
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, n, indptr[-1])
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    M = rng.random((n, width)) < 0.5
    np.save(tmp_path / "m.npy", M)
    # the paper's accelerator with small buffers: blocks of 16 x 128 / 24 = 85 destination
    # rows and 42 source rows (half the node buffer)
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", width,
                 "--mask", tmp_path / "m.npy", "--preset", "paper", "--param", "max_nodes=16",
                 "--param", "max_feature_width=128", "--report", tmp_path / "r.json", "--quiet")
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["destination_rows"] == 85 and r["source_rows"] == 42 and r["tiles"] > 20
    assert r["hbm_bytes"] == hbm_reference(indptr, indices, width, M.sum(1), 85, 42)
    assert r["work_adds"] == int(np.dot(deg, M.sum(1)))
    assert r["utilization_total"] == pytest.approx(r["work_adds"] / (16384 * r["cycles_total"]))
    assert r["utilization"] == pytest.approx(r["work_adds"] / (16384 * r["cycles_compute"]))
    assert r["bound"] in ("compute", "memory")
    assert r["cycles_total"] >= max(r["cycles_compute"], r["cycles_memory"])
    assert r["time_s"] == pytest.approx(r["cycles_total"] / 500e6)


def uniform_graph(path, n: int, max_degree: int, seed: int):
    """(indptr, indices) of ``n`` rows of 0 .. max_degree - 1 uniform random columns, saved as
    ``path``."""
    rng = np.random.default_rng(seed)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, max_degree, n))])
    indices = rng.integers(0, n, indptr[-1])
    np.savez(path, indptr=indptr, indices=indices)
    return indptr, indices


def test_estimate_of_a_job_that_fits_is_the_cycle_model(tmp_path):
    from moagcn.hw.sspmm import preset
    from moagcn.sim.sspmm.model import estimate
    width = 40
    indptr, indices = uniform_graph(tmp_path / "g.npz", 300, 9, seed=1)
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", width,
                 "--preset", "multi", "--report", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    # one cycle model: --closed-form, the flag of the second one (gone), only prints a notice
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", width,
                 "--preset", "multi", "--closed-form", "--report", tmp_path / "c.json")
    assert out.returncode == 0, out.stderr
    assert "--closed-form is ignored" in out.stderr
    c = estimate(indptr, None, width, preset("multi"))
    for tier in (r, json.loads((tmp_path / "c.json").read_text())):
        assert tier["model"] == "replay"
        assert tier["cycles_compute"] == c.cycles_compute and tier["tiles"] == 1
        assert tier["cycles_total"] == c.cycles_load + c.cycles_compute + c.cycles_output


def test_estimate_of_a_tiled_job_overlaps_loads_as_the_driver_runs_it(tmp_path):
    # a graph larger than the tiny preset's buffers: the driver's row tiles, back to back; with
    # two load banks each tile's loads beside the tile before, with one after it
    from moagcn.hw.sspmm import preset
    from moagcn.sim.driver import Driver
    from moagcn.sim.sspmm.spec import SPEC
    rng = np.random.default_rng(3)
    n, width = 900, 12
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 12, n))])
    indices = rng.integers(0, n, indptr[-1])
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    H = np.zeros((n, width), dtype=np.float32)
    reports = {}
    for banks in (1, 2):
        out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", width,
                     "--preset", "tiny", "--param", f"load_banks={banks}",
                     "--report", tmp_path / f"r{banks}.json")
        assert out.returncode == 0, out.stderr
        r = reports[banks] = json.loads((tmp_path / f"r{banks}.json").read_text())
        c = Driver(SPEC, preset("tiny", load_banks=banks), "model").run(
            SPEC.job(indptr, indices, H, None)).counters
        hidden = c.extra.get("cycles_load_hidden", 0)
        assert r["tiles"] == c.tiles > 2
        assert r["cycles_memory_hidden"] == hidden and (hidden > 0) == (banks == 2)
        assert r["cycles_memory"] == c.cycles_load + hidden
        assert r["cycles_total"] == c.cycles_load + c.cycles_compute + c.cycles_output
    assert reports[1]["cycles_memory"] == reports[2]["cycles_memory"]
    assert reports[1]["cycles_total"] - reports[2]["cycles_total"] == reports[2][
        "cycles_memory_hidden"]


@pytest.mark.parametrize("args,words", [
    (["--width", "0"], "--width 0"),
    (["--width", "300"], "max_feature_width"),
    (["--width", "8", "--param", "slices=0"], "slices=0"),
    (["--width", "8", "--param", "hbm_gb_per_s=-1", "--preset", "paper"], "hbm_gb_per_s"),
    (["--width", "8", "--mask-density", "1.5"], "--mask-density"),
])
def test_estimate_bad_input_is_one_line(tmp_path, args, words):
    np.savez(tmp_path / "g.npz", indptr=np.array([0, 1, 2]), indices=np.array([1, 0]))
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", *args,
                 "--report", tmp_path / "r.json")
    assert out.returncode == 2 and words in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_estimate_takes_model_only_parameters_on_any_preset(tmp_path):
    """The cycle model alone: slices beyond what the RTL simulates, a scheduler walking rows
    faster and HBM are valid on the default preset too (``sspmm run`` refuses them)."""
    from moagcn.hw.sspmm import preset
    from moagcn.sim.sspmm.model import estimate
    indptr, indices = uniform_graph(tmp_path / "g.npz", 300, 9, seed=2)
    params = ["--param", "slices=100", "--param", "walk_rows=4"]
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", "16", *params,
                 "--report", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    cfg = preset("default", slices=100, walk_rows=4, simulate=False)
    assert r["adders"] == 1600 and r["config"]["simulate"] is False
    assert r["cycles_compute"] == estimate(indptr, None, 16, cfg).cycles_compute
    # kept when asked for
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", "16", *params,
                 "--param", "simulate=true", "--report", tmp_path / "s.json")
    assert out.returncode == 2 and "slices=100" in out.stderr and "Traceback" not in out.stderr


def test_estimate_refuses_a_file_that_is_not_a_graph(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3))
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "x.npy", "--width", "4",
                 "--report", tmp_path / "r.json")
    assert out.returncode == 2 and "--graph" in out.stderr and "Traceback" not in out.stderr


def test_synth_bad_input_is_one_line(tmp_path):
    for args, words in ((["--like", "cora"], "--like cora"), (["--like", "reddit", "--scale",
                        "2"], "--scale")):
        out = moagcn("graph", "synth", *args, "--out", tmp_path / "g.npz")
        assert out.returncode == 2 and words in out.stderr, out.stderr


def test_estimate_with_a_shared_node_buffer_reports_its_reads(tmp_path):
    """With ``node_banks`` the estimate replays the crossbar with the graph's rows: the same
    figures as the cycle model given the column indices, and the reads and refused requests
    in the report."""
    from moagcn.hw.sspmm import preset
    from moagcn.sim.sspmm.model import estimate
    width = 24
    indptr, indices = uniform_graph(tmp_path / "g.npz", 300, 12, seed=2)
    out = moagcn("sspmm", "estimate", "--graph", tmp_path / "g.npz", "--width", width,
                 "--preset", "multi", "--param", "node_banks=4", "--report", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    c = estimate(indptr, None, width, preset("multi", node_banks=4), indices=indices)
    assert r["cycles_compute"] == c.cycles_compute
    assert r["rows_read"] == c.extra["rows_read"] < r["rows_fetched"] == c.extra["rows_fetched"]
    assert r["stall_bank"] == c.extra["stall_bank"] > 0
    private = estimate(indptr, None, width, preset("multi"))
    assert c.cycles_compute > private.cycles_compute
