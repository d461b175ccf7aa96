"""Pipelined IEEE-754 binary32 multiplier."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux

from moagcn.hw.common.bits import leading_zeros, shift_right_sticky
from moagcn.hw.common.pipeline import Retimed, place_registers
from moagcn.hw.arith.dsp import RegisteredProduct
from moagcn.hw.arith.fp32 import Fields, keep, round_nearest_even, select_result
from moagcn.hw.arith.simform import mul_form_name, through_form
from moagcn.hw.arith.unit import PipelinedBinaryUnit, UnitConfig

#: natural stages of the multiplier
MULTIPLIER_STAGES = 7


@dataclass(frozen=True)
class Fp32MulConfig(UnitConfig):
    """Parameters of :class:`Fp32Multiplier` (see :class:`~moagcn.hw.arith.unit.UnitConfig`)."""

    latency: int = MULTIPLIER_STAGES


#: the partial products: (name, multiplicand bits, multiplier bits) of the 24-bit significands
#: (17-bit low halves fit the 18 x 18 DSP multipliers)
PARTIAL_PRODUCTS = (("ll", slice(0, 17), slice(0, 17)), ("lh", slice(0, 17), slice(17, 24)),
                    ("hl", slice(17, 24), slice(0, 17)), ("hh", slice(17, 24), slice(17, 24)))


def multiplier_stages(dsp: bool = False, enable=None):
    """unpack (the operand that may be subnormal first) -> its leading zeros -> normalise it ->
    partial products -> product -> align (one right shift with sticky: a normal result's
    one-bit normalisation or a subnormal result's denormalisation) -> round to nearest even and
    select special results.

    Only one operand can be subnormal in a product that is not zero after rounding (two
    subnormals multiply to below 2^-252), so that one is normalised *before* the multiply, with a
    24-bit leading-zero count and shift. The product of two normalised significands lies in
    [2^46, 2^48): its normalisation is a one-bit shift, folded into the right shift that a
    subnormal result needs anyway. No 48-bit leading-zero count or left shift is built.

    ``dsp``: the partial products are :class:`~moagcn.hw.arith.dsp.RegisteredProduct` blocks
    fed by the normalise stage and read by the product stage, their operand and product
    registers standing for the two register slices in between (which must be there; ``enable``
    is their clock enable). Same cycles, same values: a DSP block's own registers instead of
    fabric registers on both sides of it.
    """

    def unpack(m, v):
        fa, fb = Fields(m, v["a"]), Fields(m, v["b"])
        nan = fa.is_nan | fb.is_nan | (fa.is_inf & fb.is_zero) | (fb.is_inf & fa.is_zero)
        inf = (fa.is_inf | fb.is_inf) & ~nan
        b_sub = fb.exp == 0
        # both subnormal (or zero): the exact product is below half the smallest subnormal
        zero = (fa.is_zero | fb.is_zero | ((fa.exp == 0) & b_sub)) & ~nan
        return {"sign": fa.sign ^ fb.sign, "nan": nan, "inf": inf, "zero": zero,
                "mx": Mux(b_sub, fb.mant, fa.mant), "my": Mux(b_sub, fa.mant, fb.mant),
                "exp_sum": fa.eff_exp + fb.eff_exp}

    def count(m, v):
        # 0 for a normal operand (its hidden bit is set)
        return {**keep(v, "sign", "nan", "inf", "zero", "mx", "my", "exp_sum"),
                "lz": leading_zeros(m, v["mx"])[:5]}

    def normalise(m, v):
        lz = v["lz"]
        mx, my = (v["mx"] << lz)[:24], v["my"]
        # k = exp_sum - lz + 22 > 0: the result's biased exponent is k - 149 (+ 1 when the
        # product's top bit is set)
        out = {**keep(v, "sign", "nan", "inf", "zero"), "k": (v["exp_sum"] + 22 - lz)[:10]}
        if not dsp:
            return {**out, "mx": mx, "my": my}
        for name, x, y in PARTIAL_PRODUCTS:
            block = RegisteredProduct(x.stop - x.start, y.stop - y.start, enable is not None)
            m.submodules[f"dsp_{name}"] = block
            m.d.comb += [block.a.eq(mx[x]), block.b.eq(my[y])]
            if enable is not None:
                m.d.comb += block.en.eq(enable)
            out[name] = Retimed(block.p, 2)
        return out

    def multiply(m, v):
        # 24x24 as four partial products
        k = v["k"]
        if dsp:
            products = keep(v, *(name for name, _, _ in PARTIAL_PRODUCTS))
        else:
            products = {name: v["mx"][x] * v["my"][y] for name, x, y in PARTIAL_PRODUCTS}
        # at or below the floor (k <= 149) the result is subnormal or the smallest normals:
        # the significand is the product shifted right by 150 - k (27 and more: all sticky)
        return {**keep(v, "sign", "nan", "inf", "zero"), **products,
                "floor": k < 150, "floor_shift": Mux(k < 124, 27, 150 - k)[:5],
                "exp_top0": (k - 149)[:9]}

    def accumulate(m, v):
        # ll (34 bits) and hh << 34 do not overlap: one concatenation, one addition
        prod = (Cat(v["ll"], v["hh"]) + ((v["lh"] + v["hl"]) << 17))[:48]
        # the product's bits 0..16 are ll's (nothing is added below bit 17): their OR, for the
        # align stage's sticky bit, is taken here, beside the addition
        return {**keep(v, "sign", "nan", "inf", "zero", "floor", "floor_shift", "exp_top0"),
                "prod": prod[17:], "low17": v["ll"][:17].any()}

    def align(m, v):
        prod = Cat(Const(0, 17), v["prod"])     # bits 17..47 (0..16 are in low17)
        top = prod[47]
        # the product's bits 22..47 over a sticky bit for bits 0..21: the significand is at
        # bits 2..25 for a normal product below 2^47, at 3..26 for one above (a one-bit
        # normalisation, one multiplexer on the top bit); a subnormal result's is the word
        # shifted right by floor_shift, a register, so the top bit does not drive the shifter
        x = Cat(v["low17"] | prod[17:22].any(), prod[22:48])
        y, lost = shift_right_sticky(m, x, v["floor_shift"])
        floor = v["floor"]
        return {**keep(v, "sign", "nan", "inf", "zero"),
                "exp": Mux(floor, 1, v["exp_top0"] + top)[:10],
                "sig": Mux(floor, y[2:26], Mux(top, x[3:27], x[2:26])),
                "guard": Mux(floor, y[1], Mux(top, x[2], x[1])),
                "sticky": Mux(floor, y[0] | lost, x[0] | (top & x[1]))}

    def round(m, v):
        magnitude, overflow = round_nearest_even(v["exp"], v["sig"], v["guard"], v["sticky"])
        return {"result": select_result(v["sign"], magnitude, overflow,
                                        nan=v["nan"], inf=v["inf"],
                                        zero=v["zero"], inf_sign=v["sign"],
                                        zero_sign=v["sign"])}

    return [("unpack", unpack), ("count", count), ("normalise", normalise),
            ("multiply", multiply), ("accumulate", accumulate), ("align", align),
            ("round", round)]


class Fp32Multiplier(PipelinedBinaryUnit):
    """IEEE-754 binary32 multiplier: ``o = i.a * i.b``, ``latency`` cycles later, one per cycle.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit`.
    """

    def __init__(self, config: Fp32MulConfig = Fp32MulConfig()):
        super().__init__(config)

    def stages(self):
        # the partial products in DSP blocks with their own registers where a register slice
        # follows both the normalise stage and the product stage (the natural latency and more)
        regs = dict(zip((name for name, _ in multiplier_stages()),
                        place_registers(MULTIPLIER_STAGES, self.config.latency)))
        return multiplier_stages(dsp=min(regs["normalise"], regs["multiply"]) >= 1,
                                 enable=self.en if self.config.enable else None)

    def result(self, m, platform, gates):
        # in Verilog for simulators, through the simulation form (moagcn.hw.arith.simform)
        cfg = self.config
        return through_form(m, platform, mul_form_name(cfg.latency, cfg.enable), gates,
                            "product", a=self.i.payload.a, b=self.i.payload.b,
                            en=self.en if cfg.enable else Const(1, 1))
