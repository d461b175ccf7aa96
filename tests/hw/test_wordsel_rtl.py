"""Word selects and simulation forms in Verilog: both branches of the generated modules (the
simulators' part-select and arithmetic, and with ``SYNTHESIS`` defined the design's own gates)
against Python references, exhaustively on small widths (Icarus); and the Verilog a design
converts to holds each generated module once."""

import pytest
from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import above_onehot, lowest_onehot, popcount, second_onehot
from moagcn.hw.common.wordsel import select_word
from moagcn.sim.rtl.build import verilog_text

from ..conftest import needs_icarus, run_icarus

WORDS, WIDTH, INDEX = 5, 8, 3          # 5 words: indices 5..7 are out of range (read 0)
VALUE = 0x1122334455                   # word i = 0x55, 0x44, ...
BITS = 6


class _Probe(wiring.Component):
    def __init__(self):
        super().__init__({"value": In(WORDS * WIDTH), "index": In(INDEX), "a": In(BITS),
                          "word": Out(WIDTH), "count": Out(4), "low": Out(BITS),
                          "above": Out(BITS), "second": Out(BITS)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.word.eq(select_word(m, self.value, self.index, WIDTH, name="w")),
                     self.count.eq(popcount(m, self.a)),
                     self.low.eq(lowest_onehot(m, self.a)),
                     self.above.eq(above_onehot(m, self.a)),
                     self.second.eq(second_onehot(m, self.a))]
        return m


TESTBENCH = f"""
module tb;
  reg clk = 0, rst = 0;
  reg [{INDEX - 1}:0] index;
  reg [{BITS - 1}:0] a;
  wire [{WIDTH - 1}:0] word;
  wire [3:0] count;
  wire [{BITS - 1}:0] low, above, second;
  integer i, j;
  probe dut(.clk(clk), .rst(rst), .value({WORDS * WIDTH}'h{VALUE:x}), .index(index), .a(a),
            .word(word), .count(count), .low(low), .above(above), .second(second));
  initial begin
    for (i = 0; i < {1 << INDEX}; i = i + 1)
      for (j = 0; j < {1 << BITS}; j = j + 1) begin
        index = i; a = j; #1;
        $display("%0d %0d %0d %0d %0d %0d %0d", i, j, word, count, low, above, second);
      end
    $finish;
  end
endmodule
"""


def _expected(index: int, a: int) -> tuple:
    word = (VALUE >> (index * WIDTH)) & ((1 << WIDTH) - 1) if index < WORDS else 0
    low = a & -a
    above = ~((low << 1) - 1) & ((1 << BITS) - 1) if a else 0
    set_bits = [b for b in range(BITS) if a >> b & 1]
    second = 1 << set_bits[1] if len(set_bits) > 1 else 0
    return (word, bin(a).count("1"), low, above, second)


def test_each_generated_module_is_defined_once():
    text, _ = verilog_text(_Probe(), "probe")
    for name in ("moagcn_word_select_w8_n5_s3", "moagcn_sim_form_popcount_n6_w",
                 "moagcn_sim_form_lowest_n6_w6", "moagcn_sim_form_above_n6_w6",
                 "moagcn_sim_form_second_n6_w6"):
        assert text.count(f"module {name}") == 1, name
    assert "`ifdef SYNTHESIS" in text


@needs_icarus
@pytest.mark.parametrize("synthesis", [False, True], ids=["simulation", "synthesis"])
def test_both_forms_match_the_references_exhaustively(tmp_path, synthesis):
    text, _ = verilog_text(_Probe(), "probe")
    run = run_icarus(tmp_path, {"probe.v": text, "tb.v": TESTBENCH},
                     ["SYNTHESIS"] if synthesis else [])
    rows = [tuple(map(int, line.split())) for line in run.stdout.splitlines()
            if line and line[0].isdigit()]
    assert len(rows) == (1 << INDEX) * (1 << BITS), run.stdout[-2000:] + run.stderr
    for i, a, *got in rows:
        assert tuple(got) == _expected(i, a), (i, a, got)


# -- the chunk select's simulation form against its gates ---------------------------------------

CF, CW = 6, 2                          # 6 features in jobs of 2 lanes: chunks 0..2, 3 past


class _ChunkProbe(wiring.Component):
    """The job emitter's decoding: ranks of the mask's features, then job ``chunk``'s lanes."""

    def __init__(self):
        from moagcn.hw.sspmm.mask_decoder import ChunkSelect
        self._select = ChunkSelect(CF, CW)
        super().__init__({"mask": In(CF), "chunk": In(len(self._select.chunk)),
                          "sel": Out(len(self._select.sel[0]) * CW), "valid": Out(CW)})

    def elaborate(self, platform):
        from moagcn.hw.sspmm.mask_decoder import MaskRanks
        m = Module()
        m.submodules.ranks = ranks = MaskRanks(CF, CW)
        m.submodules.select = select = self._select
        m.d.comb += [ranks.mask.eq(self.mask), select.mask.eq(self.mask),
                     select.chunk.eq(self.chunk), self.valid.eq(select.valid),
                     self.sel.eq(Cat(*select.sel))]
        for f in range(CF):
            m.d.comb += [select.chunk_of[f].eq(ranks.chunk[f]), select.lane_of[f].eq(ranks.lane[f])]
        return m


def _chunk_expected(mask: int, chunk: int) -> tuple[list, int]:
    ones = [f for f in range(CF) if mask >> f & 1]
    sel, valid = [], 0
    for k in range(CW):
        rank = chunk * CW + k
        sel.append(ones[rank] if rank < len(ones) else 0)
        valid |= (rank < len(ones)) << k
    return sel, valid


@needs_icarus
@pytest.mark.parametrize("synthesis", [False, True], ids=["simulation", "synthesis"])
def test_chunk_select_forms_match_the_rule_exhaustively(tmp_path, synthesis):
    probe = _ChunkProbe()
    text, _ = verilog_text(probe, "probe")
    assert "moagcn_sim_form_chunksel_f6_l2" in text
    sel_bits = len(probe.sel) // CW
    chunks = 1 << len(probe.chunk)
    tb = f"""
module tb;
  reg clk = 0, rst = 0;
  reg [{CF - 1}:0] mask;
  reg [{len(probe.chunk) - 1}:0] chunk;
  wire [{len(probe.sel) - 1}:0] sel;
  wire [{CW - 1}:0] valid;
  integer i, j;
  probe dut(.clk(clk), .rst(rst), .mask(mask), .chunk(chunk), .sel(sel), .valid(valid));
  initial begin
    for (i = 0; i < {1 << CF}; i = i + 1)
      for (j = 0; j < {chunks}; j = j + 1) begin
        mask = i; chunk = j; #1;
        $display("%0d %0d %0d %0d", i, j, sel, valid);
      end
    $finish;
  end
endmodule
"""
    run = run_icarus(tmp_path, {"probe.v": text, "tb.v": tb},
                     ["SYNTHESIS"] if synthesis else [])
    rows = [tuple(map(int, line.split())) for line in run.stdout.splitlines()
            if line and line[0].isdigit()]
    assert len(rows) == (1 << CF) * chunks, run.stdout[-2000:] + run.stderr
    for mask, chunk, sel, valid in rows:
        want_sel, want_valid = _chunk_expected(mask, chunk)
        got_sel = [(sel >> (k * sel_bits)) & ((1 << sel_bits) - 1) for k in range(CW)]
        assert (got_sel, valid) == (want_sel, want_valid), (mask, chunk, got_sel, valid)


@pytest.mark.parametrize("width", [7, 28, 33])
def test_second_onehot_gates_on_wide_values(width):
    """The gates of :func:`second_onehot` (the Amaranth simulator runs them) on random values
    as wide as a pass table's slots, against the second set bit found in Python."""
    import numpy as np
    from amaranth.hdl import Signal
    from amaranth.sim import Simulator

    m = Module()
    a = Signal(width)
    y = second_onehot(m, a)
    rng = np.random.default_rng(width)
    values = [int(v) for v in rng.integers(0, 1 << width, 300, dtype=np.uint64)]
    values += [0, 1, 1 << (width - 1), (1 << width) - 1, 3 << (width - 2)]
    got = []

    async def bench(ctx):
        for v in values:
            ctx.set(a, v)
            got.append(ctx.get(y))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for v, g in zip(values, got):
        bits = [b for b in range(width) if v >> b & 1]
        assert g == (1 << bits[1] if len(bits) > 1 else 0), (hex(v), hex(g))


# -- the held register's simulation form against the design's register ----------------------------

HELD = 70                              # wider than two 32-bit words


class _HeldProbe(wiring.Component):
    def __init__(self):
        super().__init__({"en": In(1), "d": In(HELD), "q": Out(HELD)})

    def elaborate(self, platform):
        from moagcn.hw.common.wordsel import held_register
        m = Module()
        m.d.comb += self.q.eq(held_register(m, platform, self.en, self.d, "r"))
        return m


@needs_icarus
@pytest.mark.parametrize("synthesis", [False, True], ids=["simulation", "synthesis"])
def test_held_register_forms_hold_and_load_as_the_enable_says(tmp_path, synthesis):
    import numpy as np
    text, _ = verilog_text(_HeldProbe(), "probe")
    assert text.count(f"module moagcn_sim_form_held_w{HELD}") == 1
    # the text synthesis reads leaves the clocked forms out (the design's register alone)
    assert "moagcn_sim_form_held" not in verilog_text(_HeldProbe(), "probe", synthesis=True)[0]
    rng = np.random.default_rng(5)
    steps = [(int(rng.random() < 0.4), int(rng.integers(0, 1 << 62)) << 8 | int(rng.integers(256)))
             for _ in range(200)]
    drive = "\n".join(f"    en = {e}; d = {HELD}'h{v:x}; #1; $display(\"%0d\", q); "
                      "clk = 1; #1; clk = 0;" for e, v in steps)
    tb = f"""
module tb;
  reg clk = 0, rst = 0, en = 0;
  reg [{HELD - 1}:0] d = 0;
  wire [{HELD - 1}:0] q;
  probe dut(.clk(clk), .rst(rst), .en(en), .d(d), .q(q));
  initial begin
{drive}
    $finish;
  end
endmodule
"""
    run = run_icarus(tmp_path, {"probe.v": text, "tb.v": tb},
                     ["SYNTHESIS"] if synthesis else [])
    got = [int(line) for line in run.stdout.splitlines() if line.strip().isdigit()]
    held, want = 0, []
    for e, v in steps:
        want.append(held)
        if e:
            held = v
    assert got == want
