"""The vectorised closed form over many tiles (the model device's path) against the per-tile
closed form it replaces: the same counters, field by field."""

import numpy as np
import pytest

from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.model import closed_form_applies, closed_form_tiles, estimate_rows
from moagcn.sim.sspmm.spec import SPEC

from ..hw.sspmm.graphs import power_law_job

FIELDS = ("cycles_load", "cycles_compute", "cycles_output", "bytes_read", "bytes_written",
          "work_adds", "lanes", "clock_mhz")


@pytest.mark.parametrize("name,params,n,F,seed,density,hub", [
    ("tiny", {}, 900, 13, 0, 0.5, 600),                 # a hub run in pieces (> 256 distinct)
    ("tiny", {"row_order": "given"}, 700, 40, 1, 0.3, 200),       # three feature chunks
    ("tiny", {"adder_latency": 2}, 600, 16, 2, 1.0, 250),
    ("default", {"max_nodes": 512, "max_edges": 3000}, 3000, 64, 3, 0.5, 1000),
    ("default", {"max_nodes": 300, "fetch_rows": 1, "groups": 2}, 1500, 70, 4, 0.8, 250),
])
def test_vectorised_closed_form_equals_the_per_tile_one(name, params, n, F, seed, density, hub):
    config = preset(name, **params)
    assert closed_form_applies(config)
    indptr, indices, H, M = power_law_job(n, F, seed, density=density, hub=hub)
    M[np.random.default_rng(seed).random(n) < 0.05] = False       # rows with nothing to do
    job = SPEC.check(SPEC.job(indptr, indices, H, M), config)
    run_job, _ = SPEC.expand(job, config)
    parts = SPEC.split(run_job, config)
    assert len(parts) >= 2
    fast = SPEC.parts_cycles(parts, run_job, config)
    assert len(fast) == len(parts)
    for part, got in zip(parts, fast):
        t = part.tile
        unmasked = np.count_nonzero(run_job.M[t.rows_start:t.rows_stop,
                                              t.feat_start:t.feat_stop], axis=1)
        want = SPEC._modelled(np.diff(t.indptr), unmasked, int(t.indices.size), t.width,
                              int(t.cols.size), config, False, (t.indptr, t.indices))
        # the per-tile path computes the row order itself (the fast one takes the tile's)
        ref = estimate_rows(np.diff(t.indptr), unmasked, int(t.indices.size), t.width,
                            config, n_cols=int(t.cols.size))
        assert want.cycles_compute == ref.cycles_compute
        for f in FIELDS:
            assert getattr(got, f) == getattr(want, f), (f, t.rows_start)
        assert got.extra == want.extra, t.rows_start


def test_only_for_the_configurations_it_models():
    for cfg in (preset("multi"), preset("tiny", slices=2), preset("tiny", node_banks=16, slices=2)):
        assert not closed_form_applies(cfg)
        with pytest.raises(ValueError, match="estimate_rows"):
            closed_form_tiles([1], [1], [0, 1], [1], [1], [1], cfg, [None])


def test_a_job_of_no_rows_in_feature_chunks():
    """No rows and features beyond one chunk: tiles of no rows, modelled one by one."""
    from moagcn.sim.driver import Driver
    job = SPEC.job(np.zeros(1, np.int64), np.zeros(0, np.int64), np.ones((1, 40), np.float32))
    res = Driver(SPEC, preset("tiny"), "model").run(job)
    assert res.output.shape == (0, 40) and res.tiles == 3
    assert res.counters.cycles_compute == 3 * 1 and res.counters.cycles_output == 0
