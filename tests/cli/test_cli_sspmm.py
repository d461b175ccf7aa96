"""`moagcn sspmm run`: outputs, report fields and one-line errors."""

import json

import numpy as np
import pytest

import scipy.sparse as sp

from moagcn.sim.sspmm.golden import float64_bound, sspmm

from ..hw.sspmm.graphs import power_law_job
from .test_cli import device_args, moagcn

REPORT_KEYS = ("cycles_total", "cycles_load", "cycles_compute", "work_adds", "lanes",
               "utilization", "command_wall_s", "sim_cycles_per_s", "device", "config")


@pytest.fixture
def job_files(tmp_path):
    indptr, indices, H, M = power_law_job(30, 6, seed=2, max_deg=10)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices, shape=np.array([30, 30]))
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "m.npy", M.astype(np.uint8))
    return tmp_path, (indptr, indices, H, M)


@pytest.mark.parametrize("backend", ["model", "pysim"])
def test_sspmm_run_writes_z_and_report(job_files, backend):
    d, (indptr, indices, H, M) = job_files
    out = moagcn("sspmm", "run", "--graph", d / "g.npz", "--features", d / "h.npy",
                 "--mask", d / "m.npy", "--out", d / "z.npy", "--report", d / "r.json",
                 *device_args(backend), "--preset", "tiny")
    assert out.returncode == 0, out.stderr
    Z = np.load(d / "z.npy")
    if backend == "model":   # the model against float64 (the golden model is its own code)
        A = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(30, 30))
        exact = (A @ H.astype(np.float64)) * M
        assert (np.abs(Z - exact) <= 2 * float64_bound(indptr, indices, H, M) + 1e-30).all()
        assert (Z[~M.astype(bool)] == 0).all()
    else:                    # the RTL against the golden model, bit for bit
        assert np.array_equal(Z.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
    report = json.loads((d / "r.json").read_text())
    for key in REPORT_KEYS:
        assert key in report
    assert report["work_adds"] == int(np.dot(np.diff(indptr), M.sum(axis=1)))
    assert report["cycles_compute"] > 0 and 0 < report["utilization"] <= 1
    assert report["cycles_total"] == (report["cycles_load"] + report["cycles_compute"]
                                      + report["cycles_output"])


@pytest.mark.parametrize("case,needle", [
    ("missing", "no such file"),
    ("indptr", "not non-decreasing"),
    ("range", "out of range"),
    ("shape", "--features has 20 rows"),
    ("dtype", "expected a 2-D float32"),
    ("mask", "expected (30, 6)"),
    ("negative", "indptr[3] = -2 is negative"),
    ("indptr_2d", "indptr must be a 1-D array of N + 1 row pointers, got shape (1, 31)"),
    ("mask_values", "a uint8 mask holds 0 (skip) or 1 (compute)"),
    ("junk", "not a .npy array file"),
    ("out_folder", "--out"),
    ("node_banks", "node_banks=3 must be 0 (a node buffer per slice) or a power of two"),
    ("node_banks_reads", "node_banks=4 needs fetch_rows=1 (not 2)"),
])
def test_sspmm_bad_input_is_one_clear_line(job_files, case, needle):
    d, (indptr, indices, H, M) = job_files
    graph, feats, mask = d / "g.npz", d / "h.npy", d / "m.npy"
    if case == "missing":
        graph = d / "none.npz"
    if case == "indptr":
        bad = indptr.copy()
        bad[5], bad[6] = bad[6] + 1, bad[5]
        np.savez(d / "b.npz", indptr=bad, indices=indices)
        graph = d / "b.npz"
    if case == "range":
        bad = indices.copy()
        bad[0] = 30
        np.savez(d / "b.npz", indptr=indptr, indices=bad)
        graph = d / "b.npz"
    if case == "shape":
        np.save(d / "h2.npy", H[:20])
        feats = d / "h2.npy"
    if case == "dtype":
        np.save(d / "h2.npy", H.astype(np.float64))
        feats = d / "h2.npy"
    if case == "mask":
        np.save(d / "m2.npy", M[:, :3])
        mask = d / "m2.npy"
    if case == "negative":
        bad = indptr.copy()
        bad[3] = -2
        np.savez(d / "b.npz", indptr=bad, indices=indices)
        graph = d / "b.npz"
    if case == "indptr_2d":
        np.savez(d / "b.npz", indptr=indptr[None, :], indices=indices)
        graph = d / "b.npz"
    if case == "mask_values":
        bad = M.astype(np.uint8)
        bad[4, 2] = 2
        np.save(d / "m2.npy", bad)
        mask = d / "m2.npy"
    if case == "junk":
        (d / "h2.npy").write_text("not an array")
        feats = d / "h2.npy"
    z = d / "z.npy"
    if case == "out_folder":
        # checked before the run: a long job must not end with nowhere to write Z
        (d / "file").write_text("")
        z = d / "file" / "z.npy"
    params = {"node_banks": ["--param", "slices=2", "--param", "node_banks=3"],
              "node_banks_reads": ["--param", "slices=2", "--param", "node_banks=4",
                                   "--param", "fetch_rows=2"]}.get(case, [])
    out = moagcn("sspmm", "run", "--graph", graph, "--features", feats, "--mask", mask,
                 "--out", z, "--report", d / "r.json", "--device", "model", *params)
    assert out.returncode == 2, out.stdout
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.xdist_group("verilator-sspmm")
@pytest.mark.parametrize("backend", ["model", "verilator"])
def test_sspmm_run_tiles_a_job_larger_than_the_preset(tmp_path, backend):
    from moagcn.core.tiling import plan_tiles
    from moagcn.sim.sspmm.spec import SPEC

    # 280 rows and 40 features on the tiny preset (256 rows, 16 features per job)
    indptr, indices, H, M = power_law_job(280, 40, seed=7, hub=120)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "m.npy", M)
    out = moagcn("sspmm", "run", "--graph", tmp_path / "g.npz", "--features", tmp_path / "h.npy",
                 "--mask", tmp_path / "m.npy", "--out", tmp_path / "z.npy",
                 "--report", tmp_path / "r.json", *device_args(backend), "--preset", "tiny")
    assert out.returncode == 0, out.stderr
    Z = np.load(tmp_path / "z.npy")
    assert np.array_equal(Z.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
    report = json.loads((tmp_path / "r.json").read_text())
    tiles = plan_tiles(indptr, indices, 280, 280, 40, SPEC.limits(None, SPEC.config("tiny")))
    assert report["tiles"] == len(tiles) >= 6          # 2+ row blocks x 3 feature chunks
    assert f"{len(tiles)} tile(s)" in out.stdout
    assert report["nodes"] == 280 and report["features"] == 40
    assert report["work_adds"] == int(np.dot(np.diff(indptr), M.sum(axis=1)))
    assert report["cycles_total"] == (report["cycles_load"] + report["cycles_compute"]
                                      + report["cycles_output"])
    assert 0 < report["utilization"] <= 1
    if backend == "verilator":
        assert report["sim_cycles"] > report["cycles_compute"] > 0


def test_old_option_spellings_still_work_with_one_deprecation_line(job_files):
    d, (indptr, indices, H, M) = job_files
    out = moagcn("sspmm", "run", "--graph", d / "g.npz", "--features", d / "h.npy",
                 "--out", d / "z.npy", "--report", d / "r.json", "--backend", "model",
                 "--preset", "tiny", "--lanes", "8")
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "moagcn: --backend model is deprecated; use --device model",
        "moagcn: --lanes is deprecated; use --param lanes=8"]
    report = json.loads((d / "r.json").read_text())
    assert report["device"] == "model" and report["config"]["lanes"] == 8


def test_the_report_is_optional(job_files):
    d, _ = job_files
    out = moagcn("sspmm", "run", "--graph", d / "g.npz", "--features", d / "h.npy",
                 "--out", d / "z.npy", "--device", "model", "--preset", "tiny")
    assert out.returncode == 0, out.stderr
    assert (d / "z.npy").exists() and not list(d.glob("*.json"))
    assert out.stdout.rstrip().endswith(str(d / "z.npy"))


def test_bench_reaches_every_design_with_a_benchmark():
    out = moagcn("bench", "sspmm", "--help")
    assert out.returncode == 0 and "--simulator" in out.stdout
    assert out.stdout.startswith("usage: moagcn bench sspmm ")
    out = moagcn("bench", "hyscale", "--help")
    assert out.returncode == 0 and "spes" in out.stdout and "--spes" not in out.stdout
