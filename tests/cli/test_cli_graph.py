"""`moagcn graph info` and `moagcn graph convert`, and the other formats on the commands that
read a graph or a dataset (--graph, --dataset, --undirected)."""

import json
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from moagcn.cli.main import main
from moagcn.host.graphs.data import save_npz
from moagcn.host.graphs.generators import sbm

from .test_cli import moagcn

# messages src -> dst on 7 nodes: node 0 is the hub (5 entries in its row), 3 -> 0 is stored
# twice, 2 -> 2 is a self loop, node 6 has no edge at all (kept by the declared node count)
SRC = np.array([1, 2, 3, 3, 4, 0, 2, 1, 5])
DST = np.array([0, 0, 0, 0, 0, 1, 2, 2, 4])
N = 7


@pytest.fixture
def edge_list(tmp_path):
    path = tmp_path / "g.txt"
    lines = ["# a small directed graph", f"# num_nodes: {N}"]
    lines += [f"{s} {d}" for s, d in zip(SRC, DST)]
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_figures():
    """The figures of the graph above, computed with numpy/scipy alone."""
    A = sp.coo_matrix((np.ones(SRC.size), (DST, SRC)), shape=(N, N)).tocsr()   # row = target
    A.sum_duplicates()
    in_deg = np.bincount(DST, minlength=N)
    out_deg = np.bincount(SRC, minlength=N)
    pairs = Counter(zip(DST.tolist(), SRC.tolist()))
    missing = sum(max(0, k - pairs.get((c, r), 0)) for (r, c), k in pairs.items() if r != c)
    S = ((A + A.T) > 0).astype(np.float64).tocsr()
    perm = reverse_cuthill_mckee(S, symmetric_mode=True)
    pos = np.empty(N, dtype=np.int64)
    pos[perm] = np.arange(N)
    return {
        "nodes": N, "entries": SRC.size,
        "in_degree": {"min": int(in_deg.min()), "mean": float(in_deg.mean()),
                      "median": float(np.median(in_deg)), "max": int(in_deg.max()),
                      "top_node": int(np.argmax(in_deg))},
        "out_degree": {"min": int(out_deg.min()), "mean": float(out_deg.mean()),
                       "median": float(np.median(out_deg)), "max": int(out_deg.max()),
                       "top_node": int(np.argmax(out_deg))},
        "isolated_nodes": int(np.count_nonzero((in_deg == 0) & (out_deg == 0))),
        "empty_rows": int(np.count_nonzero(in_deg == 0)),
        "self_loop_entries": int(np.count_nonzero(SRC == DST)),
        "self_loop_nodes": int(np.unique(SRC[SRC == DST]).size),
        "duplicate_entries": SRC.size - A.nnz,
        "symmetric": (A != A.T).nnz == 0,
        "missing_mirrors": missing,
        "bandwidth": int(np.abs(SRC - DST).max()),
        "bandwidth_rcm": int(np.abs(pos[SRC] - pos[DST]).max()),
    }


def test_graph_info_prints_and_reports_figures_checked_against_scipy(edge_list, tmp_path,
                                                                     capsys):
    want = expected_figures()
    # the figures this graph was built to show
    assert (want["isolated_nodes"], want["self_loop_entries"], want["duplicate_entries"],
            want["in_degree"]["top_node"], want["symmetric"]) == (1, 1, 1, 0, False)
    report = tmp_path / "info.json"
    assert main(["graph", "info", str(edge_list), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    rep = json.loads(report.read_text())
    for key, value in want.items():
        assert rep[key] == (pytest.approx(value) if isinstance(value, dict) else value), key
    assert rep["format"] == "edges" and rep["rows"] == rep["cols"] == N
    d = want["in_degree"]
    for text in (f"{N} nodes, {SRC.size} entries",
                 f"in-degree (entries per row): min {d['min']}, mean {d['mean']:.2f}, median "
                 f"{d['median']:g}, max {d['max']} (top hub: node {d['top_node']})",
                 f"isolated nodes {want['isolated_nodes']}",
                 f"self loops {want['self_loop_entries']} (on 1 node(s)), duplicate entries "
                 f"{want['duplicate_entries']}",
                 f"symmetric: no (--undirected would add {want['missing_mirrors']} entries)",
                 f"bandwidth {want['bandwidth']} as numbered, {want['bandwidth_rcm']} after RCM"):
        assert text in out, (text, out)


def test_graph_info_undirected_makes_the_structure_symmetric(edge_list, capsys):
    want = expected_figures()
    assert main(["graph", "info", str(edge_list), "--undirected"]) == 0
    out = capsys.readouterr().out
    assert f"{N} nodes, {SRC.size + want['missing_mirrors']} entries" in out
    assert "symmetric: yes" in out and "out-degree" not in out


def test_convert_to_matrix_market_then_sspmm_runs_on_it(edge_list, tmp_path, capsys):
    mtx = tmp_path / "g.mtx"
    assert main(["graph", "convert", str(edge_list), str(mtx)]) == 0
    assert f"-> {mtx} (Matrix Market)" in capsys.readouterr().out
    H = np.random.default_rng(1).standard_normal((N, 5)).astype(np.float32)
    np.save(tmp_path / "h.npy", H)
    # the command in a fresh process, end to end
    out = moagcn("sspmm", "run", "--graph", mtx, "--features", tmp_path / "h.npy",
                 "--out", tmp_path / "z.npy", "--report", tmp_path / "r.json",
                 "--device", "model", "--preset", "tiny")
    assert out.returncode == 0, out.stderr
    A = sp.coo_matrix((np.ones(SRC.size), (DST, SRC)), shape=(N, N)).toarray()  # repeats add
    Z = np.load(tmp_path / "z.npy")
    assert np.allclose(Z, A @ H.astype(np.float64), rtol=1e-5, atol=1e-6)
    assert json.loads((tmp_path / "r.json").read_text())["edges"] == SRC.size


def test_every_format_converts_to_every_other(edge_list, tmp_path, capsys):
    src = edge_list
    for suffix in (".npz", ".mtx", ".csv", ".pt", ".el.gz", ".tsv"):
        dst = tmp_path / f"c{suffix}"
        assert main(["graph", "convert", str(src), str(dst)]) == 0
        src = dst
    report = tmp_path / "r.json"
    assert main(["graph", "info", str(src), "--report", str(report)]) == 0
    rep = json.loads(report.read_text())
    assert rep["nodes"] == N and rep["entries"] == SRC.size
    assert rep["duplicate_entries"] == 1 and rep["isolated_nodes"] == 1
    capsys.readouterr()


def test_a_dataset_to_a_graph_only_format_warns_once_and_training_on_it_says_why(tmp_path,
                                                                               capsys):
    d = sbm(n_nodes=80, n_features=8, n_classes=3, n_val=10, n_test=10, seed=2)
    data = save_npz(d, tmp_path / "d.npz")
    assert main(["graph", "convert", str(data), str(tmp_path / "d.mtx")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moagcn: warning: ")
    assert "the dataset's features, labels and train/val/test masks are not written" in err[0]
    argv = ["train", "--dataset", str(tmp_path / "d.mtx"), "--epochs", "1", "--device", "cpu",
            "--report", str(tmp_path / "t.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "d.mtx: the file holds a graph only" in err[0]
    assert "PyG Data object" in err[0] and "an .npz dataset" in err[0]
    # and the full dataset through .pt trains
    assert main(["graph", "convert", str(data), str(tmp_path / "d.pt")]) == 0
    argv[2] = str(tmp_path / "d.pt")
    assert main(argv + ["--quiet"]) == 0
    assert "d: 80 nodes" in capsys.readouterr().out


def test_hyscale_reads_matrix_market_values_as_edge_weights(tmp_path, capsys):
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 9, 30), rng.integers(0, 9, 30)
    A = sp.coo_matrix((rng.random(30).astype(np.float32), (dst, src)), shape=(9, 9)).tocsr()
    np.savez(tmp_path / "g.npz", indptr=A.indptr, indices=A.indices, data=A.data,
             shape=np.array([9, 9]))
    np.save(tmp_path / "x.npy", rng.standard_normal((9, 6)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((6, 4)).astype(np.float32))
    assert main(["graph", "convert", str(tmp_path / "g.npz"), str(tmp_path / "g.mtx")]) == 0
    assert "real general" in (tmp_path / "g.mtx").read_text().splitlines()[0]
    outs = []
    for graph in ("g.npz", "g.mtx"):
        y = tmp_path / f"y-{graph}.npy"
        assert main(["hyscale", "run", "--graph", str(tmp_path / graph), "--features",
                     str(tmp_path / "x.npy"), "--weight", str(tmp_path / "w.npy"), "--out",
                     str(y), "--report", str(tmp_path / "r.json"), "--device", "model",
                     "--preset", "tiny"]) == 0
        outs.append(np.load(y))
    assert np.array_equal(outs[0], outs[1])
    X, W = np.load(tmp_path / "x.npy"), np.load(tmp_path / "w.npy")
    assert np.allclose(outs[1], A.toarray() @ X.astype(np.float64) @ W, rtol=1e-4, atol=1e-5)
    capsys.readouterr()


def test_sspmm_undirected_on_a_one_way_edge_list(tmp_path, capsys):
    (tmp_path / "p.csv").write_text("0,1\n1,2\n2,3\n")          # a path, one way
    H = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.save(tmp_path / "h.npy", H)
    assert main(["sspmm", "run", "--graph", str(tmp_path / "p.csv"), "--undirected",
                 "--features", str(tmp_path / "h.npy"), "--out", str(tmp_path / "z.npy"),
                 "--report", str(tmp_path / "r.json"), "--device", "model"]) == 0
    A = np.zeros((4, 4))
    A[[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]] = 1
    assert np.array_equal(np.load(tmp_path / "z.npy"), (A @ H).astype(np.float32))
    capsys.readouterr()


@pytest.mark.parametrize("command", [["sspmm", "run"], ["sspmm", "estimate"], ["hyscale", "run"],
                                     ["train"], ["pipeline"], ["graph", "info"],
                                     ["graph", "convert"]])
def test_every_command_that_reads_a_graph_takes_undirected(command, capsys):
    with pytest.raises(SystemExit):
        main(command + ["--help"])
    assert "--undirected" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["graph", "info", "nope.mtx"], "nope.mtx: no such file"),
    (["graph", "convert", "g.txt", "g.gml"], "OUT g.gml: unknown graph format (.gml)"),
    (["graph", "info", "bad.mtx"], "bad.mtx: line 1: no Matrix Market header"),
    (["graph", "info", "g.txt", "--report", "r.txt"], "ending in .json"),
    (["sspmm", "estimate", "--graph", "bad.mtx", "--width", "4", "--report", "r.json"],
     "--graph bad.mtx: line 1: no Matrix Market header"),
    (["pipeline", "--dataset", "g.txt", "--batches", "2"], "g.txt: the file holds a graph only"),
])
def test_bad_input_is_one_line(tmp_path, monkeypatch, capsys, edge_list, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.mtx").write_text("1 1 0\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moagcn: error: ") and message in err[0], err
