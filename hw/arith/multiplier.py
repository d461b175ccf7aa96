"""Pipelined IEEE-754 binary32 multiplier."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Const, Mux

from moagcn.hw.common.bits import leading_zeros, limit_mask, shift_right_sticky
from moagcn.hw.arith.fp32 import BIAS, Fields, keep, round_nearest_even, select_result
from moagcn.hw.arith.simform import mul_form_name, through_form
from moagcn.hw.arith.unit import PipelinedBinaryUnit, UnitConfig

#: natural stages of the multiplier
MULTIPLIER_STAGES = 7


@dataclass(frozen=True)
class Fp32MulConfig(UnitConfig):
    """Parameters of :class:`Fp32Multiplier` (see :class:`~moagcn.hw.arith.unit.UnitConfig`)."""

    latency: int = MULTIPLIER_STAGES


def multiplier_stages():
    """unpack -> partial products -> sum and exponent -> leading-zero count -> normalise or
    denormalise shift (with sticky) -> round to nearest even -> select special results."""

    def unpack(m, v):
        fa, fb = Fields(m, v["a"]), Fields(m, v["b"])
        nan = fa.is_nan | fb.is_nan | (fa.is_inf & fb.is_zero) | (fb.is_inf & fa.is_zero)
        inf = (fa.is_inf | fb.is_inf) & ~nan
        return {"sign": fa.sign ^ fb.sign, "nan": nan, "inf": inf,
                "zero": (fa.is_zero | fb.is_zero) & ~nan,
                "ma": fa.mant, "mb": fb.mant, "exp_sum": fa.eff_exp + fb.eff_exp}

    def multiply(m, v):
        # 24x24 as four partial products (17-bit low halves fit the 18x18 DSP multipliers)
        ma, mb = v["ma"], v["mb"]
        return {**keep(v, "sign", "nan", "inf", "zero", "exp_sum"),
                "ll": ma[:17] * mb[:17], "lh": ma[:17] * mb[17:],
                "hl": ma[17:] * mb[:17], "hh": ma[17:] * mb[17:]}

    def accumulate(m, v):
        prod = (v["ll"] + ((v["lh"] + v["hl"]) << 17) + (v["hh"] << 34))[:48]
        # value = prod * 2^(E - 127 - 46) with E = exp_sum - 127; the normalising left shift
        # may not take the exponent below 1, i.e. it is capped at E (mask below)
        exp_sum = v["exp_sum"]
        e = (exp_sum - BIAS)[:9]  # meaningful when not underflow: 0..381
        return {**keep(v, "sign", "nan", "inf", "zero"), "prod": prod, "e": e,
                "underflow": exp_sum < BIAS, "shr": (BIAS - exp_sum)[:7],
                "floor": limit_mask(e, 48)}

    def count(m, v):
        return {**keep(v, "sign", "nan", "inf", "zero", "prod", "e", "underflow", "shr"),
                "shl": Mux(v["underflow"], 0, leading_zeros(m, v["prod"] | v["floor"]))[:6]}

    def shift(m, v):
        right, lost = shift_right_sticky(m, v["prod"], v["shr"])
        left = (v["prod"] << v["shl"])[:48]
        under = v["underflow"]
        return {**keep(v, "sign", "nan", "inf", "zero"),
                "exp": Mux(under, 1, v["e"] + 1 - v["shl"])[:10],
                "norm": Mux(under, right, left),
                "lost": under & lost}

    def round(m, v):
        norm = v["norm"]
        return {**keep(v, "sign", "nan", "inf", "zero"),
                **dict(zip(("magnitude", "overflow"), round_nearest_even(
                    v["exp"], norm[24:48], norm[23], norm[:23].any() | v["lost"])))}

    def select(m, v):
        return {"result": select_result(v["sign"], v["magnitude"], v["overflow"],
                                        nan=v["nan"], inf=v["inf"],
                                        zero=v["zero"], inf_sign=v["sign"],
                                        zero_sign=v["sign"])}

    return [("unpack", unpack), ("multiply", multiply), ("accumulate", accumulate),
            ("count", count), ("shift", shift), ("round", round), ("select", select)]


class Fp32Multiplier(PipelinedBinaryUnit):
    """IEEE-754 binary32 multiplier: ``o = i.a * i.b``, ``latency`` cycles later, one per cycle.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit`.
    """

    def __init__(self, config: Fp32MulConfig = Fp32MulConfig()):
        super().__init__(config)

    stages = staticmethod(multiplier_stages)

    def result(self, m, platform, gates):
        # in Verilog for simulators, through the simulation form (moagcn.hw.arith.simform)
        cfg = self.config
        return through_form(m, platform, mul_form_name(cfg.latency, cfg.enable), gates,
                            "product", a=self.i.payload.a, b=self.i.payload.b,
                            en=self.en if cfg.enable else Const(1, 1))
