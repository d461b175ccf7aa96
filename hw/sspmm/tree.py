"""Distribution tree: multicast of neighbour feature rows from the node buffer to the groups."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.wordsel import held_register
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.layouts import RowLinkSignature, packet_layout
from moagcn.hw.sspmm.protocol import tree_depth


class DistributionTree(wiring.Component):
    """A MAERI-style multicast tree from the fetcher (root) to the groups (leaves).

    Each cycle up to ``fetch_rows`` (R) packets enter at the root, one per root link: a
    neighbour's feature row and a destination mask with one bit per job context (``L =
    adder_latency`` bits per group). Every switch has ``tree_radix`` children and is one
    register stage; a packet goes on to a child only when some destination lies below it, so
    one row read reaches every context that needs it (multicast) and no subtree without a
    destination moves data (pruning). Every link carries R rows per cycle, as wide as the root:
    the contexts have disjoint destinations, so no two packets ever compete for a link lane
    and the tree never stalls. All leaves sit ``tree_depth(groups, radix)`` stages below the
    root.

    Members
    -------
    root : In(RowLinkSignature(config, groups)).array(R)
        Packets entering the tree (one per root link) and their rows.
    leaf : Out(RowLinkSignature(config, 1)).array(groups, R)
        ``leaf[g][j]``: packets of root link j leaving at group g (``dest`` is that group's
        slice of the mask, ``slot`` / ``sel`` its entries), and their rows.
    clear : In(1)
        Drop every packet in flight.
    busy : Out(1)
        A packet is in flight.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        R = config.fetch_rows
        super().__init__({
            "clear": In(1), "busy": Out(1),
            "root": In(RowLinkSignature(config, config.groups)).array(R),
            "leaf": Out(RowLinkSignature(config, 1)).array(config.groups, R),
        })

    @property
    def depth(self) -> int:
        return tree_depth(self.config.groups, self.config.tree_radix)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        G, radix = cfg.groups, cfg.tree_radix
        # level 0: the root; a node covers the leaves [lo, hi); a lane is (valid, packet, row)
        level = [((0, G), [(link.packet.valid, link.packet, link.words) for link in self.root])]
        valids = []
        for d in range(self.depth):
            span = radix ** (self.depth - d - 1)     # leaves under each node of the next level
            children = []
            for (lo, hi), lanes in level:
                for clo in range(lo, hi, span):
                    chi = min(clo + span, hi)
                    out_lanes = [self._forward(m, platform, lane, clo, chi,
                                               f"node_{d + 1}_{clo}_{j}")
                                 for j, lane in enumerate(lanes)]
                    valids += [valid for valid, _, _ in out_lanes]
                    children.append(((clo, chi), out_lanes))
            level = children
        for (lo, _), lanes in level:
            for j, lane in enumerate(lanes):
                self._drive_leaf(m, self.leaf[lo][j], lane, lo)
        m.d.comb += self.busy.eq(Cat(*valids).any())
        return m

    def _forward(self, m: Module, platform, lane, lo: int, hi: int, name: str):
        """One switch output: the lane's packet, registered, for the child covering the leaves
        ``[lo, hi)``; it moves only when a destination lies below that child."""
        valid, pkt, words = lane
        L = self.config.adder_latency
        out = Signal(packet_layout(self.config, self.config.groups), name=name,
                     reset_less=True)
        out_valid = Signal(name=f"{name}_valid")
        below = valid & pkt.dest[lo * L:hi * L].any()
        if (lo, hi) == (0, self.config.groups):
            # a child under which every leaf lies (one group): every packet has a destination
            # below it, so its payload registers load every cycle (what they hold without a
            # packet is never read): an enable would fan out to each of the row's bits, and
            # that fan-out was a longest path
            out_words = Signal(len(words), name=f"{name}_words", reset_less=True)
            m.d.sync += [out.eq(pkt), out_words.eq(words)]
        else:
            # the payload only moves into a subtree with a destination (the row through a
            # simulation form: moagcn.hw.common.wordsel.held_register)
            with m.If(below):
                m.d.sync += out.eq(pkt)
            out_words = held_register(m, platform, below, words, f"{name}_words")
        m.d.sync += out_valid.eq(below & ~self.clear)
        return out_valid, out, out_words

    def _drive_leaf(self, m: Module, leaf, lane, g: int):
        """Leaf output of group ``g``: the lane's packet with the group's slice of ``dest``, its
        destination context and that context's lane features."""
        valid, pkt, words = lane
        L = self.config.adder_latency
        m.d.comb += [leaf.packet.valid.eq(valid), leaf.packet.first.eq(pkt.first),
                     leaf.packet.last.eq(pkt.last), leaf.words.eq(words),
                     leaf.packet.dest.eq(pkt.dest[g * L:(g + 1) * L]),
                     leaf.packet.slot[0].eq(pkt.slot[g]), leaf.packet.sel[0].eq(pkt.sel[g])]
        if self.config.weighted:
            m.d.comb += leaf.packet.value.eq(pkt.value)
