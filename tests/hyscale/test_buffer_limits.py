"""HyScale jobs at every buffer limit and a ReLU on -0, through the driver on the RTL, against
plain loops.

The expected outputs come from loops written from docs/hyscale.md ("Order of operations",
"Use": long rows in pieces of ``min(max_edges, max_sources)`` edges in source order, added in
order on the host; a fused layer with such a row runs as its aggregation, then the update of
whole aggregates): :func:`plain_loop` here and ``reference_update`` of test_golden.py, float32
loops that share no code with the golden model or the driver (whose cut and merge use the
golden module's ``row_pieces`` and ``sum_pieces``, so that comparing the RTL with the golden
model cannot see a wrong cut there). The jobs sit on the limits of the
``tiny`` preset (512 sources, 1,024 edges, 64 destinations, 16 features): rows of exactly
``max_edges`` edges and one more, of exactly ``max_sources`` distinct sources and one more
(with and without duplicates), tiles filled to exactly 64 destinations, 512 sources and 1,024
edges, feature chunks of an aggregation, and the dense products' inner and output chunks.
"""

import numpy as np
import pytest

from moagcn.core.tiling import plan_tiles
from moagcn.hw.hyscale import preset
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale.spec import SPEC

from .test_golden import reference_update
from .test_long_rows import same_bits

pytestmark = pytest.mark.xdist_group("verilator-hyscale")

TINY = preset("tiny")
N_SRC = 700


def rows_at_the_long_row_limit(rng, max_edges, max_sources):
    """Rows 0-7: exactly ``max_edges`` edges over 40 sources (fits), one more (long); exactly
    ``max_sources`` distinct sources (fits), one more (long); ``max_sources + 60`` edges with
    exactly ``max_sources`` distinct sources (fits), and with one more distinct (long); each
    of ``max_sources`` sources twice, ``max_edges`` edges (fits both limits exactly); an
    empty row. Then 30 short rows."""
    perm = rng.permutation(N_SRC)
    dup = rng.permutation(perm[:max_sources])
    rows = [rng.integers(0, 40, max_edges), rng.integers(0, 40, max_edges + 1),
            perm[:max_sources], rng.permutation(perm[:max_sources + 1]),
            np.concatenate([dup, dup[:60]]),
            np.concatenate([perm[:max_sources + 1], perm[:59]]),
            np.concatenate([dup, dup[::-1]]), np.zeros(0, np.int64)]
    return rows + [rng.integers(0, N_SRC, rng.integers(1, 6)) for _ in range(30)]


def csr(rows):
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return indptr, np.concatenate([np.asarray(r, np.int64) for r in rows])


def features(rng, f):
    X = (rng.standard_normal((N_SRC, f)) * 2.0 ** rng.integers(-8, 9, (N_SRC, f)))
    X = X.astype(np.float32)
    X[rng.random(X.shape) < 0.03] = -0.0
    return X


def plain_loop(indptr, indices, data, X, max_edges, max_sources, strict=True):
    """Z row by row: a row's edges in ascending source order (stable), each adding
    ``float32(a * X[u])`` to a sum from +0; a row with more than ``max_edges`` edges or more
    than ``max_sources`` distinct sources in runs of ``min(max_edges, max_sources)`` of those
    edges, each summed from +0, the runs' sums added in order (``strict=False``: ``>=`` for
    ``>``, the rule off by one). Vectorised over features only: one float32 rounding per
    element and operation, as the scalar loops of test_long_rows."""
    size = min(max_edges, max_sources)
    Z = np.zeros((len(indptr) - 1, X.shape[1]), dtype=np.float32)
    with np.errstate(all="ignore"):
        for v in range(len(indptr) - 1):
            edges = sorted(range(indptr[v], indptr[v + 1]), key=lambda e: indices[e])
            n_src = len({int(indices[e]) for e in edges})
            long = (len(edges) > max_edges or n_src > max_sources) if strict else \
                (len(edges) >= max_edges or n_src >= max_sources)
            runs = [edges[k:k + size] for k in range(0, len(edges), size)] if long else [edges]
            total = None
            for run in runs:
                acc = np.zeros(X.shape[1], np.float32)
                for e in run:
                    acc = acc + np.float32(data[e]) * X[indices[e]]
                total = acc if total is None else total + acc
            if total is not None:
                Z[v] = total
    return Z


def off_by_one(indptr, indices, data, X):
    return plain_loop(indptr, indices, data, X, TINY.max_edges, TINY.max_sources, strict=False)


def check_the_limit_rows_matter(indptr, indices, data, X, want):
    """Rows 0, 4 and 6 (exactly max_edges edges; max_sources distinct sources within more
    edges) get other bits when cut: the job tells the documented rule from ``>=``."""
    other = off_by_one(indptr, indices, data, X)
    for v in (0, 4, 6):
        assert not np.array_equal(as_bits(want)[v], as_bits(other)[v]), v


def test_aggregation_at_the_long_row_limit_in_tiles_and_chunks_on_verilator():
    """The aggregation a sparse device runs (unit weights): long rows in pieces, tiles, two
    feature chunks (20 features)."""
    rng = np.random.default_rng(11)
    indptr, indices = csr(rows_at_the_long_row_limit(rng, TINY.max_edges, TINY.max_sources))
    X = features(rng, 20)
    ones = np.ones(indices.size, np.float32)
    want = plain_loop(indptr, indices, ones, X, TINY.max_edges, TINY.max_sources)
    check_the_limit_rows_matter(indptr, indices, ones, X, want)
    M = np.ones((indptr.size - 1, 20), bool)
    job = SPEC.aggregation_job(indptr, indices, X, M, TINY)
    res = Driver(SPEC, TINY, "rtl", "verilator").run(job)
    assert same_bits(SPEC.aggregation_output(res.output, job, M), want)
    assert res.tiles >= 6


def test_fused_layer_at_the_long_row_limit_on_verilator():
    """A fused layer with rows at the limit: the aggregation in pieces, then the update of
    whole aggregates (bias, ReLU), as two passes."""
    rng = np.random.default_rng(12)
    indptr, indices = csr(rows_at_the_long_row_limit(rng, TINY.max_edges, TINY.max_sources))
    X = features(rng, 12)
    data = rng.uniform(-1.0, 1.0, indices.size).astype(np.float32)
    W = rng.standard_normal((12, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    Z = plain_loop(indptr, indices, data, X, TINY.max_edges, TINY.max_sources)
    check_the_limit_rows_matter(indptr, indices, data, X, Z)
    with np.errstate(all="ignore"):
        want = reference_update(Z, W, b, relu=True)
    job = SPEC.job(indptr, indices, X, W, b, relu=True, data=data)
    assert SPEC.passes(SPEC.check(job, TINY), TINY) is not None
    res = Driver(SPEC, TINY, "rtl", "verilator").run(job)
    assert same_bits(res.output, want)


def test_fused_layer_tiles_filled_to_every_limit_on_verilator():
    """Tiles of exactly 64 destinations, exactly 512 distinct sources and exactly 1,024 edges
    (the next row would not fit), ReLU."""
    rng = np.random.default_rng(13)
    D, S, E = TINY.max_destinations, TINY.max_sources, TINY.max_edges
    rows = [rng.integers(0, 7, 1) for _ in range(D)]                   # D rows, one edge each
    fresh = rng.permutation(np.arange(100, 100 + S))
    rows += [fresh[k * (S // 16):(k + 1) * (S // 16)] for k in range(16)]    # S sources
    rows += [rng.integers(0, 10, E // 16) for _ in range(16)]                 # E edges
    rows += [rng.integers(0, N_SRC, rng.integers(1, 6)) for _ in range(20)]
    indptr, indices = csr(rows)
    n = indptr.size - 1
    tiles = plan_tiles(indptr, indices, n, N_SRC, 8, SPEC.limits(SPEC.job(
        indptr, indices, np.zeros((N_SRC, 8), np.float32), np.zeros((8, 3), np.float32)),
        TINY))
    blocks = [(t.rows_start, t.rows_stop, t.cols.size, t.indices.size) for t in tiles]
    assert blocks[0][:2] == (0, D)
    assert blocks[1][:3] == (D, D + 16, S)
    assert blocks[2][:2] == (D + 16, D + 32) and blocks[2][3] == E
    assert blocks[3][0] == D + 32
    X = features(rng, 8)
    data = rng.uniform(-1.0, 1.0, indices.size).astype(np.float32)
    W = rng.standard_normal((8, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    with np.errstate(all="ignore"):
        want = reference_update(plain_loop(indptr, indices, data, X, E, S), W, b, relu=True)
    res = Driver(SPEC, TINY, "rtl", "verilator").run(
        SPEC.job(indptr, indices, X, W, b, relu=True, data=data))
    assert same_bits(res.output, want)
    assert res.tiles == len(tiles)


def negative_zero_job():
    """Destinations 0 and 3 have no in-edges (their aggregates are +0); W is negative and
    the bias -0 in columns 0 and 1, so their outputs are ``-0 + (+0 * w) + ...`` = -0 (every
    product +0 * negative is -0, and -0 + -0 = -0); column 2's bias is +0, which keeps +0;
    column 3's is -1. The other rows are ordinary."""
    rng = np.random.default_rng(14)
    rows = [[], [1, 2], [0, 3, 3], [], [4]]
    indptr, indices = csr([np.array(r, np.int64) for r in rows])
    X = rng.standard_normal((5, 4)).astype(np.float32)
    data = rng.uniform(0.5, 1.0, indices.size).astype(np.float32)
    W = -np.abs(rng.standard_normal((4, 4))).astype(np.float32) - np.float32(0.25)
    b = np.array([-0.0, -0.0, 0.0, -1.0], np.float32)
    return indptr, indices, data, X, W, b


@pytest.mark.parametrize("simulator", ["pysim", "verilator"])
def test_relu_turns_negative_zero_into_positive_zero(simulator):
    """docs/hyscale.md: "ReLU turns any result with the sign bit set into +0", -0 included.
    Without the ReLU (on Verilator; pysim runs the ReLU job only, to stay fast) the empty
    rows' outputs in columns 0 and 1 are -0: the job reaches the ReLU with -0."""
    indptr, indices, data, X, W, b = negative_zero_job()
    Z = plain_loop(indptr, indices, data, X, 1 << 30, 1 << 30)
    driver = Driver(SPEC, TINY, "rtl", simulator)
    for relu in ((True,) if simulator == "pysim" else (False, True)):
        with np.errstate(all="ignore"):
            want = reference_update(Z, W, b, relu=relu)
        got = driver.run(SPEC.job(indptr, indices, X, W, b, relu=relu, data=data)).output
        assert np.array_equal(as_bits(got), as_bits(want)), (relu, as_bits(got))
        empty = as_bits(got)[[0, 3]]
        if relu:
            assert (empty == 0).all()                                    # +0 everywhere
        else:
            assert (empty[:, :2] == 0x80000000).all() and (empty[:, 2] == 0).all()


def dense_loop(X, W, b, width, bias_last=False):
    """``X W + b`` as the device's dense products are documented (``AcceleratorDevice.linear``,
    docs/hyscale.md "Order of operations"): the inner dimension in chunks of ``width``, each
    chunk a layer whose aggregate of row v is ``+0 + X[v, i]`` (one edge of weight 1) and whose
    output starts from the bias (first chunk only; +0 in the others) and adds
    ``float32(z_i * W[i, c])`` for ascending i; the chunks' outputs added in ascending order."""
    n, k = X.shape
    Z = np.float32(0.0) + X                        # +0 + x: -0 becomes +0, the rest unchanged
    Y = None
    with np.errstate(all="ignore"):
        for k0 in range(0, k, width):
            here = k0 == (width * ((k - 1) // width) if bias_last else 0)
            acc = np.broadcast_to(b if here else np.zeros_like(b), (n, b.size)).copy()
            for i in range(k0, min(k, k0 + width)):
                acc = acc + Z[:, i:i + 1] * W[i]
            Y = acc if Y is None else Y + acc
    return Y


@pytest.mark.parametrize("n,k,f", [(64, 16, 16), (65, 33, 17)])
def test_dense_products_at_the_chunk_limits_on_verilator(n, k, f):
    """The dense product a trainer's update runs on the systolic array, cut by the device into
    inner and output chunks of exactly 16 (and one more: 17 outputs, 33 inner) and by the
    driver into tiles of exactly 64 rows (and one more), against the loop."""
    from moagcn.host.devices.select import AcceleratorChoice
    rng = np.random.default_rng(n + k + f)
    X = (rng.standard_normal((n, k)) * 2.0 ** rng.integers(-6, 7, (n, k))).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = -0.0
    W = rng.standard_normal((k, f)).astype(np.float32)
    b = rng.standard_normal(f).astype(np.float32)
    want = dense_loop(X, W, b, TINY.max_feature_width)
    Y = AcceleratorChoice("rtl", "hyscale", "tiny").make().linear(X, W, b)
    assert np.array_equal(as_bits(Y), as_bits(want))
    if k > TINY.max_feature_width:             # the job tells the bias's chunk apart
        last = dense_loop(X, W, b, TINY.max_feature_width, bias_last=True)
        assert not np.array_equal(as_bits(last), as_bits(want))
