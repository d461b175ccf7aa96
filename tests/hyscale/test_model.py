"""HyScale-GNN performance model (Eq. 5-13) against hand-computed values."""

import pytest

from moagcn.errors import UserError
from moagcn.hw.hyscale import HyScaleConfig, preset
from moagcn.sim import hyscale_model as hm


def test_equations_on_hand_computed_values():
    # Eq. 11: 1000 edges x 64 features x 4 B / 64e9 B/s = 4 us
    assert hm.t_aggregate(1000, 64, 64e9) == pytest.approx(4e-6)
    # Eq. 12: 500 x 64 x 32 MACs / (16 units x 200 MHz) = 320 us
    assert hm.t_update(500, 64, 32, 16, 200e6) == pytest.approx(3.2e-4)
    # Eq. 7 sums trainers, Eq. 8 is one mini-batch
    assert hm.t_load([100, 300], 10, 4000.0) == pytest.approx(4.0)
    assert hm.t_trans(100, 10, 2000.0) == pytest.approx(2.0)
    # Eq. 13: 2 x (8*4 + 4*2) x 4 B / 320 B/s = 1 s
    assert hm.t_sync([8, 4, 2], 320.0) == pytest.approx(1.0)
    # Eq. 9, 6, 5
    assert hm.t_prop([1.0, 3.0, 2.0], 0.5) == 3.5
    assert hm.t_execution(1.0, 2.0, 0.5, 1.5) == 2.0
    assert hm.throughput([[10, 20], [30, 40]], 2.0) == 50.0


def test_trainer_time_pipelined_and_not():
    agg, upd = [3.0, 1.0], [2.0, 5.0]
    # pipelined: max(3,2) + max(1,5) forward, 2 + max(1,5) backward
    assert hm.t_trainer(agg, upd, pipelined=True) == 3 + 5 + 2 + 5
    # sequential: (3+2) + (1+5) forward, 2 + (1+5) backward
    assert hm.t_trainer(agg, upd, pipelined=False) == 5 + 6 + 2 + 6


def test_cycle_forms_match_the_time_forms():
    cfg = HyScaleConfig(mem_words_per_cycle=4, macs=16, clock_mhz=250.0)
    bytes_per_s = cfg.mem_words_per_cycle * 4 * cfg.clock_mhz * 1e6
    assert hm.aggregate_cycles(1000, 64, cfg) / (cfg.clock_mhz * 1e6) == pytest.approx(
        hm.t_aggregate(1000, 64, bytes_per_s))
    assert hm.update_cycles(500, 64, 32, cfg) / (cfg.clock_mhz * 1e6) == pytest.approx(
        hm.t_update(500, 64, 32, cfg.macs, cfg.clock_mhz * 1e6))


def test_aggregate_cycles_use_the_slower_of_memory_and_s_pes():
    # two S-PEs take two elements per cycle although the memory delivers four
    assert hm.aggregate_cycles(100, 64, HyScaleConfig(spes=2, mem_words_per_cycle=4)) == 3200
    assert hm.aggregate_cycles(100, 64, HyScaleConfig(spes=8, mem_words_per_cycle=4)) == 1600


def test_presets_and_validation():
    assert preset("default").spes == 4 and preset("default").macs == 16
    u250 = preset("u250")
    assert (u250.spes, u250.macs, u250.clock_mhz, u250.ddr_gbps) == (8, 2048, 300.0, 77.0)
    assert not u250.simulate
    with pytest.raises(UserError, match="spes=3"):
        preset("default", spes=3)
    with pytest.raises(UserError, match="unknown preset"):
        preset("vu9p")
