"""Cycle model of the S-SpMM accelerator.

Work is split into *jobs*: one per (row v, chunk of W = lanes / groups unmasked features), for rows
with at least one neighbour and one unmasked feature. A job takes one *turn* per neighbour; a
turn adds one neighbour's W selected features into W accumulators. Each of the G groups takes
one turn per cycle, interleaving ``adder_latency`` jobs so that an accumulator's previous sum
leaves the adder exactly when its next operand arrives. The fetcher reads each neighbour row
once per *pass* (up to G jobs of a row, one per group, multicast down the distribution tree)
and reads ``fetch_rows`` rows per cycle. Hence

    turns          = sum_v deg(v) * ceil(|S_v| / W)
    rows fetched   = sum_v deg(v) * ceil(ceil(|S_v| / W) / G)
    cycles_compute ~ max(turns / G, rows fetched / fetch_rows, jobs bound at one per cycle,
                         max_v start(v) + deg(v) * L * ceil(passes_v / L))
                     + pipeline fill and drain
    utilisation    = work_adds / (lanes * cycles_compute)

The fourth term is the latency of a long row: a job takes one turn per ring period of L =
``adder_latency`` cycles, so a hub row of degree d needs d * L cycles however idle the other
contexts are; start(v) is when the rows before v have been issued at the three rates before
it. A local buffer too shallow for its ring (see :func:`turn_gap`) stretches the ring period,
and both the turn rate and the row latency with it.

Load cycles: the four load streams fill in parallel (row pointers, column indices and feature
words ``load_width`` per beat, one mask row per beat), so the longest stream sets them. Output
cycles: two per row to read its element count k_v from the count buffer, then ``ceil(k_v /
lanes)`` beats of its computed elements (none for a row without neighbours); masked elements
never move.
The RTL comparison and the remaining error are documented in docs/sspmm.md.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import degrees
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.protocol import FRONT_END_LATENCY, ISSUE_TO_ROOT, tree_depth

from .golden.sspmm import normalise_mask


def job_counts(indptr, mask, config: SSpmmConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per row: degree and number of jobs (feature chunks of W lanes)."""
    deg = degrees(indptr)
    unmasked = np.asarray(mask).astype(bool).sum(axis=1)
    w = config.group_lanes
    jobs = np.where(deg > 0, -(-unmasked // w), 0)
    return deg, jobs


def streamed_elements(indptr, mask, n_features: int) -> np.ndarray:
    """Which elements of Z the output stream carries (bool, n_rows x n_features): the unmasked
    features below ``n_features`` of rows with at least one neighbour, in row-major order."""
    indptr = np.asarray(indptr)
    n = indptr.size - 1
    keep = np.asarray(mask, dtype=bool)[:n, :n_features]
    return keep & (np.diff(indptr) > 0)[:, None]


def output_counts(indptr, mask, n_features: int) -> np.ndarray:
    """Per row, the words the output stream carries (see :func:`streamed_elements`)."""
    return streamed_elements(indptr, mask, n_features).sum(axis=1)


def turn_gap(config: SSpmmConfig) -> float:
    """Average cycles between two turns of one job context.

    A context takes a turn every ring period (L = ``adder_latency`` cycles) if an entry is in
    its local buffer. An entry's credit comes back ``round_trip`` cycles after the fetcher
    issued the entry that frees it: the issue, the index and row reads (``ISSUE_TO_ROOT``), the
    tree, the local-buffer write, the turn, the credit. With ``local_depth`` D entries in flight
    a context therefore takes D turns per ``max(D * L, ceil(round_trip / L) * L)`` cycles: a
    buffer too shallow for a short ring (D * L < round trip) slows every turn.
    """
    L, D = config.adder_latency, config.local_depth
    round_trip = ISSUE_TO_ROOT + tree_depth(config.groups, config.tree_radix) + 2
    return max(D * L, -(-round_trip // L) * L) / D


def estimate(indptr, mask, n_features: int, config: SSpmmConfig) -> Counters:
    """Predicted cycles of a job that fits ``config`` (mask ``None``: all ones).

    Load, compute and output cycles and the work; ``extra`` holds the model's ``turns``,
    ``jobs`` and ``rows_fetched`` (the last equals the RTL's counter exactly).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    mask = normalise_mask(mask, (n, n_features))
    return estimate_rows(degrees(indptr), mask.sum(axis=1), int(indptr[-1]), n_features, config)


def estimate_rows(deg, unmasked, n_edges: int, n_features: int,
                  config: SSpmmConfig) -> Counters:
    """:func:`estimate` from per-row figures: the degrees and the unmasked features (below
    ``n_features``) of the job's rows, and its stored entries. Tiles are estimated from slices
    of the whole job's figures, without copying their masks."""
    deg = np.asarray(deg, dtype=np.int64)
    unmasked = np.asarray(unmasked, dtype=np.int64)
    n = deg.size
    w = config.group_lanes
    jobs = np.where(deg > 0, -(-unmasked // w), 0)
    turns = int(np.dot(deg, jobs))
    n_jobs = int(jobs.sum())
    passes = -(-jobs // config.groups)
    reads = int(np.dot(deg, passes))
    # the scheduler walks every row, one per cycle, before any slice can take it
    arrival = np.arange(n, dtype=np.int64)
    import os
    if os.environ.get("MOAGCN_MODEL") == "events":
        lat = int(os.environ.get("MOAGCN_LAT", "3"))
        one = lambda d, j, p, a: int(np.ceil(_slice_finish_events(d, j, a + lat, config)))  # noqa
    else:
        one = lambda d, j, p, a: _slice_issue(d, j, p, a, config)  # noqa
    if config.slices == 1:
        issue = one(deg, jobs, passes, arrival)
    else:
        owner = dispatch(deg * jobs, config.slices)
        issue = max((one(deg[rows], jobs[rows], passes[rows], arrival[rows])
                     for rows in _rows_of(owner, config.slices)), default=0)
    # fill and drain: a row read's way to a local buffer, the wait for its context's turn
    # (half a ring on average), the buffer read, the adders, the write
    fill = (ISSUE_TO_ROOT + tree_depth(config.groups, config.tree_radix) + 1
            + config.adder_latency // 2 + FRONT_END_LATENCY + config.adder_latency + 1
            + (1 if config.slices > 1 else 0))        # the dispatcher's slice queues
    compute = issue + (fill if n_jobs else 0) + 1
    # the load streams fill in parallel, one beat per stream per cycle: the longest one counts
    lw = config.load_width
    load = max(-(-(n + 1) // lw), -(-n_edges // lw), n, n * -(-n_features // lw))
    counts = np.where(deg > 0, unmasked, 0)
    # per row: read its element count, decide; then its beats
    output = 2 * n + int((-(-counts // config.lanes)).sum())
    work = int(np.dot(deg, unmasked))
    return Counters(work_adds=work, cycles_load=load, cycles_compute=compute,
                    cycles_output=output, lanes=config.adders, clock_mhz=config.clock_mhz,
                    extra={"turns": turns, "jobs": n_jobs, "rows_fetched": reads})


def dispatch(turns, slices: int) -> np.ndarray:
    """The slice each row goes to (-1: a row without work), as the row dispatcher decides:
    rows in order, each to the slice with the fewest turns assigned so far (lowest index on a
    tie)."""
    import heapq
    turns = np.asarray(turns, dtype=np.int64)
    owner = np.full(turns.size, -1, dtype=np.int64)
    heap = [(0, k) for k in range(slices)]
    for v in np.flatnonzero(turns > 0).tolist():
        work, k = heap[0]
        owner[v] = k
        heapq.heapreplace(heap, (work + int(turns[v]), k))
    return owner


def _rows_of(owner: np.ndarray, slices: int):
    """Per slice, its rows in order."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(slices + 1))
    for k in range(slices):
        yield order[bounds[k]:bounds[k + 1]]


def _slice_issue(deg, jobs, passes, arrival, config: SSpmmConfig) -> int:
    """Cycles until one slice (or the whole engine, with one slice) has issued its last turn:
    the largest of its turn rate, its fetch rate, one job per cycle, and its longest row's
    latency from when the row can start.

    A job takes one turn per ``gap`` cycles (a ring period when its local buffer is deep
    enough), so a long row bounds the job: its passes run side by side, at most L per group (the
    contexts), and it starts once the rows before it have been issued at the engine's rates and
    the scheduler has walked to it.
    """
    G, R, L = config.groups, config.fetch_rows, config.adder_latency
    gap = turn_gap(config)
    turns = deg * jobs
    has = jobs > 0
    if not has.any():
        return int(arrival[-1]) + 1 if arrival.size else 0

    def before(x):      # per row, the sum over the rows before it
        return np.cumsum(x) - x

    issue = max(int(np.ceil(turns.sum() * gap / (L * G))), -(-int(np.dot(deg, passes)) // R),
                int(jobs.sum()))
    row_time = deg * gap * -(-passes // L)
    start = np.maximum(np.maximum(before(turns) * gap / (L * G), before(deg * passes) / R),
                       np.maximum(before(jobs), arrival))
    return max(issue, int(np.ceil((start + row_time)[has].max())))


def _slice_finish_events(deg, jobs, ready, config: SSpmmConfig) -> float:
    """When one slice issues its last neighbour read: an event simulation of its passes.

    Jobs are bound in order, one per cycle, each to a free context in a group its pass does not
    use yet (preferring the group after the last one used); a row's consecutive jobs form
    passes of up to G members. A closed pass reads its ``deg`` neighbours; the open passes
    share the fetcher's R reads per cycle, each at most one read per turn gap of its contexts
    (processor sharing with a cap). A pass's contexts are free again when its last entry is in
    their local buffers.
    """
    import heapq
    G, L, R = config.groups, config.adder_latency, config.fetch_rows
    cap = min(1.0, 1.0 / turn_gap(config))
    release = ISSUE_TO_ROOT + tree_depth(G, config.tree_radix) + 1
    free = [[0.0] * L for _ in range(G)]          # per group: free times of its contexts
    active: list = []                             # (virtual finish, seq, groups)
    state = {"T": 0.0, "V": 0.0, "last": 0.0}
    seq = 0

    def rate(n):
        return min(cap, R / n) if n else 0.0

    def advance(t):
        T, V = state["T"], state["V"]
        while active:
            vmin, _, groups = active[0]
            dt = (vmin - V) / rate(len(active))
            if T + dt > t:
                break
            T += dt
            V = vmin
            heapq.heappop(active)
            for g in groups:
                heapq.heappush(free[g], T + release)
            state["last"] = T
        if active and t > T:
            V += rate(len(active)) * (t - T)
        state["T"], state["V"] = max(T, t), V

    def next_departure():
        if not active:
            return None
        return state["T"] + (active[0][0] - state["V"]) / rate(len(active))

    t = 0.0
    next_group = 0
    for d, j, r in zip(deg.tolist(), jobs.tolist(), ready.tolist()):
        if j <= 0:
            continue
        t = max(t, float(r))
        left = j
        while left > 0:
            k = min(G, left)
            used: list[int] = []
            for _ in range(k):
                while True:
                    advance(t)
                    order = [(next_group + i) % G for i in range(G)]
                    allowed = [g for g in order if g not in used]
                    pick = next((g for g in allowed if free[g] and free[g][0] <= t), None)
                    if pick is not None:
                        heapq.heappop(free[pick])
                        used.append(pick)
                        next_group = (pick + 1) % G
                        t += 1.0
                        break
                    waits = [free[g][0] for g in allowed if free[g]]
                    nd = next_departure()
                    if nd is not None:
                        waits.append(nd + release)
                    t = max(t, float(np.ceil(min(waits))))
            advance(t)
            seq += 1
            heapq.heappush(active, (state["V"] + d, seq, used))
            left -= k
    advance(float("inf"))
    return state["last"]
