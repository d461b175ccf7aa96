"""DEAL's distributed SDDMM (Sec. 3.4, Table 3, approach ii), for GAT's attention.

A GAT layer (:class:`~moagcn.host.nn.gat.GATConv`) scores every entry ``(v, u)`` of its graph
as ``e_vu = LeakyReLU(s_v + t_u)`` per head, with ``s_v = <h_v, a_dst>`` and ``t_u = <h_u,
a_src>`` over the head's ``C`` columns of the projected features ``h``, and normalises the scores
over each row with a softmax. In the ``P x M`` scheme process ``(p, m)`` holds column block ``m``
of ``h`` for the rows of range ``p``, so it can form only *partial* terms ``s^m_v``, ``t^m_u``:
the sums over its own columns, one per head its block touches (``k_m`` heads; ``H / M`` when
``M`` divides the heads). The score of an entry is ``Σ_m s^m_v + Σ_m t^m_u``: an SDDMM whose
operands are the partial terms, ``D = Σ_m k_m`` columns split into ``M`` blocks.

Approach (ii) of DEAL's Table 3: the rows of range ``p`` are cut into ``M`` sub-ranges, and
process ``(p, m)`` scores the entries of sub-range ``m`` only:

1. **dest**: it receives the other ``M - 1`` blocks' partial ``s`` of its sub-range's rows
   (DEAL: ``(M - 1) N D / (M^2 P)`` values);
2. **src**: it sends the ids of the source rows its entries use to their owners in other
   ranges (its own range's processes hold the same graph and work the ids out), then receives
   every block's partial ``t`` of those rows that it does not hold (DEAL: ``(M P - 1) N D /
   (M^2 P)``, which assumes the sources a process needs scale with the rows it scores; on a
   dense graph every process needs every source, ``(M P - 1) N D / (M P)``, approach (i)'s);
3. sums the partials per head (block order), runs the SDDMM ``<[s_v, 1], [1, t_u]>`` on its
   sparse device, applies LeakyReLU and the row softmax (its rows are whole, so the softmax
   is local);
4. **scores**: the ``M`` processes of the range swap the attention weights, each receiving the
   other sub-ranges' weights of the heads its own column block aggregates (DEAL: ``N Z (M - 1)
   / (P M)`` values per head).

Every process counts what it receives (``sddmm_ids``, ``sddmm_dest``, ``sddmm_src``,
``sddmm_scores``); :func:`formula` is Table 3's count for the same ``N, Z, D, P, M``. The weighted
aggregation ``Σ_u α_vu h_u`` that follows is the engine's SpMM with the attention weights as
values (:meth:`~moagcn.host.deal.engine.DealEngine.spmm`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.nn.attention import head_segments

FLOAT_BYTES = 4


@dataclass
class ScorePlan:
    """What process ``(p, m)`` scores in one layer: its sub-range's rows ``[a, b)`` of range
    ``p``'s graph, with the columns renumbered to positions in ``need``
    (the sorted global ids of the sources they use; ``need_of[q]`` the slice of range ``q``)."""

    a: int
    b: int
    sub: CSRGraph
    need: np.ndarray
    need_of: dict


def score_plan(adj: CSRGraph, a: int, b: int, bounds) -> ScorePlan:
    e0, e1 = int(adj.indptr[a]), int(adj.indptr[b])
    cols = adj.indices[e0:e1].astype(np.int64)
    need, pos = np.unique(cols, return_inverse=True)
    sub = CSRGraph((adj.indptr[a:b + 1] - e0).astype(np.int64), pos.astype(np.int64),
                   n_cols=need.size, what="SDDMM sub-range")
    starts = np.array([lo for lo, _ in bounds])
    owner = np.searchsorted(starts, need, side="right") - 1
    need_of = {}
    for q in range(len(bounds)):
        i0, i1 = np.searchsorted(owner, [q, q + 1])
        need_of[q] = slice(int(i0), int(i1))
    return ScorePlan(a, b, sub, need, need_of)


def prepare(engine, layer: int) -> None:
    """Every local process's :class:`ScorePlan` of layer ``layer``, and which source rows each
    holder serves to whom: the processes of the other ranges are sent the ids (counts, then
    ids: ``sddmm_ids``); the range's own processes hold the same sampled graph, so each
    works out its peers' plans itself."""
    made = engine._ops[layer]

    def plan_of(p, m):
        a, b = engine.rsub(p)[m]
        return score_plan(made[p][0], a, b, engine.bounds)

    plans = {r: plan_of(*engine.pm(r)) for r in engine.local}

    def others(r):          # the holders in other ranges (they need the ids sent)
        return [d for d in _holders(engine, r) if engine.pm(d)[0] != engine.pm(r)[0]]

    sends, expect = {}, {}
    for r, sp in plans.items():
        for dst in others(r):
            sends[(r, dst)] = torch.tensor([sp.need[sp.need_of[engine.pm(dst)[0]]].size])
            expect[(dst, r)] = ((1,), torch.int64)
    counts = engine._exchange(sends, expect, "sddmm_ids")
    sends = {(r, dst): torch.from_numpy(plans[r].need[plans[r].need_of[engine.pm(dst)[0]]])
             for r in plans for dst in others(r)}
    expect = {key: ((int(c[0]),), torch.int64) for key, c in counts.items()}
    got = engine._exchange(sends, expect, "sddmm_ids")
    serve = {r: {} for r in engine.local}
    for (src, dst), ids in got.items():
        lo = engine.bounds[engine.pm(dst)[0]][0]
        serve[dst][src] = torch.from_numpy(ids.numpy() - lo)
    for r in engine.local:          # the range's peers: their own-range sources, worked out
        p, m = engine.pm(r)
        lo = engine.bounds[p][0]
        for m2 in range(engine.M):
            if m2 != m:
                sp = plans.get(engine.rank(p, m2)) or plan_of(p, m2)
                serve[r][engine.rank(p, m2)] = torch.from_numpy(sp.need[sp.need_of[p]] - lo)
    engine._scores[layer] = (plans, serve)


def _holders(engine, r: int) -> list[int]:
    """The processes ``r`` asks for source terms, and that ask ``r``: every process but itself
    (each holds one column block of one range)."""
    return [d for d in range(engine.P * engine.M) if d != r]


def _width(bounds) -> int:
    return bounds[1] - bounds[0]


def _swap_in_range(engine, ranks, piece, shape, category: str) -> dict:
    """One round among each range's ``M`` processes: process ``r`` sends ``piece(r, m2)`` to
    the range's process ``m2`` and expects ``shape(r, m2)`` (float32) from it; received
    bytes are counted under ``category``."""
    sends, expect = {}, {}
    for r in ranks:
        p, m = engine.pm(r)
        for m2 in range(engine.M):
            if m2 != m:
                peer = engine.rank(p, m2)
                sends[(r, peer)] = piece(r, m2).contiguous()
                expect[(peer, r)] = (shape(r, m2), torch.float32)
    return engine._exchange(sends, expect, category)


def attention(engine, layer: int, Y: dict, conv) -> dict:
    """The attention weights of range ``p``'s graph entries, on every local process ``(p, m)``:
    ``{r: nnz_p x k_m}`` (the heads of block ``m``, in :func:`head_segments` order)."""
    H, C = conv.heads, conv.out_channels
    width = H * C
    a_dst = conv.att_dst.detach().reshape(-1)
    a_src = conv.att_src.detach().reshape(-1)
    plans, serve = engine._scores[layer]
    segs = {m: head_segments(C, *engine.cols(width, m)) for m in range(engine.M)}
    # 1. partial terms of every row this process holds, for the heads its block touches
    s_part, t_part = {}, {}
    for r, Yr in Y.items():
        p, m = engine.pm(r)
        c0, _ = engine.cols(width, m)
        t0 = time.perf_counter()
        s_part[r] = torch.stack([(Yr[:, a:b] * a_dst[c0 + a:c0 + b]).sum(1)
                                 for _, a, b in segs[m]], 1)
        t_part[r] = torch.stack([(Yr[:, a:b] * a_src[c0 + a:c0 + b]).sum(1)
                                 for _, a, b in segs[m]], 1)
        engine._timed(r, "sddmm", t0)
        engine.stats[r].mem.hold(s_part[r], t_part[r])
    # 2. dest: the other blocks' partial s of this sub-range's rows
    t0 = time.perf_counter()
    dest = _swap_in_range(
        engine, Y, lambda r, m2: s_part[r][slice(*engine.rsub(engine.pm(r)[0])[m2])],
        lambda r, m2: (_width(engine.rsub(engine.pm(r)[0])[engine.pm(r)[1]]), len(segs[m2])),
        "sddmm_dest")
    # 3. src: every block's partial t of the needed source rows
    sends, expect = {}, {}
    for r in Y:
        for asker, rows in serve[r].items():
            sends[(r, asker)] = t_part[r][rows].contiguous()
        sp = plans[r]
        for src in _holders(engine, r):
            q, m2 = engine.pm(src)
            expect[(src, r)] = ((sp.need[sp.need_of[q]].size, len(segs[m2])), torch.float32)
    src_terms = engine._exchange(sends, expect, "sddmm_src")
    received = {r: [t for (_, dst), t in (*dest.items(), *src_terms.items()) if dst == r]
                for r in Y}
    for r in Y:
        engine._timed(r, "sddmm_comm", t0)
        engine.stats[r].mem.hold(*received[r])
    # 4. sum the partials per head, score on the device, LeakyReLU, row softmax
    alpha_own = {}
    for r in Y:
        p, m = engine.pm(r)
        sp = plans[r]
        t0 = time.perf_counter()
        S = torch.zeros(sp.b - sp.a, H)
        T = torch.zeros(sp.need.size, H)
        for m2 in range(engine.M):
            heads = [h for h, _, _ in segs[m2]]
            S[:, heads] += s_part[r][sp.a:sp.b] if m2 == m else dest[(engine.rank(p, m2), r)]
            for q in range(engine.P):
                sl = sp.need_of[q]
                if sl.stop == sl.start:
                    continue
                holder = engine.rank(q, m2)
                if holder == r:
                    lo = engine.bounds[q][0]
                    piece = t_part[r][torch.from_numpy(sp.need[sl] - lo)]
                else:
                    piece = src_terms[(holder, r)]
                T[sl, heads] += piece
        engine.stats[r].mem.hold(S, T)
        c_before = engine.devices[r].counters.cycles_total
        alpha_own[r] = conv.attention(sp.sub, S, T, engine.devices[r])
        engine.stats[r].mem.hold(alpha_own[r])
        engine.stats[r].mem.drop(S, T)
        engine._timed(r, "sddmm", t0)
        engine.trace[r].append(("sddmm", layer, -1, time.perf_counter() - t0,
                                engine.devices[r].counters.cycles_total - c_before))
    for r in Y:
        engine.stats[r].mem.drop(s_part[r], t_part[r], *received[r])
    # 5. scores: each process gets the other sub-ranges' weights of the heads it aggregates
    t0 = time.perf_counter()
    got = _swap_in_range(
        engine, Y, lambda r, m2: alpha_own[r][:, [h for h, _, _ in segs[m2]]],
        lambda r, m2: (score_plan_size(engine, layer, engine.pm(r)[0], m2),
                       len(segs[engine.pm(r)[1]])), "sddmm_scores")
    for r in Y:
        engine._timed(r, "sddmm_comm", t0)
    out = {}
    for r in Y:
        p, m = engine.pm(r)
        mine = [h for h, _, _ in segs[m]]
        parts = [alpha_own[r][:, mine] if m2 == m else got[(engine.rank(p, m2), r)]
                 for m2 in range(engine.M)]
        out[r] = torch.cat(parts) if len(parts) > 1 else parts[0].contiguous()
        engine.stats[r].mem.hold(out[r])
        engine.stats[r].mem.drop(alpha_own[r])
    return out


def score_plan_size(engine, layer: int, p: int, m: int) -> int:
    """Entries of sub-range ``m`` of range ``p`` in layer ``layer``'s graph."""
    adj = engine._ops[layer][p][0]
    a, b = engine.rsub(p)[m]
    return int(adj.indptr[b] - adj.indptr[a])


def formula(n: int, nnz: int, D: int, k_mean: float, P: int, M: int) -> dict:
    """DEAL's Table 3 counts (values received per process) for an ``n``-node graph with ``nnz``
    entries (``Z = nnz / n``), an SDDMM of ``D`` operand columns, ``k_mean`` attention heads
    exchanged per process: approach (ii) split into its dest, src and scores terms, and
    approach (i)'s total; in bytes (fp32)."""
    z = nnz / n
    dest = (M - 1) * n * D / (M * M * P)
    src = (M * P - 1) * n * D / (M * M * P)
    scores = n * z * (M - 1) / (P * M) * k_mean
    return {"dest": FLOAT_BYTES * dest, "src": FLOAT_BYTES * src,
            "scores": FLOAT_BYTES * scores,
            "approach_ii": FLOAT_BYTES * (dest + src + scores),
            "approach_i": FLOAT_BYTES * (M + M * P - 2) * n * D / (M * P)}
