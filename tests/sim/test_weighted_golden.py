"""The weighted S-SpMM's golden model, spec, device and cycle model, without a simulator.

The reference is written here from the documented order (docs/sspmm.md, "Weighted S-SpMM"),
independent of :mod:`moagcn.sim.sspmm.golden`: per unmasked element, ``acc = +0``, then for
the row's entries in ascending column order (equal columns in stored order) ``acc =
float32(float32(w * h) + acc)`` with numpy float32 scalars, two roundings; a split row's
pieces each from +0 and added in order; NaNs canonical, masked elements +0.
"""

import numpy as np
import pytest
import torch

from moagcn.core.device import CpuDevice
from moagcn.core.graph import CSRGraph
from moagcn.errors import UserError
from moagcn.hw.sspmm import preset
from moagcn.hw.sspmm.protocol import MUL_LATENCY
from moagcn.sim.arith.golden import as_float
from moagcn.sim.device import AcceleratorDevice
from moagcn.sim.driver import Driver
from moagcn.sim.sspmm import golden
from moagcn.sim.sspmm.spec import SPEC

from ..hw.sspmm.graphs import power_law_job

CANONICAL_NAN = np.uint32(0x7FC00000)


def weighted_job(n, F, seed, density=0.5, hub=None, max_deg=None):
    """A power-law job (hubs, empty rows, self loops, duplicate columns, signed zeros) with
    one value per entry: normal values, some exact zeros, -0, small and large magnitudes."""
    indptr, indices, H, M = power_law_job(n, F, seed, density=density, hub=hub,
                                          max_deg=max_deg)
    rng = np.random.default_rng(seed + 100)
    values = rng.standard_normal(indices.size).astype(np.float32)
    pick = rng.random(indices.size)
    values[pick < 0.03] = 0.0
    values[(pick >= 0.03) & (pick < 0.05)] = -0.0
    values[(pick >= 0.05) & (pick < 0.08)] *= np.float32(1e-30)    # products near subnormal
    values[(pick >= 0.08) & (pick < 0.1)] *= np.float32(1e20)
    return indptr, indices, H, M, values


def entries_in_order(indptr, indices, v):
    """Row ``v``'s entries, ascending column, equal columns in stored order."""
    return sorted(range(int(indptr[v]), int(indptr[v + 1])), key=lambda e: (int(indices[e]), e))


def reference(indptr, indices, H, M, values, split=0, pieces=0):
    """The documented order with plain loops and float32 scalars (see the module docstring);
    ``split`` / ``pieces``: rows longer than ``split`` in pieces of ``max(split, ceil(deg /
    pieces))`` entries, each summed from +0, the pieces' sums added in order."""
    n, F = len(indptr) - 1, H.shape[1]
    Z = np.zeros((n, F), dtype=np.float32)
    with np.errstate(all="ignore"):
        for v in range(n):
            order = entries_in_order(indptr, indices, v)
            deg = len(order)
            size = deg
            if split and deg > split:
                size = max(split, -(-deg // pieces)) if pieces else split
            runs = [order[i:i + size] for i in range(0, deg, max(size, 1))] or [[]]
            for f in range(F):
                if not M[v, f]:
                    continue
                total = None
                for run in runs:
                    acc = np.float32(0.0)
                    for e in run:
                        product = np.float32(np.float32(values[e]) * H[indices[e], f])
                        acc = np.float32(product + acc)
                    total = acc if total is None else np.float32(total + acc)
                Z[v, f] = total
    bits = Z.view(np.uint32)
    bits[np.isnan(Z)] = CANONICAL_NAN
    return Z


def assert_bits(got, want):
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{len(bad)} elements differ, first at {bad[:5].tolist()}"


@pytest.mark.parametrize("F,density,seed,hub", [(13, 0.5, 1, 120), (7, 1.0, 2, None),
                                                (16, 0.25, 3, 60), (5, 0.75, 4, 200)])
def test_golden_model_equals_the_plain_loop(F, density, seed, hub):
    indptr, indices, H, M, values = weighted_job(80, F, seed, density, hub=hub)
    Z = golden.sspmm_weighted(indptr, indices, values, H, M)
    assert_bits(Z, reference(indptr, indices, H, M, values))
    assert (Z[~M] == 0).all() and not np.signbit(Z[~M]).any()


def test_special_values_follow_the_two_roundings():
    """A product that rounds before the add (row 0: two roundings give +0 where a fused
    multiply-add gives 2^-46), overflow to inf, inf * 0 = NaN (canonical), subnormal products,
    -0 products."""
    indptr = np.array([0, 2, 4, 6, 8, 10, 12])
    indices = np.array([0, 1, 1, 2, 3, 0, 0, 4, 2, 2, 4, 0])
    one_22, one_23 = 1.0 + 2.0 ** -22, 1.0 + 2.0 ** -23
    H = np.array([[one_22, 3e38], [one_23, -3e38], [np.inf, 1e-20], [1e-20, -1.0],
                  [-0.0, 2.0]], dtype=np.float32)
    values = np.array([-1.0, one_23, 2.0, 0.0, 1e-20, 0.0, 3.0, -3.0, 1.0, -1.0, 0.5, 7.0],
                      dtype=np.float32)
    M = np.ones((6, 2), dtype=bool)
    Z = golden.sspmm_weighted(indptr, indices, values, H, M)
    assert_bits(Z, reference(indptr, indices, H, M, values))
    assert Z[0, 0] == 0 and not np.signbit(Z[0, 0])          # fused: 2^-46
    assert np.isneginf(Z[0, 1])                              # -3e38 - 3e38 overflows
    assert Z[1, 0:1].view(np.uint32)[0] == CANONICAL_NAN     # inf * 0 + ...
    assert 0 < Z[2, 0] < np.finfo(np.float32).tiny           # 1e-20 * 1e-20: subnormal


def test_unit_values_give_the_unweighted_sums_bit_for_bit():
    indptr, indices, H, M, _ = weighted_job(90, 11, 5, hub=150)
    ones = np.ones(indices.size, dtype=np.float32)
    assert_bits(golden.sspmm_weighted(indptr, indices, ones, H, M),
                golden.sspmm(indptr, indices, H, M))


@pytest.mark.parametrize("split,pieces", [(8, 2), (5, 3), (16, 4)])
def test_split_rows_follow_the_pieces(split, pieces):
    indptr, indices, H, M, values = weighted_job(60, 9, 6, hub=100)
    Z = golden.sspmm_weighted(indptr, indices, values, H, M, split=split, pieces=pieces)
    assert_bits(Z, reference(indptr, indices, H, M, values, split, pieces))


def _parts_from_packed(job, cfg):
    """The driver's parts of ``job`` summed from their packed index beats (the values as the
    hardware would read them, beside their column indices), placed and merged as the driver
    does: a wrong cut of the values shows here without a simulator."""
    run_job, merge = SPEC.expand(job, cfg)
    out = SPEC.empty_output(run_job)
    parts = SPEC.split(run_job, cfg)
    lw = cfg.load_width
    for part in parts:
        pj = part.job
        beats = SPEC.pack(pj, cfg).streams["indices_in"]
        assert beats.shape[1] == 2 * lw
        nnz = int(np.asarray(pj.indices).size)
        cols = beats[:, :lw].reshape(-1)[:nnz].astype(np.int64)
        vals = as_float(beats[:, lw:].reshape(-1)[:nnz])
        assert np.array_equal(cols, np.asarray(pj.indices)), "the beats hold the sorted rows"
        SPEC.place(out, part, reference(pj.indptr, cols, pj.H, pj.M, vals, cfg.split_degree,
                                        cfg.slices))
    return (out if merge is None else merge(out)), len(parts)


@pytest.mark.parametrize("params", [dict(), dict(slices=2, split_degree=8)])
def test_values_travel_with_pieces_tiles_and_row_order(params):
    """A row longer than the buffers (cut into pieces), a job larger than them (tiles), long
    rows first: each value stays with its entry, the parts' sums equal the whole job's."""
    cfg = preset("tiny", weighted=True, **params)
    indptr, indices, H, M, values = weighted_job(500, 21, 7, density=0.6, hub=5000)
    job = SPEC.check(SPEC.job(indptr, indices, H, M, values), cfg)
    out, parts = _parts_from_packed(job, cfg)
    assert parts > 3
    assert_bits(out, SPEC.golden(job, cfg))
    # and the golden model of the whole job is the buffers' cut of the plain loop
    assert_bits(SPEC.golden(job, cfg), golden.sspmm_weighted(
        indptr, indices, values, H, M, split=cfg.split_degree, pieces=cfg.slices,
        buffer=(cfg.max_edges, cfg.max_nodes)))


def test_model_device_runs_spmm_weighted_and_unweighted_refuses_in_one_line():
    indptr, indices, H, _, values = weighted_job(70, 6, 8, hub=90)
    g = CSRGraph(indptr, indices)
    vals = torch.from_numpy(np.stack([values, -values], axis=1))
    X = torch.from_numpy(np.stack([H, H[:, ::-1].copy()], axis=1))
    dev = AcceleratorDevice(SPEC, preset("tiny", weighted=True), "model")
    assert "weighted" in dev.entry_ops
    Z = dev.spmm_weighted(g, vals, X).numpy()
    ones = np.ones(H.shape, dtype=bool)
    for h in range(2):
        assert_bits(Z[:, h], reference(indptr, indices, X[:, h].numpy(), ones,
                                       vals[:, h].numpy()))
    assert dev.counters.cycles_compute > 0 and dev.counters.calls == 1
    torch.testing.assert_close(torch.from_numpy(Z), CpuDevice().spmm_weighted(g, vals, X),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(UserError, match=r"--param weighted=true") as exc:
        AcceleratorDevice(SPEC, preset("tiny"), "model").spmm_weighted(g, vals, X)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("values,needle", [
    (lambda v: np.where(np.arange(v.size) == 3, np.nan, v), "entry 3 is nan"),
    (lambda v: np.where(np.arange(v.size) == 0, np.inf, v), "entry 0 is inf"),
    (lambda v: v[:-1], "values in shape"),
    (lambda v: np.full(v.size, 1e39), "not finite, after rounding to float32"),
])
def test_bad_values_are_one_line(values, needle):
    indptr, indices, H, M, v = weighted_job(30, 4, 9)
    cfg = preset("tiny", weighted=True)
    with pytest.raises(UserError) as exc:
        SPEC.check(SPEC.job(indptr, indices, H, M, values(v)), cfg)
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(UserError, match="--param weighted=true"):
        SPEC.check(SPEC.job(indptr, indices, H, M, v), preset("tiny"))


@pytest.mark.parametrize("name", ["tiny", "default", "multi"])
def test_cycle_model_adds_the_multiplier_stages_and_nothing_else(name):
    """The weighted engine turns like the binary one, the multipliers' stages later: compute
    cycles the unweighted model's plus ``MUL_LATENCY``; loads and output the same beats; the
    bytes read the values' words more."""
    indptr, indices, H, M, values = weighted_job(300, 40 if name != "tiny" else 13, 10,
                                                 hub=200)
    plain, weighted = preset(name), preset(name, weighted=True)
    a = Driver(SPEC, plain, "model").estimate(SPEC.job(indptr, indices, H, M))
    b = Driver(SPEC, weighted, "model").estimate(SPEC.job(indptr, indices, H, M, values))
    assert b.cycles_compute == a.cycles_compute + MUL_LATENCY * a.tiles
    assert (b.cycles_load, b.cycles_output, b.work_adds) == \
        (a.cycles_load, a.cycles_output, a.work_adds)
    assert b.bytes_read > a.bytes_read


def test_bench_on_the_model(tmp_path):
    """``moagcn bench sspmm-weighted --device model``: the weighted and binary designs on the
    same jobs, every row bit-exact, the ratio of utilisations near 1."""
    import json

    from moagcn.sim.benches.sspmm_weighted import main

    assert main(["--device", "model", "--cases", "2", "--report", str(tmp_path / "r.json")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert len(rows) == 2 and all(r["bit_exact"] for r in rows)
    assert all(0.95 <= r["utilization_ratio"] <= 1.0 for r in rows)
    assert rows[0]["width"] == 64 and rows[0]["mask_density"] == 0.5
