"""Pipelined IEEE-754 binary32 adder."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux
from amaranth.lib.wiring import In

from moagcn.hw.common.bits import leading_zeros, limit_mask, prefix_or
from moagcn.hw.arith.fp32 import Fields, keep, round_nearest_even, select_result
from moagcn.hw.arith.simform import add_form_name, through_form
from moagcn.hw.arith.unit import PipelinedBinaryUnit, UnitConfig

#: natural stages of the adder (a latency of this many gives one register after each)
ADDER_STAGES = 7


@dataclass(frozen=True)
class Fp32AddConfig(UnitConfig):
    """Parameters of :class:`Fp32Adder` (see :class:`~moagcn.hw.arith.unit.UnitConfig`)."""

    latency: int = ADDER_STAGES
    #: add a ``restart`` input: where it is set, ``a`` is taken as ``+0``
    restart: bool = False


def adder_stages(restart: bool = False):
    """The adder as a list of combinational stages (see :class:`StagedPipeline`).

    unpack/swap -> align (with sticky) -> add/subtract -> leading-zero count -> normalise shift
    -> round to nearest even -> select special results.

    With ``restart`` the first stage also takes ``restart``: where it is set the sum is
    ``+0 + b``. The multiplexer that makes ``a`` zero is not put in front of the magnitude
    compare and the exponent differences (carry chains): they are formed from ``a`` as it
    comes, the compare's known outcome for ``a = +0`` is selected after it, and the
    difference only aligns an operand that is then zero.
    """

    def unpack(m, v):
        fb = Fields(m, v["b"])
        if restart:
            zero_a, raw = v["restart"], Fields(m, v["a"])
            a = Mux(zero_a, 0, v["a"])
            fa = Fields(m, a)
            # +0 against b: b is the larger unless it is a zero. The exponent difference
            # does not matter then: the operand it aligns is +0 (or b is a zero)
            swap = Mux(zero_a, fb.magnitude.any(), fb.magnitude > raw.magnitude)
            a_minus_b = (raw.eff_exp - fb.eff_exp)[:8]
            b_minus_a = (fb.eff_exp - raw.eff_exp)[:8]
        else:
            a = v["a"]
            fa = Fields(m, a)
            # order the operands by magnitude so the aligned difference is never negative
            swap = fb.magnitude > fa.magnitude
            # the exponent difference both ways, beside the magnitude compare, and the swap
            # picks one: subtracting after the swap put a second carry chain behind the
            # compare's
            a_minus_b = (fa.eff_exp - fb.eff_exp)[:8]
            b_minus_a = (fb.eff_exp - fa.eff_exp)[:8]
        # the larger (x) and the smaller (y) operand's fields, each decoded from both operands
        # before the swap settles and then picked: decoding after the swap put the exponent's
        # zero test behind the compare, and synthesis made that test the exponent register's
        # synchronous reset, the adder's longest path in the default HyScale preset
        def larger(first, second):
            return Mux(swap, first, second)

        x_sign, y_sign = larger(fb.sign, fa.sign), larger(fa.sign, fb.sign)
        x_exp = larger(fb.eff_exp, fa.eff_exp)
        x_mant, y_mant = larger(fb.mant, fa.mant), larger(fa.mant, fb.mant)
        # where the smaller significand has ones: bit i of its prefix OR says whether it has a
        # one at or below i. Formed on both operands before the swap settles, it lets the
        # alignment find the sticky bit with one selection instead of OR-ing shifted-out bits
        below_y = Mux(swap, prefix_or(m, fa.mant), prefix_or(m, fb.mant))
        nan = fa.is_nan | fb.is_nan | (fa.is_inf & fb.is_inf & (fa.sign != fb.sign))
        return {
            "sign": x_sign,
            "sub": fa.sign ^ fb.sign,
            "exp": x_exp,
            "diff": Mux(swap, b_minus_a, a_minus_b),
            "mx": x_mant,
            "my": y_mant,
            "below_y": below_y,
            "nan": nan,
            "inf": (fa.is_inf | fb.is_inf) & ~nan,
            "inf_sign": Mux(fa.is_inf, fa.sign, fb.sign),
        }

    def align(m, v):
        # three extra bits below the significand: guard, round, and a sticky OR of the rest
        diff = v["diff"]
        # diff >= 27 spelled as logic (27 = 0b11011): a comparison would become a carry chain
        # in front of the shifter
        beyond = diff[5:].any() | (diff[4] & diff[3] & (diff[2] | (diff[1] & diff[0])))
        # the sticky bit: a one among the diff lowest bits of Cat(000, my), i.e. a one at or
        # below bit diff - 4 of my: one bit of the prefix OR, selected in parallel with the
        # shifter (all of my once diff >= 27)
        below = v["below_y"]
        lost = Cat(Const(0, 4), below, below[-1].replicate(4)).bit_select(diff[:5], 1)
        shifted = Mux(beyond, 0, Cat(Const(0, 3), v["my"]) >> diff[:5])
        return {**keep(v, "sign", "sub", "exp", "nan", "inf", "inf_sign"),
                "x_al": Cat(Const(0, 3), v["mx"]),
                "y_al": Cat(shifted[0] | Mux(diff[5:].any(), below[-1], lost), shifted[1:])}

    def add(m, v):
        total = Mux(v["sub"], v["x_al"] - v["y_al"], v["x_al"] + v["y_al"])[:28]
        # normalising may shift left by at most exp - 1 (below that the result is subnormal)
        # (the floor is ORed in here, after the carry chain, to keep the counter's stage short)
        return {**keep(v, "sign", "sub", "exp", "nan", "inf", "inf_sign"), "sum": total,
                "floored": total[:27] | limit_mask((v["exp"] - 1)[:8], 27)}

    def count(m, v):
        total = v["sum"]
        carry = total[27]
        return {**keep(v, "sign", "sub", "nan", "inf", "inf_sign", "exp"),
                "carry": carry,
                "zero": total == 0,
                "pre": Mux(carry, Cat(total[0] | total[1], total[2:28]), total[:27]),
                "shl": Mux(carry, 0, leading_zeros(m, v["floored"]))[:5]}

    def shift(m, v):
        return {**keep(v, "sign", "sub", "nan", "inf", "inf_sign", "zero"),
                "exp": Mux(v["carry"], v["exp"] + 1, v["exp"] - v["shl"])[:9],
                "norm": (v["pre"] << v["shl"])[:27]}

    def round(m, v):
        norm = v["norm"]
        return {**keep(v, "sign", "sub", "nan", "inf", "inf_sign", "zero"),
                **dict(zip(("magnitude", "overflow"), round_nearest_even(
                    v["exp"], norm[3:27], norm[2], norm[1] | norm[0])))}

    def select(m, v):
        # an exact zero is +0 unless both operands were zeros of the same (negative) sign
        return {"result": select_result(v["sign"], v["magnitude"], v["overflow"],
                                        nan=v["nan"], inf=v["inf"],
                                        zero=v["zero"], inf_sign=v["inf_sign"],
                                        zero_sign=v["sign"] & ~v["sub"])}

    return [("unpack", unpack), ("align", align), ("add", add), ("count", count),
            ("shift", shift), ("round", round), ("select", select)]


class Fp32Adder(PipelinedBinaryUnit):
    """IEEE-754 binary32 adder: ``o = i.a + i.b``, ``latency`` cycles later, one per cycle.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit`, and with
    ``config.restart``:

    restart : In(1)
        Take ``i.a`` as ``+0`` (``o = +0 + i.b``), without a multiplexer in front of the
        operands' compare.
    """

    def __init__(self, config: Fp32AddConfig = Fp32AddConfig()):
        super().__init__(config, {"restart": In(1)} if config.restart else None)

    def stages(self):
        return adder_stages(restart=self.config.restart)

    def extra_inputs(self) -> dict:
        return {"restart": self.restart} if self.config.restart else {}

    def result(self, m, platform, gates):
        # in Verilog for simulators, through the simulation form (moagcn.hw.arith.simform)
        cfg = self.config
        return through_form(m, platform, add_form_name(cfg.latency, cfg.restart, cfg.enable),
                            gates, "sum", a=self.i.payload.a, b=self.i.payload.b,
                            restart=self.restart if cfg.restart else Const(0, 1),
                            en=self.en if cfg.enable else Const(1, 1))
