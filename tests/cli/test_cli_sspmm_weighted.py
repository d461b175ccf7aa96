"""`moagcn sspmm run | estimate` with a weighted S-SpMM (``--param weighted=true``): the edge
values of an .npz (``data``), a Matrix Market file and a weighted edge list; bad values are one
line and exit status 2."""

import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from moagcn.cli.main import main
from moagcn.sim.sspmm.golden import sspmm_weighted

from ..hw.sspmm.graphs import power_law_job
from .test_cli import moagcn

WEIGHTED = ("--preset", "tiny", "--param", "weighted=true")


def run_main(capsys, *args):
    """The command in this process (a subprocess per case took four seconds each):
    (exit status, stdout, stderr)."""
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.fixture
def files(tmp_path):
    indptr, indices, H, M = power_law_job(40, 7, seed=3, max_deg=12)
    rng = np.random.default_rng(3)
    values = rng.standard_normal(indices.size).astype(np.float32)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices, data=values,
             shape=np.array([40, 40]))
    np.save(tmp_path / "h.npy", H)
    np.save(tmp_path / "m.npy", M)
    # the same graph as Matrix Market (real values) and as a weighted edge list (`src dst w`,
    # a row of A is a target); both keep duplicates as stored entries
    rows = np.repeat(np.arange(40), np.diff(indptr))
    scipy.io.mmwrite(tmp_path / "g.mtx", sp.coo_matrix((values, (rows, indices)),
                                                       shape=(40, 40)))
    lines = [f"{c} {r} {float(v)!r}" for r, c, v in zip(rows, indices, values)]
    (tmp_path / "g.txt").write_text("# num_nodes: 40\n" + "\n".join(lines) + "\n")
    return tmp_path, (indptr, indices, H, M, values)


@pytest.mark.parametrize("graph", ["g.npz", "g.mtx", "g.txt"])
def test_run_reads_the_values_of_every_format(files, graph, capsys):
    d, (indptr, indices, H, M, values) = files
    status, stdout, stderr = run_main(
        capsys, "sspmm", "run", "--graph", d / graph, "--features", d / "h.npy", "--mask",
        d / "m.npy", "--out", d / "z.npy", "--report", d / "r.json", "--device", "model",
        *WEIGHTED)
    assert status == 0, stderr
    assert "weighted sspmm on model" in stdout
    Z = np.load(d / "z.npy")
    # the formats store entries in their own order within a row: the sums follow the sorted
    # columns, equal columns in stored order, the same for all three here
    want = sspmm_weighted(indptr, indices, values, H, M)
    assert np.array_equal(Z.view(np.uint32), want.view(np.uint32))
    report = json.loads((d / "r.json").read_text())
    assert report["config"]["weighted"] is True


def test_estimate_reads_and_checks_the_values(files, capsys):
    d, _ = files
    status, _, stderr = run_main(capsys, "sspmm", "estimate", "--graph", d / "g.txt", "--width",
                                 7, "--report", d / "e.json", *WEIGHTED)
    assert status == 0, stderr
    status, _, stderr = run_main(capsys, "sspmm", "estimate", "--graph", d / "g.npz",
                                 "--width", 7, "--report", d / "p.json", "--preset", "tiny")
    assert status == 0 and "not used (a weighted S-SpMM uses them" in stderr
    w, p = (json.loads((d / f).read_text()) for f in ("e.json", "p.json"))
    assert w["cycles_compute"] > p["cycles_compute"] and w["hbm_bytes"] > p["hbm_bytes"]


@pytest.mark.parametrize("case,needle", [
    ("nan", "edge values: entry 4 is nan"),
    ("short", "values in shape"),
    ("inf_list", "edge values: entry"),
    ("two_columns", "a weighted edge list holds `src dst weight`"),
    ("bad_number", "is not a number"),
])
@pytest.mark.parametrize("command", ["run", "estimate"])
def test_bad_values_are_one_line_exit_2(files, case, needle, command, capsys):
    d, (indptr, indices, H, M, values) = files
    path = d / "bad.npz"
    if case == "nan":
        bad = values.copy()
        bad[4] = np.nan
        np.savez(path, indptr=indptr, indices=indices, data=bad)
    elif case == "short":
        np.savez(path, indptr=indptr, indices=indices, data=values[:-1])
    else:
        path = d / "bad.txt"
        path.write_text({"inf_list": "0 1 0.5\n1 2 inf\n", "two_columns": "0 1\n1 2\n",
                         "bad_number": "0 1 x\n"}[case])
    if command == "run":
        args = ("run", "--graph", path, "--features", d / "h.npy", "--out", d / "z.npy",
                "--device", "model")
    else:
        args = ("estimate", "--graph", path, "--width", 7, "--report", d / "e.json")
    status, _, stderr = run_main(capsys, "sspmm", *args, *WEIGHTED)
    assert status == 2, stderr
    assert needle in stderr and str(path.name) in stderr
    assert len(stderr.strip().splitlines()) == 1
    if case == "nan" and command == "run":
        # and as a command: exit status 2, the one line, no traceback
        out = moagcn("sspmm", *args, *WEIGHTED)
        assert out.returncode == 2 and out.stderr == stderr
