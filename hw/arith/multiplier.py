"""Pipelined IEEE-754 binary32 multiplier."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Mux

from ..common.bits import leading_zeros, shift_right_sticky
from .fp32 import (BIAS, CANONICAL_NAN, POS_INF, Fields, keep, pack,
                   round_nearest_even)
from .unit import PipelinedBinaryUnit, UnitConfig

#: natural stages of the multiplier
MULTIPLIER_STAGES = 5


@dataclass(frozen=True)
class Fp32MulConfig(UnitConfig):
    """Parameters of :class:`Fp32Multiplier` (see :class:`~moagcn.hw.arith.unit.UnitConfig`)."""

    latency: int = MULTIPLIER_STAGES


def multiplier_stages():
    """unpack -> 24x24 multiply -> leading-zero count and shift decision -> normalise / denormalise
    shift (with sticky) -> round to nearest even and select special results."""

    def unpack(m, v):
        fa, fb = Fields(v["a"]), Fields(v["b"])
        nan = fa.is_nan | fb.is_nan | (fa.is_inf & fb.is_zero) | (fb.is_inf & fa.is_zero)
        inf = (fa.is_inf | fb.is_inf) & ~nan
        return {"sign": fa.sign ^ fb.sign, "nan": nan, "inf": inf,
                "zero": (fa.is_zero | fb.is_zero) & ~nan,
                "ma": fa.mant, "mb": fb.mant, "exp_sum": fa.eff_exp + fb.eff_exp}

    def multiply(m, v):
        return {**keep(v, "sign", "nan", "inf", "zero", "exp_sum"),
                "prod": (v["ma"] * v["mb"])[:48]}

    def count(m, v):
        # value = prod * 2^(E - 127 - 46), E = exp_sum - 127; normal when the leading one can be
        # brought to bit 47 without the exponent dropping below 1
        exp_sum = v["exp_sum"]
        underflow = exp_sum < BIAS
        e = (exp_sum - BIAS)[:9]  # meaningful when not underflow: 0..381
        lz = leading_zeros(v["prod"])
        shl = Mux(underflow, 0, Mux(lz > e, e, lz))[:6]
        shr = Mux(underflow, (BIAS - exp_sum)[:7], 0)
        return {**keep(v, "sign", "nan", "inf", "zero", "prod"),
                "shl": shl, "shr": shr,
                "exp": Mux(underflow, 1, e + 1 - shl)[:10]}

    def shift(m, v):
        right, lost = shift_right_sticky(v["prod"], v["shr"], 48)
        left = (v["prod"] << v["shl"])[:48]
        return {**keep(v, "sign", "nan", "inf", "zero", "exp"),
                "norm": Mux(v["shr"] != 0, right, left),
                "lost": (v["shr"] != 0) & lost}

    def finish(m, v):
        norm = v["norm"]
        result = round_nearest_even(v["sign"], v["exp"], norm[24:48], norm[23],
                                    norm[:23].any() | v["lost"])
        result = Mux(v["zero"], pack(v["sign"], Const(0, 31)), result)
        result = Mux(v["inf"], pack(v["sign"], Const(POS_INF, 31)), result)
        result = Mux(v["nan"], CANONICAL_NAN, result)
        return {"result": result}

    return [("unpack", unpack), ("multiply", multiply), ("count", count), ("shift", shift),
            ("finish", finish)]


class Fp32Multiplier(PipelinedBinaryUnit):
    """IEEE-754 binary32 multiplier: ``o = i.a * i.b``, ``latency`` cycles later, one per cycle.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit`.
    """

    def __init__(self, config: Fp32MulConfig = Fp32MulConfig()):
        super().__init__(config)

    stages = staticmethod(multiplier_stages)
