"""What the SDDMM accelerator computes, bit for bit (docs/attention.md, "Order of accumulation").

For every stored entry ``e = (v, u)`` and head ``h`` (``D = F / H`` columns from ``hD``), with
``P`` lanes and ``C = ceil(D / P)`` chunks:

1. products ``p[c, k] = round(Q[v, hD + cP + k] * K[u, hD + cP + k])`` for ``k < P``; a column at
   or beyond ``D`` is the product ``+0 * +0 = +0``;
2. each chunk through the binary tree, pairwise by lane: ``(p0 + p1), (p2 + p3), ...``, then
   those sums pairwise, to one ``t[c]``;
3. the chunks in order from ``+0``: ``S = (((+0 + t[0]) + t[1]) + ...) + t[C-1]``.

Every operation is a binary32 operation rounded to nearest even; a NaN result is the canonical
quiet NaN ``0x7FC00000`` the hardware gives. Masked (entry, head) pairs are ``+0``.
"""

from __future__ import annotations

import numpy as np

#: the NaN every binary32 unit of the hardware returns
CANONICAL_NAN = np.uint32(0x7FC00000)
#: (entry, head) pairs computed at once (bounds the memory of the products)
BLOCK = 1 << 15


def chunked(X: np.ndarray, heads: int, lanes: int) -> np.ndarray:
    """``X`` (rows x F) as (rows, heads, chunks, lanes): each head's ``F / heads`` columns in
    chunks of ``lanes``, the last chunk zero padded (what the hardware's buffers hold)."""
    rows, F = X.shape
    D = F // heads
    C = max(-(-D // lanes), 1)
    out = np.zeros((rows, heads, C * lanes), dtype=np.float32)
    out[:, :, :D] = X.reshape(rows, heads, D)
    return out.reshape(rows, heads, C, lanes)


def tree_sum(p: np.ndarray) -> np.ndarray:
    """The last axis (a power of two) summed pairwise by lane, level by level, in float32."""
    while p.shape[-1] > 1:
        p = p[..., 0::2] + p[..., 1::2]
    return p[..., 0]


def sddmm(indptr, indices, Q, K, heads: int = 1, lanes: int = 16, mask=None) -> np.ndarray:
    """``S`` (entries x heads, float32) in the hardware's order. ``mask`` (entries x heads,
    bool; None: all) selects the pairs computed; the others are ``+0``."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    Qc, Kc = chunked(np.asarray(Q, np.float32), heads, lanes), \
        chunked(np.asarray(K, np.float32), heads, lanes)
    D = np.asarray(Q).shape[1] // heads
    if Qc.shape[2] == 1 and D < lanes:
        # one chunk narrower than the lanes: its tree's lanes beyond the power of two that
        # holds D add only +0 products, and x + (+0) is x except that -0 becomes +0, which the
        # chunk sum (+0 + t[0]) does anyway; so the tree over those lanes alone is bit-exact
        w = 1 << (D - 1).bit_length()
        Qc, Kc = np.ascontiguousarray(Qc[..., :w]), np.ascontiguousarray(Kc[..., :w])
    S = np.zeros((indices.size, heads), dtype=np.float32)
    e, h = np.nonzero(np.ones_like(S, dtype=bool) if mask is None else np.asarray(mask, bool))
    with np.errstate(all="ignore"):
        for lo in range(0, e.size, BLOCK):
            ee, hh = e[lo:lo + BLOCK], h[lo:lo + BLOCK]
            t = tree_sum(Qc[rows[ee], hh] * Kc[indices[ee], hh])          # (pairs, chunks)
            acc = np.zeros(ee.size, dtype=np.float32)
            for c in range(t.shape[1]):
                acc = acc + t[:, c]
            S[ee, hh] = acc
    bits = S.view(np.uint32)
    bits[np.isnan(S)] = CANONICAL_NAN
    return S
