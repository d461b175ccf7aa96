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

from amaranth.hdl import Cat, ClockSignal, Instance, Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

RAM_MODULE = "moagcn_ram"

VERILOG_RAM = """
// Multi-port RAM used by moagcn designs (see moagcn.hw.common.ram).
module moagcn_ram #(
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
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  integer p, b;
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


class VerilogTarget:
    """Platform marker passed to ``verilog.convert``: elaborate RAMs as :data:`VERILOG_RAM`."""


class Ram(wiring.Component):
    """``depth`` words of ``width`` bits with ``read_ports`` read and ``write_ports`` write ports.

    Members
    -------
    r{i}_addr : In, r{i}_data : Out, r{i}_en : In(1, init=1)
        Read port i (data one cycle after the address). Without ``en`` the data holds its
        last value (a block RAM's read clock enable; a simulator then skips the copy).
    w{i}_addr, w{i}_data : In; w{i}_en : In(width // granularity)
        Write port i, one enable bit per ``granularity`` bits.
    """

    def __init__(self, width: int, depth: int, read_ports: int = 1, write_ports: int = 1,
                 granularity: int | None = None):
        granularity = granularity or width
        if width % granularity:
            raise ValueError(f"width {width} is not a multiple of granularity {granularity}")
        self.width, self.depth, self.granularity = width, depth, granularity
        self.n_read, self.n_write = read_ports, write_ports
        self.addr_bits = max(depth - 1, 1).bit_length()
        members = {}
        for i in range(read_ports):
            members[f"r{i}_addr"] = In(self.addr_bits)
            members[f"r{i}_data"] = Out(width)
            members[f"r{i}_en"] = In(1, init=1)
        for i in range(write_ports):
            members[f"w{i}_addr"] = In(self.addr_bits)
            members[f"w{i}_data"] = In(width)
            members[f"w{i}_en"] = In(width // granularity)
        super().__init__(members)

    def read(self, i: int):
        """(addr, data) of read port ``i``."""
        return getattr(self, f"r{i}_addr"), getattr(self, f"r{i}_data")

    def write(self, i: int):
        """(addr, data, en) of write port ``i``."""
        return getattr(self, f"w{i}_addr"), getattr(self, f"w{i}_data"), getattr(self, f"w{i}_en")

    def elaborate(self, platform):
        m = Module()
        reads = [self.read(i) for i in range(self.n_read)]
        writes = [self.write(i) for i in range(self.n_write)]
        if isinstance(platform, VerilogTarget):
            m.submodules.ram = Instance(
                RAM_MODULE,
                p_WIDTH=self.width, p_DEPTH=self.depth, p_AW=self.addr_bits,
                p_GRAN=self.granularity, p_NR=self.n_read, p_NW=self.n_write,
                i_clk=ClockSignal(),
                i_w_addr=Cat(*[w[0] for w in writes]), i_w_data=Cat(*[w[1] for w in writes]),
                i_w_en=Cat(*[w[2] for w in writes]),
                i_r_addr=Cat(*[r[0] for r in reads]),
                i_r_en=Cat(*[getattr(self, f"r{i}_en") for i in range(self.n_read)]),
                o_r_data=Cat(*[r[1] for r in reads]))
            return m
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
        for i, (addr, data) in enumerate(reads):
            port = mem.read_port()
            m.d.comb += [port.addr.eq(addr), port.en.eq(getattr(self, f"r{i}_en")),
                         data.eq(port.data)]
        for addr, data, en in writes:
            port = mem.write_port(granularity=self.granularity)
            m.d.comb += [port.addr.eq(addr), port.data.eq(data), port.en.eq(en)]
        return m
