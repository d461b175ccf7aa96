"""Mini-batch training input: a feature loader and two-stage feature prefetching (HyScale-GNN,
Sec. III-A and IV-B), over the batches of :mod:`moagcn.host.graphs.minibatch`'s sampler.

The batches' layout (blocks, fanouts, salts) is described once, in
:mod:`moagcn.host.graphs.minibatch`; stage A's loader and process pool are
:mod:`moagcn.host.hyscale.stage_a`.

:class:`Prefetcher` overlaps the stages (Fig. 7): while the caller trains on batch ``i``, stage
B ("transfer": a copy onto the trainer's device, a real copy into a fresh buffer on the CPU)
works on ``i + 1`` and stage A (sampling + feature loading) on ``i + 2``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import MiniBatch, NeighborSampler, batch_salt, whole_number
from moagcn.host.hyscale.stage_a import FeatureLoader, StageAProcesses, _died, can_fork, stage_a

# -- two-stage prefetching ------------------------------------------------------------------------


@dataclass(eq=False)
class LoadedBatch:
    """What the trainer gets for iteration ``index``: the sampled ``batch`` (host numpy), its
    input features ``x`` and target labels ``y`` on the trainer's device, the blocks' topology
    there (``topology[l] = (indptr, indices, dst_pos)`` int64 tensors), the seconds each
    stage spent on it, and what the prefetcher's ``prepare`` made of the batch in stage A
    (None without one)."""

    index: int
    batch: MiniBatch
    x: torch.Tensor
    y: torch.Tensor | None
    topology: list
    times: dict = field(default_factory=dict)
    prepared: object = None


@dataclass
class PrefetchStats:
    """Seconds: ``busy`` per stage (``sample``, ``load``, ``transfer``, summed over the batches
    the trainer received), ``wait`` (the trainer blocked for its next batch), ``train`` (the
    trainer's time between batches) and ``wall`` (first request to the end)."""

    busy: dict = field(default_factory=lambda: {"sample": 0.0, "load": 0.0, "transfer": 0.0})
    wait: float = 0.0
    train: float = 0.0
    wall: float = 0.0
    iterations: int = 0

    def as_dict(self) -> dict:
        return {"busy_s": dict(self.busy), "wait_s": self.wait, "train_s": self.train,
                "wall_s": self.wall, "iterations": self.iterations}


def transfer(mb, x: torch.Tensor, y, device: torch.device):
    """Stage B's copy of a loaded batch onto ``device``: the features, the labels (or None)
    and each block's topology (small int64 arrays, copied straight over); on the CPU a real
    copy into fresh buffers. Returns ``(x, y, topology)``."""
    if device.type == "cpu":
        def move(t):
            return t.clone()                              # a real copy, into a fresh buffer
    else:
        def move(t):
            return t.to(device, non_blocking=t.is_pinned())
    topology = [tuple(torch.tensor(a, device=device)
                      for a in (b.graph.indptr, b.graph.indices, b.dst_pos))
                for b in mb.blocks]
    return move(x), (move(y) if y is not None else None), topology


class Prefetcher:
    """Two-stage feature prefetching of ``batches`` (lists of target ids): an epoch's, or a
    whole run's (then give ``salts``, one per batch, e.g. ``(epoch, i)``, so that the pipeline
    does not drain between epochs).

    Stage A (a pool of ``workers`` threads; with ``processes=True`` of ``workers`` forked
    processes, or those of a :class:`StageAProcesses` given as ``processes``) samples batch
    ``i`` with salt ``(salt, i)`` or ``salts[i]`` (see
    :meth:`NeighborSampler.sample_many`) and gathers its features and labels; stage B (one
    thread) copies them to ``device`` (``.to(device)``, or a clone into a fresh buffer on the
    CPU). While the trainer holds batch ``i``, batches ``i + 1 .. i + depth`` are in flight:
    with ``depth=2``, ``i + 1`` in B and ``i + 2`` in A. ``enabled=False`` is the baseline:
    every stage in sequence in the caller's thread. ``depth=0`` is the baseline with stage A's
    workers: stage A in its pool, started when the batch is asked for or :meth:`request` is
    called (so that several trainers' stage A run at once), stage B in the caller; nothing
    runs beside the training. Batches arrive in order and equal the sequential ones.
    ``prepare`` (optional, ``prepare(mini_batch) -> object``) is more of
    stage A's work on each sampled batch (e.g. the blocks' normalised operators), timed with
    the sampling and handed over as :attr:`LoadedBatch.prepared`; with processes it must not
    call torch.

    Threads share the interpreter lock with the trainer: sampling is numpy, but also many
    small Python steps, and so is a training step, so on a host with few cores the two slow
    each other down. Processes share nothing but the cores: each is forked (copy on write: the
    graph and the features are not copied) when the first batch is asked for, samples and
    gathers with numpy alone, and sends the batch back through shared memory
    (:class:`StageAProcesses`; the sending is not timed, the copy into the trainer's buffer is
    stage B's). A stage-A process that dies stops the
    trainer with an error at its next batch. Processes the prefetcher made end with it; a
    :class:`StageAProcesses` it was given is left running (its queued batches are cancelled).

    Iterate it once (``for lb in pf``); leaving the loop early, an exception in the loop or in
    a stage, or :meth:`close` cancels what is queued and joins the threads. Also a context
    manager. :attr:`stats` holds the stage and wait times.
    """

    def __init__(self, sampler: NeighborSampler, loader: FeatureLoader, batches: Sequence,
                 salt=None, device="cpu", depth: int = 2, enabled: bool = True,
                 workers: int = 1, labels: bool = True,
                 processes: "bool | StageAProcesses" = False, prepare=None, salts=None):
        if isinstance(processes, StageAProcesses):
            if not processes.serves(sampler, loader, labels, prepare):
                raise UserError("Prefetcher(processes=...): the stage-A processes were made for "
                                "another sampler, loader, labels or prepare; make them with "
                                "this prefetcher's")
            self._procs, self._own_procs = processes, False
        elif processes and not can_fork():
            raise UserError("Prefetcher(processes=True) forks stage-A processes, which this "
                            "platform cannot; use processes=False (threads)")
        else:
            self._procs, self._own_procs = None, bool(processes)
        self.processes = bool(processes)
        self.prepare = prepare
        self.salts = None if salts is None else list(salts)
        if loader.n_nodes != sampler.graph.n_rows:
            raise UserError(f"the features have {loader.n_nodes} rows but the graph has "
                            f"{sampler.graph.n_rows} nodes; give one feature row per node")
        if labels and loader.labels is None:
            raise UserError("Prefetcher(labels=True) needs a FeatureLoader with labels; pass "
                            "labels=dataset.labels to FeatureLoader, or labels=False")
        self.depth = whole_number(depth, "depth", "use 0 (no look-ahead) or more")
        if self.depth < 0:
            raise UserError(f"depth = {self.depth}; use 0 (no look-ahead), 1 or 2")
        self.workers = whole_number(workers, "workers", "use 1 or more")
        if self.workers < 1:
            raise UserError(f"workers = {self.workers}; use 1 or more stage-A threads")
        self.sampler, self.loader, self.salt, self.labels = sampler, loader, salt, bool(labels)
        # a list, or any sequence that makes batch i when asked (the hybrid trainer's splits,
        # decided by DRM just before stage A samples them): read only by stage A
        self.batches = batches if isinstance(batches, Sequence) else list(batches)
        if not len(self.batches):
            raise UserError("Prefetcher got no batches; make them with batches(train_ids, ...)")
        if self.salts is not None and len(self.salts) != len(self.batches):
            raise UserError(f"Prefetcher got {len(self.salts)} salts for {len(self.batches)} "
                            "batches; give one salt per batch (or salt=)")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise UserError(f"device = {device!r} is not a torch device; use 'cpu' or "
                            "'cuda[:N]'") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise UserError(f"device = {device!r} but CUDA is not available here; use "
                            "device='cpu'")
        #: depth 0 with ``enabled``: stage A in its pool (see :meth:`request`), no look-ahead
        self.lockstep = bool(enabled) and self.depth == 0
        self.enabled = bool(enabled) and self.depth > 0
        self.stats = PrefetchStats()
        self._pending: deque = deque()      # stage-B futures, in order (at most depth)
        self._stage_a_futures: deque = deque()   # with processes: for cancelling at close
        self._submitted = 0
        self._pool_a = self._pool_b = None
        self._stop = threading.Event()
        self._closed = False
        self._started = False
        self._stream = None

    # stages (thread-safe: they touch only their own batch)
    def _stage_a(self, i: int):
        if self._stop.is_set():
            raise CancelledError
        return stage_a(self.sampler, self.loader, self.batches[i], self._salt(i), self.labels,
                       self.prepare)

    def _stage_b(self, i: int, host):
        if isinstance(host, Future):                      # a stage-A future
            try:
                host = host.result()
            except BrokenProcessPool as e:
                raise _died(i, e) from None
        if self._stop.is_set():
            raise CancelledError
        mb, x, y, times, prepared = host
        if isinstance(x, np.ndarray):                     # from a stage-A process
            x = torch.from_numpy(x)
            y = torch.from_numpy(y) if y is not None else None
        t0 = time.perf_counter()
        dev = self.device
        if dev.type == "cuda":
            if self._stream is None:
                self._stream = torch.cuda.Stream(dev)
            with torch.cuda.stream(self._stream):
                xd, yd, topo = transfer(mb, x, y, dev)
            self._stream.synchronize()                    # on the device when handed over
        else:
            xd, yd, topo = transfer(mb, x, y, dev)
        times = dict(times, transfer=time.perf_counter() - t0)
        return LoadedBatch(i, mb, xd, yd, topo, times, prepared)

    def _salt(self, i: int):
        return self.salts[i] if self.salts is not None else batch_salt(self.salt, i)

    def _submit_a(self, i: int) -> Future:
        """Stage A of batch ``i`` into its pool (threads or processes)."""
        if self.processes:
            try:
                fa = self._procs.submit(self.batches[i], self._salt(i))
            except BrokenProcessPool as e:
                raise _died(i, e) from None
            while self._stage_a_futures and self._stage_a_futures[0].done():
                self._stage_a_futures.popleft()
            self._stage_a_futures.append(fa)
            return fa
        return self._pool_a.submit(self._stage_a, i)

    def _submit(self):
        if self._submitted >= len(self.batches):
            return
        i = self._submitted
        self._submitted += 1
        self._pending.append(self._pool_b.submit(self._stage_b, i, self._submit_a(i)))

    def _start_pools(self) -> None:
        if self._own_procs and self._procs is None:
            self._procs = StageAProcesses(self.sampler, self.loader, self.workers,
                                          self.labels, self.prepare)
        elif not self.processes and self._pool_a is None:
            self._pool_a = ThreadPoolExecutor(self.workers,
                                              thread_name_prefix="moagcn-prefetch-load")

    def request(self) -> None:
        """Without look-ahead (``depth=0``): start stage A of the next batch now (it is started
        when the batch is asked for otherwise), so that several prefetchers' stage A run at
        once before their trainers take the batches. Otherwise (and when the next batch is
        already started, or there is none) nothing."""
        if not (self.lockstep and not self._closed and not self._pending
                and self._submitted < len(self.batches)):
            return
        self._start_pools()
        i = self._submitted
        self._submitted += 1
        self._pending.append((i, self._submit_a(i)))

    def _next(self) -> LoadedBatch:
        if self.lockstep:
            self.request()
            if not self._pending:
                raise StopIteration
            i, fa = self._pending.popleft()
            return self._stage_b(i, fa)              # stage B in the caller: no overlap
        if self.enabled:
            if self._pool_b is None:
                self._start_pools()
                self._pool_b = ThreadPoolExecutor(1, thread_name_prefix="moagcn-prefetch-transfer")
                for _ in range(self.depth):
                    self._submit()
            if not self._pending:
                raise StopIteration
            fb = self._pending.popleft()
            self._submit()                                # keep i + 1 .. i + depth in flight
            return fb.result()
        i = self._submitted
        if i >= len(self.batches):
            raise StopIteration
        self._submitted += 1
        return self._stage_b(i, self._stage_a(i))

    def __iter__(self) -> Iterator[LoadedBatch]:
        if self._started:
            raise UserError("a Prefetcher runs once; make a new one for each epoch")
        self._started = True
        return self._run()

    def _run(self):
        t_start = time.perf_counter()
        try:
            while not self._closed:
                t0 = time.perf_counter()
                try:
                    lb = self._next()
                except StopIteration:
                    return
                t1 = time.perf_counter()
                self.stats.wait += t1 - t0
                for k, v in lb.times.items():
                    self.stats.busy[k] += v
                self.stats.iterations += 1
                yield lb
                self.stats.train += time.perf_counter() - t1
        finally:
            self.stats.wall = time.perf_counter() - t_start
            self.close()

    def close(self, wait: bool = True) -> None:
        """Cancel queued work and join the stage threads (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for f in (*self._pending, *self._stage_a_futures):
            (f[1] if isinstance(f, tuple) else f).cancel()
        self._pending.clear()
        self._stage_a_futures.clear()
        # A first: its running task finishes, queued ones are cancelled, so every stage-B task
        # waiting on one returns; then B.
        for pool in (self._pool_a, self._pool_b):
            if pool is not None:
                pool.shutdown(wait=wait, cancel_futures=True)
        if self._own_procs and self._procs is not None:
            self._procs.close()

    def __enter__(self) -> "Prefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close(wait=False)      # the pools' idle threads exit once they are unreferenced
        except Exception:   # interpreter shutdown
            pass
