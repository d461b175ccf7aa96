"""HyScale-GNN performance model (Eq. 5-13) against hand-computed values."""

import pytest

from moagcn.errors import UserError
from moagcn.hw.hyscale import HyScaleConfig, preset
from moagcn.sim.hyscale import model as hm


def test_equations_on_hand_computed_values():
    # Eq. 11: 1000 edges x 64 features x 4 B / 64e9 B/s = 4 us
    assert hm.t_aggregate(1000, 64, 64e9) == pytest.approx(4e-6)
    # Eq. 12: 500 x 64 x 32 MACs / (16 units x 200 MHz) = 320 us
    assert hm.t_update(500, 64, 32, 16 * 200e6) == pytest.approx(3.2e-4)
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
    assert hm.t_trainer(agg, upd, "max") == 3 + 5 + 2 + 5
    # sequential: (3+2) + (1+5) forward, 2 + (1+5) backward
    assert hm.t_trainer(agg, upd, "sum") == 5 + 6 + 2 + 6


def test_cycle_forms_match_the_time_forms():
    cfg = HyScaleConfig(mem_words_per_cycle=4, macs=16, clock_mhz=250.0)
    bytes_per_s = cfg.mem_words_per_cycle * 4 * cfg.clock_mhz * 1e6
    assert hm.aggregate_cycles(1000, 64, cfg) / (cfg.clock_mhz * 1e6) == pytest.approx(
        hm.t_aggregate(1000, 64, bytes_per_s))
    assert hm.update_cycles(500, 64, 32, cfg) / (cfg.clock_mhz * 1e6) == pytest.approx(
        hm.t_update(500, 64, 32, cfg.macs * cfg.clock_mhz * 1e6))


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


# -- the kernel cycle model (hyscale_model.kernel_cycles) ----------------------------------------

def test_update_model_single_block_by_hand():
    # one block: R f_in tokens after the opening cycle, the activation read (2), the chain
    # (m MACs), the MAC pipeline and result write (1 + 1 + mul + add + 1: the weight read, the
    # operands' register beside the multiplier, the units, the write), the drain's start (2)
    # and its beats, its output register (1), the done flag
    cfg = preset("tiny")                                 # m = 4, R = 7, 2 words per beat
    for f_in, f_out in ((1, 1), (2, 4), (3, 5), (16, 16)):
        groups = -(-f_out // cfg.macs)
        beats = sum(-(-min(cfg.macs, f_out - g * cfg.macs) // 2) for g in range(groups))
        want = 7 * f_in + cfg.macs + 22 + beats
        assert hm.update_kernel_cycles(1, f_in, f_out, cfg) == want


def test_aggregate_model_one_edge_and_no_conflicts():
    cfg = preset("tiny")                                 # 2 words per beat, 7-cycle units
    # one edge: ceil(f / 2) beats + 5 to the first S-PE read (ring write, dispatch, the pair's
    # input register, pop, grant), f reads, 2 mul + add + 8 after; the edge itself is in the
    # dispatcher's buffer from cycle 4 (read, read data registered, buffered), which a row of
    # one beat (ready at cycle 3) waits for
    for f in (1, 2, 3, 16):
        want = max(-(-f // 2), 2) + 5 + f + 29
        assert hm.aggregate_kernel_cycles([0], [0], f, cfg) == want
        assert hm.aggregate_bound_cycles(1, [1, 0], f, cfg) == want
    # one source, edges alternating between the two banks: each bank takes an edge every
    # max(f + 1, add_latency + 3) cycles; bank 1 gets its first edge one cycle after bank 0
    f = 16
    sched = ([0] * 8, [0, 1] * 4)
    want = 8 + 5 + 3 * 17 + f + 29
    assert hm.aggregate_kernel_cycles(*sched, f, cfg) == want + 1
    assert hm.aggregate_bound_cycles(1, [4, 4], f, cfg) == want
    assert hm.kernel_cycles(cfg, edges=8, distinct_sources=1, destinations=2, f_in=f, f_out=4,
                            schedule=sched)["aggregate"] == want + 1
    assert hm.kernel_cycles(cfg, edges=8, distinct_sources=1, destinations=2, f_in=f,
                            f_out=4)["aggregate"] == want


# held-out shapes (not used to derive the model; see moagcn bench hyscale-model-kernel) on the
# tiny preset, whose Verilator build the layer tests share
HELD_OUT = ("h4", "t1")


def _held_out_shape(name):
    from moagcn.sim.benches.hyscale_kernel import SHAPES, Shape
    if name == "t1":
        return Shape("t1", 2, 4, 5, 9, "synthetic", 34, preset="tiny", n_dst=24, n_src=30,
                     hub=30)
    return next(s for s in SHAPES if s.name == name)


@pytest.mark.xdist_group("verilator-hyscale")
@pytest.mark.parametrize("name", HELD_OUT)
def test_kernel_model_within_ten_percent_of_the_rtl(name):
    from moagcn.sim.benches.hyscale_kernel import run_shape
    row = run_shape(_held_out_shape(name))
    assert row["bit_exact"]
    for phase in ("load", "aggregate", "update"):
        assert row[f"cycles_{phase}"] == pytest.approx(row[f"model_cycles_{phase}"], rel=0.10), \
            phase
    assert abs(row["model_error"]) <= 0.10
    assert row["cycles_total"] == row["cycles_load"] + row["cycles_compute"]
    # beyond the 10 %: the model replays the RTL's schedule, and is exact here (as on
    # every benchmark run), so any drift between the two shows
    for phase in ("load", "aggregate", "update"):
        assert row[f"cycles_{phase}"] == row[f"model_cycles_{phase}"], phase


@pytest.mark.parametrize("name", HELD_OUT)
def test_the_held_out_shapes_tell_the_model_from_its_mutants(name):
    # on these shapes, a model that charges a feature read per edge instead of per distinct
    # source, or ignores the ceil of the column passes, is off by more than 10 %
    from moagcn.sim.benches.hyscale_kernel import make_job
    from moagcn.sim.hyscale.spec import SPEC, job_kernel_cycles, kernel_schedule
    shape = _held_out_shape(name)
    cfg = preset(shape.preset, spes=shape.spes, macs=shape.macs)
    job = SPEC.check(SPEC.job(*make_job(shape, cfg), relu=True), cfg)
    k = job_kernel_cycles(job, cfg)
    sources, banks = kernel_schedule(job.indptr, job.indices, cfg)
    per_edge = hm.aggregate_kernel_cycles(list(range(len(sources))), banks, job.f_in, cfg)
    assert abs(per_edge / k["aggregate"] - 1) > 0.10
    floor_groups = hm.update_kernel_cycles(job.n_dst, job.f_in,
                                           job.f_out // cfg.macs * cfg.macs, cfg)
    assert abs(floor_groups / k["update"] - 1) > 0.10
