"""Output mask decoder: which features a job's lanes work on."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..common.bits import wire


class MaskDecoder(wiring.Component):
    """Select the ``base``-th to ``base + lanes - 1``-th set bits of an output-mask row.

    This is the feature-wise selection of the hybrid index module: a job covers ``lanes``
    consecutive *unmasked* features of its row, so masked outputs never reach an adder and
    never move. Combinational: a prefix count of the mask bits, then per lane a one-hot match
    and an encoder.

    Members
    -------
    mask : In(width)
        The output-mask row (bit f = feature f is computed).
    base : In(range(width + 1))
        Index, among the set bits, of lane 0's feature.
    sel : Out(range(width)) x lanes
        Feature index of each lane (``sel_k``).
    valid : Out(lanes)
        Lane k has a feature (fewer than ``base + k + 1`` set bits leave it idle).
    """

    def __init__(self, width: int, lanes: int):
        self._width = width
        self._lanes = lanes
        members = {"mask": In(width), "base": In(range(width + 1)), "valid": Out(lanes)}
        for k in range(lanes):
            members[f"sel_{k}"] = Out(range(max(width, 2)))
        super().__init__(members)

    def sel(self, k: int) -> Signal:
        """Feature index of lane ``k``."""
        return getattr(self, f"sel_{k}")

    def elaborate(self, platform):
        m = Module()
        width = self._width
        # prefix[f] = set bits below f
        prefix = [wire(m, 0, name="prefix_0")]
        for f in range(width):
            prefix.append(wire(m, prefix[-1] + self.mask[f], name=f"prefix_{f + 1}"))
        for k in range(self._lanes):
            target = wire(m, self.base + k, name=f"target_{k}")
            hits = [wire(m, self.mask[f] & (prefix[f] == target)) for f in range(width)]
            # at most one hit per lane: OR-ing the matching indices encodes it
            index = Const(0, range(max(width, 2)))
            for f, hit in enumerate(hits[1:], start=1):
                index = index | Mux(hit, f, 0)
            m.d.comb += [self.sel(k).eq(index), self.valid[k].eq(Cat(*hits).any())]
        return m
