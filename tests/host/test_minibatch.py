"""Mini-batch sampling, feature loading and two-stage prefetching (host/hyscale/minibatch.py).

The blocks are checked against the graph's stored rows with Python multisets and sets, not with
the sampler's own arithmetic; the prefetcher against the plain sequential path. No wall-clock
assertions: the thread tests wait on events with generous time-outs only.
"""

import multiprocessing
import os
import threading
import time
from collections import Counter
from concurrent.futures import wait

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import (NeighborSampler, batches, check_fanouts, salted_seed,
                                          training_ids)
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.sampling import sample_rows
from moagcn.host.hyscale.stage_a import FeatureLoader
from moagcn.host.hyscale.minibatch import Prefetcher
from moagcn.host.hyscale.stage_a import StageAProcesses
from moagcn.host.nn.layerwise import local_operator
from moagcn.host.nn.models import GNN, reference_forward


def awkward(n=80, seed=5):
    """A hub (node 1), isolated nodes, self loops (one doubled), a thrice-repeated edge."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 6, size=4 * n)
    dst = rng.integers(0, n - 8, size=4 * n)
    src = np.concatenate([src, np.arange(n - 10), np.full(n - 12, 1), [2, 2, 3, 11, 11, 11]])
    dst = np.concatenate([dst, np.full(n - 10, 1), np.arange(n - 12), [2, 2, 3, 10, 10, 10]])
    keep = (src != n - 1) & (dst != n - 1)                    # node n-1 isolated
    return CSRGraph.from_edges(dst[keep], src[keep], n, dedupe=False)


def stored(g, v):
    return g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()


def prefetch_threads():
    return [t for t in threading.enumerate()
            if t.name.startswith("moagcn-prefetch") and t.is_alive()]


def no_prefetch_threads():
    """Every prefetch thread has ended already: close() (run when the loop ends, is left or
    fails) joins them before returning."""
    return not prefetch_threads()


# -- blocks ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fanouts", [[3, 2], [None, 4], [2, None, 1]])
def test_block_structure_against_the_graph(fanouts):
    g = awkward()
    batch = np.array([1, 40, 0, 79, 2, 11, 57])
    mb = NeighborSampler(g, fanouts, seed=3).sample(batch, salt=7)
    assert mb.n_layers == len(fanouts)
    assert np.array_equal(mb.targets, batch)
    targets = batch
    for layer in reversed(range(len(fanouts))):
        blk = mb.blocks[layer]
        k = fanouts[layer]
        src = blk.src
        assert np.all(np.diff(src) > 0)                                   # sorted, unique
        assert blk.graph.n_rows == targets.size and blk.graph.n_cols == src.size
        assert np.array_equal(src[blk.dst_pos], targets)                  # dst_pos
        assert set(targets.tolist()) <= set(src.tolist())                 # targets in sources
        seen = set(targets.tolist())
        for r, v in enumerate(targets):
            loc = blk.graph.indices[blk.graph.indptr[r]:blk.graph.indptr[r + 1]]
            assert np.all((loc >= 0) & (loc < src.size))                  # local ids in range
            got = src[loc].tolist()                                       # global ids
            row = stored(g, v)
            assert len(got) == (len(row) if k is None else min(k, len(row)))
            assert not Counter(got) - Counter(row)                        # every edge exists
            seen.update(got)
        assert seen == set(src.tolist())                                  # nothing else
        targets = src                                                     # next layer down
    assert np.array_equal(mb.input_nodes, mb.blocks[0].src)
    assert mb.edges == sum(b.graph.nnz for b in mb.blocks)


def test_one_layer_full_fanout_is_the_graph_rows():
    g = awkward()
    batch = np.array([5, 1, 79, 2, 30])
    for k in (None, int(g.degrees().max())):
        blk = NeighborSampler(g, [k], seed=1).sample(batch, salt=3).blocks[0]
        rows = blk.global_rows(g.n_rows)
        for r, v in enumerate(batch):
            assert rows.indices[rows.indptr[r]:rows.indptr[r + 1]].tolist() == stored(g, v)


def test_unsalted_draw_is_deals_and_salt_changes_it_reproducibly():
    g = awkward()
    s = NeighborSampler(g, [2, 3], seed=9)
    batch = np.array([1, 3, 40, 11])
    plain = s.sample(batch)
    assert plain.seed == 9
    indptr, idx = sample_rows(g, batch, 3, 1, seed=9)                     # DEAL / ego draw
    assert np.array_equal(plain.blocks[1].global_rows(g.n_rows).indices, idx)

    def flat(mb):
        return [np.concatenate([b.src, b.graph.indptr, b.graph.indices, b.dst_pos])
                for b in mb.blocks]

    a, b = s.sample(batch, salt=(4, 2)), s.sample(batch, salt=(4, 2))
    assert all(np.array_equal(x, y) for x, y in zip(flat(a), flat(b)))
    assert a.seed == s.seed_for((4, 2)) == salted_seed(9, (4, 2))
    # the salted draw is the plain draw of the salted seed
    _, idx2 = sample_rows(g, batch, 3, 1, seed=a.seed)
    assert np.array_equal(a.blocks[1].global_rows(g.n_rows).indices, idx2)
    # different salts (epochs) draw differently: the hub has far more than 3 neighbours
    hub = [NeighborSampler(g, [3], seed=9).sample(np.array([1]), salt=e).blocks[0].src
           for e in range(6)]
    assert len({tuple(h) for h in hub}) > 1
    assert len({salted_seed(9, e) for e in range(100)} | {9}) == 101


def test_threads_give_the_serial_result_in_order():
    g = awkward()
    s = NeighborSampler(g, [3, 2], seed=2)
    bs = batches(np.arange(g.n_rows), 7, seed=1, epoch=0)
    one = s.sample_many(bs, threads=1, salt=5)
    two = s.sample_many(bs, threads=2, salt=5)
    assert len(one) == len(two) == len(bs)
    for x, y, b in zip(one, two, bs):
        assert np.array_equal(x.targets, b) and np.array_equal(y.targets, b)
        for bx, by in zip(x.blocks, y.blocks):
            assert np.array_equal(bx.src, by.src) and bx.graph == by.graph
            assert np.array_equal(bx.dst_pos, by.dst_pos)
    # batch i of an epoch is drawn with salt (epoch, i)
    assert one[3].seed == s.seed_for((5, 3))


def test_minibatch_forward_and_backward_with_full_fanout_equal_the_full_graph():
    """SAGE-mean on blocks with every neighbour: the targets' logits are the full forward's."""
    g = awkward()
    torch.manual_seed(0)
    X = torch.randn(g.n_rows, 5)
    model = GNN("sage", 5, 6, 3, 2)
    ref = reference_forward(model, model.aggregation(g), X, None)
    batch = np.array([1, 2, 11, 79, 33])
    mb = NeighborSampler(g, [None, None]).sample(batch)
    H = X[torch.from_numpy(mb.input_nodes)]
    H_self = H
    for layer, blk in enumerate(mb.blocks):
        adj, rs, _ = local_operator("mean", blk.graph, blk.dst_pos)
        A = torch.from_numpy(adj.to_scipy().toarray())
        P = model.update(layer, torch.from_numpy(rs)[:, None] * (A @ H),
                         H_self[torch.from_numpy(blk.dst_pos)])
        H = H_self = torch.relu(P)
    assert torch.allclose(P, ref[torch.from_numpy(batch)], atol=1e-5)
    torch.nn.functional.cross_entropy(P, torch.tensor([0, 1, 2, 0, 1])).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


# -- batches and features -----------------------------------------------------------------------

def test_batches_shuffle_per_epoch_and_keep_the_last_partial_batch():
    ids = np.arange(100, 123)
    e0 = batches(ids, 5, seed=3, epoch=0)
    assert [b.size for b in e0] == [5, 5, 5, 5, 3]
    assert sorted(np.concatenate(e0).tolist()) == ids.tolist()
    assert all(np.array_equal(x, y) for x, y in zip(e0, batches(ids, 5, seed=3, epoch=0)))
    assert not np.array_equal(np.concatenate(e0), np.concatenate(batches(ids, 5, 3, epoch=1)))
    assert not np.array_equal(np.concatenate(e0), np.concatenate(batches(ids, 5, 4, epoch=0)))
    assert len(batches(ids, 23)) == 1


def test_feature_loader_gathers_into_a_fresh_contiguous_float32_tensor():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 4))                      # float64 in, float32 out
    y = np.arange(10) % 3
    y[7] = -1
    ld = FeatureLoader(X, y)
    nodes = np.array([9, 0, 3, 3])
    x = ld.gather(nodes)
    assert x.dtype == torch.float32 and x.is_contiguous() and x.shape == (4, 4)
    assert np.array_equal(x.numpy(), X[nodes].astype(np.float32))
    x[0, 0] = 123.0
    assert ld.X[9, 0] != 123.0                            # not a view of the features
    assert ld.labels_of(np.array([2, 4])).tolist() == [2, 1]
    with pytest.raises(UserError, match="node 7 has no label"):
        ld.labels_of(np.array([1, 7]))
    with pytest.raises(UserError, match="no labels"):
        FeatureLoader(X).labels_of(np.array([1]))


# -- prefetching ----------------------------------------------------------------------------------

def setup(n_batches_of=6, fanouts=(3, 2)):
    g = awkward()
    rng = np.random.default_rng(1)
    X = rng.standard_normal((g.n_rows, 4)).astype(np.float32)
    y = rng.integers(0, 3, g.n_rows)
    bs = batches(np.arange(g.n_rows), n_batches_of, seed=2, epoch=1)
    return NeighborSampler(g, list(fanouts), seed=4), FeatureLoader(X, y), bs


def same(a, b):
    assert a.index == b.index
    assert np.array_equal(a.batch.targets, b.batch.targets) and a.batch.seed == b.batch.seed
    for x, y in zip(a.batch.blocks, b.batch.blocks):
        assert np.array_equal(x.src, y.src) and x.graph == y.graph
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    for ta, tb in zip(a.topology, b.topology):
        assert all(torch.equal(u, v) for u, v in zip(ta, tb))


@pytest.mark.parametrize("depth,workers", [(1, 1), (2, 1), (2, 2), (4, 2)])
def test_prefetcher_yields_the_sequential_batches_in_order(depth, workers):
    sampler, loader, bs = setup()
    seq = list(Prefetcher(sampler, loader, bs, salt=1, enabled=False))
    assert [lb.index for lb in seq] == list(range(len(bs)))
    ref = sampler.sample_many(bs, salt=1)
    for lb, mb in zip(seq, ref):
        assert np.array_equal(lb.batch.input_nodes, mb.input_nodes)
        assert torch.equal(lb.x, loader.gather(mb.input_nodes))
        assert lb.x.data_ptr() != loader.gather(mb.input_nodes).data_ptr()
    pf = Prefetcher(sampler, loader, bs, salt=1, depth=depth, workers=workers)
    got = list(pf)
    assert len(got) == len(seq)
    for a, b in zip(got, seq):
        same(a, b)
    st = pf.stats.as_dict()
    assert st["iterations"] == len(bs)
    assert set(st["busy_s"]) == {"sample", "load", "transfer"}
    assert all(v >= 0 for v in st["busy_s"].values()) and st["wait_s"] >= 0
    assert no_prefetch_threads()


def test_prefetcher_runs_depth_batches_ahead_and_no_further():
    sampler, loader, bs = setup(4)
    depth = 2
    started = []
    ahead = threading.Condition()

    class Recording(NeighborSampler):
        def sample(self, targets, salt=None):
            with ahead:
                started.append(salt[-1])
                ahead.notify_all()
            return super().sample(targets, salt)

    rec = Recording(sampler.graph, sampler.fanouts, sampler.seed)
    for lb in Prefetcher(rec, loader, bs, salt=0, depth=depth):
        i = lb.index
        with ahead:
            assert max(started) <= i + depth            # never more than depth ahead
            want = min(i + depth, len(bs) - 1)          # ... and it does run ahead
            assert ahead.wait_for(lambda: want in started, timeout=30)
    assert sorted(started) == list(range(len(bs)))
    assert no_prefetch_threads()


def test_early_break_and_exceptions_leave_no_live_threads():
    sampler, loader, bs = setup(3)
    # a plain for loop left early (no with, no close), the prefetcher still referenced
    pf = Prefetcher(sampler, loader, bs, salt=0, depth=2)
    for lb in pf:
        if lb.index == 1:
            break
    assert no_prefetch_threads() and pf.stats.iterations == 2
    # an exception in the loop body, inside a with block
    with pytest.raises(KeyError):
        with Prefetcher(sampler, loader, bs, depth=2, workers=2) as pf:
            for lb in pf:
                raise KeyError("trainer failed")
    assert no_prefetch_threads()
    # close() in the middle of an epoch, then the iterator stops
    pf = Prefetcher(sampler, loader, bs, depth=3)
    it = iter(pf)
    next(it)
    pf.close()
    assert list(it) == [] and no_prefetch_threads()
    with pytest.raises(UserError, match="runs once"):
        iter(pf)

    # a stage failing at batch 2 reaches the trainer at batch 2, and the threads end
    class Failing(NeighborSampler):
        def sample(self, targets, salt=None):
            if salt[-1] == 2:
                raise RuntimeError("sampler broke")
            return super().sample(targets, salt)

    bad = Failing(sampler.graph, sampler.fanouts, 0)
    seen = []
    with pytest.raises(RuntimeError, match="sampler broke"):
        for lb in Prefetcher(bad, loader, bs, salt=0, depth=2):
            seen.append(lb.index)
    assert seen == [0, 1] and no_prefetch_threads()


def _prep(mb):
    """A stand-in for a trainer's per-batch preparation (numpy only): the blocks' edge counts
    and the sum of their column ids."""
    return [(int(b.graph.indices.size), int(b.graph.indices.sum())) for b in mb.blocks]


def _in_thread(fn, timeout=120):
    """Run ``fn`` in a thread and return what it raised (None): a hang fails the test instead of
    the suite."""
    box = {}

    def run():
        try:
            fn()
        except BaseException as e:   # noqa: BLE001 (handed to the test)
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"did not finish within {timeout} s"
    return box.get("error")


@pytest.mark.parametrize("workers", [1, 2])
def test_stage_a_in_processes_yields_the_sequential_batches(workers):
    """Stage A in forked processes: the batches, features, labels and prepared values of the
    sequential path, in order; the processes end with the prefetcher."""
    sampler, loader, bs = setup()
    before = set(multiprocessing.active_children())
    seq = list(Prefetcher(sampler, loader, bs, salt=1, enabled=False, prepare=_prep))
    assert seq[0].prepared == _prep(seq[0].batch)
    pf = Prefetcher(sampler, loader, bs, salt=1, depth=2, workers=workers, processes=True,
                    prepare=_prep)
    got = list(pf)
    assert len(got) == len(seq)
    for a, b in zip(got, seq):
        same(a, b)
        assert a.prepared == b.prepared
    assert pf.stats.iterations == len(bs) and pf.stats.busy["sample"] > 0
    assert set(multiprocessing.active_children()) == before and no_prefetch_threads()


def test_stage_a_processes_serve_many_epochs_and_outlive_their_prefetchers():
    sampler, loader, bs = setup(4)
    before = set(multiprocessing.active_children())
    with StageAProcesses(sampler, loader, 2, prepare=_prep) as procs:
        forked = set(multiprocessing.active_children()) - before
        assert len(forked) == 2
        for epoch in range(3):
            ref = list(Prefetcher(sampler, loader, bs, salt=epoch, enabled=False, prepare=_prep))
            pf = Prefetcher(sampler, loader, bs, salt=epoch, depth=2, processes=procs,
                            prepare=_prep)
            for a, b in zip(pf, ref):
                same(a, b)
                assert a.prepared == b.prepared
            # the same processes, still running after the prefetcher closed
            assert set(multiprocessing.active_children()) - before == forked
        # left early: its queued batches are cancelled, the processes serve the next one
        for lb in Prefetcher(sampler, loader, bs, salt=9, depth=3, processes=procs,
                             prepare=_prep):
            break
        assert len(list(Prefetcher(sampler, loader, bs, salt=9, processes=procs,
                                   prepare=_prep))) == len(bs)
        with pytest.raises(UserError, match="made for another"):
            Prefetcher(sampler, loader, bs, processes=procs)            # no prepare: not ours
    assert set(multiprocessing.active_children()) == before


def test_stage_a_processes_give_waiting_tasks_to_whichever_process_is_free():
    """One slow batch holds one of two processes: every later task goes to the other one as
    it frees (the processes take tasks from one queue), none waits behind the slow batch;
    tasks cancelled before a process takes them are skipped, not run."""
    sampler, loader, bs = setup(4)

    class SlowFirst(NeighborSampler):
        def sample(self, targets, salt=None):
            if salt == (9, 9):
                time.sleep(3.0)
            return super().sample(targets, salt)
    slow = SlowFirst(sampler.graph, sampler.fanouts, 0)
    with StageAProcesses(slow, loader, 2) as procs:
        first = procs.submit(bs[0], (9, 9))
        rest = [procs.submit(bs[k % len(bs)], (1, k)) for k in range(6)]
        done, _ = wait(rest, timeout=2.5)
        assert len(done) == 6 and not first.done()
        assert all(f.result()[0].targets.size == bs[k % len(bs)].size for k, f in enumerate(rest))
        # tasks queued behind busy processes and cancelled are dropped, not sampled
        held = procs.submit(bs[0], (9, 9))          # the free process takes it
        queued = [procs.submit(bs[1], (2, k)) for k in range(3)]
        assert all(q.cancel() for q in queued)
        assert first.result(timeout=10)[0].targets.size == bs[0].size
        assert held.result(timeout=10)[0].targets.size == bs[0].size
        deadline = time.monotonic() + 10
        while procs.skipped < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procs.skipped == 3
        after = procs.submit(bs[2], (3, 0))             # the queue still serves
        assert after.result(timeout=10)[0].targets.size == bs[2].size


class _Parked:
    """A thread that waits until released (its native id in ``native_id``)."""

    def __init__(self):
        self._go = threading.Event()
        started = threading.Event()
        self._t = threading.Thread(target=lambda: (started.set(), self._go.wait(30)),
                                   daemon=True)
        self._t.start()
        started.wait(10)
        self.native_id = self._t.native_id

    def release(self):
        self._go.set()
        self._t.join(10)


def _cores_here(mb):
    """A preparation that reports the cores the process preparing the batch may run on."""
    return sorted(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="binding to cores needs Linux and two cores")
def test_pinned_stage_a_processes_run_on_cores_of_their_own():
    """``pin``: each stage-A process on one of the last cores, every thread of this process
    on the others while the pool lives (those running before and those started meanwhile),
    each with its cores back at close; with as many processes as cores nothing is bound."""
    sampler, loader, bs = setup(4)
    cores = sorted(os.sched_getaffinity(0))
    before = _Parked()
    with StageAProcesses(sampler, loader, 1, prepare=_cores_here, pin=True) as procs:
        assert procs.cores == (cores[:-1], cores[-1:])
        assert procs.submit(bs[0], (1, 0)).result(timeout=30)[4] == cores[-1:]
        assert sorted(os.sched_getaffinity(0)) == cores[:-1]
        seen = []
        t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
        t.start()
        t.join()
        assert seen == [cores[:-1]]
        # a thread of this process started before the pool is bound too, one started while
        # it lives gets the trainers' cores; both get theirs back at close
        assert sorted(os.sched_getaffinity(before.native_id)) == cores[:-1]
        during = _Parked()
        assert sorted(os.sched_getaffinity(during.native_id)) == cores[:-1]
    assert sorted(os.sched_getaffinity(0)) == cores
    assert sorted(os.sched_getaffinity(before.native_id)) == cores
    assert sorted(os.sched_getaffinity(during.native_id)) == cores
    before.release()
    during.release()
    with StageAProcesses(sampler, loader, len(cores), prepare=_cores_here, pin=True) as procs:
        assert procs.cores is None
        assert procs.submit(bs[0], (1, 0)).result(timeout=30)[4] == cores
        assert sorted(os.sched_getaffinity(0)) == cores
    with StageAProcesses(sampler, loader, 1, prepare=_cores_here) as procs:     # not pinned
        assert procs.cores is None
        assert procs.submit(bs[0], (1, 0)).result(timeout=30)[4] == cores


class _SlowSalt(NeighborSampler):
    """Sleeps ``delay`` seconds on batches salted ``(9, ...)``."""
    delay = 1.5

    def sample(self, targets, salt=None):
        if salt[0] == 9:
            time.sleep(self.delay)
        return super().sample(targets, salt)


def test_a_cancelled_tasks_slot_never_skips_a_later_task():
    """A slot of the cancellation table holds the cancelled task's number: a task cancelled
    after a process took it does not make the later task sharing its slot skipped (a table
    of four slots makes the aliasing reachable)."""
    sampler, loader, bs = setup(4)

    class FourSlots(StageAProcesses):
        _SLOTS = 4
    slow = _SlowSalt(sampler.graph, sampler.fanouts, 0)
    with FourSlots(slow, loader, 2) as procs:
        first = [procs.submit(bs[0], (9, k)) for k in range(2)]     # both processes busy
        time.sleep(0.5)
        later = [procs.submit(bs[1], (1, k)) for k in range(3)]     # task 4 shares slot 0
        assert first[0].cancel()                                    # taken already: runs
        assert all(f.result(timeout=20)[0].targets.size == bs[1].size for f in later)
        assert procs.skipped == 0


def test_a_dead_process_breaks_the_pool_and_the_others_skip_what_was_queued():
    """One of two processes killed: every queued batch fails with BrokenProcessPool, the
    other process skips the rest of the queue instead of sampling it, later submits fail."""
    from concurrent.futures.process import BrokenProcessPool
    sampler, loader, bs = setup(4)
    slow = _SlowSalt(sampler.graph, sampler.fanouts, 0)
    slow.delay = 0.2
    procs = StageAProcesses(slow, loader, 2)
    try:
        futs = [procs.submit(bs[k % len(bs)], (9, k)) for k in range(20)]
        time.sleep(0.1)
        procs._procs[0].kill()
        for f in futs[4:]:
            with pytest.raises(BrokenProcessPool):
                f.result(timeout=20)
        with pytest.raises(BrokenProcessPool):
            procs.submit(bs[0], (1, 0))
        deadline = time.monotonic() + 10
        while procs.skipped < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procs.skipped >= 10          # not sampled: each would have taken 0.2 s
    finally:
        procs.close()


def test_large_strided_targets_travel_in_shared_memory():
    """A target array too large for one record when pickled in band (strided: numpy pickles
    those whole into the record) is queued as a contiguous copy in shared memory."""
    g = awkward(n=70_000)
    sampler = NeighborSampler(g, [2], seed=4)
    loader = FeatureLoader(np.zeros((g.n_rows, 2), dtype=np.float32), np.zeros(g.n_rows, int))
    targets = np.arange(g.n_rows)[::2]              # 35,000 ids, 280 kB in band
    with StageAProcesses(sampler, loader, 1) as procs:
        got = procs.submit(targets, (1, 0)).result(timeout=60)
        assert np.array_equal(got[0].targets, targets)


@pytest.mark.parametrize("processes", [False, True])
def test_depth_zero_runs_stage_a_in_its_pool_on_request_and_nothing_ahead(processes):
    """depth 0: the batches of the sequential path; stage A starts when a batch is requested
    (two prefetchers' at once) or asked for, never ahead of that; stage B in the caller."""
    sampler, loader, bs = setup(4)
    seq = list(Prefetcher(sampler, loader, bs, salt=3, enabled=False))
    pfs = [Prefetcher(sampler, loader, bs, salt=3, depth=0, workers=2, processes=processes)
           for _ in range(2)]
    its = [iter(pf) for pf in pfs]
    for i in range(len(bs)):
        for pf in pfs:
            pf.request()
            pf.request()                          # idempotent: one batch in flight
            assert pf._submitted == i + 1 and len(pf._pending) == 1
        for it in its:
            lb = next(it)
            same(lb, seq[i])
            assert lb.times["sample"] > 0
    assert all(list(it) == [] for it in its)
    assert no_prefetch_threads()


def _refuse():
    raise ValueError("not here")


class _ExplodesWhenUnpickled:
    """Pickles, but unpickling it raises."""

    def __reduce__(self):
        return (_refuse, ())


def test_a_stage_a_process_that_fails_or_dies_stops_the_trainer():
    sampler, loader, bs = setup(4)

    class Failing(NeighborSampler):
        def sample(self, targets, salt=None):
            if salt[-1] == 2:
                raise RuntimeError("sampler broke")
            return super().sample(targets, salt)

    class Dying(NeighborSampler):
        def sample(self, targets, salt=None):
            if salt[-1] == 2:
                os._exit(3)                 # the process ends without a word
            return super().sample(targets, salt)

    class Unreadable(NeighborSampler):
        def sample(self, targets, salt=None):
            mb = super().sample(targets, salt)
            if salt[-1] == 2:
                mb.blocks[0].extra = _ExplodesWhenUnpickled()   # pickles there, not here
            return mb

    before = set(multiprocessing.active_children())
    for cls, error, match in ((Failing, RuntimeError, "sampler broke"),
                              (Dying, RuntimeError, "stage-A process died"),
                              (Unreadable, RuntimeError, "its reply could not be read: "
                               "ValueError: not here")):
        seen = []

        def epoch():
            for lb in Prefetcher(cls(sampler.graph, sampler.fanouts, 0), loader, bs, salt=0,
                                 depth=2, processes=True):
                seen.append(lb.index)
        err = _in_thread(epoch)
        assert isinstance(err, error) and match in str(err), err
        assert seen == list(range(len(seen))) and len(seen) <= 2
        assert set(multiprocessing.active_children()) == before and no_prefetch_threads()


# -- bad input ------------------------------------------------------------------------------------

def one_line(exc_info, *words):
    msg = str(exc_info.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("fanouts,word", [([], "empty"), ([0], "fanouts[0]"),
                                          ([5, -1], "fanouts[1]"), ([2.5], "whole number"),
                                          ("10,5", "parse_fanout"), (7, "not a list")])
def test_bad_fanouts(fanouts, word):
    with pytest.raises(UserError) as e:
        check_fanouts(fanouts)
    one_line(e, word)
    with pytest.raises(UserError):
        NeighborSampler(awkward(), fanouts)


def test_bad_batches_targets_masks_and_labels():
    ids = np.arange(10)
    for bs, word in ((0, "batch_size = 0"), (11, "use 1..10"), (2.0, "batch_size")):
        with pytest.raises(UserError) as e:
            batches(ids, bs)
        one_line(e, word)
    for bad in (np.array([], dtype=np.int64), np.array([1, 1, 2])):
        with pytest.raises(UserError) as e:
            batches(bad, 1)
        one_line(e, "train_ids")
    with pytest.raises(UserError) as e:
        training_ids(None)
    one_line(e, "train_mask is missing", "dataset.train_mask")
    with pytest.raises(UserError) as e:
        training_ids(np.zeros(5, bool))
    one_line(e, "selects no node")
    labels = np.array([0, -1, 2, 1, 0])
    with pytest.raises(UserError) as e:
        training_ids(np.array([1, 1, 0, 0, 0], bool), labels=labels)
    one_line(e, "node 1", "no label")
    assert training_ids(np.array([1, 0, 1, 0, 0], bool), labels=labels).tolist() == [0, 2]

    g = awkward()
    s = NeighborSampler(g, [2])
    for t, word in ((np.array([0, 80]), "not a node"), (np.array([3, 3]), "repeat"),
                    (np.array([], dtype=np.int64), "non-empty"), (np.array([0.5]), "dtype")):
        with pytest.raises(UserError) as e:
            s.sample(t)
        one_line(e, word)
    with pytest.raises(UserError) as e:
        s.sample_many([np.array([1])], threads=0)
    one_line(e, "threads")
    with pytest.raises(UserError) as e:
        NeighborSampler(CSRGraph(np.array([0, 1]), np.array([1]), n_cols=2), [1])
    one_line(e, "square")

    X = np.zeros((g.n_rows, 2), np.float32)
    with pytest.raises(UserError) as e:
        Prefetcher(s, FeatureLoader(X), [np.array([1])])
    one_line(e, "labels=dataset.labels")
    assert len(list(Prefetcher(s, FeatureLoader(X), [np.array([1])], labels=False))) == 1
    with pytest.raises(UserError) as e:
        Prefetcher(s, FeatureLoader(X[:5]), [np.array([1])], labels=False)
    one_line(e, "feature row per node")
    with pytest.raises(UserError) as e:
        Prefetcher(s, FeatureLoader(X), [np.array([1])], labels=False, depth=-1)
    one_line(e, "depth")
    with pytest.raises(UserError) as e:
        Prefetcher(s, FeatureLoader(X), [np.array([1])], labels=False, device="gpu0")
    one_line(e, "not a torch device")
    # an unlabelled target fails in the stage and reaches the trainer as the UserError
    y = np.zeros(g.n_rows, np.int64)
    y[4] = -1
    with pytest.raises(UserError, match="node 4 has no label"):
        list(Prefetcher(s, FeatureLoader(X, y), [np.array([3]), np.array([4, 5])]))
    assert no_prefetch_threads()
