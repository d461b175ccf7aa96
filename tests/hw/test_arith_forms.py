"""The binary32 adder's two forms in Verilog (``moagcn.hw.arith.simform``): the design's gates
(``SYNTHESIS`` defined, what yosys reads) and the simulation form (what Verilator and Icarus
read otherwise) both give numpy's float32 sum on every cycle once their pipelines hold one
(all but the first ``latency`` enabled cycles), so the same word as each other.

Three adders side by side take the same operand streams: latency 3 with ``restart`` (``a``
taken as +0 where it is set); latency 2 with a clock enable (the slices hold while it is low);
latency 0 (the plain adder of ``tests/hw/test_arith_rtl.py`` is a fourth configuration).
The streams are every special-value pair, then random pairs, runs of held operands (where the
simulation form keeps its last sum) and near-cancellations; restart and enable toggle at random.
Each form is built with Verilator, driven by a small C++ loop that prints every output on every
cycle. (Icarus reads the simulation form in ``tests/hw/test_arith_rtl.py::test_icarus_subset``.)
"""

import subprocess

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32AddConfig, Fp32Adder
from moagcn.sim.arith import golden
from moagcn.sim.rtl.build import verilog_text
from moagcn.sim.rtl.lean import WRAPPER, verilate_and_make

pytestmark = pytest.mark.xdist_group("verilator-arith-forms")

#: (name, latency, restart, enable)
UNITS = [("restart", 3, True, False), ("enabled", 2, False, True), ("comb", 0, False, False)]


class _Adders(wiring.Component):
    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "restart": In(1), "en": In(1),
                          **{f"y_{name}": Out(32) for name, *_ in UNITS}})

    def elaborate(self, platform):
        m = Module()
        for name, latency, restart, enable in UNITS:
            unit = Fp32Adder(Fp32AddConfig(latency=latency, restart=restart, enable=enable))
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
    a = np.concatenate([sa, ra, ha, ca]).astype(np.uint32)
    b = np.concatenate([sb, rb, hb, cb]).astype(np.uint32)
    restart = (rng.random(a.size) < 0.3).astype(np.uint32)
    en = (rng.random(a.size) < 0.7).astype(np.uint32)
    return a, b, restart, en


def _write_inputs(tmp_path, a, b, restart, en):
    (tmp_path / "ops.txt").write_text("".join(
        f"{x:08x} {y:08x} {r | e << 1:x}\n" for x, y, r, e in zip(a, b, restart, en)))


def _read_outputs(path) -> np.ndarray:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return np.array([[int(x, 16) for x in r] for r in rows], dtype=np.int64)


#: drives the adders one cycle per line of ops.txt (a, b, {en, restart} in hex), printing the
#: outputs before each rising edge
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
    fprintf(out, "%08x %08x %08x\n", top.y_restart, top.y_enabled, top.y_comb);
    top.clk = 1; top.eval(); top.clk = 0;
  }
  fclose(out);
  return 0;
}
"""


def _run_verilator(tmp_path, text: str, synthesis: bool) -> np.ndarray:
    work = tmp_path / ("gates" if synthesis else "form")
    work.mkdir()
    (work / "ops.txt").write_bytes((tmp_path / "ops.txt").read_bytes())
    (work / "adders.v").write_text(text)
    (work / "main.cpp").write_text(MAIN)
    with open(work / "build.log", "w") as log:
        ok = verilate_and_make(work, ["adders.v", "main.cpp"],
                               ["-Wno-fatal", *(["-DSYNTHESIS"] if synthesis else [])],
                               work / "sim", log)
    assert ok, (work / "build.log").read_text()[-3000:]
    run = subprocess.run([str(work / "sim")], cwd=work, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return _read_outputs(work / "out.txt")


def _expected(a, b, restart, en) -> dict[str, np.ndarray]:
    """numpy's sums where each unit's output is defined (-1 elsewhere): cycle t of a unit of
    latency L shows the operands of L enabled cycles before."""
    n = a.size
    out = {}
    for name, latency, rst, enable in UNITS:
        ops_a = np.where(restart.astype(bool), 0, a).astype(np.uint32) if rst else a
        sums = golden.add(ops_a, b)
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
    # the adders as the lean harness's top module (its build caches Verilator's runtime)
    text, _ = verilog_text(_Adders(), WRAPPER)
    for name in ("l3_r1_e0", "l2_r0_e1", "l0_r0_e0"):
        assert text.count(f"module moagcn_sim_form_fp32add_{name}") == 1, name
    _write_inputs(tmp_path, a, b, restart, en)
    gates = _run_verilator(tmp_path, text, synthesis=True)
    form = _run_verilator(tmp_path, text, synthesis=False)
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
