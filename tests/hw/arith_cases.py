"""Operand sets shared by the arithmetic tests."""

import numpy as np

from moagcn.sim.arith import golden


def pairs(n_random: int, seed: int):
    """All special-value pairs followed by ``n_random`` random pairs."""
    sa, sb = golden.special_pairs()
    ra, rb = golden.random_pairs(n_random, seed=seed)
    return np.concatenate([sa, ra]), np.concatenate([sb, rb])


def triples(n: int, seed: int):
    """Random (a, b, c) for the multiply-add, c mostly near -a*b to provoke cancellation."""
    a, b = golden.random_pairs(n, seed=seed)
    rng = np.random.default_rng(seed + 1)
    prod = golden.mul(a, b)
    c = prod ^ np.uint32(0x80000000)
    c = c + rng.integers(-3, 4, n).astype(np.uint32)
    other = rng.random(n) < 0.5
    c[other] = rng.integers(0, 2**32, int(other.sum()), dtype=np.uint64).astype(np.uint32)
    return a, b, c


def assert_bit_exact(op, operands, got, expected):
    """Fail with the first mismatching operands in hex."""
    bad = np.nonzero(got != expected)[0]
    if bad.size:
        rows = []
        for i in bad[:8]:
            ops = " ".join(f"{x[i]:08x}" for x in operands)
            rows.append(f"  {op}({ops}) = {got[i]:08x}, numpy {expected[i]:08x}")
        raise AssertionError(f"{bad.size} of {got.size} results differ:\n" + "\n".join(rows))
