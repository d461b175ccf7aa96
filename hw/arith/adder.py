"""Pipelined IEEE-754 binary32 adder."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux

from ..common.bits import leading_zeros, shift_right_sticky
from .fp32 import (CANONICAL_NAN, POS_INF, Fields, keep, pack,
                   round_nearest_even)
from .unit import PipelinedBinaryUnit, UnitConfig

#: natural stages of the adder (a latency of this many gives one register after each)
ADDER_STAGES = 6


@dataclass(frozen=True)
class Fp32AddConfig(UnitConfig):
    """Parameters of :class:`Fp32Adder` (see :class:`~moagcn.hw.arith.unit.UnitConfig`)."""

    latency: int = ADDER_STAGES


def adder_stages():
    """The adder as a list of combinational stages (see :class:`StagedPipeline`).

    unpack/swap -> align (with sticky) -> add/subtract -> leading-zero count -> normalise shift
    -> round to nearest even and select special results.
    """

    def unpack(m, v):
        fa, fb = Fields(v["a"]), Fields(v["b"])
        # order the operands by magnitude so the aligned difference is never negative
        swap = fb.magnitude > fa.magnitude
        x, y = Fields(Mux(swap, v["b"], v["a"])), Fields(Mux(swap, v["a"], v["b"]))
        nan = fa.is_nan | fb.is_nan | (fa.is_inf & fb.is_inf & (fa.sign != fb.sign))
        return {
            "sign": x.sign,
            "sub": x.sign ^ y.sign,
            "exp": x.eff_exp,
            "diff": (x.eff_exp - y.eff_exp)[:8],
            "mx": x.mant,
            "my": y.mant,
            "nan": nan,
            "inf": (fa.is_inf | fb.is_inf) & ~nan,
            "inf_sign": Mux(fa.is_inf, fa.sign, fb.sign),
        }

    def align(m, v):
        # three extra bits below the significand: guard, round, and a sticky OR of the rest
        shifted, lost = shift_right_sticky(Cat(Const(0, 3), v["my"]), v["diff"], 27)
        return {**keep(v, "sign", "sub", "exp", "nan", "inf", "inf_sign"),
                "x_al": Cat(Const(0, 3), v["mx"]),
                "y_al": Cat(shifted[0] | lost, shifted[1:])}

    def add(m, v):
        total = Mux(v["sub"], v["x_al"] - v["y_al"], v["x_al"] + v["y_al"])[:28]
        return {**keep(v, "sign", "sub", "exp", "nan", "inf", "inf_sign"), "sum": total}

    def count(m, v):
        total = v["sum"]
        carry = total[27]
        lz = leading_zeros(total[:27])
        # never shift a result below the subnormal exponent: the rest stays subnormal
        limit = (v["exp"] - 1)[:8]
        shl = Mux(carry, 0, Mux(lz > limit, limit, lz))[:5]
        return {**keep(v, "sign", "sub", "nan", "inf", "inf_sign"),
                "zero": total == 0,
                "pre": Mux(carry, Cat(total[0] | total[1], total[2:28]), total[:27]),
                "shl": shl,
                "exp": Mux(carry, v["exp"] + 1, v["exp"] - shl)[:9]}

    def shift(m, v):
        return {**keep(v, "sign", "sub", "nan", "inf", "inf_sign", "zero", "exp"),
                "norm": (v["pre"] << v["shl"])[:27]}

    def finish(m, v):
        norm = v["norm"]
        result = round_nearest_even(v["sign"], v["exp"], norm[3:27], norm[2], norm[1] | norm[0])
        # an exact zero is +0 unless both operands were zeros of the same (negative) sign
        zero = pack(v["sign"] & ~v["sub"], Const(0, 31))
        result = Mux(v["zero"], zero, result)
        result = Mux(v["inf"], pack(v["inf_sign"], Const(POS_INF, 31)), result)
        result = Mux(v["nan"], CANONICAL_NAN, result)
        return {"result": result}

    return [("unpack", unpack), ("align", align), ("add", add), ("count", count),
            ("shift", shift), ("finish", finish)]


class Fp32Adder(PipelinedBinaryUnit):
    """IEEE-754 binary32 adder: ``o = i.a + i.b``, ``latency`` cycles later, one per cycle.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit`.
    """

    def __init__(self, config: Fp32AddConfig = Fp32AddConfig()):
        super().__init__(config)

    stages = staticmethod(adder_stages)
