"""The shared, banked node buffer's read crossbar (``node_banks`` > 0).

Without it every slice reads its own copy of the node buffer. With it the slices share one
copy in B banks: feature row r lives in bank ``r mod B`` at ``r div B``. Each cycle each bank
reads at most one row. Among the slices asking for a row in a bank, the bank's round-robin
pointer picks one; the bank reads that slice's row, and every slice asking for the same row
is granted too: it takes the one read (multicast). A slice asking for another row of the bank
is refused and asks again the next cycle (its row reader keeps the request at the head of its
queue, see :class:`~moagcn.hw.sspmm.fetch.QueuedRowReader`).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import above_onehot, bits_for, lowest_onehot, onehot_select, popcount
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.layouts import widths


def bank_rows(config: SSpmmConfig) -> int:
    """Rows of one bank of the shared node buffer."""
    return -(-config.max_nodes // config.node_banks)


def bank_bits(config: SSpmmConfig) -> int:
    """Bits of a row id that pick its bank (log2 ``node_banks``)."""
    return config.node_banks.bit_length() - 1


class NodeRequestSignature(wiring.Signature):
    """A slice's request for a feature row, as the slice sees it.

    Members
    -------
    valid : Out(1)
        A row is asked for (held until granted).
    row : Out(row bits)
        Which row.
    grant : In(1)
        The row is read this cycle (for this slice, or for another one asking for it too).
    data : In(32 * max_feature_width)
        The row granted in the cycle before.
    """

    def __init__(self, config: SSpmmConfig):
        super().__init__({"valid": Out(1), "row": Out(widths(config)["row"]),
                          "grant": In(1), "data": In(32 * config.max_feature_width)})


class NodeCrossbar(wiring.Component):
    """Grant the slices' row requests on the banks of the shared node buffer (see the module).

    Members
    -------
    req : In(NodeRequestSignature(config)).array(slices)
        Each slice's request.
    bank : Out(RamReadSignature(bank address bits, 32 * F)).array(node_banks)
        Each bank's read port (``en`` only when the bank reads).
    clear : In(1)
        Every round-robin pointer back to slice 0 (a job starts).
    reads : Out(range(node_banks + 1))
        Rows read from the banks this cycle.
    refused : Out(range(slices + 1))
        Requests refused this cycle (bank conflicts).
    """

    def __init__(self, config: SSpmmConfig):
        if not config.node_banks:
            raise ValueError("the node crossbar needs node_banks > 0")
        self.config = config
        B, S = config.node_banks, config.slices
        addr_bits = bits_for(bank_rows(config))
        super().__init__({
            "req": In(NodeRequestSignature(config)).array(S),
            "bank": Out(RamReadSignature(addr_bits, 32 * config.max_feature_width)).array(B),
            "clear": In(1),
            "reads": Out(range(B + 1)), "refused": Out(range(S + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        B, S, bb = cfg.node_banks, cfg.slices, bank_bits(cfg)
        addr_bits = len(self.bank[0].addr)
        bank_of = [r.row[:bb] if bb else 0 for r in self.req]
        addr_of = [r.row[bb:bb + addr_bits] for r in self.req]
        winner_addr = []
        for b in range(B):
            asking = Signal(S, name=f"bank_{b}_asking")
            m.d.comb += asking.eq(Cat(*[r.valid & (k == b) for r, k in zip(self.req, bank_of)]))
            # round robin: the lowest asking slice after the last one served, else the lowest
            after = Signal(S, name=f"bank_{b}_after")
            ahead = asking & after
            win = Signal(S, name=f"bank_{b}_winner")
            m.d.comb += win.eq(Mux(ahead.any(),
                                   lowest_onehot(m, ahead, name=f"bank_{b}_low_after"),
                                   lowest_onehot(m, asking, name=f"bank_{b}_low")))
            addr = Signal(addr_bits, name=f"bank_{b}_addr")
            m.d.comb += addr.eq(onehot_select(win, addr_of))
            winner_addr.append(addr)
            m.d.comb += [self.bank[b].addr.eq(addr), self.bank[b].en.eq(asking.any())]
            with m.If(self.clear):
                m.d.sync += after.eq(0)
            with m.Elif(asking.any()):
                m.d.sync += after.eq(above_onehot(m, win, name=f"bank_{b}_above"))
        winners = Array(winner_addr)
        refused = []
        for k, r in enumerate(self.req):
            grant = Signal(name=f"grant_{k}")
            m.d.comb += [grant.eq(r.valid & (winners[bank_of[k]] == addr_of[k])),
                         r.grant.eq(grant)]
            refused.append(r.valid & ~grant)
            # the granted row arrives a cycle later from the bank that read it
            if B == 1:
                m.d.comb += r.data.eq(self.bank[0].data)
                continue
            took = Signal(range(B), name=f"took_bank_{k}")
            with m.If(grant):
                m.d.sync += took.eq(bank_of[k])
            m.d.comb += r.data.eq(Array(p.data for p in self.bank)[took])
        m.d.comb += [self.reads.eq(popcount(m, Cat(*[p.en for p in self.bank]), name="reads")),
                     self.refused.eq(popcount(m, Cat(*refused), name="refused"))]
        return m

