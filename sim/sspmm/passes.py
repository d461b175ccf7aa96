"""The S-SpMM cycle model's pass-by-pass part: how rows are dispatched to the slices and split
into pieces, and the replay of the passes through the contexts and the fetcher (the fourth
term of :mod:`moagcn.sim.sspmm.model`, whose docstring states the model; the replay's event
loop is :mod:`moagcn.sim.sspmm.schedule`).
"""

from __future__ import annotations

import functools
import heapq

import numpy as np

from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.protocol import (ISSUE_TO_ROOT_SHARED, ROW_HEAD_LATENCY, front_end_latency,
                                      idle_latency, issue_to_root as issue_to_root_of,
                                      leaf_to_buffer, local_write_latency, row_check_latency)
from moagcn.sim.sspmm.crossbar import (CrossbarRates, replay as crossbar_replay,
                                       replay_sequences as crossbar_sequences)
from moagcn.sim.sspmm.golden import piece_sizes
from moagcn.sim.sspmm.schedule import slice_schedules


def turn_gap(config: SSpmmConfig, issue_to_root: float | None = None) -> float:
    """Average cycles between two turns of one job context.

    A context takes a turn every ring period (L = ``adder_latency`` cycles) if an entry is in
    its local buffer. An entry's credit comes back ``round_trip`` cycles after the fetcher
    issued the entry that frees it: the issue, the index and row reads
    (:func:`~moagcn.hw.sspmm.protocol.issue_to_root`), the tree, the local-buffer write, the
    turn, the credit. With ``local_depth`` D entries in flight
    a context therefore takes D turns per ``max(D * L, ceil(round_trip / L) * L)`` cycles: a
    buffer too shallow for a short ring (D * L < round trip) slows every turn.
    ``issue_to_root``: the read's cycles to the tree when not the configuration's own (the
    shared node buffer's, with its mean wait for a grant).
    """
    L, D = config.adder_latency, config.local_depth
    if issue_to_root is None:
        issue_to_root = issue_to_root_of(config)
    round_trip = issue_to_root + leaf_to_buffer(config) + 1
    return max(D * L, -(-round_trip // L) * L) / D


def fill_cycles(config: SSpmmConfig, fetch: "FetchTiming") -> float:
    """Fill and drain: a row's check stages and the emitter's head register, a row read's way
    to a local buffer (with its write register, :func:`local_write_latency`), the wait for its
    context's turn (half a ring on average), the buffer read and the operand register (with
    ``weighted``, the lanes' multipliers), the adders, the write, the idle test's register
    (:func:`idle_latency`)."""
    return (row_check_latency(config) + ROW_HEAD_LATENCY + fetch.issue_to_root
            + leaf_to_buffer(config) + config.adder_latency // 2
            + front_end_latency(config) + config.adder_latency + 1 + idle_latency(config)
            + (1 if config.slices > 1 else 0)         # the dispatcher's slice queues
            + (1 if config.split_degree else 0))      # and its row register when it splits


def split_rows(deg, jobs, arrival, split: int, slices: int, rate: int = 1):
    """Rows longer than ``split`` as the dispatcher cuts them: pieces of ``max(split,
    ceil(deg / slices))`` neighbours (:func:`~moagcn.sim.sspmm.golden.piece_sizes`) in place of
    the row, with its jobs; the dispatcher sends ``rate`` pieces a cycle (so a split row delays
    the rows after it too). Returns the
    per-piece degrees, jobs and arrivals, each piece's index within its row, and the pieces
    of each row."""
    size, pieces = piece_sizes(deg, split, slices)
    rep = np.repeat(np.arange(deg.size), pieces)
    first = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    k = np.arange(rep.size) - np.repeat(first, pieces)          # piece index within its row
    piece_deg = np.minimum(deg[rep] - k * size[rep], size[rep])
    piece_deg = np.where(deg[rep] == 0, 0, piece_deg)
    # the dispatcher sends ``rate`` records a cycle (the RTL's one; as many as the scheduler
    # walks rows): in units of 1 / rate cycles a record with work leaves no earlier than its
    # row arrives and one unit after the record before it (u_i = max(rate * a_i, u_{i-1} + 1),
    # i.e. u_i - i is the running maximum of rate * a_i - i), so a split row delays the rows
    # after it
    p_jobs = jobs[rep]
    when = arrival[rep].astype(np.int64)
    work = np.flatnonzero((piece_deg > 0) & (p_jobs > 0))
    if work.size:
        i = np.arange(work.size)
        when[work] = (np.maximum.accumulate(rate * when[work] - i) + i) // rate
    return piece_deg, p_jobs, when, k, pieces


def dispatch(turns, slices: int, piece=None) -> np.ndarray:
    """The slice each row (or piece) goes to (-1: a row without work), as the row dispatcher
    decides: rows in order, each to the slice with the fewest turns assigned so far (lowest
    index on a tie); ``piece``: each record's index among its row's pieces, piece k > 0 going
    to the slice after piece k - 1's."""
    turns = np.asarray(turns, dtype=np.int64)
    owner = np.full(turns.size, -1, dtype=np.int64)
    if piece is None:
        heap = [(0, k) for k in range(slices)]
        for v in np.flatnonzero(turns > 0).tolist():
            w, k = heap[0]
            owner[v] = k
            heapq.heapreplace(heap, (w + int(turns[v]), k))
        return owner
    # with pieces the next slice is not always the least loaded: a plain argmin per row
    work = np.zeros(slices, dtype=np.int64)
    prev = 0
    piece = np.asarray(piece)
    for v in np.flatnonzero(turns > 0).tolist():
        k = int(np.argmin(work)) if piece[v] == 0 else (prev + 1) % slices
        owner[v] = prev = k
        work[k] += int(turns[v])
    return owner


def row_passes(unmasked, config: SSpmmConfig) -> np.ndarray:
    """Per row, how often the fetcher reads each of its neighbours' rows: once per pass of up
    to ``groups`` of its ``ceil(unmasked / group_lanes)`` jobs."""
    jobs = -(-np.asarray(unmasked, dtype=np.int64) // config.group_lanes)
    return -(-jobs // config.groups)


def or_uniform(weights, n_cols: int) -> np.ndarray:
    """``weights``, or every one of ``n_cols`` rows read equally often when not known."""
    return weights if weights is not None else np.ones(max(n_cols, 1))


class FetchTiming:
    """A slice's neighbour reads: rows per cycle (``rate``), cycles from an issue to the tree
    (``issue_to_root``), and with the shared node buffer (``node_banks``) the crossbar's mean
    wait per request (``wait``, in ``issue_to_root``) and the share of its grants served by
    another slice's read (``shared``); see :mod:`moagcn.sim.sspmm.crossbar`."""

    def __init__(self, config: SSpmmConfig, reads=None, n_cols: int = 0):
        self.rate, self.issue_to_root = float(config.fetch_rows), float(issue_to_root_of(config))
        self.wait = self.shared = 0.0
        if not config.node_banks:
            return
        self.issue_to_root = float(ISSUE_TO_ROOT_SHARED)
        if config.slices == 1:
            return          # one slice never meets another at a bank
        if reads is None:
            # every row read equally often: only the rows' number matters (how often two
            # slices ask for the same one), to a power of two
            rates = uniform_crossbar(config.slices, config.node_banks,
                                      1 << max(n_cols - 1, 0).bit_length())
        else:
            rates = crossbar_replay(reads, config.slices, config.node_banks)
        self.rate = config.fetch_rows * rates.grant_rate
        self.wait, self.shared = rates.wait, rates.shared
        self.issue_to_root = ISSUE_TO_ROOT_SHARED + rates.wait


#: the most row requests the model replays in order, request by request (beyond, draws: the
#: replay's cost per cycle grows with the slices; docs/sim.md, "Why these options")
SEQUENCE_LIMIT = 1_000_000


def replayed_fetch(config: SSpmmConfig, parts, seqs) -> list:
    """Per slice, its fetch timing from the crossbar replayed with each slice asking for its
    rows ``seqs[k]`` every cycle until they are done
    (:func:`~moagcn.sim.sspmm.crossbar.replay_sequences`): rows granted per cycle from its
    first request, the mean wait, the share served by another slice's read."""
    reads = [len(q) for q in seqs]
    # a slice asks from its first row's arrival (the dispatcher hands out a row a cycle)
    starts = np.array([int(a.min()) if a.size else 0 for _, _, _, a in parts])
    finish, wait, shared = crossbar_sequences(seqs, config.node_banks, starts)
    fetch = []
    for r, end, start in zip(reads, finish.tolist(), starts.tolist()):
        f = FetchTiming(config)
        # the rate over the cycles the slice was asking (its pass replay waits for the rows'
        # arrival itself)
        f.rate = config.fetch_rows * (min(1.0, r / max(end - start, 1.0)) if r else 1.0)
        f.wait, f.shared = wait, shared
        f.issue_to_root = ISSUE_TO_ROOT_SHARED + wait
        fetch.append(f)
    return fetch


@functools.lru_cache(maxsize=64)
def uniform_crossbar(slices: int, banks: int, n_cols: int) -> CrossbarRates:
    """The crossbar's rates when every feature row is read equally often."""
    return crossbar_replay(np.ones(n_cols), slices, banks)


def rows_of(owner: np.ndarray, slices: int):
    """Per slice, its rows in order."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(slices + 1))
    for k in range(slices):
        yield order[bounds[k]:bounds[k + 1]]


def slice_issues(parts, config: SSpmmConfig, fetches) -> list[int]:
    """Per slice (``parts``: each slice's degrees, jobs, passes and arrivals; ``fetches``: its
    read timing), the cycles until it has issued its last turn: the larger of the throughput
    bounds (turns over the contexts, reads over the fetcher's R reads per cycle, one job per
    cycle) and :func:`slice_schedule`, which replays how the slice's contexts are bound to
    passes and how the passes share the fetcher: a hub row, or a row queued behind one, can
    only start when contexts in the groups its passes need come free (see there)."""
    if not parts:
        return []
    bounds = np.concatenate([[0], np.cumsum([p[0].size for p in parts])])
    cat = [np.concatenate([p[k] for p in parts]) for k in range(4)]
    ends = schedules(bounds, cat[0], cat[1], cat[3], config, fetches)
    out = []
    for (deg, jobs, passes, _), fetch, end in zip(parts, fetches, ends.tolist()):
        if not (jobs > 0).any():
            out.append(0)
            continue
        G, R, L = config.groups, fetch.rate, config.adder_latency
        gap = turn_gap(config, fetch.issue_to_root)
        reads = int(np.dot(deg, passes)) + pass_read_cost(config, fetch) * int(passes.sum())
        issue = max(int(np.ceil(int(np.dot(deg, jobs)) * gap / (L * G))),
                    int(np.ceil(reads / R)), int(jobs.sum()))
        out.append(max(issue, int(np.ceil(end))))
    return out


#: read-port cycles a pass costs beyond its reads, per cycle by which a row read's round trip
#: (issue to the turn that frees its entry) exceeds the ring period, over that period: fitted on
#: 24 jobs of the tiny preset (ring 3, round trip 6; seeds 800-823 of
#: ``validate_sspmm.held_out_job``), checked on its held-out jobs (docs/sspmm.md, "Cycle
#: model"). Zero where the round trip fits in a ring (multi, paper), 0.05 on the default preset
PASS_PORT_LOSS = 0.35


def pass_read_cost(config: SSpmmConfig, fetch: "FetchTiming") -> float:
    """Read-port cycles each pass costs beyond its reads (:data:`PASS_PORT_LOSS`): with a ring
    shorter than a read's round trip a pass that starts cannot keep its contexts' turns fed
    from its first reads, and when the port is what bounds the slice (one read per cycle, every
    pass at its ring's pace) the port idles for part of a cycle at each pass's start. Slices
    reading shared node banks (``node_banks``) have no port of their own: the crossbar's replay
    (:mod:`moagcn.sim.sspmm.crossbar`) sets their read rate, and no charge is added (measured:
    with it, a two-slice one-bank job on ``tiny`` read 9.9 % high, without it 2.7 %)."""
    if config.node_banks:
        return 0.0
    L = config.adder_latency
    round_trip = fetch.issue_to_root + leaf_to_buffer(config) + 1
    return PASS_PORT_LOSS * max(0.0, round_trip - L) / L


def schedule_terms(config: SSpmmConfig, fetch: "FetchTiming") -> tuple[float, float, float]:
    """The replay's rates for a slice with read timing ``fetch``: reads per cycle, the turn
    rate of one pass (neighbours per cycle) and the hold (:func:`slice_schedule`)."""
    cap = 1.0 / turn_gap(config, fetch.issue_to_root)
    # a context is released as its pass's last entry arrives at the leaf (before the write
    # register of two or more root links, :func:`local_write_latency`)
    hold = (fetch.issue_to_root + leaf_to_buffer(config) - local_write_latency(config)) * cap
    return fetch.rate, cap, hold


def schedules(bounds, deg, jobs, arrival, config: SSpmmConfig, fetches,
               compiled: bool = True) -> np.ndarray:
    """:func:`slice_schedule` of each segment ``s`` (rows ``bounds[s]:bounds[s + 1]``) with
    read timing ``fetches[s]``: the compiled loop (:mod:`moagcn.sim.sspmm.schedule`), or the
    Python one where it is not available (or ``compiled`` is False); the same numbers."""
    bounds = np.asarray(bounds, dtype=np.int64)
    terms = np.array([schedule_terms(config, f) for f in fetches], dtype=np.float64
                     ).reshape(-1, 3)
    if compiled:
        ends = slice_schedules(bounds, deg, jobs, arrival, config.groups, config.adder_latency,
                               terms[:, 0], config.local_depth, terms[:, 1], terms[:, 2])
        if ends is not None:
            return ends
    return np.array([slice_schedule(deg[lo:hi], jobs[lo:hi], arrival[lo:hi], config, f)
                     for lo, hi, f in zip(bounds[:-1].tolist(), bounds[1:].tolist(), fetches)],
                    dtype=np.float64)


def slice_schedule(deg, jobs, arrival, config: SSpmmConfig,
                   fetch: "FetchTiming | None" = None) -> float:
    """When a slice issues its last turn, from a replay of its context binding and fetching.
    This is the reference loop in Python; :mod:`moagcn.sim.sspmm.schedule` compiles the same
    loop, which :func:`estimate_rows` runs (tests/sim/test_cycle_model.py: equal results).

    The design (``hw/sspmm/fetch.py``), at the granularity of passes:

    - *binding*: the emitter offers the slice's jobs in row order, one per cycle and none before
      the scheduler has walked to its row; the binder puts each on a free context in a group
      its pass does not use yet (the group after the last one used if it has a free context,
      else the lowest), and a row's next job waits, holding the pass's contexts, until such a
      context comes free (no job overtakes it: ``stall_no_context``);
    - *issue*: a closed pass reads its neighbours' rows; the passes in flight share the R reads
      per cycle (round robin) and each takes at most one turn per ``turn_gap`` cycles in each
      of its contexts, so k passes each progress at ``min(1 / gap, R / k)`` neighbours per cycle;
    - *release*: a context is free for the next job once its pass's last entry is in its local
      buffer: the pass issues that entry ``local_depth`` turns before its last when the adders
      set the pace (a short pass issues all of its entries one per cycle, a cycle after its
      bind), and the entry reaches the buffer ``issue_to_root + tree depth + 1`` cycles after
      its issue (with two-entry buffers and short jobs those cycles decide how long contexts
      stay bound); the next job's turns follow the old job's in the same context (the double
      buffer), so a pass starts when every member's previous pass has finished.

    The rest of a slice's time (a row read's way to the adders, the adders, the write) is the
    fill that :func:`estimate_rows` adds. Events are pass releases and completions, so the cost
    is a few microseconds per job.
    """
    fetch = fetch or FetchTiming(config)
    G, L = config.groups, config.adder_latency
    lead = config.local_depth
    # a context is released when its pass's last entry reaches its local buffer: the issue's
    # way there after the last issue, in turns at the adders' pace
    R, cap, hold = schedule_terms(config, fetch)
    # per group, the contexts free to bind, each as (pass, member) it last served (None: none)
    pool = [[None] * L for _ in range(G)]
    done = {}               # (pass, member) -> when that context's last turn of it was
    members = []            # per pass, its groups
    left = []               # per pass, members still taking turns
    waiting = {}            # pass -> [contexts it still waits for, neighbours, bound, prior]
    dependents = {}         # (pass, member) -> passes waiting for that context
    events = []             # (progress, kind, pass, member): 0 = release, 1 = member finishes
    state = {"t": 0.0, "progress": 0.0, "active": 0, "end": 0.0}

    def rate():             # neighbours per cycle of each pass in flight
        k = state["active"]
        return min(cap, R / k) if k else 0.0

    def advance(t):
        state["progress"] += (t - state["t"]) * rate()
        state["t"] = t

    def next_event() -> float:
        if not events:
            return float("inf")
        r = rate()
        ahead = events[0][0] - state["progress"]
        return state["t"] + max(ahead, 0.0) / r if r else state["t"]

    def activate(p: int, d: int, t_bound: float, prior: list):
        # the slowest member's previous turns end now (or the pass was bound now); the others
        # take the pass's rows as they come, up to ``lead`` entries before it
        now, v = state["t"], state["progress"]
        t_issue = max(t_bound, max(prior) - lead / cap)
        state["active"] += 1
        # the pass issues once bound (a cycle to set up), its last ``lead`` entries (or all of
        # a short pass's) one per cycle; its last entry then takes ``hold`` to arrive
        setup = (d if d <= lead else 1) * cap
        heapq.heappush(events, (v + max(d - lead, 0) + setup + hold, 0, p, 0))
        for i, f in enumerate(prior):
            heapq.heappush(events, (v + d + (max(f, t_issue) - now) * cap, 1, p, i))

    def pop_event():
        _, kind, p, i = heapq.heappop(events)
        if kind == 0:
            for j, g in enumerate(members[p]):
                pool[g].append((p, j))
            return
        done[(p, i)] = state["t"]
        left[p] -= 1
        if not left[p]:
            state["active"] -= 1
            state["end"] = max(state["end"], state["t"])
        for q in dependents.pop((p, i), ()):
            wait = waiting[q]
            wait[0].discard((p, i))
            if not wait[0]:
                del waiting[q]
                activate(q, wait[1], wait[2], [done.get(c, -1e18) for c in wait[3]])

    bound = -1.0            # when the last job was bound
    nxt = 0                 # the group the binder tries first
    for v in np.flatnonzero(jobs > 0).tolist():
        d, rest, a = int(deg[v]), int(jobs[v]), float(arrival[v])
        while rest:
            m = min(G, rest)
            rest -= m
            used, prev = [], []
            for _ in range(m):
                while True:
                    free = [g for g in range(G) if pool[g] and g not in used]
                    t_bind = max(bound + 1, a, state["t"])
                    t_event = next_event()
                    if free and t_bind <= t_event:
                        advance(t_bind)
                        break
                    advance(t_event)
                    pop_event()
                g = nxt if nxt in free else free[0]
                ctxs = pool[g]
                prev.append(ctxs.pop(ctxs.index(None) if None in ctxs else 0))
                used.append(g)
                nxt = (g + 1) % G
                bound = state["t"]
            p = len(members)
            members.append(used)
            left.append(m)
            busy = {c for c in prev if c is not None and c not in done}
            if busy:
                waiting[p] = [busy, d, bound, prev]
                for c in busy:
                    dependents.setdefault(c, []).append(p)
            else:
                activate(p, d, bound, [done.get(c, -1e18) if c is not None else -1e18
                                       for c in prev])
    while events:
        advance(next_event())
        pop_event()
    return state["end"]
