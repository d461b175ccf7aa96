"""The generic driver: bytes from the packed streams, parts, device and simulator checks."""

import numpy as np
import pytest

from moagcn.core.spec import get_spec, spec_names
from moagcn.errors import UserError
from moagcn.sim.driver import Driver

from ..hw.sspmm.graphs import power_law_job

SSPMM = get_spec("sspmm")


def test_sspmm_bytes_are_the_words_the_streams_carry():
    cfg = SSPMM.config("tiny")
    indptr, indices, H, M = power_law_job(120, 13, seed=5, hub=90)
    job = SSPMM.check(SSPMM.job(indptr, indices, H, M), cfg)
    c = Driver(SSPMM, cfg, "model").run(job, checked=True).counters
    assert c.tiles == 1
    assert c.bytes_read == 4 * SSPMM.pack(job, cfg).load_words
    deg = np.diff(indptr)
    # per row with neighbours: its computed elements, padded to whole beats of `lanes` words
    words = sum(-(-int(M[v].sum()) // cfg.lanes) * cfg.lanes for v in range(120) if deg[v])
    assert c.bytes_written == 4 * words


def test_counters_add_up_over_parts():
    cfg = SSPMM.config("tiny", {"max_nodes": "64", "max_feature_width": "8"})
    indptr, indices, H, M = power_law_job(150, 13, seed=2, max_deg=20)
    driver = Driver(SSPMM, cfg, "model")
    job = SSPMM.check(SSPMM.job(indptr, indices, H, M), cfg)
    whole = driver.run(job, checked=True).counters
    parts = SSPMM.split(job, cfg)
    assert whole.tiles == len(parts) > 4
    assert whole.cycles_compute == sum(SSPMM.cycles(p.job, cfg).cycles_compute for p in parts)
    assert whole.bytes_read == sum(4 * SSPMM.pack(p.job, cfg).load_words for p in parts)
    assert whole.cycles_total == whole.cycles_load + whole.cycles_compute + whole.cycles_output


def test_driver_refuses_bad_choices():
    with pytest.raises(UserError, match="unknown simulator 'vcs'"):
        Driver(SSPMM, SSPMM.config("tiny"), "rtl", "vcs")
    with pytest.raises(UserError, match="cycle model only"):
        Driver(SSPMM, SSPMM.config("paper"), "rtl")
    with pytest.raises(UserError, match="cannot run an accelerator job"):
        Driver(SSPMM, SSPMM.config("tiny"), "cpu")
    assert set(spec_names()) >= {"sspmm", "hyscale"}
