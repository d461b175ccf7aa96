"""The shared node buffer's crossbar model (``moagcn.sim.sspmm.crossbar``) on cases worked out
by hand, and its two replays (a Python loop for a few slices, numpy over many) against each
other."""

import numpy as np
import pytest

from moagcn.sim.sspmm.crossbar import (_replay_numpy, _replay_small, pass_sequence,
                                      replay_sequences)


@pytest.mark.parametrize("replay", [_replay_small, _replay_numpy])
def test_one_read_serves_every_slice_asking_for_the_row(replay):
    # both slices ask for row 5 then row 7: each cycle one read serves both (multicast)
    finish, wait, shared = replay([[5, 7], [5, 7]], 4)
    assert finish.tolist() == [2, 2] and wait == 0 and shared == 0.5


@pytest.mark.parametrize("replay", [_replay_small, _replay_numpy])
def test_a_bank_serves_one_row_a_cycle_in_round_robin(replay):
    # rows 0, 4 and 8 all live in bank 0 of 4: slice 0 wins the first cycle (the pointer
    # starts at 0), then slice 1 (the lowest asker after 0), then slice 2; every slice asks
    # again the next cycle, so slice 0's second request (row 12, bank 0) waits for slice 2
    finish, wait, shared = replay([[0, 12], [4], [8]], 4)
    assert finish.tolist() == [4, 2, 3]
    # refused cycles: slice 1 one, slice 2 two, slice 0's second request two (cycles 1, 2)
    assert wait == pytest.approx((0 + 1 + 2 + 2) / 4) and shared == 0


@pytest.mark.parametrize("replay", [_replay_small, _replay_numpy])
def test_slices_start_when_told_and_empty_lists_finish_at_once(replay):
    finish, wait, shared = replay([[1, 2, 3], [], [1]], 2, starts=[0, 0, 5])
    assert finish.tolist() == [3, 0, 6] and wait == 0 and shared == 0


@pytest.mark.parametrize("slices,banks,rows", [(2, 1, 3), (3, 2, 5), (4, 16, 40), (8, 4, 9),
                                               (5, 8, 1000)])
def test_the_two_replays_agree(slices, banks, rows):
    rng = np.random.default_rng(slices * 100 + banks)
    for trial in range(5):
        seqs = []
        for _ in range(slices):
            n = int(rng.integers(0, 60))
            q = rng.integers(0, rows, n)
            # runs of repeats, as a row's passes ask for the same neighbours a few apart
            q[1::3] = q[0:-1:3][:q[1::3].size]
            seqs.append(q)
        starts = rng.integers(0, 20, slices) if trial % 2 else None
        a = _replay_small(seqs, banks, starts)
        b = _replay_numpy(seqs, banks, starts)
        assert a[0].tolist() == b[0].tolist()
        assert a[1] == pytest.approx(b[1]) and a[2] == pytest.approx(b[2])


def test_many_slices_take_the_numpy_replay():
    rng = np.random.default_rng(7)
    seqs = [rng.integers(0, 64, 20) for _ in range(40)]
    a = replay_sequences(seqs, 8)
    b = _replay_small(seqs, 8)
    assert a[0].tolist() == b[0].tolist() and a[1] == pytest.approx(b[1])


def _pass_sequence_loop(rows, indptr, indices, passes, in_flight):
    """The fetcher's request order request by request: before each request every free slot
    takes the next pass (lowest slot first), then the slots take turns from the one after
    the last served, skipping empty ones."""
    order = []
    for v in rows:
        nbrs = sorted(indices[indptr[v]:indptr[v + 1]])
        order += [list(nbrs) for _ in range(passes[v]) if nbrs]
    slots = [None] * in_flight
    out, last, nxt = [], -1, 0
    while nxt < len(order) or any(s is not None for s in slots):
        for k in range(in_flight):
            if slots[k] is None and nxt < len(order):
                slots[k], nxt = order[nxt], nxt + 1
        k = next(j % in_flight for j in range(last + 1, last + 1 + in_flight)
                 if slots[j % in_flight] is not None)
        out.append(slots[k].pop(0))
        if not slots[k]:
            slots[k] = None
        last = k
    return out


@pytest.mark.parametrize("in_flight", [1, 2, 5, 14])
def test_pass_sequence_is_the_fetchers_order(in_flight):
    rng = np.random.default_rng(in_flight)
    for _ in range(4):
        n = 40
        deg = rng.integers(0, 9, n)
        deg[rng.integers(0, n)] = 60                       # a hub
        indptr = np.concatenate([[0], np.cumsum(deg)])
        indices = rng.integers(0, 50, int(deg.sum()))      # duplicates, any order
        passes = rng.integers(0, 4, n)
        rows = np.sort(rng.choice(n, 25, replace=False))
        got = pass_sequence(rows, indptr, indices, passes, in_flight)
        assert got.tolist() == _pass_sequence_loop(rows, indptr, indices, passes, in_flight)
