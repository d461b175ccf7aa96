"""DEAL all-node inference of a GAT (host/deal/sddmm.py, the engine's GAT layer, the ego
baseline's, checkpoints and ``moagcn infer``).

References share no code with what they check: the embeddings against a GAT written here
from its formulas, entry by entry in numpy (PyG's conventions: self loops removed, one per node
added, the softmax over each target's in-entries), on the engine's own layer samples; the
SDDMM's bytes against DEAL's Table 3 on regular and complete graphs (where its terms are exact)
and against the source rows counted here with numpy sets.
"""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.deal.ego import ego_forward
from moagcn.host.deal.engine import DealEngine, InferConfig, assemble
from moagcn.host.deal.infer import infer
from moagcn.host.deal.sddmm import formula
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.nn.gat import GAT
from moagcn.host.nn.layerwise import layer_graphs, layerwise_forward
from moagcn.host.parallel.comm import LocalComm

from .test_deal import awkward, features


def gat(f_in, hidden, heads, classes, seed=0):
    torch.manual_seed(seed)
    model = GAT(f_in, hidden, heads, classes, dropout=0.6)
    with torch.no_grad():       # a non-zero bias and attention vectors that matter
        for conv in model.convs:
            conv.bias.uniform_(-0.5, 0.5)
            conv.att_src.mul_(3.0)
    return model.eval()


def plain_gat(model, graphs, X):
    """The GAT from its formulas, one target at a time."""
    x = X.astype(np.float64)
    for layer, conv in enumerate(model.convs):
        if layer > 0:
            x = np.where(x > 0, x, np.expm1(x))                      # ELU
        H, C = conv.heads, conv.out_channels
        W = conv.lin.weight.detach().double().numpy()
        a_s = conv.att_src.detach().double().numpy().reshape(H, C)
        a_d = conv.att_dst.detach().double().numpy().reshape(H, C)
        h = (x @ W.T).reshape(-1, H, C)
        G = graphs[layer]
        out = np.zeros((G.n_rows, H, C))
        for v in range(G.n_rows):
            srcs = [int(u) for u in G.indices[G.indptr[v]:G.indptr[v + 1]] if u != v] + [v]
            for k in range(H):
                e = np.array([h[v, k] @ a_d[k] + h[u, k] @ a_s[k] for u in srcs])
                e = np.where(e > 0, e, conv.negative_slope * e)
                w = np.exp(e - e.max())
                w /= w.sum()
                out[v, k] = sum(wi * h[u, k] for wi, u in zip(w, srcs))
        out = out.reshape(G.n_rows, H * C) if conv.concat else out.mean(1)
        x = out + conv.bias.detach().double().numpy()
    return x


def run(model, graph, X, **kw):
    cfg = InferConfig(**kw)
    eng = DealEngine(model, graph, X, cfg, LocalComm(cfg.processes))
    return assemble([eng.run()], graph.n_rows, model.dims[-1]), eng


@pytest.mark.parametrize("P,M", [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2), (2, 3)])
@pytest.mark.parametrize("gemm", ["deal", "cagnet"])
def test_embeddings_equal_the_formulas(P, M, gemm):
    """Hub, isolated nodes, stored self loops, repeated edges; 3 heads of 5 (blocks that cut
    heads when M = 2), then one head; sampled and full neighbourhoods."""
    g = awkward(40, seed=3)
    X = features(g.n_rows, 7, seed=1)
    model = gat(7, 5, 3, 4)
    fanout = [4, None]
    emb, _ = run(model, g, X, partitions=P, feature_groups=M, fanout=fanout, gemm=gemm,
                 groups=2, seed=6)
    want = plain_gat(model, layer_graphs(g, fanout, seed=6), X)
    assert np.abs(emb - want).max() < 1e-5 * np.abs(want).max()


def test_equals_the_model_s_own_layers_and_the_ego_baseline():
    g = awkward(64, seed=7)
    X = features(g.n_rows, 6, seed=2)
    model = gat(6, 4, 4, 3, seed=3)
    fanout = [3, 5]
    emb, _ = run(model, g, X, partitions=2, feature_groups=2, fanout=fanout, groups=3, seed=4)
    ref = layerwise_forward(model, layer_graphs(g, fanout, 4), torch.from_numpy(X)).numpy()
    scale = np.abs(ref).max()
    assert np.abs(emb - ref).max() < 1e-5 * scale
    ego, stats = ego_forward(model, g, X, fanout, seed=4, batch_size=10)
    assert np.abs(ego - emb).max() < 1e-5 * scale
    assert stats["time_s"]["sddmm"] > 0 and sum(stats["nodes_computed"]) > 2 * g.n_rows


def circulant(n, k):
    """Every node's in-neighbours are the k nodes before it and the k after it (mod n)."""
    v = np.repeat(np.arange(n), 2 * k)
    off = np.tile(np.r_[np.arange(1, k + 1), -np.arange(1, k + 1)], n)
    return CSRGraph.from_edges(v, (v + off) % n, n)


def _sddmm_bytes(eng, kind):
    return [s.bytes_received[f"sddmm_{kind}"] for s in eng.stats.values()]


@pytest.mark.parametrize("P,M", [(1, 2), (2, 2), (3, 2), (2, 4)])
def test_sddmm_bytes_are_table_3_where_it_is_exact(P, M):
    """M divides the heads and N divides into P M equal sub-ranges of equal degree: the dest and
    scores terms of approach (ii) exactly, for every process; on the complete graph every
    process needs every source row, approach (i)'s source term."""
    heads = 4
    N = P * M * 6
    X = features(N, 5)
    model = gat(5, 2, heads, heads, seed=1)     # layer 2: 4 classes, one head
    r, c = np.nonzero(~np.eye(N, dtype=bool))
    complete = CSRGraph.from_edges(r, c, N)
    for g, Z, dense in ((circulant(N, 2), 5, False), (complete, N, True)):
        _, eng = run(model, g, X, partitions=P, feature_groups=M, fanout=[None, None])
        want = {k: 0.0 for k in ("dest", "src", "scores")}
        for layer in range(2):
            D = heads if layer == 0 else M      # layer 2: one head cut in M partial terms
            t3 = formula(N, N * Z, D, D / M, P, M)
            want["dest"] += t3["dest"]
            want["scores"] += t3["scores"]
            # approach (i)'s source term: every other process's whole block
            want["src"] += 4 * (M * P - 1) * N * D / (M * P) if dense else 0
        assert _sddmm_bytes(eng, "dest") == [want["dest"]] * (P * M)
        assert _sddmm_bytes(eng, "scores") == [want["scores"]] * (P * M)
        if dense:
            assert _sddmm_bytes(eng, "src") == [want["src"]] * (P * M)


def test_sddmm_fetches_exactly_the_needed_source_terms():
    g = awkward()
    N = g.n_rows
    X = features(N, 6)
    model = gat(6, 3, 2, 5, seed=2)
    P, M, fanout = 3, 2, [4, 2]
    _, eng = run(model, g, X, partitions=P, feature_groups=M, fanout=fanout, seed=8)
    graphs = layer_graphs(g, fanout, seed=8)
    bounds = [(N * i // P, N * (i + 1) // P) for i in range(P)]
    subs = [[(lo + (hi - lo) * m // M, lo + (hi - lo) * (m + 1) // M) for m in range(M)]
            for lo, hi in bounds]
    def needed(G, q, j):         # the sources sub-range (q, j)'s entries use (loops added)
        a, b = subs[q][j]
        return {int(u) for v in range(a, b)
                for u in G.indices[G.indptr[v]:G.indptr[v + 1]]} | set(range(a, b))

    for r, st in eng.stats.items():
        p, m = divmod(r, M)
        lo, hi = bounds[p]
        # ids come only from the other ranges' processes: a count, then the ids in this range
        ids = sum(8 * (1 + len({u for u in needed(G, q, j) if lo <= u < hi}))
                  for G in graphs for q in range(P) if q != p for j in range(M))
        assert st.bytes_received["sddmm_ids"] == ids
        a, b = subs[p][m]
        src = 0
        for layer, G in enumerate(graphs):
            conv = model.convs[layer]
            width = conv.heads * conv.out_channels
            # partial terms per block: the heads its columns touch
            k = [len({c // conv.out_channels for c in range(width * j // M,
                                                              width * (j + 1) // M)})
                 for j in range(M)]
            need = {int(u) for v in range(a, b)
                    for u in G.indices[G.indptr[v]:G.indptr[v + 1]]} | set(range(a, b))
            for u in need:
                q = next(i for i, (lo, hi) in enumerate(bounds) if lo <= u < hi)
                src += 4 * sum(k[j] for j in range(M) if (q, j) != (p, m))
        assert st.bytes_received["sddmm_src"] == src


def test_distributed_gat_equals_the_in_process_run():
    g = awkward(48, seed=1)
    X = features(g.n_rows, 5, seed=3)
    model = gat(5, 3, 2, 3, seed=5)
    from moagcn.host.graphs.data import Dataset
    d = Dataset("awkward", g, X, np.zeros(g.n_rows, np.int64), *([np.ones(g.n_rows, bool)] * 3))
    cfg = InferConfig(2, 2, [3, 4], groups=2, seed=1)
    e1, r1 = infer(d, model, {"normalize_features": False}, cfg)
    e2, r2 = infer(d, model, {"normalize_features": False}, cfg, distributed=True,
                   timeout_s=60)
    assert np.array_equal(e1, e2)
    assert r1["sddmm_bytes_received"] == r2["sddmm_bytes_received"]
    assert min(r1["sddmm_bytes_received"]) > 0


def test_rtl_equals_model_bit_for_bit():
    """The attention's SDDMM and the weighted SpMM on the tiny presets' RTL (Verilator) give
    the model device's embeddings bit for bit, and cycles within the cycle models' 3 %."""
    from moagcn.host.devices.select import AcceleratorChoice
    g = awkward(20, seed=6)
    X = features(g.n_rows, 4, seed=2)
    model = gat(4, 2, 2, 3, seed=7)
    cfg = InferConfig(2, 2, [3, None], groups=2, seed=1)
    out = {}
    for device in ("model", "rtl"):
        eng = DealEngine(model, g, X, cfg, LocalComm(4),
                         AcceleratorChoice(device, "sspmm", "tiny", {"weighted": "true"}))
        out[device] = (assemble([eng.run()], g.n_rows, 3),
                       [s.device["cycles_total"] for s in eng.stats.values()])
    assert np.array_equal(out["rtl"][0], out["model"][0])
    assert min(out["model"][1]) > 0
    assert out["rtl"][1] == pytest.approx(out["model"][1], rel=0.03)


def test_model_device_runs_the_attention_and_bad_models_are_named():
    from moagcn.host.devices.select import AcceleratorChoice
    g = awkward(24, seed=2)
    X = features(g.n_rows, 4, seed=4)
    model = gat(4, 2, 2, 3, seed=4)
    cfg = InferConfig(2, 1, [3, None], groups=2, seed=2)
    cpu = assemble([DealEngine(model, g, X, cfg, LocalComm(2)).run()], g.n_rows, 3)
    eng = DealEngine(model, g, X, cfg, LocalComm(2),
                     AcceleratorChoice("model", "sspmm", "tiny", {"weighted": "true"}))
    emb = assemble([eng.run()], g.n_rows, 3)
    assert np.abs(emb - cpu).max() < 1e-5 * np.abs(cpu).max()
    assert all(s.device["cycles_total"] > 0 for s in eng.stats.values())
    with pytest.raises(UserError, match="weighted=true"):
        DealEngine(model, g, X, cfg, LocalComm(2), AcceleratorChoice("model", "sspmm", "tiny"))
    mean = GAT(4, 2, 2, 3)
    mean.conv1.concat = False
    with pytest.raises(UserError, match="concat=False"):
        DealEngine(mean, g, X, cfg, LocalComm(2))
