"""The SDDMM golden model against a plain loop, the cycle model's cuts, and the estimate."""

from __future__ import annotations

import numpy as np
import pytest

from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.sim.driver import Driver
from moagcn.sim.sddmm.spec import estimate_graph
from tests.hw.sddmm.graphs import awkward_pattern, loop_reference, power_law_pattern

SPEC = get_spec("sddmm")


@pytest.mark.parametrize("lanes,width,heads", [(4, 8, 1), (4, 6, 2), (8, 13, 1), (2, 12, 3),
                                               (16, 64, 4), (4, 3, 3), (16, 4, 2), (16, 10, 2),
                                               (8, 9, 3), (16, 16, 2)])
def test_golden_equals_a_plain_loop(lanes, width, heads):
    indptr, indices = awkward_pattern(17, 11, seed=width)
    rng = np.random.default_rng(lanes * width)
    Q = rng.standard_normal((17, width)).astype(np.float32)
    K = rng.standard_normal((11, width)).astype(np.float32)
    Q[0, 0] = -0.0
    mask = rng.random((indices.size, heads)) < 0.6
    cfg = SPEC.config(None, {"lanes": str(lanes), "max_heads": "8", "max_chunks": "32"})
    for m in (None, mask):
        job = SPEC.check(SPEC.job(indptr, indices, Q, K, heads, m), cfg)
        S = SPEC.golden(job, cfg)
        ref = loop_reference(indptr, indices, Q, K, heads, lanes, m)
        assert np.array_equal(S.view(np.uint32), ref.view(np.uint32))
        # and the value, in float64
        rows = np.repeat(np.arange(17), np.diff(indptr))
        D = width // heads
        exact = np.einsum("ehd,ehd->eh", Q[rows].reshape(-1, heads, D).astype(np.float64),
                          K[indices].reshape(-1, heads, D).astype(np.float64))
        if m is not None:
            exact[~m] = 0
        np.testing.assert_allclose(S, exact, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lanes,width,heads", [(16, 4, 2), (16, 5, 1), (8, 6, 2)])
def test_narrow_heads_with_signed_zeros_equal_a_plain_loop(lanes, width, heads):
    """Heads narrower than the lanes (GAT's scores are 2 wide on 16 lanes): products of -0 and
    +0 in every combination, and tiny values that underflow to -0."""
    indptr, indices = awkward_pattern(13, 9, seed=lanes + width)
    rng = np.random.default_rng(width)
    Q = rng.choice(np.array([-0.0, 0.0, 1.0, -1.0, 1e-30, -1e-30], np.float32), (13, width))
    K = rng.choice(np.array([-0.0, 0.0, 2.0, -3.0, 1e-30], np.float32), (9, width))
    cfg = SPEC.config(None, {"lanes": str(lanes), "max_heads": "8", "max_chunks": "32"})
    job = SPEC.check(SPEC.job(indptr, indices, Q, K, heads), cfg)
    S = SPEC.golden(job, cfg)
    ref = loop_reference(indptr, indices, Q, K, heads, lanes)
    assert np.array_equal(S.view(np.uint32), ref.view(np.uint32))


def sorted_plan(rows, cols, kept, cfg):
    """The greedy cut into parts, written with a set of K rows per part."""
    parts, cur, qrows, krows = [], [], set(), set()
    for e in np.flatnonzero(kept):
        r, k = int(rows[e]), int(cols[e])
        if cur and (len(cur) == cfg.max_edges or (r not in qrows and len(qrows) == cfg.max_rows)
                    or (k not in krows and len(krows) == cfg.max_cols)):
            parts.append(np.array(cur))
            cur, qrows, krows = [], set(), set()
        cur.append(e)
        qrows.add(r)
        krows.add(k)
    if cur:
        parts.append(np.array(cur))
    return parts


def test_parts_are_the_greedy_cut_and_their_cycles_are_their_jobs():
    """The planner against the greedy rule written here with sets, and each part's cycles
    (counted from the entries) against the cycle model of the part's own job."""
    from moagcn.sim.sddmm.spec import plan_parts
    rng = np.random.default_rng(3)
    for trial in range(60):
        n, m = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        indptr = np.r_[0, np.cumsum(rng.integers(0, 9, n))]
        indices = rng.integers(0, m, indptr[-1])
        heads = int(rng.integers(1, 4))
        Q = rng.standard_normal((n, 2 * heads)).astype(np.float32)
        K = rng.standard_normal((m, 2 * heads)).astype(np.float32)
        mask = rng.random((indices.size, heads)) < 0.7 if trial % 2 else None
        cfg = SPEC.config(None, {"lanes": "4", "max_rows": str(rng.integers(2, 8)),
                                 "max_cols": str(rng.integers(2, 8)),
                                 "max_edges": str(rng.integers(2, 16))})
        rows = np.repeat(np.arange(n), np.diff(indptr))
        kept = np.ones(indices.size, bool) if mask is None else mask.any(axis=1)
        got = plan_parts(rows, indices, kept, cfg)
        want = sorted_plan(rows, indices, kept, cfg)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        job = SPEC.check(SPEC.job(indptr, indices, Q, K, heads, mask), cfg)
        parts = SPEC.split(job, cfg)
        for fast, part in zip(SPEC.parts_cycles(parts, job, cfg), parts):
            slow = SPEC.cycles(part.job, cfg)
            assert vars(fast) == vars(slow)


def test_golden_follows_the_tree_order_and_ieee_corners():
    """Values where the order shows: cancellation, overflow to inf and inf - inf (the
    canonical NaN), subnormal products, -0 products summed from +0."""
    lanes = 4
    Q = np.array([[1e30, 1e30, -1e30, 1.0, 1e-30, 3.0, 2.0 ** -75, -0.0],
                  [1.0, 2.0 ** 24, 1.0, -(2.0 ** 24), -1.0, 0.0, 0.0, 0.0]], np.float32)
    K = np.array([[1e30, -1e30, 1.0, 1.0, 1e-20, 1.0, 2.0 ** -75, 1.0],
                  [1.0, 1.0, 1.0, 1.0, 0.0, 5.0, 7.0, 1.0]], np.float32)
    indptr, indices = np.array([0, 2, 4]), np.array([0, 1, 1, 0])
    cfg = SPEC.config(None, {"lanes": str(lanes)})
    job = SPEC.check(SPEC.job(indptr, indices, Q, K, 1), cfg)
    S = SPEC.golden(job, cfg)
    ref = loop_reference(indptr, indices, Q, K, 1, lanes)
    assert np.array_equal(S.view(np.uint32), ref.view(np.uint32))
    assert S.view(np.uint32)[0, 0] == 0x7FC00000          # inf + -inf in the tree
    # entry 2, row 1 with K row 1: pairwise (1 + 2^24) + (1 - 2^24) = 2^24 - (2^24 - 1) = 1,
    # where one product at a time would give ((1 + 2^24) + 1) - 2^24 = 0
    assert S[2, 0] == 1.0


def test_the_cycle_model_counts_groups_of_add_latency_pairs():
    cfg = SPEC.config("tiny")               # P = 4, add_latency 2: L = 2
    Q = np.ones((3, 8), np.float32)
    job = SPEC.check(SPEC.job(np.array([0, 2, 3, 5]), np.array([0, 1, 2, 0, 1]), Q, Q, 1),
                     cfg)
    c = SPEC.cycles(job, cfg)
    # 5 pairs of 2 chunks: 3 groups of 2 x 2 cycles, the last group's idle slot not waited for
    from moagcn.hw.sddmm import protocol
    assert c.cycles_compute == protocol.START_CYCLES + 3 * 2 * 2 - 1 + \
        protocol.pipeline_latency(cfg) + protocol.DRAIN_CYCLES
    assert c.cycles_load == max(5, 3 * 2, 3 * 2) and c.extra["chunks_issued"] == 10


def test_parts_respect_every_buffer_and_the_estimate_equals_the_model_device():
    cfg = SPEC.config("tiny")               # 16 rows, 16 columns, 64 entries
    indptr, indices = power_law_pattern(60, 4.0, seed=3)
    rng = np.random.default_rng(4)
    Q = rng.standard_normal((60, 8)).astype(np.float32)
    mask = rng.random((indices.size, 2)) < 0.7
    mask[5] = False                        # an entry with no head to compute
    job = SPEC.check(SPEC.job(indptr, indices, Q, Q, 2, mask), cfg)
    parts = SPEC.split(job, cfg)
    assert len(parts) > 3
    for part in parts:
        pj = part.job
        assert pj.n_rows <= 16 and pj.K.shape[0] <= 16 and pj.indices.size <= 64
        assert pj.pair_mask().any(axis=1).all()
    res = Driver(SPEC, cfg, "model").run(job)
    ref = loop_reference(indptr, indices, Q, Q, 2, 4, mask)
    assert np.array_equal(res.output.view(np.uint32), ref.view(np.uint32))
    est = estimate_graph(indptr, indices, 60, 8, 2, mask, cfg)
    for key in ("cycles_load", "cycles_compute", "work_adds", "bytes_read", "tiles"):
        assert getattr(est, key) == getattr(res.counters, key), key


def test_widths_heads_and_operands_that_do_not_fit_are_one_line():
    cfg = SPEC.config("tiny")
    Q = np.ones((2, 8), np.float32)
    ip, ix = np.array([0, 1, 2]), np.array([0, 1])
    for job, text in ((SPEC.job(ip, ix, Q, Q, 3), "does not divide"),
                      (SPEC.job(ip, ix, Q, Q, 0), "at least 1"),
                      (SPEC.job(ip, ix, Q, np.ones((2, 4), np.float32)), "same width"),
                      (SPEC.job(ip, ix, Q, Q.astype(np.float64)), "float32"),
                      (SPEC.job(ip, ix, np.full((2, 8), np.inf, np.float32), Q), "finite"),
                      (SPEC.job(ip, ix, Q[:1], Q), "one row per graph row"),
                      (SPEC.job(ip, np.array([0, 2]), Q, Q), "2")):
        with pytest.raises(UserError, match=text):
            SPEC.check(job, cfg)
    wide = np.ones((2, 32), np.float32)      # 8 chunks of 4 > max_chunks 4
    with pytest.raises(UserError, match="max_chunks"):
        SPEC.split(SPEC.check(SPEC.job(ip, ix, wide, wide), cfg), cfg)
