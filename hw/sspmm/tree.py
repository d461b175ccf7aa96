"""Distribution tree: multicast of neighbour feature rows from the node buffer to the groups."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .config import SSpmmConfig
from .layouts import packet_layout, row_words_shape
from .protocol import tree_depth


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
    root_j : In(packet_layout(config, contexts)), root_words_j : In(32 * F), j < R
        Packets entering the tree, and their rows.
    leaf_g_j : Out(packet_layout(config, L)), leaf_words_g_j : Out(32 * F), g < groups, j < R
        Packets leaving at group g (``dest`` is that group's slice of the mask), and their rows.
    clear : In(1)
        Drop every packet in flight.
    busy : Out(1)
        A packet is in flight.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        n, L, R = config.contexts, config.adder_latency, config.fetch_rows
        members = {"clear": In(1), "busy": Out(1)}
        for j in range(R):
            members[f"root_{j}"] = In(packet_layout(config, n))
            members[f"root_words_{j}"] = In(row_words_shape(config))
        for g in range(config.groups):
            for j in range(R):
                members[f"leaf_{g}_{j}"] = Out(packet_layout(config, L))
                members[f"leaf_words_{g}_{j}"] = Out(row_words_shape(config))
        super().__init__(members)

    def root(self, j: int):
        return getattr(self, f"root_{j}")

    def root_words(self, j: int):
        return getattr(self, f"root_words_{j}")

    def leaf(self, g: int, j: int):
        return getattr(self, f"leaf_{g}_{j}")

    def leaf_words(self, g: int, j: int):
        return getattr(self, f"leaf_words_{g}_{j}")

    @property
    def depth(self) -> int:
        return tree_depth(self.config.groups, self.config.tree_radix)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        G, L, R, radix = cfg.groups, cfg.adder_latency, cfg.fetch_rows, cfg.tree_radix
        depth = self.depth
        layout = packet_layout(cfg, cfg.contexts)
        # level 0: the root; a node covers the leaves [lo, hi); a lane is (valid, packet, row)
        level = [((0, G), [(self.root(j).valid, self.root(j), self.root_words(j))
                           for j in range(R)])]
        valids = []
        for d in range(depth):
            span = radix ** (depth - d - 1)          # leaves under each node of the next level
            nxt = []
            for (lo, hi), lanes in level:
                for clo in range(lo, hi, span):
                    chi = min(clo + span, hi)
                    out_lanes = []
                    for j, (valid, pkt, words) in enumerate(lanes):
                        out = Signal(layout, name=f"node_{d + 1}_{clo}_{j}", reset_less=True)
                        out_words = Signal(len(words), name=f"node_{d + 1}_{clo}_{j}_words",
                                           reset_less=True)
                        out_valid = Signal(name=f"node_{d + 1}_{clo}_{j}_valid")
                        below = valid & pkt.dest[clo * L:chi * L].any()
                        # the payload only moves into a subtree with a destination
                        with m.If(below):
                            m.d.sync += [out.eq(pkt), out_words.eq(words)]
                        m.d.sync += out_valid.eq(below & ~self.clear)
                        valids.append(out_valid)
                        out_lanes.append((out_valid, out, out_words))
                    nxt.append(((clo, chi), out_lanes))
            level = nxt
        for (lo, _), lanes in level:
            for j, (valid, pkt, words) in enumerate(lanes):
                leaf = self.leaf(lo, j)
                m.d.comb += [leaf.valid.eq(valid), leaf.first.eq(pkt.first),
                             leaf.last.eq(pkt.last), self.leaf_words(lo, j).eq(words),
                             leaf.dest.eq(pkt.dest[lo * L:(lo + 1) * L])]
        m.d.comb += self.busy.eq(Cat(*valids).any())
        return m
