"""The SDDMM RTL through the driver: bit-exact against the plain loop and the golden model,
its counters equal to the cycle model, on Verilator (tiny and default presets) and pysim."""

from __future__ import annotations

import numpy as np
import pytest

from moagcn.core.spec import get_spec
from moagcn.errors import SimulationError
from moagcn.sim.driver import Driver
from tests.hw.sddmm.graphs import awkward_pattern, loop_reference, power_law_pattern

SPEC = get_spec("sddmm")
EXACT = ("cycles_load", "cycles_compute", "cycles_total", "work_adds", "bytes_read",
         "bytes_written", "tiles")


def operands(n_rows, n_cols, width, seed):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n_rows, width)).astype(np.float32)
    K = rng.standard_normal((n_cols, width)).astype(np.float32)
    Q[0, 0], K[-1, -1] = -0.0, 1e-42          # a signed zero and a subnormal
    return Q, K


def check_rtl(cfg, simulator, indptr, indices, Q, K, heads, mask=None, **run):
    job = SPEC.job(indptr, indices, Q, K, heads, mask)
    rtl = Driver(SPEC, cfg, "rtl", simulator).run(job, **run)
    model = Driver(SPEC, cfg, "model").run(job)
    ref = loop_reference(indptr, indices, Q, K, heads, cfg.lanes, mask)
    assert np.array_equal(rtl.output.view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(model.output.view(np.uint32), ref.view(np.uint32))
    if not run:
        for key in EXACT:
            assert getattr(rtl.counters, key) == getattr(model.counters, key), key
        assert rtl.counters.extra == {k: model.counters.extra[k] for k in rtl.counters.extra}
    return rtl, model


@pytest.mark.xdist_group("sddmm-verilator")
@pytest.mark.parametrize("width,heads,masked", [(8, 1, False), (6, 2, True), (12, 4, True),
                                                (3, 1, False)])
def test_tiny_on_verilator_awkward_patterns(width, heads, masked):
    # 40 rows > max_rows 16, a hub of 40 entries, isolated rows, self loops, duplicates: parts
    cfg = SPEC.config("tiny")
    indptr, indices = awkward_pattern(40, 30, seed=width, hub=40)
    Q, K = operands(40, 30, width, seed=heads)
    mask = np.random.default_rng(7).random((indices.size, heads)) < 0.6 if masked else None
    rtl, _ = check_rtl(cfg, "verilator", indptr, indices, Q, K, heads, mask)
    assert rtl.counters.tiles > 2


@pytest.mark.xdist_group("sddmm-verilator")
def test_tiny_on_verilator_with_output_backpressure_and_idle_loads():
    """Four heads of one column (a pair a cycle, four per entry) against a consumer that takes
    every other beat: the output queue (32 words) fills, and groups wait for room instead of
    losing sums."""
    cfg = SPEC.config("tiny")
    indptr, indices = awkward_pattern(30, 12, seed=2, hub=12)
    Q, K = operands(30, 12, 4, seed=3)
    rtl, model = check_rtl(cfg, "verilator", indptr, indices, Q, K, 4, stall_every=2,
                           idle_every=4)
    assert rtl.counters.cycles_compute > model.counters.cycles_compute


@pytest.mark.slow            # the default preset's build is this test's alone: make test-slow
@pytest.mark.xdist_group("sddmm-verilator")
@pytest.mark.parametrize("heads", [1, 4])
def test_default_on_verilator_power_law_f64(heads):
    """F = 64 on a power-law graph with hubs (several parts): bit-exact, the counters equal
    to the cycle model, and (one head) at least 0.80 useful multiply-adds per lane per cycle."""
    cfg = SPEC.config("default")
    indptr, indices = power_law_pattern(700, 8.0, seed=11)
    Q, K = operands(700, 700, 64, seed=12)
    rtl, _ = check_rtl(cfg, "verilator", indptr, indices, Q, K, heads)
    assert rtl.counters.tiles >= 2
    if heads == 1:
        assert rtl.counters.utilization >= 0.80


def test_tiny_on_pysim():
    cfg = SPEC.config("tiny")
    indptr = np.array([0, 2, 2, 5, 6])
    indices = np.array([1, 1, 0, 3, 2, 2])
    Q, K = operands(4, 4, 14, seed=5)           # D = 7: two chunks of 4 lanes per head
    mask = np.array([[1, 0], [1, 1], [0, 0], [0, 1], [1, 1], [1, 0]], dtype=bool)
    check_rtl(cfg, "pysim", indptr, indices, Q, K, 2, mask)


def test_an_index_beyond_the_rows_raises_the_flag_on_pysim():
    cfg = SPEC.config("tiny")
    Q = np.ones((2, 4), np.float32)
    job = SPEC.job(np.array([0, 1, 2]), np.array([0, 5]), Q, Q, 1)
    with pytest.raises(SimulationError, match="err_index"):
        Driver(SPEC, cfg, "rtl", "pysim").run(job, checked=True)


@pytest.mark.xdist_group("sddmm-verilator")
def test_tiny_on_verilator_smallest_jobs():
    """One entry with one chunk (its buffer word written the cycle before start), a job whose
    pairs are all masked (no part runs) and one without entries."""
    cfg = SPEC.config("tiny")
    Q, K = operands(1, 1, 4, seed=9)
    check_rtl(cfg, "verilator", np.array([0, 1]), np.array([0]), Q, K, 1)
    Q, K = operands(3, 3, 8, seed=10)
    ip, ix = np.array([0, 2, 2, 3]), np.array([0, 2, 1])
    rtl, _ = check_rtl(cfg, "verilator", ip, ix, Q, K, 2, np.zeros((3, 2), bool))
    assert rtl.counters.tiles == 0 and not rtl.output.any()
    # rows without entries: the accelerator starts and stops at once
    rtl, _ = check_rtl(cfg, "verilator", np.zeros(4, np.int64), np.zeros(0, np.int64), Q, K, 2)
    assert rtl.counters.tiles == 1 and rtl.counters.cycles_compute == 1
