"""S-SpMM jobs at every buffer limit, through the driver on the RTL, against plain loops.

The expected outputs come from :func:`loop_reference`, written here from docs/sspmm.md
("Accumulation order", "Driver and CLI", the dispatcher's split rule under "Blocks"), and
share no code with the golden model or with the driver's cut and merge (which use the golden
module's ``buffer_pieces`` and ``merge_pieces``, so that comparing the RTL with the golden
model cannot see a wrong cut there). The jobs sit on the limits: rows of exactly
``max_edges`` entries and one more, of exactly ``max_nodes`` distinct neighbours and one
more (with and without duplicates), tiles filled to exactly ``max_nodes`` rows, ``max_nodes``
distinct columns and ``max_edges`` entries, feature chunks, and hub rows split across slices
inside long rows' pieces.
"""

import numpy as np
import pytest

from moagcn.core.tiling import plan_tiles
from moagcn.hw.sspmm import preset

from .graphs import drive

pytestmark = pytest.mark.xdist_group("verilator-sspmm")

TINY = preset("tiny")                    # max_nodes 256, max_edges 4096, 16 features per job
SPLIT = preset("tiny", slices=2, split_degree=8)
SMALL = preset("tiny", max_nodes=16, max_edges=64, max_feature_width=4)     # pysim
CANONICAL_NAN = 0x7FC00000


def loop_reference(indptr, indices, H, M, max_edges, max_nodes, slices=1, split_degree=0,
                   strict=True):
    """Z by loops, from the documented rules (``strict=False``: the long-row rule off by one,
    ``>=`` for ``>``, to show that a job can tell them apart):

    - a row's neighbours in ascending column order, summed from +0 in binary32, one after
      the other;
    - a row with more than ``max_edges`` entries or more than ``max_nodes`` distinct
      neighbours runs in runs of ``min(max_edges, max_nodes)`` consecutive neighbours, each
      summed from +0, the runs' sums added in order on the host ``((r0 + r1) + r2) + ...``;
    - with ``slices`` S > 1 and ``split_degree`` D > 0, a row of the job the accelerator runs
      (a whole row or a run) with more than D neighbours is summed in pieces of
      ``max(D, ceil(deg / S))`` consecutive neighbours, each from +0, added in order;
    - masked elements +0, NaNs the canonical quiet NaN.
    """
    n, F = len(indptr) - 1, H.shape[1]
    run_len = min(max_edges, max_nodes)
    Z = np.zeros((n, F), np.float32)

    def pieces_sum(pieces):
        total = None
        for piece in pieces:
            acc = np.zeros(F, np.float32)
            for u in piece:
                acc = acc + H[u]                 # float32 + float32: one rounding per element
            total = acc if total is None else total + acc
        return total

    with np.errstate(all="ignore"):
        for v in range(n):
            cols = sorted(int(c) for c in indices[indptr[v]:indptr[v + 1]])
            if strict:
                long = len(cols) > max_edges or len(set(cols)) > max_nodes
            else:
                long = len(cols) >= max_edges or len(set(cols)) >= max_nodes
            if long:
                runs = [cols[k:k + run_len] for k in range(0, len(cols), run_len)]
            else:
                runs = [cols]
            sums = []
            for run in runs:
                if slices > 1 and split_degree and len(run) > split_degree:
                    q = max(split_degree, -(-len(run) // slices))
                    sums.append(pieces_sum([run[k:k + q] for k in range(0, len(run), q)]))
                else:
                    sums.append(pieces_sum([run]))
            total = sums[0]
            for s in sums[1:]:
                total = total + s
            Z[v] = np.where(M[v], total, np.float32(0.0))
    bits = Z.view(np.uint32)
    bits[np.isnan(Z)] = CANONICAL_NAN
    return Z


def assert_same_bits(got, want, what="Z"):
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{what}: {len(bad)} elements differ, first at {bad[:5].tolist()}"


def job_of_rows(rows, n, F, seed, density=0.8):
    """(indptr, indices, H, M) with the given rows, then random short rows up to ``n``; H of
    wide dynamic range (sums in another grouping round differently), a few signed zeros."""
    rng = np.random.default_rng(seed)
    rows = list(rows) + [rng.integers(0, n, rng.integers(0, 5)) for _ in range(n - len(rows))]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.concatenate([np.asarray(r, np.int64) for r in rows])
    H = (rng.standard_normal((n, F)) * 2.0 ** rng.integers(-8, 9, (n, F))).astype(np.float32)
    H[rng.random(H.shape) < 0.03] = -0.0
    M = rng.random((n, F)) < density
    M[:8] = True                                   # the limit rows: every element
    return indptr, indices, H, M


def rows_at_the_long_row_limit(rng, n, max_edges, max_nodes, few=40):
    """Rows 0-6: exactly ``max_edges`` entries over ``few`` columns (fits), one more (long);
    exactly ``max_nodes`` distinct (fits), one more (long); ``max_nodes + k`` entries with
    exactly ``max_nodes`` distinct (fits), and with one more distinct (long); each of
    ``max_nodes`` neighbours twice (fits); row 7 empty."""
    others = rng.permutation(np.arange(1, n))
    dup = rng.permutation(others[:max_nodes])
    k = max_nodes // 4 + 3
    return [rng.integers(0, few, max_edges), rng.integers(0, few, max_edges + 1),
            others[:max_nodes], rng.permutation(others[:max_nodes + 1]),
            np.concatenate([dup, dup[:k]]),
            np.concatenate([others[:max_nodes + 1], others[:k - 1]]),
            np.concatenate([dup, dup[::-1]]), np.zeros(0, np.int64)]


def long_rows(indptr, indices, max_edges, max_nodes):
    """Which rows the reference cuts (for the tests' own checks of their jobs)."""
    return [v for v in range(len(indptr) - 1)
            if indptr[v + 1] - indptr[v] > max_edges
            or np.unique(indices[indptr[v]:indptr[v + 1]]).size > max_nodes]


def check_the_limit_rows_matter(job, cfg, **split):
    """The job can tell the documented rule from the rule off by one (rows at exactly a limit
    cut too): other bits on rows 0, 4 and 6. (Row 2, exactly ``max_nodes`` neighbours, would
    be one run of all of them: the same sum.) Returns the reference."""
    want = loop_reference(*job, cfg.max_edges, cfg.max_nodes, **split)
    off_by_one = loop_reference(*job, cfg.max_edges, cfg.max_nodes, **split, strict=False)
    for v in (0, 4, 6):
        assert not np.array_equal(want[v].view(np.uint32), off_by_one[v].view(np.uint32)), v
    return want


def test_rows_at_the_long_row_limit_on_verilator():
    """Rows of exactly ``max_edges`` entries and ``max_nodes`` distinct neighbours run whole;
    one more entry or one more distinct neighbour and they run in pieces of 256 added on the
    host; 20 features (two chunks); 400 rows (several tiles)."""
    rng = np.random.default_rng(1)
    n, F = 400, 20
    job = job_of_rows(rows_at_the_long_row_limit(rng, n, TINY.max_edges, TINY.max_nodes),
                      n, F, seed=2)
    indptr, indices, H, M = job
    assert long_rows(indptr, indices, TINY.max_edges, TINY.max_nodes) == [1, 3, 5]
    want = check_the_limit_rows_matter(job, TINY)
    res = drive(TINY, "verilator", *job)
    assert_same_bits(res.output, want)
    assert res.tiles >= 6 and res.raw["err_index"] == 0 and res.raw["err_indptr"] == 0


def tile_edge_rows(rng, n, max_edges, max_nodes):
    """Rows 0 .. max_nodes - 1: one entry each (a block of exactly max_nodes rows); then 16
    rows of 16 new distinct columns each (a block of exactly max_nodes distinct columns, the
    next row's columns all new); then 16 rows of max_edges / 16 entries over 10 columns (a
    block of exactly max_edges entries, the next row one more)."""
    per = max_nodes // 16
    rows = [rng.integers(0, 7, 1) for _ in range(max_nodes)]
    fresh = rng.permutation(np.arange(300, 300 + max_nodes))
    rows += [fresh[k * per:(k + 1) * per] for k in range(16)]
    rows += [rng.integers(0, 10, max_edges // 16) for _ in range(16)]
    return rows + [rng.integers(0, 7, 3)]


def test_tiles_filled_to_every_limit_on_verilator():
    rng = np.random.default_rng(3)
    n, F = 600, 20
    job = job_of_rows(tile_edge_rows(rng, n, TINY.max_edges, TINY.max_nodes), n, F, seed=4)
    indptr, indices, H, M = job
    from moagcn.sim.sspmm.spec import SPEC
    tiles = plan_tiles(indptr, indices, n, n, F, SPEC.limits(None, TINY))
    blocks = sorted({(t.rows_start, t.rows_stop, t.cols.size, t.indices.size) for t in tiles})
    N, E = TINY.max_nodes, TINY.max_edges
    assert blocks[0][:2] == (0, N)                                    # max_nodes rows
    assert blocks[1][:3] == (N, N + 16, N)                            # max_nodes columns
    assert blocks[2][:2] == (N + 16, N + 32) and blocks[2][3] == E    # max_edges entries
    assert blocks[3][0] == N + 32
    assert {(t.feat_start, t.feat_stop) for t in tiles} == {(0, 16), (16, 20)}
    want = loop_reference(*job, TINY.max_edges, TINY.max_nodes)
    res = drive(TINY, "verilator", *job)
    assert_same_bits(res.output, want)
    assert res.tiles == len(tiles)


def test_long_rows_split_across_slices_in_tiles_and_chunks_on_verilator():
    """Every path that cuts, pieces or merges at once: rows at the long-row limit (their runs
    of 256 split again by the dispatcher over two slices, pieces of max(8, ceil(deg / 2))),
    rows of exactly D = 8 neighbours (whole) and D + 1 (split), tiles, two feature chunks."""
    rng = np.random.default_rng(5)
    n, F = 400, 20
    rows = rows_at_the_long_row_limit(rng, n, SPLIT.max_edges, SPLIT.max_nodes)
    rows += [rng.integers(0, n, 8), rng.integers(0, n, 9), rng.integers(0, n, 17),
             rng.integers(0, n, 100)]
    job = job_of_rows(rows, n, F, seed=6)
    indptr, indices, H, M = job
    M[:12] = True
    split = dict(slices=SPLIT.slices, split_degree=SPLIT.split_degree)
    want = check_the_limit_rows_matter(job, SPLIT, **split)
    unsplit = loop_reference(*job, SPLIT.max_edges, SPLIT.max_nodes)
    for v in (0, 2, 10, 11):                   # the split changes these rows' bits
        assert not np.array_equal(want[v].view(np.uint32), unsplit[v].view(np.uint32)), v
    res = drive(SPLIT, "verilator", *job)
    assert_same_bits(res.output, want)
    assert res.tiles >= 6


def test_small_buffers_at_the_long_row_limit_on_pysim():
    """The same rows on buffers of 16 rows and 64 entries, 4 features per chunk, on the
    Amaranth simulator: exactly 64 entries and 65, exactly 16 distinct neighbours and 17;
    24 rows, one feature chunk."""
    rng = np.random.default_rng(7)
    n, F = 24, 4
    rows = rows_at_the_long_row_limit(rng, n, SMALL.max_edges, SMALL.max_nodes, few=5)
    job = job_of_rows(rows, n, F, seed=8)
    indptr, indices, H, M = job
    assert long_rows(indptr, indices, SMALL.max_edges, SMALL.max_nodes) == [1, 3, 5]
    want = check_the_limit_rows_matter(job, SMALL)
    res = drive(SMALL, "pysim", *job)
    assert_same_bits(res.output, want)
