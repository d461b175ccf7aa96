"""Binary32 units on the Amaranth simulator: specials + random, several latencies."""

import numpy as np
import pytest

from moagcn.hw.arith import ADDER_STAGES, MULTIPLIER_STAGES
from moagcn.sim import run
from moagcn.sim.arith import stream as arith
from moagcn.sim.arith.stream import design_config, pack_operands

from .arith_cases import assert_bit_exact, pairs, triples


@pytest.mark.parametrize("op,latency", [("add", 0), ("add", 3), ("add", ADDER_STAGES + 2),
                                        ("mul", 1), ("mul", MULTIPLIER_STAGES)])
def test_binary_unit_pysim(op, latency):
    a, b = pairs(600, seed=latency)
    got = arith.simulate(op, a, b, simulator="pysim", latency=latency)
    assert_bit_exact(op, (a, b), got, arith.expected(op, a, b))


def test_muladd_pysim():
    a, b, c = triples(500, seed=3)
    got = arith.simulate("muladd", a, b, c, simulator="pysim")
    assert_bit_exact("muladd", (a, b, c), got, arith.expected("muladd", a, b, c))


@pytest.mark.parametrize("op", ["add", "mul"])
def test_latency_is_exact_and_throughput_one_per_cycle(op):
    """The first result appears exactly `latency` cycles after its operands, then one per cycle."""
    latency = 4
    design, config = design_config(op, latency)
    a, b = pairs(0, seed=0)
    a, b = a[:50], b[:50]

    async def tb(io, payloads):
        first_valid = None
        count = 0
        for cycle in range(len(payloads) + latency + 2):
            if cycle < len(payloads):
                io.set("i__payload", payloads[cycle])
                io.set("i__valid", 1)
            else:
                io.set("i__valid", 0)
            await io.tick()
            if await io.get("o__valid"):
                count += 1
                if first_valid is None:
                    first_valid = cycle
        return first_valid, count

    res = run(design, config, tb, "pysim", payloads=pack_operands(a, b))
    first, count = res.value
    assert first == latency - 1  # operands of cycle 0 are out after `latency` edges
    assert count == len(a)


def test_enable_freezes_pipeline_and_idle_cycles_are_skipped():
    design, config = design_config("add", 5, enable=True)
    a, b = pairs(200, seed=9)

    async def tb(io, payloads):
        # en toggles 1,1,0 while valid operands stream; results may only move when en is high
        results, sent, cycle = [], 0, 0
        while len(results) < len(payloads):
            en = int(cycle % 3 != 2)
            io.set("en", en)
            if sent < len(payloads):
                io.set("i__payload", payloads[sent])
                io.set("i__valid", 1)
                if await io.get("i__ready"):
                    sent += 1
            else:
                io.set("i__valid", 0)
            await io.tick()
            cycle += 1
            if await io.get("o__valid"):
                results.append(await io.get("o__payload"))
        return results

    res = run(design, config, tb, "pysim", payloads=pack_operands(a, b), max_cycles=10_000)
    got = np.asarray(res.value, dtype=np.uint32)
    assert_bit_exact("add", (a, b), got, arith.expected("add", a, b))


def test_idle_cycles_on_input():
    a, b = pairs(300, seed=4)
    got = arith.simulate("mul", a, b, simulator="pysim", idle_every=3)
    assert_bit_exact("mul", (a, b), got, arith.expected("mul", a, b))


@pytest.mark.parametrize("latency", [3, ADDER_STAGES])
def test_restart_input_adds_b_to_plus_zero(latency):
    """``restart`` makes the adder return ``+0 + b`` whatever ``a`` holds (the S-SpMM lanes'
    restart, selected after the operand compare rather than in front of it); without it the
    adder is the plain one. Reference: numpy on ``a`` replaced by +0 where restart is set."""
    from amaranth.sim import Simulator

    from moagcn.hw.arith import Fp32AddConfig, Fp32Adder

    a, b = pairs(300, seed=41)
    rng = np.random.default_rng(7)
    restart = rng.random(a.size) < 0.5
    want = arith.expected("add", np.where(restart, np.uint32(0), a).astype(np.uint32), b)
    dut = Fp32Adder(Fp32AddConfig(latency=latency, restart=True))
    got = np.zeros(a.size, dtype=np.uint32)

    async def bench(ctx):
        for n in range(a.size + latency):
            if n < a.size:
                ctx.set(dut.i.payload.a, int(a[n]))
                ctx.set(dut.i.payload.b, int(b[n]))
                ctx.set(dut.restart, int(restart[n]))
                ctx.set(dut.i.valid, 1)
            if latency:
                await ctx.tick()
                if n >= latency - 1 and n - latency + 1 < a.size:
                    got[n - latency + 1] = ctx.get(dut.o.payload)
            else:
                got[n] = ctx.get(dut.o.payload)

    sim = Simulator(dut)
    if latency:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert_bit_exact("add(restart ? +0 : a, b)", (a, b, restart.astype(np.uint32)), got, want)
