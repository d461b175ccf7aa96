"""Pre/post aggregation of cut entries by a minimum vertex cover (SuperGCN Sec. 5, Alg. 1).

Worker ``j`` owns the nodes ``parts[j]`` (``owner[v] == j``) and computes the rows ``parts[j]``
of ``Z = A H`` for a sparse operator ``A`` (a square :class:`CSRGraph`: row ``v`` lists the
columns ``u`` summed into output ``v``; a stored entry repeated ``k`` times counts ``k`` times).
A *cut entry* ``(v, u)`` has ``owner[v] = j != i = owner[u]``: the value of ``u`` lives on
worker ``i`` but is summed at worker ``j``. For an ordered pair ``i -> j`` the distinct cut
entries form a bipartite graph between the sources ``U_ij`` (columns, owned by ``i``) and the
destinations ``V_ij`` (rows, owned by ``j``). Each cut entry is either

- **post**-aggregated: ``i`` sends the row ``H[u]`` once and ``j`` sums it into every ``v`` that
  needs it (the halo exchange of the partition baseline), or
- **pre**-aggregated: ``i`` sums the entries of ``v`` whose sources it owns into one partial
  row and sends that; ``j`` adds the partial row to ``Z[v]``.

A row sent is a source with post entries or a destination with pre entries, so the rows sent
``i -> j`` are a vertex cover of the bipartite graph, and a minimum vertex cover gives the
fewest rows (Sec. 5.3). Three modes:

``post``
    every cut entry is post: rows sent = ``|U_ij|``.
``pre``
    every cut entry is pre: rows sent = ``|V_ij|``.
``prepost``
    a minimum vertex cover ``C`` (Alg. 1): entries whose source is in ``C`` are post, the others
    (whose destination is then in ``C``) are pre. Rows sent = ``|C|`` = the size of a maximum
    matching (König) <= ``min(|U_ij|, |V_ij|)``.

The cover
---------
One bipartite graph holds all pairs at once (vertex ``(pair, u)`` on the left, ``(pair, v)`` on
the right; pairs share no vertex, so its matchings and covers are those of the pairs together).
The **left side is the sources** ``U`` (the columns of ``A``, owned by the sender). A maximum
matching comes from scipy's Hopcroft-Karp (``maximum_bipartite_matching``); ``Z`` is the set of
vertices reachable from the unmatched left vertices by alternating paths (a non-matching edge
left -> right, the matching edge right -> left; one breadth-first search) and König's cover is
``C = (U \\ Z) ∪ (V ∩ Z)``.

Tie-breaking is deterministic and independent of which maximum matching scipy returns: ``U ∩ Z``
is the set of sources that some maximum matching leaves unmatched (Dulmage-Mendelsohn), a
property of the graph alone, so ``C`` is *the* minimum cover with the most sources (minimum
covers form a lattice; this is its top in ``U``). When a pre and a post split tie, the plan
sends source rows: post needs no partial-sum work at the sender, a source row sent to several
workers is the same row (quantised once), and the plan departs least from the halo baseline.

Executing the plan
------------------
Forward, worker ``j`` computes::

    Z_j = local_block(j) @ H[local_cols(j)]                     # own + post-received rows
    Z_j[pre_index(i, j)] += pre_block(i, j) @ H[parts[i]]       # partial sums computed on i

``local_block(j)`` holds exactly the entries of rows ``parts[j]`` that are not pre-aggregated;
the pre entries live in the senders' ``pre_block`` (they must not be summed again at ``j``).
Worker ``i`` sends ``H_i[send_index(i, j)]`` (the post rows) and ``pre_block(i, j) @ H_i`` (the
partial sums) to ``j``, who places the post rows at ``recv_index(i, j)`` of its columns.

Backward (``dH = Aᵀ dZ``) uses the same plan the other way round, with the same row counts:
``j`` sends ``dZ_j[pre_index(i, j)]`` to ``i``, who adds ``pre_block(i, j)ᵀ @`` it to ``dH_i``;
``j`` computes ``local_block(j)ᵀ @ dZ_j`` and sends the rows at ``recv_index(i, j)`` (one
pre-aggregated gradient per post source) to ``i``, who adds them at ``send_index(i, j)``.

Rows, not bytes: a row of width ``w`` is ``4 w`` bytes in fp32; the codec in
:mod:`moagcn.host.parallel.quant` gives the bytes of quantised rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_bipartite_matching

from moagcn.core.graph import CSRGraph
from moagcn.errors import UserError

MODES = ("post", "pre", "prepost")


@dataclass(eq=False)
class PrePostPlan:
    """Which cut entries are summed at the sender (pre) and which at the receiver (post).

    Build with :func:`plan_prepost`. Indices ``[i][j]`` are ordered pairs sender ``i`` ->
    receiver ``j``; ``[j][j]`` is empty.

    Members
    -------
    adj : CSRGraph
        The operator (rows = output nodes, columns = input nodes).
    owner : numpy.ndarray
        Part of every node (int64).
    parts : list of numpy.ndarray
        Sorted node ids of every part.
    mode : str
        ``post``, ``pre`` or ``prepost``.
    post_src : list of list of numpy.ndarray
        ``post_src[i][j]``: sorted global ids of the source rows ``i`` sends to ``j``.
    pre_dst : list of list of numpy.ndarray
        ``pre_dst[i][j]``: sorted global ids of the destinations whose partial sums ``i`` sends
        to ``j``.
    is_pre : numpy.ndarray
        bool per stored entry of ``adj``: True where the entry is summed at the sender.
    min_cover : numpy.ndarray
        ``P x P`` ints: size of a minimum vertex cover (= maximum matching) of every pair's
        bipartite graph, whatever the mode.
    """

    adj: CSRGraph
    owner: np.ndarray
    parts: list
    mode: str
    post_src: list
    pre_dst: list
    is_pre: np.ndarray
    min_cover: np.ndarray
    distinct_sources: np.ndarray = field(repr=False)
    distinct_destinations: np.ndarray = field(repr=False)
    _pair_ptr: np.ndarray = field(repr=False)
    _pair_pos: np.ndarray = field(repr=False)
    _local_pos: np.ndarray = field(repr=False)

    @property
    def n_parts(self) -> int:
        return len(self.parts)

    # -- volume ----------------------------------------------------------------------------------

    def rows_sent(self, i: int, j: int) -> int:
        """Rows worker ``i`` sends to ``j`` per exchange: post sources plus pre partial sums."""
        return int(self.post_src[i][j].size + self.pre_dst[i][j].size)

    def rows_matrix(self) -> np.ndarray:
        """``P x P`` int64: ``rows_sent(i, j)`` at ``[i, j]`` (zero diagonal)."""
        P = self.n_parts
        return np.array([[self.rows_sent(i, j) for j in range(P)] for i in range(P)],
                        dtype=np.int64).reshape(P, P)

    def summary(self) -> dict:
        """Totals and per-pair numbers (pairs without cut entries are left out).

        ``rows_sent`` is what this plan sends (``post_rows`` + ``pre_rows``); ``cover_size`` is
        the sum of the minimum vertex covers (what ``prepost`` sends); ``rows_if_post`` and
        ``rows_if_pre`` are the distinct sources and destinations (what ``post`` and ``pre``
        send). Bytes per exchange of width ``w`` in fp32: ``4 w rows_sent``.
        """
        P = self.n_parts
        pairs = []
        for i in range(P):
            for j in range(P):
                cut = self.cut_entries(i, j).size
                if i == j or cut == 0:
                    continue
                n_pre = int(self.pre_entries(i, j).size)
                pairs.append({"src": i, "dst": j, "cut_entries": int(cut),
                              "pre_entries": n_pre, "post_entries": int(cut) - n_pre,
                              "post_rows": int(self.post_src[i][j].size),
                              "pre_rows": int(self.pre_dst[i][j].size),
                              "rows_sent": self.rows_sent(i, j),
                              "cover_size": int(self.min_cover[i, j]),
                              "rows_if_post": int(self.distinct_sources[i, j]),
                              "rows_if_pre": int(self.distinct_destinations[i, j])})
        cut = int(self._pair_pos.size)
        n_pre = int(np.count_nonzero(self.is_pre))
        post_rows = sum(int(a.size) for row in self.post_src for a in row)
        pre_rows = sum(int(a.size) for row in self.pre_dst for a in row)
        return {"mode": self.mode, "parts": P, "cut_entries": cut, "pre_entries": n_pre,
                "post_entries": cut - n_pre, "post_rows": post_rows, "pre_rows": pre_rows,
                "rows_sent": post_rows + pre_rows, "cover_size": int(self.min_cover.sum()),
                "rows_if_post": int(self.distinct_sources.sum()),
                "rows_if_pre": int(self.distinct_destinations.sum()), "pairs": pairs}

    # -- entries ---------------------------------------------------------------------------------

    def cut_entries(self, i: int, j: int) -> np.ndarray:
        """Positions in ``adj.indices`` of the cut entries ``i -> j`` (ascending)."""
        P = self.n_parts
        k = i * P + j
        return self._pair_pos[self._pair_ptr[k]:self._pair_ptr[k + 1]]

    def pre_entries(self, i: int, j: int) -> np.ndarray:
        """Positions of the cut entries ``i -> j`` summed at the sender (ascending)."""
        pos = self.cut_entries(i, j)
        return pos[self.is_pre[pos]]

    def post_entries(self, i: int, j: int) -> np.ndarray:
        """Positions of the cut entries ``i -> j`` summed at the receiver (ascending)."""
        pos = self.cut_entries(i, j)
        return pos[~self.is_pre[pos]]

    # -- blocks ----------------------------------------------------------------------------------

    def pre_block(self, i: int, j: int) -> CSRGraph:
        """Sender ``i``'s partial sums for ``j``: rows ``pre_dst[i][j]`` (in order), columns the
        positions within ``parts[i]``; ``pre_block(i, j) @ H[parts[i]]`` are the rows sent."""
        pos = self.pre_entries(i, j)
        dst = self.pre_dst[i][j]
        r = np.searchsorted(dst, self.adj.row_ids()[pos])
        indptr = np.zeros(dst.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=dst.size), out=indptr[1:])
        return CSRGraph(indptr, self._local_pos[self.adj.indices[pos]],
                        n_cols=self.parts[i].size, what=f"pre_block({i}, {j})")

    def local_cols(self, j: int) -> np.ndarray:
        """Sorted global ids of ``j``'s own nodes and of every post source it receives."""
        recv = [self.post_src[i][j] for i in range(self.n_parts)]
        return np.union1d(self.parts[j], np.concatenate(recv)).astype(np.int64)

    def local_block(self, j: int) -> tuple[CSRGraph, np.ndarray]:
        """``(block, cols)``: rows ``parts[j]``, columns positions in ``cols`` =
        :meth:`local_cols`; exactly the entries of those rows that are not pre-aggregated."""
        own, cols = self.parts[j], self.local_cols(j)
        deg = self.adj.degrees()[own]
        take = self.adj.row_entries(own)
        keep = ~self.is_pre[take]
        row = np.repeat(np.arange(own.size, dtype=np.int64), deg)[keep]
        take = take[keep]
        indptr = np.zeros(own.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=own.size), out=indptr[1:])
        col = self.adj.indices[take]
        idx = np.searchsorted(cols, col)
        if col.size and not np.array_equal(cols[np.minimum(idx, cols.size - 1)], col):
            raise RuntimeError(f"local_block({j}): a kept entry's column is neither owned nor "
                               "received; the plan is inconsistent")
        return CSRGraph(indptr, idx, n_cols=cols.size, what=f"local_block({j})"), cols

    # -- index maps for the runtime --------------------------------------------------------------

    def send_index(self, i: int, j: int) -> np.ndarray:
        """Positions within ``parts[i]`` of the post rows ``i`` sends to ``j``."""
        return self._local_pos[self.post_src[i][j]]

    def recv_index(self, i: int, j: int) -> np.ndarray:
        """Positions within :meth:`local_cols` ``(j)`` of the post rows ``j`` receives from
        ``i``."""
        return np.searchsorted(self.local_cols(j), self.post_src[i][j])

    def pre_index(self, i: int, j: int) -> np.ndarray:
        """Positions within ``parts[j]`` of the partial sums ``j`` receives from ``i``."""
        return self._local_pos[self.pre_dst[i][j]]


def plan_prepost(adj: CSRGraph, owner, parts: int, mode: str = "prepost") -> PrePostPlan:
    """Split every cut entry of ``adj`` into pre- and post-aggregation (SuperGCN Alg. 1).

    Parameters
    ----------
    adj : CSRGraph
        Square operator: row ``v`` sums the columns it lists (e.g.
        ``AggregationOp.gcn(graph).adj``, the structure of ``A + I``).
    owner : array-like of int
        Part of every node, in ``0..parts-1``.
    parts : int
        Number of workers (a part may be empty).
    mode : str
        ``post``, ``pre`` or ``prepost`` (see the module docstring).

    Returns
    -------
    PrePostPlan

    Raises
    ------
    UserError
        For a non-square operator, a bad ``owner`` or ``parts``, or an unknown ``mode``.
    """
    owner = _check(adj, owner, parts, mode)
    P, n = int(parts), adj.n_rows
    rows, cols = adj.row_ids(), adj.indices
    dst_part, src_part = owner[rows], owner[cols]
    cut = np.flatnonzero(dst_part != src_part)
    pair = src_part[cut] * P + dst_part[cut]
    order = np.argsort(pair, kind="stable")           # grouped by pair, ascending within
    pos, pair = cut[order], pair[order]
    pair_ptr = np.searchsorted(pair, np.arange(P * P + 1))
    span = max(n, 1)
    lkey = pair * span + cols[pos]                     # (pair, source): left vertex
    rkey = pair * span + rows[pos]                     # (pair, destination): right vertex
    lk, li = np.unique(lkey, return_inverse=True)
    rk, ri = np.unique(rkey, return_inverse=True)
    cover_l, cover_r = koenig_cover(li, ri, lk.size, rk.size)
    min_cover = (np.bincount(lk[cover_l] // span, minlength=P * P)
                 + np.bincount(rk[cover_r] // span, minlength=P * P)).reshape(P, P)
    if mode == "post":
        post = np.ones(pos.size, dtype=bool)
    elif mode == "pre":
        post = np.zeros(pos.size, dtype=bool)
    else:
        post = cover_l[li]
    is_pre = np.zeros(adj.nnz, dtype=bool)
    is_pre[pos[~post]] = True
    part_sets = [np.flatnonzero(owner == j) for j in range(P)]
    local_pos = np.zeros(n, dtype=np.int64)
    for p in part_sets:
        local_pos[p] = np.arange(p.size)
    return PrePostPlan(
        adj=adj, owner=owner, parts=part_sets, mode=mode,
        post_src=_split_keys(np.unique(lkey[post]), span, P),
        pre_dst=_split_keys(np.unique(rkey[~post]), span, P),
        is_pre=is_pre, min_cover=min_cover.astype(np.int64),
        distinct_sources=np.bincount(lk // span, minlength=P * P).reshape(P, P),
        distinct_destinations=np.bincount(rk // span, minlength=P * P).reshape(P, P),
        _pair_ptr=pair_ptr, _pair_pos=pos, _local_pos=local_pos)


def koenig_cover(left, right, n_left: int, n_right: int) -> tuple[np.ndarray, np.ndarray]:
    """Minimum vertex cover of a bipartite graph by Hopcroft-Karp and König's theorem.

    Parameters
    ----------
    left, right : array-like of int
        One edge ``(left[k], right[k])`` per position (repeats allowed).
    n_left, n_right : int
        Vertex counts of the two sides.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        bool masks over the left and right vertices: ``C = (L \\ Z) ∪ (R ∩ Z)``, ``Z`` the
        vertices reachable from unmatched left vertices by alternating paths. Of all minimum
        covers this is the one with the most left vertices (independent of the matching).
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if n_left == 0 or n_right == 0:
        return np.zeros(n_left, dtype=bool), np.zeros(n_right, dtype=bool)
    edge = np.unique(left * n_right + right)
    el, er = edge // n_right, edge % n_right
    B = sp.csr_matrix((np.ones(edge.size, dtype=np.int8), (el, er)), shape=(n_left, n_right))
    mate = np.asarray(maximum_bipartite_matching(B, perm_type="column"), dtype=np.int64)
    matched = np.flatnonzero(mate >= 0)
    # alternating-path reachability as one BFS on a directed graph: left l -> right n_left + r
    # for every edge, right -> its mate, and a root (the last vertex) -> every unmatched left
    root = n_left + n_right
    free = np.flatnonzero(mate < 0)
    src = np.concatenate([el, n_left + mate[matched], np.full(free.size, root)])
    dst = np.concatenate([n_left + er, matched, free])
    G = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(root + 1,) * 2)
    reached = np.zeros(root + 1, dtype=bool)
    reached[breadth_first_order(G, root, directed=True, return_predecessors=False)] = True
    cover_l, cover_r = ~reached[:n_left], reached[n_left:root]
    if (np.count_nonzero(cover_l) + np.count_nonzero(cover_r) != matched.size
            or not (cover_l[el] | cover_r[er]).all()):
        raise RuntimeError("koenig_cover: the cover is not a minimum cover of the matching "
                           "(internal error)")
    return cover_l, cover_r


# -- helpers -------------------------------------------------------------------------------------

def _check(adj, owner, parts, mode) -> np.ndarray:
    """``owner`` as int64 after checking every argument of :func:`plan_prepost`."""
    if not isinstance(adj, CSRGraph):
        raise UserError(f"plan_prepost: adj is a {type(adj).__name__}; pass a CSRGraph "
                        "(e.g. AggregationOp.gcn(graph).adj)")
    if adj.n_rows != adj.n_cols:
        raise UserError(f"plan_prepost: adj is {adj.n_rows} x {adj.n_cols}; the operator must "
                        "be square (rows and columns are the same partitioned nodes)")
    if mode not in MODES:
        raise UserError(f"plan_prepost: unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise UserError(f"plan_prepost: parts = {parts!r}; give the worker count as an int >= 1")
    owner = np.asarray(owner)
    if owner.shape != (adj.n_rows,) or (owner.size and not np.issubdtype(owner.dtype,
                                                                         np.integer)):
        raise UserError(f"plan_prepost: owner has shape {owner.shape} dtype {owner.dtype}; "
                        f"give one int part id per node ({adj.n_rows})")
    owner = owner.astype(np.int64)
    if owner.size and (owner.min() < 0 or owner.max() >= parts):
        v = int(np.argmax((owner < 0) | (owner >= parts)))
        raise UserError(f"plan_prepost: owner[{v}] = {owner[v]} is out of range for {parts} "
                        f"parts; part ids are 0..{parts - 1}")
    return owner


def _split_keys(keys: np.ndarray, span: int, P: int) -> list:
    """Sorted ``pair * span + node`` keys as ``out[i][j]`` = sorted node ids of pair ``i, j``."""
    bounds = np.searchsorted(keys // span, np.arange(P * P + 1))
    nodes = keys % span
    return [[nodes[bounds[i * P + j]:bounds[i * P + j + 1]] for j in range(P)]
            for i in range(P)]
