"""Model of the shared, banked node buffer's crossbar (``node_banks`` > 0).

The slices share one node buffer of B banks (row r in bank ``r mod B``); each cycle a bank
reads one row, for the slice its round-robin pointer picks among those asking for a row in
it, and every slice asking for that same row takes the read too (see
``hw/sspmm/crossbar.py``). How often a slice waits depends on which rows the slices ask for
at the same time, which the cycle model does not follow request by request. This module
replays the crossbar alone, cycle by cycle, with the RTL's arbitration (:func:`_grant`):

- :func:`replay_sequences`: each slice asks for its own list of rows, one at a time, every
  cycle from its start until the list is done. The lists are the rows each slice asks for,
  in its pass table's order (:func:`pass_sequence`), or rows drawn independently with the
  job's read frequencies (:func:`drawn_sequences`, :func:`read_weights`; row c is read once
  per pass of every row naming it), which miss the order's share of the conflicts;
- :func:`replay`: every slice always asking, for a fixed number of cycles (a saturation
  figure, for jobs too long to replay request by request).

They give each slice's grants per cycle (its fetch rate in the cycle model), the mean cycles a
request is refused (``wait``), and the share of grants served by a read another slice's
request caused (``shared``: rows read = rows fetched x (1 - shared)).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CrossbarRates:
    """What the replay of the crossbar gives (see the module)."""

    grant_rate: float
    wait: float
    shared: float


def read_weights(indptr, indices, passes, n_cols: int) -> np.ndarray:
    """Per feature row, how often the job reads it: once per pass of each row naming it."""
    indptr = np.asarray(indptr, dtype=np.int64)
    reps = np.repeat(np.asarray(passes, dtype=np.float64), np.diff(indptr))
    return np.bincount(np.asarray(indices, dtype=np.int64)[:reps.size], weights=reps,
                       minlength=n_cols)


def replay(weights, slices: int, banks: int, cycles: int = 4096,
           seed: int = 0) -> CrossbarRates:
    """Replay the crossbar for ``cycles`` cycles (see the module). ``weights``: per row, its
    share of the reads (any scale; all zero or empty: rows uniform)."""
    draw = _sampler(weights, seed)
    S, B = slices, banks
    head = draw(S)
    asked = np.zeros(S, dtype=np.int64)         # the cycle each head request was made
    after = np.zeros(B, dtype=np.int64)         # per bank: the first slice of its round robin
    granted = shared = waited = 0
    who = np.arange(S)
    for t in range(cycles):
        grant, reads = _grant(head, who, after, S, B)
        n = grant.size
        granted += n
        shared += n - reads
        waited += int((t - asked[grant]).sum())
        head[grant] = draw(n)
        asked[grant] = t + 1
    return CrossbarRates(grant_rate=granted / (S * cycles), wait=waited / max(granted, 1),
                         shared=shared / max(granted, 1))


def drawn_sequences(weights, reads, seed: int = 0) -> list[np.ndarray]:
    """Per slice, ``reads[k]`` rows drawn independently, row c with probability proportional
    to ``weights[c]`` (all zero or empty: rows uniform)."""
    draw = _sampler(weights, seed)
    return [draw(int(r)) for r in reads]


def _sampler(weights, seed: int):
    """A function drawing k rows with probabilities proportional to ``weights``."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0 or w.sum() <= 0:
        w = np.ones(max(w.size, 1))
    cdf = np.cumsum(w / w.sum())
    rng = np.random.default_rng(seed)

    def draw(k: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(k), side="right"), cdf.size - 1)

    return draw


def _grant(head, who, after, S: int, B: int):
    """One cycle of the crossbar: slices ``who`` ask for rows ``head[who]``; per bank the
    lowest asker at or after the bank's round-robin pointer ``after`` wins (else the lowest
    asker), and every asker of the winner's row is granted. Moves the pointers; returns the
    slices granted and the number of banks read."""
    bank = head[who] % B
    key = np.where(who >= after[bank], who, who + S)
    win_key = np.full(B, 2 * S)
    np.minimum.at(win_key, bank, key)
    used = np.flatnonzero(win_key < 2 * S)
    win = win_key[used] % S
    after[used] = win + 1
    win_row = np.full(B, -1)
    win_row[used] = head[win]
    return who[head[who] == win_row[bank]], used.size


def pass_sequence(rows, indptr, indices, passes, in_flight: int) -> np.ndarray:
    """The rows a slice asks for, in the order its fetcher asks: its rows in order, each read
    once per pass. Up to ``in_flight`` passes are open at a time, each in a slot (the pass
    table's slots are contexts): a new pass takes the lowest free slot, and the slots take
    turns in slot order from the one after the last served (the pass table's round robin). So
    a row's passes ask for the same neighbours a few requests apart, as the RTL's do
    (independent draws miss that, and with it 15-20 % of the conflicts).

    While passes wait, every slot is busy (a freed slot takes the next pass at once), so slot
    k asks at steps ``k, k + F, k + 2F, ...`` (F = ``in_flight``) and each pass runs on the
    slot that frees first: the passes are placed with a heap over the slots, and the requests
    sorted by step (once no pass waits, the turns skip empty slots, which keeps that order)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    # each row's neighbours in ascending order, as the driver loads them
    row_of = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    indices = np.asarray(indices, dtype=np.int64)[:row_of.size]
    indices = indices[np.lexsort((indices, row_of))]
    rows = np.asarray(rows, dtype=np.int64)
    reps = np.asarray(passes, dtype=np.int64)[rows]
    first = np.repeat(indptr[rows], reps)
    size = np.repeat(indptr[rows + 1] - indptr[rows], reps)
    first, size = first[size > 0], size[size > 0]
    F = max(int(in_flight), 1)
    slot = np.empty(size.size, dtype=np.int64)
    turn = np.empty(size.size, dtype=np.int64)     # the slot's turn of the pass's first ask
    free = [(0, k) for k in range(F)]               # (next turn, slot): a heap
    for p, n in enumerate(size.tolist()):
        j, k = heapq.heappop(free)
        slot[p], turn[p] = k, j
        heapq.heappush(free, (j + n, k))
    owner = np.repeat(np.arange(size.size), size)
    within = np.arange(owner.size) - np.repeat(np.cumsum(size) - size, size)
    step = slot[owner] + F * (turn[owner] + within)
    return indices[(first[owner] + within)[np.argsort(step, kind="stable")]]


#: up to this many slices :func:`replay_sequences` runs a plain Python loop per cycle (numpy's
#: per-call cost dominates for a handful of slices); beyond, numpy over the slices
_SMALL = 32


def replay_sequences(seqs, banks: int, starts=None) -> tuple[np.ndarray, float, float]:
    """Replay the crossbar with each slice asking for its rows ``seqs[k]`` in order, one at a
    time, every cycle from cycle ``starts[k]`` (default 0) until they are done, each request
    kept until granted. Returns the cycle each slice's last request is granted, the mean cycles
    a request was refused, and the share of grants served by another slice's read."""
    if len(seqs) <= _SMALL:
        return _replay_small(seqs, banks, starts)
    return _replay_numpy(seqs, banks, starts)


def _replay_small(seqs, banks: int, starts=None) -> tuple[np.ndarray, float, float]:
    """:func:`replay_sequences` as a plain loop: the same arbitration as :func:`_grant`, and
    cycles in which no slice asks skipped (nothing changes in them)."""
    S, B = len(seqs), banks
    seqs = [np.asarray(q, dtype=np.int64).tolist() for q in seqs]
    lens = [len(q) for q in seqs]
    finish = np.zeros(S)
    if S == 0 or sum(lens) == 0:
        return finish, 0.0, 0.0
    pos = [0] * S
    since = [0] * S if starts is None else [int(x) for x in starts]
    after = [0] * B
    left = sum(1 for n in lens if n)              # slices with requests still to make
    granted = shared = waited = 0
    t = min(since)
    while left:
        asking = [k for k in range(S) if pos[k] < lens[k] and since[k] <= t]
        if not asking:
            t = min(since[k] for k in range(S) if pos[k] < lens[k])
            continue
        by_bank: dict[int, list[int]] = {}
        for k in asking:                      # in slice order
            by_bank.setdefault(seqs[k][pos[k]] % B, []).append(k)
        for b, askers in by_bank.items():
            win = next((k for k in askers if k >= after[b]), askers[0])
            after[b] = win + 1
            row = seqs[win][pos[win]]
            served = [k for k in askers if seqs[k][pos[k]] == row]
            granted += len(served)
            shared += len(served) - 1
            for k in served:
                waited += t - since[k]
                pos[k] += 1
                finish[k] = t + 1
                since[k] = t + 1
                if pos[k] == lens[k]:
                    left -= 1
        t += 1
    return finish, waited / max(granted, 1), shared / max(granted, 1)


def _replay_numpy(seqs, banks: int, starts=None) -> tuple[np.ndarray, float, float]:
    """:func:`replay_sequences` with numpy over the slices, cycle by cycle."""
    S, B = len(seqs), banks
    lens = np.array([len(s) for s in seqs], dtype=np.int64)
    finish = np.zeros(S)
    if S == 0 or lens.sum() == 0:
        return finish, 0.0, 0.0
    # every slice's requests in one array: slice k's request i at offset[k] + i
    flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs]
                          + [np.zeros(1, dtype=np.int64)])
    offset = np.concatenate([[0], np.cumsum(lens)[:-1]])
    pos = np.zeros(S, dtype=np.int64)
    head = flat[offset]
    since = np.zeros(S, dtype=np.int64) if starts is None else np.array(starts, np.int64)
    after = np.zeros(B, dtype=np.int64)
    idx = np.arange(S)
    granted = shared = waited = 0
    t = int(since.min())
    while True:
        left = pos < lens
        if not left.any():
            break
        grant, banks_read = _grant(head, idx[left & (since <= t)], after, S, B)
        granted += grant.size
        shared += grant.size - banks_read
        waited += int((t - since[grant]).sum())
        pos[grant] += 1
        finish[grant] = t + 1
        since[grant] = t + 1
        head[grant] = flat[offset[grant] + pos[grant]]
        t += 1
    return finish, waited / max(granted, 1), shared / max(granted, 1)
