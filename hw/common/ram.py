"""Multi-port RAM that converts to Verilog without an initialiser.

Amaranth writes a memory's initial contents element by element; for the megabit buffers of the
S-SpMM accelerator that alone takes minutes and megabytes of Verilog. :class:`Ram` therefore
elaborates to a plain behavioural Verilog module (:data:`VERILOG_RAM`) when the design is
converted to Verilog (``platform`` is a :class:`VerilogTarget`), and to an
``amaranth.lib.memory.Memory`` in the Amaranth simulator. Both have the same ports and
behaviour: synchronous writes with a per-word enable, synchronous reads that return the old
contents when a word is written in the same cycle. Contents start undefined (zero in
Verilator): designs must not depend on them.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, ClockSignal, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import bits_for
from moagcn.hw.common.target import VerilogTarget
from moagcn.hw.common.wordsel import sim_form

RAM_MODULE = "moagcn_ram"
#: the same RAM for designs that never read a word in the cycle they write it (see
#: :class:`Ram`'s ``collisions``)
RAM_MODULE_NO_COLLISIONS = "moagcn_ram_nc"

_RAM_TEMPLATE = """
// Multi-port RAM used by moagcn designs (see moagcn.hw.common.ram).{note}
module {name} #(
  parameter WIDTH = 32, parameter DEPTH = 16, parameter AW = 4, parameter GRAN = 32,
  parameter NR = 1, parameter NW = 1
) (
  input clk,
  input [NW*AW-1:0] w_addr,
  input [NW*WIDTH-1:0] w_data,
  input [NW*(WIDTH/GRAN)-1:0] w_en,
  input [NR*AW-1:0] r_addr,
  input [NR-1:0] r_en,
  output reg [NR*WIDTH-1:0] r_data
);
  {attr}reg [WIDTH-1:0] mem [0:DEPTH-1];
  integer p, b;{check}
  always @(posedge clk) begin
    for (p = 0; p < NR; p = p + 1)
      if (r_en[p])
        r_data[p*WIDTH +: WIDTH] <= mem[r_addr[p*AW +: AW]];
    // (the per-port test lets a simulator skip idle ports' word loops)
    for (p = 0; p < NW; p = p + 1)
      if (|w_en[p*(WIDTH/GRAN) +: (WIDTH/GRAN)])
        for (b = 0; b < WIDTH/GRAN; b = b + 1)
          if (w_en[p*(WIDTH/GRAN) + b])
            mem[w_addr[p*AW +: AW]][b*GRAN +: GRAN] <= w_data[p*WIDTH + b*GRAN +: GRAN];
  end
endmodule
"""

# simulators check the promise of a RAM without collisions every cycle (synthesis skips it)
_COLLISION_CHECK = """
`ifndef SYNTHESIS
  integer cp, cq;
  always @(posedge clk)
    for (cp = 0; cp < NR; cp = cp + 1)
      for (cq = 0; cq < NW; cq = cq + 1)
        if (r_en[cp] && (|w_en[cq*(WIDTH/GRAN) +: (WIDTH/GRAN)])
            && r_addr[cp*AW +: AW] == w_addr[cq*AW +: AW]) begin
          $display("%m: read port %0d and write port %0d at word %0d in one cycle, in a RAM built without read/write collisions", cp, cq, r_addr[cp*AW +: AW]);
          $fatal;
        end
`endif"""

VERILOG_RAM = _RAM_TEMPLATE.format(name=RAM_MODULE, note="", attr="", check="")
_NO_COLLISIONS_NOTE = (
    "\n// Never read and written at one word in one cycle: synthesis may return anything then\n"
    "// (no bypass logic); simulators stop with an error if it happens.")
VERILOG_RAM_NO_COLLISIONS = _RAM_TEMPLATE.format(
    name=RAM_MODULE_NO_COLLISIONS, attr="(* no_rw_check *) ", check=_COLLISION_CHECK,
    note=_NO_COLLISIONS_NOTE)
#: a RAM without collisions that synthesis puts in block RAM however small it is (see
#: :class:`Ram`'s ``block``)
RAM_MODULE_BLOCK = "moagcn_ram_nc_block"
VERILOG_RAM_BLOCK = _RAM_TEMPLATE.format(
    name=RAM_MODULE_BLOCK, attr='(* no_rw_check, ram_style = "block" *) ',
    check=_COLLISION_CHECK,
    note=_NO_COLLISIONS_NOTE + "\n// Mapped to block RAM whatever its size.")
#: every RAM module a design may instantiate, with its Verilog
VERILOG_RAMS = {RAM_MODULE: VERILOG_RAM, RAM_MODULE_NO_COLLISIONS: VERILOG_RAM_NO_COLLISIONS,
                RAM_MODULE_BLOCK: VERILOG_RAM_BLOCK}


class RamReadSignature(wiring.Signature):
    """A RAM read port as its user sees it.

    Parameters
    ----------
    addr_bits : int
    width : int or shape-castable
        The word; a layout gives the user a view of its fields (the RAM itself holds plain
        words of that many bits).

    Members
    -------
    addr : Out(addr_bits)
        Word to read.
    data : In(width)
        Its contents, one cycle after the address.
    en : Out(1, init=1)
        Read enable: without it ``data`` holds its last value (a block RAM's read clock
        enable; a simulator then skips the copy). Left undriven, every cycle reads.
    """

    def __init__(self, addr_bits: int, width: int):
        super().__init__({"addr": Out(addr_bits), "data": In(width), "en": Out(1, init=1)})


class RamWriteSignature(wiring.Signature):
    """A RAM write port as its user sees it.

    Members
    -------
    addr : Out(addr_bits)
        Word to write.
    data : Out(width)
        New contents.
    en : Out(enables)
        One enable bit per ``width // enables`` bits of the word.
    """

    def __init__(self, addr_bits: int, width: int, enables: int = 1):
        super().__init__({"addr": Out(addr_bits), "data": Out(width), "en": Out(enables)})



def refuse(elaboratable, message: str):
    """Raise ``ValueError(message)`` from ``elaboratable``'s constructor. Amaranth warns about
    every elaboratable that is created and never elaborated, also one whose constructor failed
    and that nobody holds; this one is marked as not to be warned about first."""
    elaboratable._MustUse__silence = True
    raise ValueError(message)

class Ram(wiring.Component):
    """``depth`` words of ``width`` bits with ``read_ports`` read and ``write_ports`` write ports.

    Members
    -------
    read : In(RamReadSignature(addr_bits, width)).array(read_ports)
        Read ports (data one cycle after the address; see :class:`RamReadSignature`).
    write : In(RamWriteSignature(addr_bits, width, width // granularity)).array(write_ports)
        Write ports, one enable bit per ``granularity`` bits.
    """

    def __init__(self, width: int, depth: int, read_ports: int = 1, write_ports: int = 1,
                 granularity: int | None = None, collisions: bool = True, block: bool = False):
        granularity = granularity or width
        #: ``True``: synthesis maps the RAM to block RAM even where its size would make it
        #: distributed (LUT) RAM: a wide, shallow buffer in LUT RAM is dozens of cells spread
        #: over the die, its read address fanned out to all of them. Only without collisions.
        if block and collisions:
            refuse(self, "a block-RAM Ram must be built with collisions=False")
        self.block = block
        #: ``False``: the design never reads a word in the cycle it writes it (a buffer
        #: written only while loading and read only while computing). Synthesis then drops
        #: the logic that returns a block RAM's old contents on such a collision (a compare
        #: of the addresses and a bypass register on the read data, in the read path);
        #: Verilog simulations stop with an error if a collision happens all the same.
        self.collisions = collisions
        if width % granularity:
            refuse(self, f"width {width} is not a multiple of granularity {granularity}")
        self.width, self.depth, self.granularity = width, depth, granularity
        self.n_read, self.n_write = read_ports, write_ports
        self.addr_bits = bits_for(depth)
        super().__init__({
            "read": In(self.read_signature).array(read_ports),
            "write": In(self.write_signature).array(write_ports),
        })

    @property
    def read_signature(self) -> RamReadSignature:
        """Signature of one read port, as its user sees it."""
        return RamReadSignature(self.addr_bits, self.width)

    @property
    def write_signature(self) -> RamWriteSignature:
        """Signature of one write port, as its user sees it."""
        return RamWriteSignature(self.addr_bits, self.width, self.width // self.granularity)

    def elaborate(self, platform):
        m = Module()
        if isinstance(platform, VerilogTarget):
            # ports are concatenated, port 0 in the low bits, as VERILOG_RAM slices them
            module = (RAM_MODULE_BLOCK if self.block else
                      RAM_MODULE if self.collisions else RAM_MODULE_NO_COLLISIONS)
            m.submodules.ram = Instance(
                module,
                p_WIDTH=self.width, p_DEPTH=self.depth, p_AW=self.addr_bits,
                p_GRAN=self.granularity, p_NR=self.n_read, p_NW=self.n_write,
                i_clk=ClockSignal(),
                i_w_addr=Cat(*[w.addr for w in self.write]),
                i_w_data=Cat(*[w.data for w in self.write]),
                i_w_en=Cat(*[w.en for w in self.write]),
                i_r_addr=Cat(*[r.addr for r in self.read]),
                i_r_en=Cat(*[r.en for r in self.read]),
                o_r_data=Cat(*[r.data for r in self.read]))
            return m
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
        for read in self.read:
            port = mem.read_port()
            m.d.comb += [port.addr.eq(read.addr), port.en.eq(read.en), read.data.eq(port.data)]
        for write in self.write:
            port = mem.write_port(granularity=self.granularity)
            m.d.comb += [port.addr.eq(write.addr), port.data.eq(write.data), port.en.eq(write.en)]
        return m


class LvtRam(wiring.Component):
    """A RAM with several write ports built from single-write-port block RAMs and a
    live-value table (LaForest and Steffan's multi-ported memory).

    Each write port has a bank of its own: a block RAM of ``depth`` words with every read
    port. The *live-value table* (LVT), one small register per word, remembers which bank
    wrote the word last; a read reads the word from every bank and keeps the one the table
    names, in the cycle its data arrives (the table is read beside the banks, registered).

    Synthesis maps a :class:`Ram` with two or more write ports to flip-flops and a
    multiplexer tree on the read (no FPGA block RAM has two write ports and a read port),
    whose read address fans out to every word: on ECP5 that path of the S-SpMM's local
    buffers held the whole accelerator to about 60 MHz. Here the read is a block RAM's, the
    table is ``depth`` x ``bits_for(write_ports)`` flip-flops, and the path after the banks is
    one multiplexer of ``write_ports`` words.

    Same ports and timing as :class:`Ram` (whole words only) and, like a ``Ram`` built with
    ``collisions=False``, never read and written at one word in one cycle. Two write ports
    never write one word in one cycle either (which one would win is not defined).

    In Verilog the banks and the table are what synthesis sees; simulators read the same
    words from one multi-port memory (a ``Ram`` beside them, through a simulation form of
    :mod:`.wordsel`: copying each read from every bank cost the S-SpMM's co-simulation 11 %),
    and Verilator removes the banks, which nothing then reads. The Amaranth simulator runs the
    banks and the table.
    """

    def __init__(self, width: int, depth: int, read_ports: int = 1, write_ports: int = 2):
        if write_ports < 2:
            refuse(self, f"an LvtRam needs two or more write ports (not {write_ports}); "
                         f"use a Ram")
        self.width, self.depth = width, depth
        self.n_read, self.n_write = read_ports, write_ports
        self.addr_bits = bits_for(depth)
        super().__init__({
            "read": In(RamReadSignature(self.addr_bits, width)).array(read_ports),
            "write": In(RamWriteSignature(self.addr_bits, width)).array(write_ports),
        })

    def elaborate(self, platform):
        m = Module()
        banks = []
        for j, write in enumerate(self.write):
            bank = Ram(self.width, self.depth, read_ports=self.n_read, collisions=False,
                       block=True)
            m.submodules[f"bank_{j}"] = bank
            m.d.comb += [bank.write[0].addr.eq(write.addr), bank.write[0].data.eq(write.data),
                         bank.write[0].en.eq(write.en)]
            for read, port in zip(self.read, bank.read):
                m.d.comb += [port.addr.eq(read.addr), port.en.eq(read.en)]
            banks.append(bank)
        live = Array(Signal(range(self.n_write), name=f"live_{a}") for a in range(self.depth))
        for j, write in enumerate(self.write):
            with m.If(write.en):
                m.d.sync += live[write.addr].eq(j)
        plain = None
        if isinstance(platform, VerilogTarget):
            m.submodules.sim_ram = plain = Ram(self.width, self.depth, self.n_read, self.n_write,
                                               collisions=False)
            for write, port in zip(self.write, plain.write):
                m.d.comb += [port.addr.eq(write.addr), port.data.eq(write.data),
                             port.en.eq(write.en)]
        for p, read in enumerate(self.read):
            which = Signal(range(self.n_write), name=f"read_{p}_bank")
            with m.If(read.en):
                m.d.sync += which.eq(live[read.addr])
            data = Array(bank.read[p].data for bank in banks)[which]
            if plain is None:
                m.d.comb += read.data.eq(data)
            else:
                m.d.comb += [plain.read[p].addr.eq(read.addr), plain.read[p].en.eq(read.en),
                             read.data.eq(sim_form(m, "pass", plain.read[p].data, data,
                                                   name=f"read_{p}_data"))]
        return m
