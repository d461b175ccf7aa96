"""Golden binary32 arithmetic (numpy float32) and test-vector generators.

numpy's float32 arithmetic on x86-64 is IEEE-754 binary32 with round to nearest even and
subnormals honoured, which is the reference for the hardware units. The only convention that
differs is NaN: the hardware always returns the canonical quiet NaN ``0x7FC00000`` while numpy
keeps an input payload, so results are compared after :func:`canonical`.
"""

from __future__ import annotations

import numpy as np

CANONICAL_NAN = np.uint32(0x7FC00000)


def as_bits(x) -> np.ndarray:
    """float32 values (or anything castable) as uint32 bit patterns."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def as_float(bits) -> np.ndarray:
    """uint32 bit patterns as float32 values."""
    return np.ascontiguousarray(np.asarray(bits, dtype=np.uint32)).view(np.float32)


def canonical(bits) -> np.ndarray:
    """Replace every NaN pattern by the canonical quiet NaN."""
    bits = np.asarray(bits, dtype=np.uint32).copy()
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    bits[nan] = CANONICAL_NAN
    return bits


def add(a_bits, b_bits) -> np.ndarray:
    """Expected adder output for operand bit patterns."""
    with np.errstate(all="ignore"):
        return canonical(as_bits(as_float(a_bits) + as_float(b_bits)))


def mul(a_bits, b_bits) -> np.ndarray:
    """Expected multiplier output for operand bit patterns."""
    with np.errstate(all="ignore"):
        return canonical(as_bits(as_float(a_bits) * as_float(b_bits)))


def muladd(a_bits, b_bits, c_bits) -> np.ndarray:
    """Expected multiply-add output: the product is rounded before the addition."""
    with np.errstate(all="ignore"):
        prod = as_float(a_bits) * as_float(b_bits)
        return canonical(as_bits(prod + as_float(c_bits)))


#: golden function per operation name
OPERATIONS = {"add": add, "mul": mul, "muladd": muladd}

#: values whose every pair the units are checked on
SPECIAL_VALUES = np.array([
    0x00000000, 0x80000000,              # +0, -0
    0x00000001, 0x80000001,              # smallest subnormal
    0x007FFFFF, 0x807FFFFF,              # largest subnormal
    0x00400000, 0x00000002,              # mid and tiny subnormals
    0x00800000, 0x80800000,              # smallest normal
    0x00800001, 0x00FFFFFF,              # just above the smallest normal
    0x3F800000, 0xBF800000,              # +1, -1
    0x3F800001, 0x3F7FFFFF,              # 1 + ulp, 1 - ulp/2
    0x40000000, 0x3F000000,              # 2, 0.5
    0x33800000, 0x34000000,              # 2^-24, 2^-23: rounding ties around 1
    0x4B800000, 0x4B7FFFFF,              # 2^24 and just below: ties at integer scale
    0x3FC00000, 0x40400000,              # 1.5, 3
    0x7F7FFFFF, 0xFF7FFFFF,              # largest finite
    0x7F000000, 0x7E800000,              # large powers of two (overflow on add/mul)
    0x1F800000, 0x20000000,              # products near the subnormal boundary
    0x7F800000, 0xFF800000,              # +inf, -inf
    0x7FC00000, 0xFFC00000,              # quiet NaNs
    0x7F800001, 0x7FBFFFFF,              # signalling NaNs
], dtype=np.uint32)


def special_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of :data:`SPECIAL_VALUES`."""
    a, b = np.meshgrid(SPECIAL_VALUES, SPECIAL_VALUES, indexing="ij")
    return a.ravel(), b.ravel()


def random_pairs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` operand pairs mixing several distributions.

    A quarter uniform random bit patterns (all classes, mostly huge or tiny magnitudes), a quarter
    with exponents near each other (real additions), a quarter near-cancellations (``b`` close
    to ``-a``: massive normalisation shifts), a quarter in the subnormal/small range (underflow of
    products and subnormal sums).
    """
    rng = np.random.default_rng(seed)
    q = n // 4
    sizes = [q, q, q, n - 3 * q]
    parts_a, parts_b = [], []

    # 1: uniform bit patterns
    parts_a.append(rng.integers(0, 2**32, sizes[0], dtype=np.uint64).astype(np.uint32))
    parts_b.append(rng.integers(0, 2**32, sizes[0], dtype=np.uint64).astype(np.uint32))

    # 2: nearby exponents, random signs
    def near(count, centre_lo, centre_hi, spread):
        e = rng.integers(centre_lo, centre_hi, count)
        ea = e
        eb = np.clip(e + rng.integers(-spread, spread + 1, count), 0, 254)
        fa = rng.integers(0, 2**23, count)
        fb = rng.integers(0, 2**23, count)
        sa = rng.integers(0, 2, count)
        sb = rng.integers(0, 2, count)
        a = (sa << 31) | (ea << 23) | fa
        b = (sb << 31) | (eb << 23) | fb
        return a.astype(np.uint32), b.astype(np.uint32)

    a, b = near(sizes[1], 1, 255, 30)
    parts_a.append(a)
    parts_b.append(b)

    # 3: near-cancellation: b = -(a +/- a few ulps); half of them with a fraction near zero so
    # that the neighbour crosses into the next lower binade (operands one exponent apart)
    a = rng.integers(0, 0x7F800000, sizes[2], dtype=np.int64)
    low = rng.random(sizes[2]) < 0.5
    a[low] &= ~np.int64(0x7FFFFF)
    a[low] |= rng.integers(0, 8, int(low.sum()))
    delta = rng.integers(-40, 41, sizes[2])
    b = np.clip(a + delta, 0, 0x7F7FFFFF) | (1 << 31)
    parts_a.append(a.astype(np.uint32))
    parts_b.append(b.astype(np.uint32))

    # 4: small magnitudes: subnormals and small normals, and products that underflow
    a, b = near(sizes[3], 0, 60, 40)
    small = rng.random(sizes[3]) < 0.5
    a[small] &= np.uint32(0x807FFFFF)  # make half of them subnormal (exponent field 0)
    bb = b.copy()
    bb[~small] = (b[~small] & np.uint32(0x807FFFFF)) | np.uint32(rng.integers(60, 130) << 23)
    parts_a.append(a)
    parts_b.append(bb)

    a = np.concatenate(parts_a)
    b = np.concatenate(parts_b)
    perm = rng.permutation(n)
    return a[perm], b[perm]
