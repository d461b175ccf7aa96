"""The binary32 adder's and multiplier's two forms in Verilog (``moagcn.hw.arith.simform``):
the design's gates (``SYNTHESIS`` defined, what yosys reads; Icarus reads them too) and the
simulation form (what Verilator reads otherwise) both give numpy's float32 sum or product on
every cycle once their pipelines hold one (all but the first ``latency`` enabled cycles), so the
same word as each other.

Six units side by side take the same operand streams. Adders: latency 3 with ``restart``
(``a`` taken as +0 where it is set); latency 2 with a clock enable (the slices hold while it is
low); latency 0 (the plain adder of ``tests/hw/test_arith_rtl.py`` is a fourth configuration).
Multipliers: latency 7 (a register after each stage), latency 2 with a clock enable, latency 0.
The streams are every special-value pair, then random pairs, runs of held operands (where the
simulation form keeps its last result), near-cancellations, products around the bottom of the
normal range (subnormal results, rounding up into the smallest normal) and near overflow, and
underflowing products of sparse significands (ties, and sticky bits from the shifted-out bits);
restart and enable toggle at random. A second test does the same for HyScale's accumulating
adder (its second operand its own sum, or a new item's initial value after a restart) against a
numpy model of that loop, from the first cycle.
Each form is built with Verilator, driven by a small C++ loop that prints every output on every
cycle."""

import subprocess

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32AddConfig, Fp32Adder, Fp32MulConfig, Fp32Multiplier
from moagcn.hw.hyscale.mac import AccumulatingAdder
from moagcn.sim.arith import golden
from moagcn.sim.rtl.build import verilog_text
from moagcn.sim.rtl.lean import WRAPPER, verilate_and_make

pytestmark = pytest.mark.xdist_group("verilator-arith-forms")

#: (name, operation, latency, restart, enable)
UNITS = [("restart", "add", 3, True, False), ("enabled", "add", 2, False, True),
         ("comb", "add", 0, False, False), ("mul_full", "mul", 7, False, False),
         ("mul_enabled", "mul", 2, False, True), ("mul_comb", "mul", 0, False, False)]


class _Units(wiring.Component):
    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "restart": In(1), "en": In(1),
                          **{f"y_{name}": Out(32) for name, *_ in UNITS}})

    def elaborate(self, platform):
        m = Module()
        for name, op, latency, restart, enable in UNITS:
            unit = (Fp32Adder(Fp32AddConfig(latency=latency, restart=restart, enable=enable))
                    if op == "add" else
                    Fp32Multiplier(Fp32MulConfig(latency=latency, enable=enable)))
            m.submodules[name] = unit
            m.d.comb += [unit.i.payload.a.eq(self.a), unit.i.payload.b.eq(self.b),
                         unit.i.valid.eq(1), getattr(self, f"y_{name}").eq(unit.o.payload)]
            if restart:
                m.d.comb += unit.restart.eq(self.restart)
            if enable:
                m.d.comb += unit.en.eq(self.en)
        return m


def _streams(n_random: int, seed: int):
    """Operands a, b and control bits restart, en, one entry per cycle."""
    rng = np.random.default_rng(seed)
    sa, sb = golden.special_pairs()
    ra, rb = golden.random_pairs(n_random, seed=seed)
    # held operands: each pair repeated for 1-4 cycles
    ha, hb = golden.random_pairs(500, seed=seed + 1)
    reps = rng.integers(1, 5, ha.size)
    ha, hb = np.repeat(ha, reps), np.repeat(hb, reps)
    # near-cancellations: b within a few ulps of -a
    ca, _ = golden.random_pairs(2_000, seed=seed + 2)
    cb = (ca ^ np.uint32(0x80000000)) + rng.integers(-3, 4, ca.size).astype(np.uint32)
    # products whose exponents sum near the bottom of the normal range (biased 100-130: the
    # denormalising shift, rounding up into the smallest normal) and near its top (250-260)
    ua, ub = _with_exponent_sum(rng, 4_000, 100, 131)
    oa, ob = _with_exponent_sum(rng, 1_000, 250, 261)
    pa, pb = _sparse_products(rng)
    a = np.concatenate([sa, ra, ha, ca, ua, oa, pa]).astype(np.uint32)
    b = np.concatenate([sb, rb, hb, cb, ub, ob, pb]).astype(np.uint32)
    restart = (rng.random(a.size) < 0.3).astype(np.uint32)
    en = (rng.random(a.size) < 0.7).astype(np.uint32)
    return a, b, restart, en


def _with_exponent_sum(rng, n: int, low: int, high: int):
    """``n`` pairs of random signs and fractions whose biased exponents sum to ``low`` ..
    ``high - 1`` (an exponent field of 0 is a subnormal operand)."""
    total = rng.integers(low, high, n)
    ea = rng.integers(np.maximum(total - 254, 0), np.minimum(total, 254) + 1)
    eb = total - ea

    def word(e):
        return ((rng.integers(0, 2, n) << 31) | (e << 23)
                | rng.integers(0, 1 << 23, n)).astype(np.uint32)
    return word(ea), word(eb)


#: fractions with few bits set, or all: their products have long runs of zeros or ones
_SPARSE_FRACTIONS = [0, 1, 2, 3, 5, 0x000800, 0x100001, 0x200000, 0x400000, 0x400001,
                     0x600000, 0x7FFFFE, 0x7FFFFF]


def _sparse_products(rng):
    """Every pair of :data:`_SPARSE_FRACTIONS` at exponent sums 100-131 (split evenly, or one
    operand at exponent 1 or subnormal): underflowing products whose rounding depends on a
    tie, or on the bits the denormalising shift drops alone (random fractions almost never
    do)."""
    a, b = [], []
    for total in range(100, 132):
        for ea in (total // 2, 1, 0):
            for fa in _SPARSE_FRACTIONS:
                for fb in _SPARSE_FRACTIONS:
                    a.append(ea << 23 | fa)
                    b.append((total - ea) << 23 | fb)
    signs = rng.integers(0, 4, len(a))
    return (np.array(a, np.uint32) | (signs & 1).astype(np.uint32) << 31,
            np.array(b, np.uint32) | (signs >> 1).astype(np.uint32) << 31)


def _write_inputs(tmp_path, a, b, restart, en):
    (tmp_path / "ops.txt").write_text("".join(
        f"{x:08x} {y:08x} {r | e << 1:x}\n" for x, y, r, e in zip(a, b, restart, en)))


def _read_outputs(path) -> np.ndarray:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return np.array([[int(x, 16) for x in r] for r in rows], dtype=np.int64)


#: drives the units one cycle per line of ops.txt (a, b, {en, restart} in hex), printing the
#: outputs (``OUTPUTS``) before each rising edge
MAIN = r"""
#include <cstdio>
#include "Vtop.h"
#include "verilated.h"
int main() {
  FILE *in = fopen("ops.txt", "r"), *out = fopen("out.txt", "w");
  if (!in || !out) return 1;
  Vtop top;
  top.clk = 0; top.rst = 0; top.eval();
  unsigned a, b, c;
  while (fscanf(in, "%x %x %x", &a, &b, &c) == 3) {
    top.a = a; top.b = b; top.restart = c & 1; top.en = (c >> 1) & 1;
    top.eval();
    OUTPUTS
    top.clk = 1; top.eval(); top.clk = 0;
  }
  fclose(out);
  return 0;
}
"""


def _main(names) -> str:
    """:data:`MAIN` printing the top's outputs ``y_<name>``."""
    return MAIN.replace("OUTPUTS", 'fprintf(out, "{}\\n", {});'.format(
        " ".join(["%08x"] * len(names)), ", ".join(f"top.y_{n}" for n in names)))


def _run_verilator(tmp_path, text: str, synthesis: bool, names) -> np.ndarray:
    work = tmp_path / ("gates" if synthesis else "form")
    work.mkdir()
    (work / "ops.txt").write_bytes((tmp_path / "ops.txt").read_bytes())
    (work / "units.v").write_text(text)
    (work / "main.cpp").write_text(_main(names))
    with open(work / "build.log", "w") as log:
        ok = verilate_and_make(work, ["units.v", "main.cpp"],
                               ["-Wno-fatal", *(["-DSYNTHESIS"] if synthesis else [])],
                               work / "sim", log)
    assert ok, (work / "build.log").read_text()[-3000:]
    run = subprocess.run([str(work / "sim")], cwd=work, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return _read_outputs(work / "out.txt")


def _expected(a, b, restart, en) -> dict[str, np.ndarray]:
    """numpy's sums and products where each unit's output is defined (-1 elsewhere): cycle t
    of a unit of latency L shows the operands of L enabled cycles before."""
    n = a.size
    out = {}
    for name, op, latency, rst, enable in UNITS:
        ops_a = np.where(restart.astype(bool), 0, a).astype(np.uint32) if rst else a
        sums = golden.OPERATIONS[op](ops_a, b)
        y = np.full(n, -1, dtype=np.int64)
        if latency == 0:
            y[:] = sums
        else:
            moves = en.astype(bool) if enable else np.ones(n, bool)
            line = [-1] * latency           # line[k]: the sum in slice k
            for t in range(n):
                y[t] = line[-1]
                if moves[t]:
                    line = [int(sums[t])] + line[:-1]
        out[name] = y
    return out


@pytest.fixture(scope="module")
def streams():
    return _streams(20_000, seed=31)


def test_both_forms_match_numpy_on_every_cycle_after_the_fill(tmp_path, streams):
    a, b, restart, en = streams
    # the units as the lean harness's top module (its build caches Verilator's runtime)
    text, _ = verilog_text(_Units(), WRAPPER)
    for name in ("add_l3_r1_e0", "add_l2_r0_e1", "add_l0_r0_e0", "mul_l7_e0", "mul_l2_e1",
                 "mul_l0_e0"):
        assert text.count(f"module moagcn_sim_form_fp32{name}") == 1, name
    _write_inputs(tmp_path, a, b, restart, en)
    names = [name for name, *_ in UNITS]
    gates = _run_verilator(tmp_path, text, synthesis=True, names=names)
    form = _run_verilator(tmp_path, text, synthesis=False, names=names)
    assert gates.shape == form.shape == (a.size, len(UNITS))
    expected = _expected(a, b, restart, en)
    for k, (name, *_rest) in enumerate(UNITS):
        due = expected[name] >= 0
        assert due.sum() > a.size - 10, name
        for got, form_name in ((gates[:, k], "gates"), (form[:, k], "simulation form")):
            bad = np.nonzero(due & (got != expected[name]))[0]
            assert bad.size == 0, (f"{name}, {form_name}: {bad.size} cycles differ from numpy, "
                                   f"first at cycle {bad[0]}: got {got[bad[0]]:08x}, "
                                   f"numpy {expected[name][bad[0]]:08x}")


#: accumulating adders (latency, and registers after the last stage: ``lead``)
ACCUMULATORS = [("acc7", 7), ("acc9", 9), ("acc3", 3)]


class _Accumulators(wiring.Component):
    """HyScale's accumulating adders: ``a`` the operand, ``b`` the initial value ``init``."""

    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "restart": In(1), "en": In(1),
                          **{f"y_{name}": Out(32) for name, _ in ACCUMULATORS}})

    def elaborate(self, platform):
        m = Module()
        for name, latency in ACCUMULATORS:
            m.submodules[name] = acc = AccumulatingAdder(latency)
            m.d.comb += [acc.valid.eq(1), acc.a.eq(self.a), acc.restart.eq(self.restart),
                         acc.init.eq(self.b), getattr(self, f"y_{name}").eq(acc.o)]
        return m


def _accumulated(a, init, restart, latency: int, lead: int) -> np.ndarray:
    """The accumulating adder cycle by cycle with numpy's sums: ``y(t)`` is the sum of ``a``
    and ``f`` of ``latency`` cycles before, ``f(t) = init(t - lead)`` where ``restart(t -
    lead)``, else ``y(t)``; everything 0 before cycle 0."""
    line = [0] * latency
    y = np.zeros(a.size, dtype=np.int64)
    for t in range(a.size):
        y[t] = line[-1]
        f = int(init[t - lead]) if t >= lead and restart[t - lead] else line[-1]
        total = golden.add(np.array([a[t]], np.uint32), np.array([f], np.uint32))
        line = [int(total[0])] + line[:-1]
    return y


def test_accumulating_adder_forms_match_numpy_on_every_cycle(tmp_path):
    rng = np.random.default_rng(41)
    # operands as the MACs see them (products of moderate size, some special values) and
    # restarts at random, as items start; init is a bias
    n = 12_000
    a = golden.as_bits(rng.standard_normal(n).astype(np.float32) * 8)
    special = rng.random(n) < 0.02
    a[special] = rng.choice(golden.SPECIAL_VALUES, special.sum())
    init = golden.as_bits(rng.standard_normal(n).astype(np.float32))
    restart = (rng.random(n) < 0.15).astype(np.uint32)
    # held operands: a stays for a while (an idle MAC), the loop still adds
    for start in rng.integers(0, n - 20, 30):
        a[start:start + 20] = a[start]
    text, _ = verilog_text(_Accumulators(), WRAPPER)
    for name, latency in ACCUMULATORS:
        lead = AccumulatingAdder.lead_for(latency)
        assert text.count(f"module moagcn_sim_form_fp32acc_l{latency}_d{lead}(") == 1, name
    _write_inputs(tmp_path, a, init, restart, np.ones(n, np.uint32))
    names = [name for name, _ in ACCUMULATORS]
    gates = _run_verilator(tmp_path, text, synthesis=True, names=names)
    form = _run_verilator(tmp_path, text, synthesis=False, names=names)
    for k, (name, latency) in enumerate(ACCUMULATORS):
        expected = _accumulated(a, init, restart, latency, AccumulatingAdder.lead_for(latency))
        for got, form_name in ((gates[:, k], "gates"), (form[:, k], "simulation form")):
            bad = np.nonzero(got != expected)[0]
            assert bad.size == 0, (f"{name}, {form_name}: {bad.size} cycles differ from numpy, "
                                   f"first at cycle {bad[0]}: got {got[bad[0]]:08x}, "
                                   f"numpy {expected[bad[0]]:08x}")
