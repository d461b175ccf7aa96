"""Bit-level helpers for datapaths."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from moagcn.hw.common.wordsel import sim_form


def bits_for(count: int) -> int:
    """Bits of an index ``0 .. count - 1`` (at least one): a RAM's address for ``count`` words.

    >>> bits_for(256), bits_for(257), bits_for(1)
    (8, 9, 1)
    """
    return max(count - 1, 1).bit_length()


def log2(value: int) -> int:
    """``log2(value)`` of a power of two; anything else is refused.

    >>> log2(1), log2(64)
    (0, 6)
    """
    if value < 1 or value & (value - 1):
        raise ValueError(f"log2({value}): {value} is not a power of two")
    return value.bit_length() - 1


def wire(m: Module, value: Value, name: str | None = None) -> Signal:
    """``value`` as a named combinational signal.

    Amaranth re-emits an expression at every place it is used; a datapath that reads the same
    expression bit by bit (a counting tree, a shifter) would otherwise grow its Verilog, and
    the simulators' build time, by an order of magnitude.
    """
    value = Value.cast(value)
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def lowest_set(m: Module, value: Value, name: str = "lowest") -> Value:
    """Index of the lowest set bit of ``value`` (0 when it is zero; test ``value.any()``).

    The window halves ``log2(width)`` times, keeping its lower half when that has a set bit
    (the upper one otherwise); each choice is one bit of the index. Every step works on whole
    slices, which Verilator evaluates as a few integer operations rather than bit by bit.
    """
    value = Value.cast(value)
    width = len(value)
    size = 1
    while size < width:
        size *= 2
    window = Cat(value, Const(0, size - width)) if size > width else value
    bits = []
    while len(window) > 1:
        half = len(window) // 2
        upper = wire(m, window[:half] == 0, name=f"{name}_upper_{half}")
        bits.append(upper)
        window = wire(m, Mux(upper, window[half:], window[:half]), name=f"{name}_window_{half}")
    return Cat(*reversed(bits)) if bits else Const(0, 1)


def lowest_onehot(m: Module, value: Value, name: str = "lowest_onehot") -> Signal:
    """The lowest set bit of ``value`` as a one-hot vector (zero when ``value`` is zero).

    Each bit is its own AND with the OR of the bits below it: LUT logic of logarithmic depth,
    where ``value & ~(value - 1)`` maps to a carry chain (on ECP5 a chain of CCU2C cells, with
    the routing into and out of it, was most of the pass table's pick on the longest path).
    """
    value = Value.cast(value)
    bits = [value[0]] + [value[e] & ~value[:e].any() for e in range(1, len(value))]
    # Verilog simulations compute ``value & -value`` instead (:mod:`.wordsel`)
    return sim_form(m, "lowest", value, Cat(*bits), name=name)


def second_onehot(m: Module, value: Value, name: str = "second_onehot") -> Signal:
    """The second-lowest set bit of ``value`` as a one-hot vector (zero with fewer than two
    set bits).

    Each bit is its own AND with "exactly one below" (one, and not two, among the bits below
    it): of logarithmic depth, beside :func:`lowest_onehot` rather than behind it, where
    ``lowest_onehot(value & ~lowest_onehot(value))`` puts one pick behind the other. The bits
    below ``e`` are the aligned blocks of ``e``'s binary digits (``[0, 8)``, ``[8, 12)``,
    ``[12, 13)`` for 13), each block's (any one, any two) computed once from its halves and
    named, so that the Verilog stays small.
    """
    value = Value.cast(value)
    n = len(value)
    blocks = {}          # (start, size) -> (any one, any two) of value[start:start + size]

    def block(start: int, size: int):
        if (start, size) not in blocks:
            if size == 1:
                blocks[start, size] = (value[start], Const(0, 1))
            else:
                (a1, t1), (a2, t2) = block(start, size // 2), block(start + size // 2, size // 2)
                one = wire(m, a1 | a2, name=f"{name}_one_{start}_{size}")
                two = wire(m, t1 | t2 | (a1 & a2), name=f"{name}_two_{start}_{size}")
                blocks[start, size] = (one, two)
        return blocks[start, size]

    bits = [Const(0, 1)]
    for e in range(1, n):
        one, two, start = Const(0, 1), Const(0, 1), 0
        for j in reversed(range(e.bit_length())):
            if e >> j & 1:
                a, t = block(start, 1 << j)
                one, two = one | a, two | t | (one & a)
                start += 1 << j
        bits.append(value[e] & one & ~two)
    # Verilog simulations compute the lowest of what is left without the lowest instead
    return sim_form(m, "second", value, Cat(*bits), name=name)


def above_onehot(m: Module, onehot: Value, name: str = "above_onehot") -> Signal:
    """The bits above a one-hot vector's set bit (zero when ``onehot`` is zero): bit ``e`` is
    the OR of the bits below it, where ``~((onehot << 1) - 1)`` maps to a carry chain."""
    onehot = Value.cast(onehot)
    bits = [Const(0, 1)] + [onehot[:e].any() for e in range(1, len(onehot))]
    # Verilog simulations subtract instead (:mod:`.wordsel`)
    return sim_form(m, "above", onehot, Cat(*bits), name=name)


def leading_zeros(m: Module, value: Value) -> Value:
    """Number of leading zeros of ``value`` (its width when it is zero), as a log-depth tree.

    A priority chain would be ``width`` multiplexers deep; the tree is ``log2(width)``.
    """
    value = wire(m, value)
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


def onehot_select(onehot: Value, values) -> Value:
    """``values[i]`` for the set bit i of ``onehot`` (0 when none is set), as an AND-OR
    multiplexer: no index to decode, one gate level per value."""
    out = 0
    for i, v in enumerate(values):
        out = out | Mux(onehot[i], v, 0)
    return out


def prefix_or(m: Module, value: Value) -> Value:
    """Bit i: any one among ``value[0..i]`` (a thermometer code from the lowest one up).

    ``x ^ (x - 1)`` sets the bits up to and including the lowest one; shifted down by one and
    inverted, it sets the lowest one and everything above. One decrement (a carry chain in
    hardware, one operation in a simulator) and two logic operations; computed one bit wider so
    that zero gives zero.
    """
    value = wire(m, value)
    width = len(value)
    ext = Cat(value, Const(0, 1))
    below = (ext ^ (ext - 1)[:width + 1])[1:width + 1]
    return wire(m, ~below)


def trailing_zeros(m: Module, value: Value) -> Value:
    """Number of trailing zeros of ``value`` (its width when it is zero), log-depth."""
    value = wire(m, value)
    return leading_zeros(m, Cat(*[value[i] for i in reversed(range(len(value)))]))


def shift_right_sticky(m: Module, value: Value, amount: Value) -> tuple[Value, Value]:
    """``value >> amount`` and whether any one bit was shifted out (the sticky bit).

    Any ``amount`` is allowed (all bits go to the sticky bit once it reaches the width). The
    sticky bit comes from a mask decoded from ``amount`` in parallel with the shifter rather
    than from the shifted-out bits, which keeps it off the shifter's critical path.
    """
    value = wire(m, value)
    amount = wire(m, amount)
    width = len(value)
    bits = width.bit_length()
    if len(amount) > bits:
        big = (amount >= width)
        amt = amount[:bits]
    else:
        big = amount >= width if (1 << len(amount)) > width else Const(0, 1)
        amt = amount
    shifted = Mux(big, 0, value >> amt)
    # bit i is shifted out when i < amount: ones shifted left by amount, inverted (a decoder in
    # hardware, one shift in a simulator)
    lost_mask = ~(Const((1 << width) - 1, width) << amt)[:width]
    lost = Mux(big, value.any(), (value & lost_mask).any())
    return shifted[:width], lost


def limit_mask(limit: Value, width: int) -> Value:
    """A ``width``-bit word with only bit ``width - 1 - limit`` set (zero when limit >= width).

    ORed into a word before a leading-zero count, it caps the count at ``limit``: the shift
    that normalises a result can then never push the exponent below its floor, and no
    comparison sits after the counter.
    """
    limit = Value.cast(limit)
    # a one shifted right by limit: a decoder in hardware, one shift in a simulator
    return (Const(1 << (width - 1), width) >> limit)[:width]


def popcount(m: Module, value: Value, name: str = "popcount") -> Value:
    """Number of set bits: a 4-bit lookup per nibble, then a balanced adder tree.

    Each nibble's count is a 16-entry table (three 4-input functions: one LUT4 each on an
    FPGA). Summing single bits pairwise instead costs more LUTs. Verilog simulations count
    with one ``$countones`` instead (a simulation form, :mod:`.wordsel`).
    """
    value = wire(m, value)
    width = len(value)
    if width == 0:
        return Const(0, 1)
    terms = []
    for lo in range(0, width, 4):
        nibble = value[lo:min(lo + 4, width)]
        if len(nibble) == 1:
            terms.append(nibble)
            continue
        count = Signal(range(len(nibble) + 1), name=f"{name}_{lo // 4}")
        with m.Switch(nibble):
            for v in range(1 << len(nibble)):
                with m.Case(v):
                    m.d.comb += count.eq(bin(v).count("1"))
        terms.append(count)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    if width == 1:
        return terms[0]
    # Verilog simulations count with one instruction instead (:mod:`.wordsel`)
    return sim_form(m, "popcount", value, terms[0], name=f"{name}_count")
