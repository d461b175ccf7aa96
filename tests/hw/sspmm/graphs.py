"""Random S-SpMM jobs for the tests: power-law rows, hubs, empty rows, self loops, duplicates."""

import numpy as np


def power_law_job(n, F, seed, density=0.5, max_deg=None, hub=None):
    """(indptr, indices, H, M): degrees from a Pareto law, a few rows empty, duplicates and self
    loops present, an optional hub row of degree ``hub``, a mask of the given density."""
    rng = np.random.default_rng(seed)
    deg = (rng.pareto(1.3, n) * 2).astype(int)
    if max_deg is not None:
        deg = np.minimum(deg, max_deg)
    deg[rng.random(n) < 0.1] = 0              # isolated / empty rows
    if hub is not None:
        deg[rng.integers(n)] = hub
    indptr = np.concatenate([[0], np.cumsum(deg)])
    # popular columns: skewed choice gives duplicate column ids within rows
    weights = 1.0 / np.arange(1, n + 1)
    indices = rng.choice(n, size=int(indptr[-1]), p=weights / weights.sum())
    for v in range(0, n, 7):                  # self loops
        if deg[v]:
            indices[indptr[v]] = v
    H = rng.standard_normal((n, F)).astype(np.float32)
    H[rng.random((n, F)) < 0.02] = -0.0       # signed zeros in the data
    M = rng.random((n, F)) < density
    return indptr, indices, H, M


def drive(config, where, indptr, indices, H, M=None, **options):
    """One S-SpMM job through the generic driver: ``where`` is a simulator name (the RTL) or
    ``model``."""
    from moagcn.core.spec import get_spec
    from moagcn.sim.driver import Driver
    spec = get_spec("sspmm")
    device = "model" if where == "model" else "rtl"
    driver = Driver(spec, config, device, "verilator" if where == "model" else where)
    return driver.run(spec.job(indptr, indices, H, M), **options)


def check_tiled_model(res, config, job):
    """A job the driver ran as several tiles against the replayed cycle model of the same tiles:
    tiles, rows fetched and output cycles equal, compute within 3 %."""
    from moagcn.core.spec import get_spec
    spec = get_spec("sspmm")
    model = spec.replayed_cycles(spec.job(*job), config)
    assert res.counters.tiles == model.tiles > 1
    assert res.counters.extra["rows_fetched"] == model.extra["rows_fetched"]
    assert res.counters.cycles_output == model.cycles_output
    err = model.cycles_compute / res.counters.cycles_compute - 1
    assert abs(err) < 0.03, (model.cycles_compute, res.counters.cycles_compute)
