"""IEEE-754 binary32: field layout, constants, and the port layout shared by the units.

Conventions of every binary32 unit in moagcn:

- round to nearest, ties to even; subnormal inputs and outputs are honoured (no flush to zero);
- an overflow rounds to a signed infinity;
- any NaN result is the canonical quiet NaN ``0x7FC00000`` (the payload of an input NaN is not
  propagated; numpy/x86 keep it, so comparisons treat all NaNs as equal);
- an exact zero sum of operands with opposite signs is ``+0``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Value
from amaranth.lib import data

from moagcn.hw.common.bits import wire

WIDTH = 32
EXP_BITS = 8
FRAC_BITS = 23
BIAS = 127
EXP_MAX = (1 << EXP_BITS) - 1
CANONICAL_NAN = 0x7FC00000
POS_INF = 0x7F800000


class Fields:
    """Decoded view of a binary32 value (all members are Amaranth values)."""

    def __init__(self, m: Module, bits: Value):
        bits = wire(m, bits)
        self.sign = bits[31]
        self.exp = bits[FRAC_BITS:31]
        self.frac = bits[:FRAC_BITS]
        self.magnitude = bits[:31]
        exp_zero = self.exp == 0
        exp_ones = self.exp == EXP_MAX
        frac_zero = self.frac == 0
        self.is_zero = exp_zero & frac_zero
        self.is_inf = exp_ones & frac_zero
        self.is_nan = exp_ones & ~frac_zero
        #: significand with the hidden bit (0 for subnormals): 24 bits
        self.mant = wire(m, Cat(self.frac, ~exp_zero))
        #: exponent as used in arithmetic: subnormals behave as exponent 1
        self.eff_exp = Mux(exp_zero, 1, self.exp)


def pack(sign: Value, magnitude: Value) -> Value:
    """Sign bit plus 31 magnitude bits."""
    return Cat(magnitude[:31], sign)


def constant(bits: int) -> Const:
    """A 32-bit constant."""
    return Const(bits, WIDTH)


#: payload of a binary operation
BinaryOperands = data.StructLayout({"a": WIDTH, "b": WIDTH})
#: payload of a multiply-add ``a * b + c``
TernaryOperands = data.StructLayout({"a": WIDTH, "b": WIDTH, "c": WIDTH})


def round_nearest_even(exp: Value, mant: Value, guard: Value,
                       sticky: Value) -> tuple[Value, Value]:
    """Round a normalised magnitude to binary32, ties to even.

    ``mant`` holds 24 bits with the hidden bit at bit 23 (0 for a subnormal result, whose ``exp``
    must then be 1); ``exp`` is the biased exponent, possibly >= 255 before overflow handling.
    Returns the 31 rounded magnitude bits and an overflow flag (the result is then infinity,
    which :func:`select_result` substitutes one stage later). Packing the fraction under the
    exponent field lets the rounding carry ripple into the exponent, which covers both
    1.11..1 + ulp = 10.0 and a subnormal rounding up to the smallest normal number. Overflow is
    decided from the inputs, in parallel with the increment, so no comparison follows the carry
    chain.
    """
    exp_field = Mux(mant[23], exp[:EXP_BITS], 0)
    round_up = guard & (sticky | mant[0])
    packed = (Cat(mant[:FRAC_BITS], exp_field) + round_up)[:31]
    overflow = (exp >= EXP_MAX) | ((exp == EXP_MAX - 1) & mant.all() & round_up)
    return packed, overflow


def select_result(sign: Value, magnitude: Value, overflow: Value, *, nan: Value, inf: Value,
                  zero: Value, inf_sign: Value, zero_sign: Value) -> Value:
    """The final binary32 word: canonical NaN, signed infinity, signed zero, the rounded
    magnitude or, when rounding overflowed, infinity (flags in that priority)."""
    result = pack(sign, Mux(overflow, POS_INF, magnitude))
    result = Mux(zero, pack(zero_sign, Const(0, 31)), result)
    result = Mux(inf, pack(inf_sign, Const(POS_INF, 31)), result)
    return Mux(nan, CANONICAL_NAN, result)


def keep(values: dict, *names: str) -> dict:
    """The named entries of a stage's value dict (to forward them to the next stage)."""
    return {name: values[name] for name in names}
