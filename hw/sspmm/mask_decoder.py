"""Output mask decoder: which features a job's lanes work on."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..common.bits import lowest_set, wire


class MaskDecoder(wiring.Component):
    """Select the ``lanes`` lowest set bits of an output-mask row.

    This is the feature-wise selection of the hybrid index module: a job covers ``lanes``
    consecutive *unmasked* features of its row, so masked outputs never reach an adder and
    never move. The job emitter feeds the mask row for a row's first job and ``rest`` (the row
    without the features already given out) for the next ones. Combinational: per lane, the
    index of the lowest set bit by halving the window ``log2(width)`` times (each step one
    index bit: is the lower half empty?), then ``x & (x - 1)`` clears that bit for the next
    lane.

    Members
    -------
    mask : In(width)
        The features still to give out (bit f = feature f).
    sel : Out(range(width)).array(lanes)
        Feature index of each lane (``sel[k]``).
    valid : Out(lanes)
        Lane k has a feature (fewer than ``k + 1`` set bits leave it idle).
    rest : Out(width)
        ``mask`` without the selected features.
    """

    def __init__(self, width: int, lanes: int):
        self._width = width
        self._lanes = lanes
        super().__init__({
            "mask": In(width),
            "sel": Out(range(max(width, 2))).array(lanes),
            "valid": Out(lanes),
            "rest": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        x = self.mask
        for k in range(self._lanes):
            m.d.comb += [self.valid[k].eq(x.any()),
                         self.sel[k].eq(lowest_set(m, x, name=f"lane{k}"))]
            # clear it for the next lane
            x = wire(m, x & (x - 1)[:self._width], name=f"rest_{k}")
        m.d.comb += self.rest.eq(x)
        return m
