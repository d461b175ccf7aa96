"""Bit-level helpers for datapaths."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Value


def leading_zeros(value: Value) -> Value:
    """Number of leading zeros of ``value`` (its width when it is zero), as a log-depth tree.

    A priority chain would be ``width`` multiplexers deep; the tree is ``log2(width)``.
    """
    value = Value.cast(value)
    width = len(value)
    size = 1
    while size < width:
        size *= 2
    padded = Cat(Const(0, size - width), value) if size > width else value

    def tree(v: Value) -> tuple[Value, Value]:
        # returns (all_zero, leading zero count within v; meaningful when not all_zero)
        if len(v) == 1:
            return ~v[0], Const(0, 1)
        half = len(v) // 2
        lo_zero, lo_count = tree(v[:half])
        hi_zero, hi_count = tree(v[half:])
        count = Mux(hi_zero, Const(half, range(len(v))) + lo_count, hi_count)
        return hi_zero & lo_zero, count

    all_zero, count = tree(padded)
    return Mux(all_zero, width, count)


def shift_right_sticky(value: Value, amount: Value, max_shift: int) -> tuple[Value, Value]:
    """``value >> amount`` and whether any one bit was shifted out (the sticky bit).

    ``amount`` is clamped to ``max_shift``; callers pick ``max_shift >= len(value)`` when every
    bit may have to move into the sticky bit.
    """
    value = Value.cast(value)
    width = len(value)
    amt = Mux(amount > max_shift, max_shift, amount)[: max(max_shift.bit_length(), 1)]
    wide = Cat(Const(0, max_shift), value) >> amt
    return wide[max_shift:max_shift + width], wide[:max_shift].any()
