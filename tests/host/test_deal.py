"""DEAL all-node inference (host/deal/engine.py, host/graphs/sampling.py, host/deal/ego.py).

References share no code with what they check: the sampler is checked against the rows' stored
neighbours, by frequency and against its rule written here one row at a time in plain Python;
the engine against a layer-wise forward from the formulas (tests/host/plain_gnn.py) on those
samples; the engine against the model's own aggregate-then-update forward
(:func:`layerwise_forward`, and for full neighbourhoods the training reference
``reference_forward``) on an awkward graph; the byte counts against DEAL's Table 1 formula and
against needed rows counted here with numpy sets.
"""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.deal.ego import ego_forward
from moagcn.host.deal.engine import DealEngine, InferConfig, assemble
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.sampling import (LayerSampler, parse_fanout, permute_positions,
                                         sample_graph, sample_rows)
from moagcn.host.nn.layerwise import layer_graphs, layerwise_forward
from moagcn.host.nn.models import GNN, reference_forward
from moagcn.host.parallel.comm import LocalComm

from . import plain_gnn


def awkward(n=64, seed=5):
    """A hub (node 1, in and out), isolated nodes, a node with two self loops, a thrice-repeated
    edge, nodes without in-edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 6, size=5 * n)
    dst = rng.integers(0, n - 8, size=5 * n)
    src = np.concatenate([src, np.arange(n - 10), np.full(n - 12, 1), [2, 2, 3, 11, 11, 11]])
    dst = np.concatenate([dst, np.full(n - 10, 1), np.arange(n - 12), [2, 2, 3, 10, 10, 10]])
    keep = (src != n - 1) & (dst != n - 1)                    # node n-1 isolated
    return CSRGraph.from_edges(dst[keep], src[keep], n, dedupe=False)   # rows = targets


def features(n, d, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def run(model, graph, X, **kw):
    cfg = InferConfig(**kw)
    eng = DealEngine(model, graph, X, cfg, LocalComm(cfg.processes))
    return assemble([eng.run()], graph.n_rows, model.dims[-1]), eng


# -- sampler ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 17, 255, 256, 1000, 4097])
def test_permutation_is_a_permutation(n):
    for key in (0, 1, 2 ** 63 + 12345):
        p = permute_positions(np.arange(n), np.full(n, n), np.full(n, key, dtype=np.uint64))
        assert np.array_equal(np.sort(p), np.arange(n))


def test_sampled_rows_are_subsets_of_the_stored_rows():
    g = awkward()
    for k in (1, 2, 3, 7):
        s = sample_graph(g, k, layer=1, seed=4)
        for v in range(g.n_rows):
            stored = list(g.indices[g.indptr[v]:g.indptr[v + 1]])
            got = list(s.indices[s.indptr[v]:s.indptr[v + 1]])
            assert len(got) == min(k, len(stored))
            for u in got:                       # a multiset inside the stored multiset
                stored.remove(u)


def test_sample_is_the_same_for_a_row_range_an_ego_batch_and_the_whole_graph():
    g = awkward()
    whole = sample_graph(g, 3, layer=2, seed=9)
    part = LayerSampler(g, 20, 50, seed=9).sample(3, 2)
    assert np.array_equal(part.indices, whole.indices[whole.indptr[20]:whole.indptr[50]])
    rows = np.array([1, 40, 1, 0, 63])
    indptr, idx = sample_rows(g, rows, 3, 2, seed=9)
    for i, v in enumerate(rows):
        assert np.array_equal(idx[indptr[i]:indptr[i + 1]],
                              whole.indices[whole.indptr[v]:whole.indptr[v + 1]])
    # another layer or seed draws differently (the hub has far more than 3 neighbours)
    assert not np.array_equal(sample_graph(g, 3, 3, 9).indices, whole.indices)
    assert not np.array_equal(sample_graph(g, 3, 2, 10).indices, whole.indices)


def test_state_is_built_once_and_reused_for_every_layer():
    g = awkward()
    s = LayerSampler(g, seed=1)
    for layer in range(4):
        s.sample(3, layer)
    assert s.states_built == 2          # the range, plus the layout of fanout 3
    s.sample(5, 0)
    s.sample(None, 1)
    assert s.states_built == 3


def test_sampling_is_uniform_over_the_slots():
    """Every slot of a 10-neighbour row is kept with probability 3/10 (binomial 4-sigma)."""
    n_draws = 4000
    g = CSRGraph.from_edges(np.zeros(10, np.int64), np.arange(1, 11), 11)
    counts = np.zeros(11)
    for seed in range(n_draws):
        s = sample_graph(g, 3, 0, seed)
        np.add.at(counts, s.indices[s.indptr[0]:s.indptr[1]], 1)
    p = counts[1:] / n_draws
    sigma = np.sqrt(0.3 * 0.7 / n_draws)
    assert np.all(np.abs(p - 0.3) < 4 * sigma), p
    # pairs are not degenerate either: each of the 45 pairs appears
    pairs = set()
    for seed in range(500):
        s = sample_graph(g, 2, 1, seed)
        pairs.add(tuple(s.indices[:2]))
    assert len(pairs) == 45


def test_parse_fanout():
    assert parse_fanout("all", 2) == [None, None]
    assert parse_fanout("10", 3) == [10, 10, 10]
    assert parse_fanout("25,10", 2) == [25, 10]
    assert parse_fanout("all,5", 2) == [None, 5]
    for bad, msg in (("10,10,10", "3 fanouts but the model has 2"), ("x", "not a whole number"),
                     ("0", "at least 1"), ("10,5", "exactly 3")):
        with pytest.raises(UserError, match=msg):
            parse_fanout(bad, 3 if bad == "10,5" else 2)


# -- the engine against the model's own forward -----------------------------------------------------

GRIDS = [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2)]


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
@pytest.mark.parametrize("layer_norm", [False, True])
def test_embeddings_equal_the_layerwise_reference(kind, layer_norm):
    g = awkward()
    X = features(g.n_rows, 13)
    torch.manual_seed(1)
    model = GNN(kind, 13, 11, 5, 2, layer_norm=layer_norm)
    for fanout in ([None, None], [3, 2]):
        ref = layerwise_forward(model, layer_graphs(g, fanout, seed=6),
                                torch.from_numpy(X)).numpy()
        scale = np.abs(ref).max()
        for P, M in GRIDS:
            for gemm in ("deal", "cagnet"):
                if gemm == "cagnet" and layer_norm:
                    continue
                for pipeline in (True, False):
                    out, _ = run(model, g, X, partitions=P, feature_groups=M, fanout=fanout,
                                 gemm=gemm, pipeline=pipeline, groups=3, seed=6)
                    err = np.abs(out - ref).max() / scale
                    assert err < 1e-5, (fanout, P, M, gemm, pipeline, err)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_full_neighbourhood_equals_the_training_forward(kind):
    """--fanout all: the single-process full-graph forward of the training code."""
    g = awkward()
    X = features(g.n_rows, 9, seed=2)
    torch.manual_seed(2)
    model = GNN(kind, 9, 8, 4, 3).eval()
    with torch.no_grad():
        ref = reference_forward(model, model.aggregation(g), torch.from_numpy(X), None).numpy()
    out, _ = run(model, g, X, partitions=2, feature_groups=2, fanout=None, groups=2)
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-5


# -- the engine against the formulas and the sampling rule written here ------------------------------

_M64 = (1 << 64) - 1


def _splitmix(x: int) -> int:
    """SplitMix64's finaliser on a Python int (Steele et al.)."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _slot(i: int, d: int, key: int) -> int:
    """``π(i)`` of ``[0, d)``: four Feistel rounds on the smallest even number of bits covering
    ``d``, applied again until the value is inside ``[0, d)`` (cycle walking)."""
    half = (max(1, (max(d, 2) - 1).bit_length()) + 1) // 2
    mask = (1 << half) - 1
    x = i
    while True:
        left, right = x >> half, x & mask
        for rnd in range(4):
            f = _splitmix((key + (right << 3) + rnd) & _M64) & mask
            left, right = right, left ^ f
        x = (left << half) | right
        if x < d:
            return x


def sampled_rows_by_hand(g, k, layer, seed):
    """Every row's sample by the rule of host/graphs/sampling.py's docstring, one row at a
    time in plain Python: a row with ``d > k`` stored entries keeps slots ``π(0) .. π(k-1)`` in
    stored order, keyed by (seed, layer, row); other rows keep every entry."""
    base = _splitmix(((seed & 0xFFFFFFFF) << 20) | (layer & 0xFFFFF))
    rows = []
    for v in range(g.n_rows):
        stored = [int(u) for u in g.indices[g.indptr[v]:g.indptr[v + 1]]]
        d = len(stored)
        if k is None or d <= k:
            rows.append(stored)
            continue
        key = _splitmix(((v * 0x94D049BB133111EB) & _M64) ^ base)
        rows.append([stored[s] for s in sorted(_slot(i, d, key) for i in range(k))])
    return rows


def as_graph(rows, n):
    """Rows of neighbour lists as the (indptr, indices, n_rows) that plain_gnn reads."""
    from types import SimpleNamespace
    indptr = np.r_[0, np.cumsum([len(r) for r in rows])]
    return SimpleNamespace(indptr=indptr, n_rows=n,
                           indices=np.array([u for r in rows for u in r], dtype=np.int64))


def test_the_sampler_follows_the_rule_row_by_row():
    """The vectorised sampler (whole graph, a row range, arbitrary rows) against the rule
    computed one row at a time here, at fanouts below, at and above the degrees."""
    g = awkward()
    for k, layer, seed in ((1, 0, 0), (3, 2, 9), (5, 1, 2 ** 31 + 7), (40, 3, 1)):
        want = sampled_rows_by_hand(g, k, layer, seed)
        whole = sample_graph(g, k, layer, seed)
        assert [list(whole.indices[whole.indptr[v]:whole.indptr[v + 1]])
                for v in range(g.n_rows)] == want, (k, layer, seed)
        part = LayerSampler(g, 7, 50, seed=seed).sample(k, layer)
        assert [list(part.indices[part.indptr[v]:part.indptr[v + 1]])
                for v in range(43)] == want[7:50]
        rows = np.array([1, 63, 2, 1, 11])
        indptr, idx = sample_rows(g, rows, k, layer, seed)
        assert [list(idx[indptr[i]:indptr[i + 1]]) for i in range(rows.size)] == \
            [want[v] for v in rows]


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_embeddings_equal_the_formulas_on_the_rule_s_samples(kind):
    """All-node embeddings against a layer-wise forward written from the formulas (dense
    operators from each layer's entries, tests/host/plain_gnn.py), full neighbourhoods and
    samples drawn by the rule written here: no engine, operator or sampler code."""
    g = awkward()
    X = features(g.n_rows, 10, seed=4)
    torch.manual_seed(4)
    model = GNN(kind, 10, 9, 4, 2).eval()
    W = plain_gnn.weights(model)
    for fanout in ([None, None], [3, 2]):
        graphs = [as_graph(sampled_rows_by_hand(g, k, layer, 6), g.n_rows)
                  for layer, k in enumerate(fanout)]
        with torch.no_grad():
            ref = plain_gnn.forward(kind, W, [plain_gnn.operator(kind, h) for h in graphs],
                                    X).numpy()
        for P, M in ((1, 1), (2, 2), (3, 2)):
            out, _ = run(model, g, X, partitions=P, feature_groups=M, fanout=fanout, groups=3,
                         seed=6)
            err = np.abs(out - ref).max() / np.abs(ref).max()
            assert err < 1e-5, (fanout, P, M, err)


def test_ego_network_baseline_equals_deal_and_recomputes_shared_nodes():
    g = awkward()
    X = features(g.n_rows, 7, seed=3)
    torch.manual_seed(3)
    model = GNN("gcn", 7, 6, 3, 2)
    fanout = [4, 3]
    ref = layerwise_forward(model, layer_graphs(g, fanout, seed=1), torch.from_numpy(X)).numpy()
    out, stats = ego_forward(model, g, X, fanout, seed=1, batch_size=10)
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-5
    assert stats["nodes_computed"][-1] == g.n_rows
    assert stats["nodes_computed"][0] > g.n_rows      # layer 0 nodes computed in many batches


def test_rtl_equals_model_and_model_is_near_cpu():
    """The SpMM groups run on the sparse device; RTL and bit-exact model agree bit for bit."""
    from moagcn.host.devices.select import AcceleratorChoice
    g = awkward(24, seed=2)
    X = features(g.n_rows, 6, seed=4)
    torch.manual_seed(4)
    model = GNN("sage", 6, 5, 3, 2)
    cfg = InferConfig(2, 2, [3, None], groups=2, seed=2)
    outs = {}
    for device in ("cpu", "model", "rtl"):
        eng = DealEngine(model, g, X, cfg, LocalComm(4),
                         AcceleratorChoice(device, "sspmm", "tiny"))
        outs[device] = assemble([eng.run()], g.n_rows, 3)
        if device != "cpu":
            assert eng.stats[0].device["cycles_total"] > 0
    assert np.array_equal(outs["rtl"], outs["model"])
    assert np.abs(outs["model"] - outs["cpu"]).max() < 1e-5 * np.abs(outs["cpu"]).max()


# -- bytes and memory ---------------------------------------------------------------------------------

@pytest.mark.parametrize("P,M", [(1, 2), (2, 2), (2, 4), (3, 2)])
def test_gemm_bytes_are_table_1_exactly(P, M):
    """D -> D layers, N divisible by P M^2: each process receives 2 N D (M-1) / (P M^2) entries
    per DEAL GEMM and N D (M-1) / (P M) per CAGNET GEMM."""
    D, layers = 8, 2
    N = P * M * M * 5
    rng = np.random.default_rng(0)
    g = CSRGraph.from_edges(rng.integers(0, N, 4 * N), rng.integers(0, N, 4 * N), N)
    X = features(N, D)
    torch.manual_seed(0)
    model = GNN("gcn", D, D, D, layers)
    _, eng = run(model, g, X, partitions=P, feature_groups=M, fanout=[3, 3], gemm="deal")
    want = 4 * layers * 2 * N * D * (M - 1) // (P * M * M)
    assert [s.bytes_received["gemm"] for s in eng.stats.values()] == [want] * (P * M)
    _, eng = run(model, g, X, partitions=P, feature_groups=M, fanout=[3, 3], gemm="cagnet")
    want = 4 * layers * N * D * (M - 1) // (P * M)
    assert [s.bytes_received["gemm"] for s in eng.stats.values()] == [want] * (P * M)


def test_spmm_fetches_exactly_the_needed_rows():
    g = awkward()
    N = g.n_rows
    X = features(N, 10)
    torch.manual_seed(5)
    model = GNN("gcn", 10, 7, 4, 2)
    P, M, fanout, S = 3, 2, [4, 2], 3
    _, eng = run(model, g, X, partitions=P, feature_groups=M, fanout=fanout, groups=S, seed=8)
    graphs = layer_graphs(g, fanout, seed=8)
    bounds = [(N * i // P, N * (i + 1) // P) for i in range(P)]
    for r, st in eng.stats.items():
        p, m = divmod(r, M)
        lo, hi = bounds[p]
        rows_bytes = ids_bytes = 0
        for layer, G in enumerate(graphs):
            w_out = model.dims[layer + 1]
            w = w_out * (m + 1) // M - w_out * m // M
            mine = set(G.indices[G.indptr[lo]:G.indptr[hi]].tolist())
            remote = {c for c in mine if not lo <= c < hi}
            rows_bytes += 4 * w * len(remote)
            for q, (qlo, qhi) in enumerate(bounds):     # what the other ranges ask of me
                if q != p:
                    theirs = set(G.indices[G.indptr[qlo]:G.indptr[qhi]].tolist())
                    ids_bytes += 8 * (1 + len({c for c in theirs if lo <= c < hi}))
        assert st.bytes_received["spmm_rows"] == rows_bytes
        assert st.bytes_received["spmm_ids"] == ids_bytes


def test_peak_feature_memory_is_bounded_and_below_cagnet():
    """DEAL holds at most its input block, one row tile and its output block (plus sub-group
    buffers); CAGNET's N/P x D' partial products are M times a block."""
    N, D, P, M = 240, 64, 2, 4
    rng = np.random.default_rng(1)
    g = CSRGraph.from_edges(rng.integers(0, N, 6 * N), rng.integers(0, N, 6 * N), N)
    X = features(N, D)
    torch.manual_seed(1)
    model = GNN("gcn", D, D, D, 2)
    block = 4 * (N // P) * (D // M)
    _, deal = run(model, g, X, partitions=P, feature_groups=M, fanout=[5, 5], groups=4)
    _, cag = run(model, g, X, partitions=P, feature_groups=M, fanout=[5, 5], gemm="cagnet",
                 groups=4)
    for r in range(P * M):
        assert block <= deal.stats[r].mem.peak <= 3 * block + 4 * (N // P) * (D // M)
        assert cag.stats[r].mem.peak >= 4 * (N // P) * D       # the N/P x D' intermediate
        assert deal.stats[r].mem.peak < cag.stats[r].mem.peak


def test_bad_configurations_are_named():
    g = awkward()
    model = GNN("gcn", 4, 3, 2, 2)
    X = features(g.n_rows, 4)
    with pytest.raises(UserError, match="processes, but the run has 3"):
        DealEngine(model, g, X, InferConfig(2, 2), LocalComm(3))
    with pytest.raises(UserError, match="narrowest layer width 2"):
        DealEngine(model, g, X, InferConfig(1, 3), LocalComm(3))
    with pytest.raises(UserError, match="more than the graph's"):
        DealEngine(model, g, X, InferConfig(100, 1), LocalComm(100))
    with pytest.raises(UserError, match="LayerNorm"):
        DealEngine(GNN("gcn", 4, 3, 2, 2, layer_norm=True), g, X,
                   InferConfig(1, 2, gemm="cagnet"), LocalComm(2))


def test_auto_gemm_picks_the_cheaper_exchange_per_layer():
    """1433 -> 16 -> 7 at M = 2: the reduce-scatter moves fewer bytes in both layers; D -> D at
    M = 4: the ring (2/M of the reduce-scatter's bytes)."""
    from moagcn.host.deal.engine import ring_gemm
    wide = GNN("gcn", 1433, 16, 7, 2)
    assert [ring_gemm(wide, InferConfig(1, 2, gemm="auto"), l) for l in (0, 1)] == [False, False]
    square = GNN("gcn", 8, 8, 8, 2)
    assert ring_gemm(square, InferConfig(1, 4, gemm="auto"), 0)
    N, P, M = 64, 1, 4
    g = awkward(N)
    X = features(N, 8)
    torch.manual_seed(0)
    out_auto, e_auto = run(square, g, X, partitions=P, feature_groups=M, gemm="auto")
    out_cag, e_cag = run(square, g, X, partitions=P, feature_groups=M, gemm="cagnet")
    assert np.abs(out_auto - out_cag).max() < 1e-5 * np.abs(out_cag).max()
    assert e_auto.stats[0].bytes_received["gemm"] * M == 2 * e_cag.stats[0].bytes_received["gemm"]
