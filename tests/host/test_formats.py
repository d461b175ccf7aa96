"""Graph files: every format round-trips, the direction convention, Matrix Market symmetry,
comments, --undirected, and one clear line per bad file."""

import re
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from moagcn.cli.common import load_graph
from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.formats import (FormatWarning, csr_from_entries, make_undirected,
                                        missing_mirrors, read, read_dataset, write)
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.pyg import from_edge_index

GRAPH_SUFFIXES = [".npz", ".mtx", ".mtx.gz", ".txt", ".tsv", ".csv", ".edges", ".el", ".txt.gz",
                  ".pt"]


def messages(src, dst, n):
    """The graph with one entry per message ``src[k] -> dst[k]``: row = target, as given."""
    return csr_from_entries(dst, src, n, n)[0]


@pytest.fixture
def graph():
    # a repeated edge, a self loop, a one-way edge, node 5 isolated (the last id: only a
    # declared node count keeps it in an edge list)
    return messages([0, 1, 1, 2, 3, 3, 4], [1, 0, 2, 2, 0, 0, 3], 6)


def entries(g, data=None):
    """Sorted (row, col[, weight]) triples: the stored entries with multiplicity."""
    cols = [g.row_ids(), g.indices] + ([] if data is None else [data])
    return sorted(zip(*(c.tolist() for c in cols)))


@pytest.mark.parametrize("suffix", GRAPH_SUFFIXES)
def test_a_graph_round_trips_through_every_format(tmp_path, graph, suffix):
    path = write(tmp_path / f"g{suffix}", graph)
    got = read(path)
    assert got.graph == graph and got.graph.shape == (6, 6)
    assert got.data is None and got.dataset is None
    assert entries(got.graph) == entries(graph)


@pytest.mark.parametrize("suffix", [".npz", ".mtx", ".pt"])
def test_edge_weights_round_trip_where_the_format_holds_them(tmp_path, graph, suffix):
    data = np.arange(1, graph.nnz + 1, dtype=np.float32) / 8
    got = read(write(tmp_path / f"g{suffix}", graph, data=data))
    assert got.data.dtype == np.float32
    assert entries(got.graph, got.data) == entries(graph, data)


def test_an_edge_list_drops_weights_with_one_warning(tmp_path, graph):
    data = np.ones(graph.nnz, dtype=np.float32)
    with pytest.warns(FormatWarning, match="no weights; the 7 edge weights are not written"):
        path = write(tmp_path / "g.txt", graph, data=data)
    assert read(path).data is None


@pytest.fixture(scope="module")
def dataset():
    return sbm(n_nodes=60, n_features=8, n_classes=3, n_val=10, n_test=10, seed=4)


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_a_dataset_round_trips_through_npz_and_pt(tmp_path, dataset, suffix):
    path = write(tmp_path / f"d{suffix}", dataset)
    got = read(path)
    assert got.dataset is not None and got.graph is got.dataset.graph
    d = read_dataset(path)
    assert d.graph == dataset.graph and d.name == "d"
    for key in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(d, key), getattr(dataset, key)), key
    assert load_dataset(str(path)).graph == dataset.graph


@pytest.mark.parametrize("suffix", [".mtx", ".csv"])
def test_a_dataset_in_a_graph_only_format_keeps_the_graph_and_warns(tmp_path, dataset, suffix):
    with pytest.warns(FormatWarning, match="holds the graph only; the dataset's features, labels "
                                           "and train/val/test masks are not written"):
        path = write(tmp_path / f"d{suffix}", dataset)
    got = read(path)
    assert got.dataset is None and got.graph == dataset.graph
    with pytest.raises(UserError, match=rf"d{suffix}: the file holds a graph only .*"
                                        r"give a PyG Data object .* or an .npz dataset"):
        load_dataset(str(path))


# -- direction -----------------------------------------------------------------------------------

def test_an_edge_u_v_is_a_message_from_u_to_v(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n")
    g = read(tmp_path / "e.txt").graph
    assert g.neighbours(1).tolist() == [0] and g.neighbours(0).size == 0
    assert g == from_edge_index(torch.tensor([[0], [1]]), 2)


def test_edge_lists_agree_with_pyg_edge_index(tmp_path):
    rng = np.random.default_rng(3)
    ei = rng.integers(0, 40, size=(2, 150))
    ei[:, :5] = ei[:, 5:10]                    # some repeated edges
    np.savetxt(tmp_path / "e.tsv", ei.T, fmt="%d", delimiter="\t")
    g = read(tmp_path / "e.tsv").graph
    want = from_edge_index(torch.from_numpy(ei), int(ei.max()) + 1)
    assert g == want and g.nnz == 150
    # the matrix formats store the same matrix: no transposition on the way
    assert read(write(tmp_path / "e.mtx", g)).graph == want
    np.savez(tmp_path / "m.npz", indptr=g.indptr, indices=g.indices)
    assert read(tmp_path / "m.npz").graph == want


# -- Matrix Market -------------------------------------------------------------------------------

def test_symmetric_matrix_market_lists_one_triangle_and_reads_both(tmp_path):
    (tmp_path / "s.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern symmetric\n% a comment\n4 4 4\n"
        "2 1\n3 1\n3 3\n4 2\n")
    g = read(tmp_path / "s.mtx").graph
    lower = np.zeros((4, 4))
    lower[[1, 2, 2, 3], [0, 0, 2, 1]] = 1
    want = lower + np.tril(lower, -1).T             # the diagonal once
    assert np.array_equal(g.to_scipy().toarray(), want)
    assert g.is_symmetric() and g.nnz == 7


def test_matrix_market_values_become_float32_weights_and_rectangles_are_allowed(tmp_path):
    (tmp_path / "r.mtx").write_text(
        "%%MatrixMarket matrix coordinate integer general\n2 3 3\n1 3 7\n2 1 -2\n1 3 7\n")
    got = read(tmp_path / "r.mtx")
    assert got.graph.shape == (2, 3)
    assert entries(got.graph, got.data) == [(0, 2, 7.0), (0, 2, 7.0), (1, 0, -2.0)]
    indptr, indices, n_cols, data = load_graph(str(tmp_path / "r.mtx"))
    assert n_cols == 3 and data.dtype == np.float32 and indices.tolist() == [2, 2, 0]


def test_skew_symmetric_values_are_negated_in_the_mirror(tmp_path):
    (tmp_path / "k.mtx").write_text(
        "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 1 1.5\n")
    got = read(tmp_path / "k.mtx")
    assert entries(got.graph, got.data) == [(0, 1, -1.5), (1, 0, 1.5)]


# -- edge lists ----------------------------------------------------------------------------------

def test_comments_delimiters_and_the_declared_node_count(tmp_path):
    (tmp_path / "c.csv").write_text(
        "# SNAP-style header\n% and another\n# Nodes: 3 Edges: 4\n# num_nodes: 9\n\n"
        "0,1\r\n1, 2  # an inline comment\n2\t,0\n\n% trailing\n")
    g = read(tmp_path / "c.csv").graph
    assert g.n_nodes == 9                       # declared; SNAP's "Nodes:" is not a size
    assert entries(g) == [(0, 2), (1, 0), (2, 1)]
    (tmp_path / "w.txt").write_text("3\t4\n4   3\n")
    assert read(tmp_path / "w.txt").graph.n_nodes == 5   # largest id + 1


def test_mixed_delimiters_are_read_line_by_line(tmp_path):
    (tmp_path / "m.txt").write_text("0 1\n1,2\n")   # the fast reader refuses, the line reader not
    assert entries(read(tmp_path / "m.txt").graph) == [(1, 0), (2, 1)]


# -- undirected ----------------------------------------------------------------------------------

def test_undirected_adds_each_missing_reverse_and_keeps_everything_stored(tmp_path, graph):
    write(tmp_path / "g.txt", graph)
    g = read(tmp_path / "g.txt", undirected=True).graph
    counts = {}
    for r, c in entries(g):
        counts[(r, c)] = counts.get((r, c), 0) + 1
    # 1 -> 0 and 0 -> 1 were both there; 0 -> 3 was there twice, so 3 -> 0 twice; 1 -> 2 and
    # 3 -> 4 get their mirrors; the self loop stays single
    assert counts == {(0, 1): 1, (1, 0): 1, (2, 1): 1, (1, 2): 1, (2, 2): 1, (0, 3): 2,
                      (3, 0): 2, (3, 4): 1, (4, 3): 1}
    assert g.is_symmetric() and missing_mirrors(g) == 0
    assert missing_mirrors(graph) == g.nnz - graph.nnz == 4
    again, _ = make_undirected(g)
    assert again is g                            # a symmetric graph comes back unchanged


def test_undirected_copies_weights_and_refuses_a_rectangle(tmp_path):
    g = messages([0, 2], [1, 1], 3)
    sym, data = make_undirected(g, np.array([5.0, 7.0], dtype=np.float32))
    assert entries(sym, data) == [(0, 1, 5.0), (1, 0, 5.0), (1, 2, 7.0), (2, 1, 7.0)]
    with pytest.raises(UserError, match="needs a square adjacency .* 2 x 3: drop --undirected"):
        make_undirected(CSRGraph([0, 1, 1], [2], n_cols=3))


def test_undirected_reaches_datasets(tmp_path, dataset):
    one_way = messages(dataset.graph.indices, dataset.graph.row_ids(), dataset.n_nodes)
    keep = one_way.row_ids() < one_way.indices            # one direction of each edge
    half = messages(one_way.indices[keep], one_way.row_ids()[keep], dataset.n_nodes)
    from moagcn.host.graphs.data import Dataset
    d = Dataset("h", half, dataset.features, dataset.labels, dataset.train_mask,
                dataset.val_mask, dataset.test_mask)
    path = write(tmp_path / "h.pt", d)
    assert not load_dataset(str(path)).graph.is_symmetric()
    assert load_dataset(str(path), undirected=True).graph == dataset.graph


# -- bad files -----------------------------------------------------------------------------------

MTX = "%%MatrixMarket matrix coordinate pattern general\n"

BAD = {
    # name: (file name, content, the expected message (a regex))
    "no header": ("a.mtx", "3 3 1\n1 2\n",
                  r"a.mtx: line 1: no Matrix Market header .* must start with "
                  r"`%%MatrixMarket matrix coordinate pattern general`"),
    "bad field": ("a.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n",
                  r"a.mtx: line 1: field 'complex' is not supported; use pattern, real, integer"),
    "dense": ("a.mtx", "%%MatrixMarket matrix array real general\n1 1\n1\n",
              r"a.mtx: line 1: format 'array'; a graph is a sparse 'coordinate' matrix"),
    "size line": ("a.mtx", MTX + "% c\n3 3\n1 2\n",
                  r"a.mtx: line 3: size line '3 3'; .* `rows cols entries`"),
    "mtx token": ("a.mtx", MTX + "3 3 2\n1 2\n2 b\n",
                  r"a.mtx: line 4 \('2 b'\): not a valid entry; each entry line is `row col`"),
    "mtx range": ("a.mtx", MTX + "3 3 2\n1 2\n2 4\n",
                  r"a.mtx: line 4 \('2 4'\): column index out of range 1..3; the size line "
                  r"\(line 2\) declares 3 x 3 with 2 entries: fix the entry or the size line"),
    "mtx zero id": ("a.mtx", MTX + "3 3 1\n0 1\n",
                    r"a.mtx: line 3 .*: row index out of range 1..3; .* ids start at 1"),
    "too few": ("a.mtx", MTX + "3 3 3\n1 2\n2 3\n",
                r"a.mtx: the size line \(line 2\) declares 3 x 3 with 3 entries but the file "
                r"holds 2; fix the count on the size line"),
    "too many": ("a.mtx", MTX + "3 3 1\n1 2\n2 3\n",
                 r"a.mtx: more entries than 1 \(line 4 \('2 3'\) is extra\); .* fix the count"),
    "edge token": ("e.txt", "# header\nsrc dst\n0 1\n",
                   r"e.txt: line 2: 'src' is not an integer node id; .*comment a header line "
                   r"out with #"),
    "float id": ("e.txt", "0 1\n1.0 2\n", r"e.txt: line 2: '1.0' is not an integer node id"),
    "negative": ("e.csv", "0,1\n2,-3\n",
                 r"e.csv: line 2: node id -3 is negative; .* renumber the nodes from 0"),
    "extra column": ("e.tsv", "0\t1\n1\t2\t1700000000\n",
                     r"e.tsv: line 2: 3 columns .* keep the first two columns"),
    "one column": ("e.el", "0 1\n7\n", r"e.el: line 2: one id \('7'\); .* `src dst` pair"),
    "declared": ("e.edges", "# num_nodes: 3\n0 1\n1 3\n",
                 r"e.edges: line 3: node id 3 is out of range for num_nodes 3 declared on line 1; "
                 r"raise num_nodes or remove the edge"),
    "comments only": ("e.txt", "# nothing\n\n",
                      r"e.txt: no edges \(only comments or blank lines\); .* one `src dst` pair"),
    "empty": ("e.txt", "", r"e.txt: empty file \(0 bytes\); an edge list holds one `src dst`"),
    "empty mtx": ("a.mtx", "", r"a.mtx: empty file \(0 bytes\); a Matrix Market file starts "
                               r"with the header"),
    "suffix": ("g.graphml", "<graphml/>",
               r"g.graphml: unknown graph format \(.graphml\); name the file by its format: "
               r"\.npz .* \.mtx .* \.txt/\.tsv/\.csv/\.edges/\.el .* \.pt"),
    "junk npz": ("g.npz", "not a zip", r"g.npz: not an .npz archive \(no zip header\); write"),
    "junk pt": ("g.pt", "not a pickle", r"g.pt: not readable by torch.load .*; save a PyG Data"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_file_is_one_line_naming_the_file_the_problem_and_the_fix(tmp_path, case):
    name, content, message = BAD[case]
    (tmp_path / name).write_text(content)
    with pytest.raises(UserError) as exc:
        read(tmp_path / name, what=name)
    text = str(exc.value)
    assert re.search(message, text), text
    assert "\n" not in text


def test_a_missing_file_and_a_folder(tmp_path):
    with pytest.raises(UserError, match=r"nope.mtx: no such file \(check the path\)"):
        read(tmp_path / "nope.mtx", what="nope.mtx")
    with pytest.raises(UserError, match=r"is a folder; give a graph file: \.npz"):
        read(tmp_path)
    with pytest.raises(UserError, match=r"dataset .*nope.pt: no such file \(give the path of a "
                                        r"dataset file, or one of the built-in datasets"):
        load_dataset(str(tmp_path / "nope.pt"))


def test_cli_graph_option_names_itself_in_messages(tmp_path):
    (tmp_path / "e.txt").write_text("0 x\n")
    with pytest.raises(UserError, match=r"^--graph .*e.txt: line 1: 'x' is not an integer"):
        load_graph(str(tmp_path / "e.txt"))


def test_a_pt_file_that_is_not_a_data_object(tmp_path):
    torch.save(torch.zeros(3), tmp_path / "t.pt")
    with pytest.raises(UserError, match=r"t.pt: holds a Tensor, not a PyG Data object with an "
                                        r"edge_index; save one graph with torch.save"):
        read(tmp_path / "t.pt", what="t.pt")


def test_a_pt_graph_without_masks_is_no_dataset_and_says_what_is_missing(tmp_path, dataset):
    from moagcn.host.graphs.pyg import to_pyg
    d = to_pyg(dataset)
    del d.test_mask
    torch.save(d, tmp_path / "n.pt")
    assert read(tmp_path / "n.pt").dataset is None
    with pytest.raises(UserError, match="n.pt: not a dataset: data has no test_mask"):
        load_dataset(str(tmp_path / "n.pt"))


def test_pt_edge_weights_follow_their_edges(tmp_path):
    tg = pytest.importorskip("torch_geometric")
    ei = torch.tensor([[2, 0, 1], [0, 1, 0]])
    d = tg.data.Data(edge_index=ei, edge_weight=torch.tensor([0.5, 2.0, 3.0]), num_nodes=4)
    torch.save(d, tmp_path / "w.pt")
    got = read(tmp_path / "w.pt")
    assert got.graph.n_nodes == 4
    assert entries(got.graph, got.data) == [(0, 1, 3.0), (0, 2, 0.5), (1, 0, 2.0)]


def test_reading_a_pt_file_without_torch_geometric_says_how_to_install_it(tmp_path, monkeypatch,
                                                                          graph):
    path = write(tmp_path / "g.pt", graph)
    monkeypatch.setitem(sys.modules, "torch_geometric", None)   # as if it were not installed
    with pytest.raises(UserError, match=r"torch-geometric is not installed; .*pip install "
                                        r"moagcn\[pyg\]"):
        read(path)


def test_write_refuses_a_rectangle_where_a_node_set_is_needed(tmp_path):
    rect = CSRGraph([0, 1, 1], [2], n_cols=3)
    with pytest.raises(UserError, match=r"r.txt: a 2 x 3 matrix is not a graph on one node set; "
                                        r".* write it as .npz or .mtx"):
        write(tmp_path / "r.txt", rect, what="r.txt")
    assert read(write(tmp_path / "r.mtx", rect)).graph == rect
    assert read(write(tmp_path / "r.npz", rect)).graph == rect


def test_the_npz_graph_path_keeps_its_messages(tmp_path):
    # .npz through --graph: the column range is the caller's to check, as before
    np.savez(tmp_path / "g.npz", indptr=[0, 1, 2], indices=[1, 5])
    indptr, indices, n_cols, data = load_graph(str(tmp_path / "g.npz"))
    assert n_cols is None and data is None and indices.tolist() == [1, 5]
    with pytest.raises(UserError, match=r"indices\[1\] = 5 is out of range for 2 nodes"):
        read(tmp_path / "g.npz")


def test_the_scipy_view_matches_the_edge_list(tmp_path):
    # an independent check of the whole chain: A[v, u] counts the lines `u v`
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 25, size=(80, 2))
    np.savetxt(tmp_path / "p.txt", pairs, fmt="%d")
    A = sp.coo_matrix((np.ones(80), (pairs[:, 1], pairs[:, 0])),
                      shape=(pairs.max() + 1,) * 2).toarray()
    assert np.array_equal(read(tmp_path / "p.txt").graph.to_scipy().toarray(), A)
