"""Aggregation rows longer than any HyScale job holds run in pieces added on the host: the
golden model, the model device and the Verilator RTL against a plain loop."""

import numpy as np
import pytest

from moagcn.host.devices.select import AcceleratorChoice
from moagcn.hw.hyscale.config import preset
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits

from .test_golden import reference_update

pytestmark = pytest.mark.xdist_group("verilator-hyscale")

CANON_NAN = 0x7FC00000


def plain_loop(indptr, indices, data, X, max_edges, max_sources):
    """Row by row in float32 scalars: a row that fits is one sum over its edges by source
    (stable); a longer one is cut into runs of min(max_edges, max_sources) of those edges,
    each summed from +0, and the runs' sums added in order."""
    size = min(max_edges, max_sources)
    Z = np.zeros((len(indptr) - 1, X.shape[1]), dtype=np.float32)
    for v in range(len(indptr) - 1):
        edges = sorted(range(indptr[v], indptr[v + 1]), key=lambda e: indices[e])
        long = len(edges) > max_edges or len({indices[e] for e in edges}) > max_sources
        runs = [edges[k:k + size] for k in range(0, len(edges), size)] if long else [edges]
        for i in range(X.shape[1]):
            total = None
            for run in runs:
                s = np.float32(0.0)
                with np.errstate(invalid="ignore", over="ignore"):
                    for e in run:
                        s = np.float32(s + np.float32(data[e]) * X[indices[e], i])
                    total = s if total is None else np.float32(total + s)
            Z[v, i] = 0.0 if total is None else total
    return Z


def same_bits(a, b):
    """Equal bits, any NaN taken as the canonical one (the reference's NaNs are numpy's)."""
    a, b = as_bits(a).copy(), as_bits(b).copy()
    a[np.isnan(as_bits(a).view(np.float32))] = CANON_NAN
    b[np.isnan(b.view(np.float32))] = CANON_NAN
    return np.array_equal(a, b)


def long_row_graph(seed=0, n_src=700):
    """Row 0: 600 distinct sources (> tiny's 512) within 1,024 edges; row 2: 1,500 edges
    (> 1,024) over 40 sources, duplicates; row 3: exactly 512 distinct sources (fits); an
    empty row; a self loop; short rows."""
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(n_src)[:600], rng.integers(0, n_src, 5), rng.integers(0, 40, 1500),
            rng.permutation(n_src)[:512], np.zeros(0, np.int64), np.array([5, 5])]
    rows += [rng.integers(0, n_src, rng.integers(1, 9)) for _ in range(30)]
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int64)
    data = rng.uniform(0.1, 1.0, indices.size).astype(np.float32)
    return indptr, indices, data


def test_golden_sums_a_long_rows_pieces_in_order():
    indptr, indices, data = long_row_graph()
    X = np.random.default_rng(1).standard_normal((700, 5)).astype(np.float32)
    X[indices[indptr[2]], 3] = np.inf        # row 2: an infinity in one piece ...
    X[0, 4] = np.inf                          # row 2's first piece: +inf, its last: -inf,
    X[39, 4] = -np.inf                        # so their sum is NaN
    want = plain_loop(indptr, indices, data, X, 1024, 512)
    got = golden.aggregate_rows(indptr, indices, data, X, buffer=(1024, 512))
    assert same_bits(got, want)
    assert as_bits(got)[2, 4] == CANON_NAN
    # rows that fit are the plain aggregate's, whatever else the job holds
    whole = golden.aggregate_rows(indptr, indices, data, X)
    fits = np.ones(len(indptr) - 1, bool)
    fits[[0, 2]] = False
    assert np.array_equal(as_bits(got)[fits], as_bits(whole)[fits])
    assert not np.array_equal(as_bits(got)[0], as_bits(whole)[0])   # another order of sums
    assert golden.row_pieces(indptr[:2], indices[:600], 1024, 600) is None


def test_the_model_device_and_the_rtl_run_long_rows_in_pieces():
    indptr, indices, data = long_row_graph(seed=2)
    ones = np.ones(indices.size, np.float32)
    H = np.random.default_rng(3).standard_normal((700, 20)).astype(np.float32)
    cfg = preset("tiny")
    want = plain_loop(indptr, indices, ones, H, cfg.max_edges, cfg.max_sources)
    from moagcn.core.graph import CSRGraph
    csr = CSRGraph(indptr, indices, n_cols=700)
    out = {}
    for kind in ("model", "rtl"):
        dev = AcceleratorChoice(kind, "hyscale", "tiny").make()
        out[kind] = dev.sspmm(csr, H)
        out[kind + "_tiles"] = dev.counters.tiles
        out[kind + "_cycles"] = dev.counters.cycles_total
    assert same_bits(out["model"], want)
    assert np.array_equal(as_bits(out["rtl"]), as_bits(out["model"]))
    assert out["rtl_tiles"] == out["model_tiles"] > 1
    assert out["rtl_cycles"] == out["model_cycles"] > 0       # the kernel cycle model is exact


def test_a_fused_layer_with_a_long_row_runs_as_aggregation_then_update(capsys):
    """``moagcn hyscale run``'s job: the aggregation in pieces, then the update of whole
    aggregates as a dense job, on the model and on the Verilator RTL, against plain loops;
    the RTL's progress lines name each pass."""
    from moagcn.sim.driver import Driver
    from moagcn.sim.hyscale.spec import SPEC
    indptr, indices, data = long_row_graph(seed=4)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((700, 12)).astype(np.float32)
    W = rng.standard_normal((12, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    cfg = preset("tiny")
    with np.errstate(invalid="ignore", over="ignore"):
        want = reference_update(plain_loop(indptr, indices, data, X, cfg.max_edges,
                                           cfg.max_sources), W, b, relu=True)
    assert same_bits(golden.layer(indptr, indices, data, X, W, b, True,
                                  buffer=(cfg.max_edges, cfg.max_sources)), want)
    job = SPEC.job(indptr, indices, X, W, b, relu=True, data=data)
    res = {kind: Driver(SPEC, cfg, kind).run(job, progress=True) for kind in ("model", "rtl")}
    said = capsys.readouterr()
    said = said.out + said.err
    assert "pass 1 of 2" in said and "pass 2 of 2" in said, said
    assert same_bits(res["model"].output, want)
    assert np.array_equal(as_bits(res["rtl"].output), as_bits(res["model"].output))
    m, r = res["model"].counters, res["rtl"].counters
    assert r.cycles_total == m.cycles_total > 0 and r.tiles == m.tiles > 2
    # the job's own work, whatever the passes: its edges times f_in, its rows times f_out
    assert (m.work_adds, m.elements, m.calls) == (indices.size * 12, (len(indptr) - 1) * 5, 1)
    est = Driver(SPEC, cfg, "model").estimate(job)
    assert est.cycles_total == m.cycles_total and est.tiles == m.tiles
    checked = SPEC.check(job, cfg)
    assert SPEC.kernel_model(checked, cfg)["model_cycles"] == m.cycles_total
    # without weights: GCN's, checked or not (a job passed as checked gets check's default)
    plain = SPEC.job(indptr, indices, X, W, b, relu=True)
    got = Driver(SPEC, cfg, "model").run(plain, checked=True).output
    assert np.array_equal(as_bits(got), as_bits(Driver(SPEC, cfg, "model").run(plain).output))


def test_a_read_only_graphs_cut_is_remembered():
    """Training aggregates one read-only adjacency every step: its cut is found once, and
    returned read-only so that the pieced job's tile plans are remembered as well."""
    from moagcn.sim.hyscale.spec import long_row_pieces
    indptr, indices, _ = long_row_graph()
    cfg = preset("tiny")
    loose = long_row_pieces(indptr, indices, cfg)
    assert loose is not None and long_row_pieces(indptr, indices, cfg) is not loose
    indptr.flags.writeable = indices.flags.writeable = False
    first = long_row_pieces(indptr, indices, cfg)
    assert long_row_pieces(indptr, indices, cfg) is first
    for a, b in zip(first, loose):
        assert np.array_equal(a, b) and not a.flags.writeable
    assert np.array_equal(first[1], indices[first[2]])
