"""Output mask decoder: which features a job's lanes work on.

A row's unmasked features are given out ``lanes`` at a time in ascending order: job ``c`` of
the row takes the features whose *rank* (the number of unmasked features below them) lies in
``c * lanes .. (c + 1) * lanes - 1``, the feature of rank ``c * lanes + k`` on lane ``k``. So
masked outputs never reach an adder and never move (the feature-wise selection of the hybrid
index module).

The decoding is split in two so that no cycle carries a long chain: :class:`MaskRanks` ranks
every feature once, as the row enters the job emitter's head register, and
:class:`ChunkSelect` picks a job's lanes from the registered ranks, job after job, with no
state passed from one job to the next.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire
from moagcn.hw.common.target import VerilogTarget
from moagcn.hw.common.wordsel import chunk_select_module


def _check(width: int, lanes: int) -> None:
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"lanes must be a power of two, got {lanes}")
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")


def chunk_shape(width: int, lanes: int) -> range:
    """The shape of a feature's chunk (its job) among ``width`` features in jobs of ``lanes``."""
    return range(max(-(-width // lanes), 2))


def lane_shape(lanes: int) -> range:
    """The shape of a feature's lane in its job."""
    return range(max(lanes, 2))


class MaskRanks(wiring.Component):
    """Each feature's chunk and lane: its rank among the set bits of ``mask``, split.

    Combinational: the exclusive prefix count of the set bits as a parallel prefix (Sklansky:
    ``log2(width)`` levels of small adders, each level adding a block's lower-half total into
    its upper half), then the rank's low ``log2(lanes)`` bits are the lane and the rest the
    chunk. Bits that are not set get the rank they would have (the selector ignores them).

    Members
    -------
    mask : In(width)
        The output-mask row (bit f = feature f).
    chunk : Out(range(ceil(width / lanes))).array(width)
        The job of the row that feature f belongs to, if set.
    lane : Out(range(lanes)).array(width)
        Its lane in that job.
    """

    def __init__(self, width: int, lanes: int):
        _check(width, lanes)
        self._width, self._lanes = width, lanes
        super().__init__({
            "mask": In(width),
            "chunk": Out(chunk_shape(width, lanes)).array(width),
            "lane": Out(lane_shape(lanes)).array(width),
        })

    def elaborate(self, platform):
        m = Module()
        F, W = self._width, self._lanes
        counts = [self.mask[f] for f in range(F)]          # inclusive prefix counts
        span, level = 1, 0
        while span < F:
            nxt = list(counts)
            for f in range(F):
                if f & span:
                    nxt[f] = counts[f] + counts[(f & ~(2 * span - 1)) + span - 1]
            counts = [wire(m, c, name=f"prefix_{level}_{f}") if c is not counts[f] else c
                      for f, c in enumerate(nxt)]
            span, level = span * 2, level + 1
        shift = (W - 1).bit_length()
        for f in range(F):
            rank = Cat(counts[f - 1], Const(0, shift + 1)) if f else Const(0, shift + 1)
            m.d.comb += [self.lane[f].eq(rank[:shift] if shift else 0),
                         self.chunk[f].eq(rank[shift:])]
        return m


class ChunkSelect(wiring.Component):
    """The lanes of job ``chunk`` of a row, from its features' ranks.

    Combinational, two short steps: feature f is in the job if it is set and its chunk matches;
    lane k then takes the one such feature whose lane is k (a one-hot OR: each bit of ``sel[k]``
    is the OR of the matching features whose index has that bit).

    Members
    -------
    mask : In(width)
        The output-mask row.
    chunk_of, lane_of : In, per feature (from :class:`MaskRanks`)
    chunk : In(range(ceil(width / lanes) + 1))
        Which job of the row.
    sel : Out(range(width)).array(lanes)
        Feature index of each lane.
    valid : Out(lanes)
        Lane k has a feature (a row's last job may leave lanes idle).
    """

    def __init__(self, width: int, lanes: int):
        _check(width, lanes)
        self._width, self._lanes = width, lanes
        chunks = max(-(-width // lanes), 2)
        super().__init__({
            "mask": In(width),
            "chunk_of": In(range(chunks)).array(width),
            "lane_of": In(range(max(lanes, 2))).array(width),
            "chunk": In(range(chunks + 1)),
            "sel": Out(range(max(width, 2))).array(lanes),
            "valid": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        F, W = self._width, self._lanes
        hit = Signal(F)
        for f in range(F):
            m.d.comb += hit[f].eq(self.mask[f] & (self.chunk_of[f] == self.chunk))
        sels, valids = [], []
        for k in range(W):
            on = Signal(F, name=f"lane{k}_hit")
            for f in range(F):
                m.d.comb += on[f].eq(hit[f] & (self.lane_of[f] == k))
            sels.append(Cat(*[Cat(*[on[f] for f in range(F) if f >> b & 1]).any()
                              for b in range(len(self.sel[k]))]))
            valids.append(on.any())
        # Verilog simulations find each lane's feature from the mask instead (the set bit of
        # rank chunk * W + k, by a binary search of population counts: a few dozen operations
        # where these gates, evaluated bit by bit every cycle, were most of the job emitter's
        # simulation time); synthesis and the Amaranth simulator take the gates
        gates = Cat(*sels, *valids)
        out = Cat(*self.sel, *self.valid)
        if isinstance(platform, VerilogTarget):
            m.submodules.sim_form = Instance(
                chunk_select_module(F, W, len(self.chunk), len(self.sel[0])),
                i_a=Cat(self.mask, self.chunk), i_t=gates, o_y=out)
        else:
            m.d.comb += out.eq(gates)
        return m
