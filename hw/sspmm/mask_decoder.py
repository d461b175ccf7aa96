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

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire


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
        # the compares run on bit planes (plane b: bit b of every feature's chunk or lane, one
        # bit per feature), so that each step is a few operations on F-bit words: the same
        # gates as a compare per feature, which a simulator evaluated bit by bit (every cycle,
        # for every feature and lane: most of the job emitter's simulation time)
        def planes(values, name):
            return [wire(m, Cat(*[v[b] for v in values]), name=f"{name}_plane_{b}")
                    for b in range(len(values[0]))]
        chunk_planes = planes(self.chunk_of, "chunk")
        lane_planes = planes(self.lane_of, "lane")
        ones = Const((1 << F) - 1, F)
        differ = Const(0, F)
        for b, plane in enumerate(chunk_planes):
            differ = differ | (plane ^ Mux(self.chunk[b], ones, 0))
        # a chunk past the widest a feature can have (bits above the planes) matches nothing
        above = self.chunk[len(chunk_planes):]
        hit = wire(m, self.mask & ~differ & Mux(above.any(), 0, ones) if len(above) else
                   self.mask & ~differ, name="hit")
        for k in range(W):
            on = hit
            for b, plane in enumerate(lane_planes):
                on = on & (plane if k >> b & 1 else ~plane)
            on = wire(m, on, name=f"lane{k}_hit")
            bits = [(on & Const(sum(1 << f for f in range(F) if f >> b & 1), F)).any()
                    for b in range(len(self.sel[k]))]
            m.d.comb += [self.valid[k].eq(on.any()), self.sel[k].eq(Cat(*bits))]
        return m
