"""Stage A of HyScale-GNN's training input (Sec. III-A): the feature loader, one batch's sampling
and loading (:func:`stage_a`), and the same in forked processes (:class:`StageAProcesses`).

The processes take their tasks themselves from one shared queue (a ``SOCK_SEQPACKET`` socket every
process reads; a record, a protocol-5 pickle plus the memfd of its large buffers, reaches exactly
one process whole: :func:`moagcn.host.parallel.ipc.send_record`), so no thread of the trainer's
process hands out work; a task cancelled before a process takes it is skipped through a shared
byte per task. While the pool lives, its processes are bound to cores of their own and the
trainers' threads to the others (:func:`core_plan`, :func:`bind`).
"""

from __future__ import annotations

import errno
import itertools
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import NeighborSampler, whole_number
from moagcn.host.parallel import ipc


class FeatureLoader:
    """Gathers the rows of ``features`` (N x F) a mini-batch reads into a contiguous float32
    tensor (in pinned host memory with ``pin=True``, for asynchronous copies to a GPU), and the
    labels of its targets."""

    def __init__(self, features, labels=None, pin: bool = False):
        X = features.detach().cpu().numpy() if isinstance(features, torch.Tensor) else features
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[0] < 1 or not np.issubdtype(X.dtype, np.number):
            raise UserError(f"features have shape {X.shape} dtype {X.dtype}; give an N x F "
                            "numeric matrix")
        self.X = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
        self.labels = None
        if labels is not None:
            y = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
            if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer):
                raise UserError(f"labels have shape {y.shape} dtype {y.dtype}; give {X.shape[0]} "
                                "integers (-1 for unlabelled), one per feature row")
            self.labels = torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))
        if pin and not torch.cuda.is_available():
            raise UserError("FeatureLoader(pin=True) needs CUDA (pinned memory is for copies to "
                            "a GPU); use pin=False on a CPU-only machine")
        self.pin = bool(pin)

    @property
    def n_nodes(self) -> int:
        return int(self.X.shape[0])

    def _rows(self, nodes) -> np.ndarray:
        idx = np.asarray(nodes, dtype=np.int64)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.n_nodes):
            raise UserError(f"feature rows {int(idx.min())}..{int(idx.max())} requested from "
                            f"{self.n_nodes} rows; the features must have a row per graph node")
        return idx

    def gather(self, nodes) -> torch.Tensor:
        """``X[nodes]`` as a fresh contiguous float32 tensor."""
        idx = torch.from_numpy(self._rows(nodes))
        out = torch.empty((idx.numel(), self.X.shape[1]), dtype=torch.float32,
                          pin_memory=self.pin)
        return torch.index_select(self.X, 0, idx, out=out)

    def gather_array(self, nodes) -> np.ndarray:
        """``X[nodes]`` as a fresh float32 numpy array, with numpy alone (no torch call: safe in
        a forked stage-A process, where torch's thread pool must not be used)."""
        return self.X.numpy().take(self._rows(nodes), axis=0)

    def label_array(self, targets) -> np.ndarray:
        """The labels of ``targets`` (int64 numpy); every target must be labelled."""
        if self.labels is None:
            raise UserError("FeatureLoader has no labels; pass labels=dataset.labels (or "
                            "labels=False to the Prefetcher for unlabelled batches)")
        t = np.asarray(targets, dtype=np.int64)
        y = self.labels.numpy()[t]
        if y.size and int(y.min()) < 0:
            v = int(t[int(np.argmin(y))])
            raise UserError(f"target node {v} has no label (-1); batch only labelled nodes "
                            "(training_ids(train_mask, labels=...))")
        return y

    def load(self, mb, labels: bool = True, numpy: bool = False):
        """Stage A's load of a sampled batch: ``(X', labels)`` of its input rows and targets
        (labels None without ``labels``); with ``numpy`` as numpy arrays and with numpy alone
        (what a forked stage-A process may call), else as torch tensors."""
        if numpy:
            return (self.gather_array(mb.input_nodes),
                    self.label_array(mb.targets) if labels else None)
        return self.gather(mb.input_nodes), self.labels_of(mb.targets) if labels else None

    def labels_of(self, targets) -> torch.Tensor:
        """The labels of ``targets`` (int64); every target must be labelled."""
        y = torch.from_numpy(self.label_array(targets))
        if self.pin:
            y = y.pin_memory()
        return y


def stage_a(sampler: "NeighborSampler", loader: FeatureLoader, targets, salt,
            labels: bool = True, prepare=None, numpy: bool = False):
    """Stage A's work on one batch, as the prefetcher's threads and processes do it: sample
    ``targets`` with ``salt``, ``prepare`` the mini-batch (optional), gather its features and
    labels (with ``numpy``: numpy alone, as a forked process must), and time the sampling
    (with the preparation) and the load. Returns ``(mb, x, y, times, prepared)``."""
    t0 = time.perf_counter()
    mb = sampler.sample(targets, salt)
    prepared = prepare(mb) if prepare is not None else None
    t1 = time.perf_counter()
    x, y = loader.load(mb, labels, numpy=numpy)
    t2 = time.perf_counter()
    return mb, x, y, {"sample": t1 - t0, "load": t2 - t1}, prepared


def _stage_a_worker(tasks, sock, others, cancelled, sampler, loader, labels: bool,
                    prepare, core: int | None = None) -> None:
    """A forked stage-A process: take the next task from ``tasks`` (the pool's shared queue,
    a ``SOCK_SEQPACKET`` socket every process reads, each task reaching one of them), run
    stage A (numpy only) on it and send back the batch, or the error it raised, on ``sock``;
    until ``None`` or the queue's end. A task cancelled before it is taken (its number in
    ``cancelled``, an int64 array shared with the pool, at the number's slot) is answered as
    skipped, not run. ``others``: sockets of the pool inherited
    by the fork and closed here (so that only their own processes hold them). ``core``: the
    one core this process runs on (None: wherever the scheduler puts it)."""
    import traceback
    for o in others:
        o.close()
    bind(core)
    while True:
        try:
            task = ipc.recv_record(tasks)
        except (EOFError, OSError):
            return
        if task is None:
            return
        seq, targets, salt = task
        if cancelled[seq % cancelled.size] == seq:
            reply = (seq, None, None)
        else:
            try:
                reply = (seq, True, stage_a(sampler, loader, targets, salt, labels, prepare,
                                            numpy=True))
            except BaseException as e:  # noqa: BLE001 (handed to the waiting trainer)
                text = "".join(traceback.format_exception(e))
                try:
                    pickle.loads(pickle.dumps(e))
                except Exception:       # noqa: BLE001 (an error that does not pickle)
                    e = RuntimeError(f"{type(e).__name__}: {e}")
                reply = (seq, False, (e, text))
        try:
            ipc.send(sock, reply)
        except OSError:             # the prefetcher's end is gone
            return


class _RemoteTraceback(Exception):
    def __init__(self, text: str):
        super().__init__(text)

    def __str__(self) -> str:
        return "\n\nin the stage-A process:\n" + self.args[0]


def core_plan(workers: int):
    """Cores for ``workers`` stage-A processes beside the trainers' process: ``(trainer cores,
    [one core per worker])``, the workers on the last of the cores this process may run on,
    the trainers on the rest; None where that would leave the trainers no core, or where the
    platform cannot bind a process to cores."""
    if not (hasattr(os, "sched_getaffinity") and hasattr(os, "sched_setaffinity")):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) <= workers:
        return None
    return cores[:len(cores) - workers], cores[len(cores) - workers:]


def bind(cores, thread: int = 0):
    """Bind the calling thread (or the thread with native id ``thread``) to ``cores`` (an int
    or a collection; None: nothing); returns its cores before, or None where nothing was
    bound (no cores given, or the system refused)."""
    if cores is None:
        return None
    try:
        before = os.sched_getaffinity(thread)
        os.sched_setaffinity(thread, {cores} if isinstance(cores, int) else set(cores))
    except (OSError, AttributeError):
        return None
    return before


def _threads() -> list[int]:
    """Native ids of this process's threads (Linux: ``/proc/self/task``; else the calling
    thread's)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [threading.get_native_id()]


def can_fork() -> bool:
    """Whether stage A can run in forked processes here (the ``fork`` start method: Linux)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _died(i: int, broken: BaseException | None = None) -> RuntimeError:
    why = f" ({broken})" if broken is not None and str(broken) else ""
    return RuntimeError(f"a stage-A process died before batch {i} was sampled{why}; the "
                        "prefetcher stops (see the process's own error above, or the system "
                        "log if it was killed)")


class StageAProcesses:
    """``workers`` forked processes running stage A (sampling, ``prepare``, feature loading)
    for :class:`Prefetcher` s of ``sampler`` and ``loader``: one pool can serve many epochs'
    prefetchers, so that the processes are forked once (a fork copies the page tables of a
    process that holds torch, and the first batches touch copy-on-write pages).

    Tasks (targets and salt) go, in the order submitted, into one queue that every process
    reads (a ``SOCK_SEQPACKET`` socket: each task reaches exactly one process, whole): a
    process that finishes a batch takes the next task itself, so no batch waits behind a
    longer one while another process idles, and none waits for this process to hand it work
    (handing each task out from here, when a process replied, cost up to the interpreter's
    switch interval per batch whenever the trainer held the interpreter lock; docs/hyscale.md
    has the measurement). Each process has one
    Unix socket back to this one: the batch comes back through :mod:`~moagcn.host.parallel.ipc` (its
    arrays in shared memory, mapped here without a copy) and one receiving thread completes
    the task's future. Nothing else runs in the trainer's process (with
    ``ProcessPoolExecutor``'s two threads and its unpickling of whole batches, a process
    delivering batches beside training slowed the trainer's steps by about 45 % on two cores,
    this way by about 30 %). A task cancelled before a process takes it is skipped. A process
    that dies, or whose reply cannot be read, fails every batch in flight and every later
    :meth:`submit` with ``BrokenProcessPool``.

    With ``pin`` (and more cores than workers) every process runs on a core of its own and
    this process (every thread of it: the trainers', torch's, and those started later, the
    prefetchers' stage B) on the other cores until the pool is closed, when each thread gets
    its cores back (one started meanwhile: those of the thread that made the pool)
    (:func:`core_plan`), as
    the paper's threads are bound to cores: left to the scheduler, a process that sleeps
    between batches wakes on whichever core is free, its caches cold, and the trainers' thread
    moves onto its core; on two cores, with small batches, binding shortened the prefetched
    iteration by 12-18 % (docs/hyscale.md). :attr:`cores` holds the plan (None: not bound).

    The processes are forked when the pool is made: make it after everything the stage reads
    (the graph, the features, ``prepare``'s state) is final. Close it (or use it as a context
    manager) to end them."""

    #: seconds :meth:`close` waits for a process to finish its batch before killing it
    CLOSE_TIMEOUT_S = 30.0
    #: cancelled task numbers, one slot per task number modulo this (a slot holds the number
    #: itself, so a task never reads another's cancellation)
    _SLOTS = 1 << 16

    def __init__(self, sampler: "NeighborSampler", loader: FeatureLoader, workers: int = 1,
                 labels: bool = True, prepare=None, pin: bool = False):
        if not can_fork():
            raise UserError("stage-A processes are forked, which this platform cannot; run "
                            "stage A in threads (processes=False)")
        self.workers = whole_number(workers, "workers", "use 1 or more")
        if self.workers < 1:
            raise UserError(f"workers = {self.workers}; use 1 or more stage-A processes")
        self.sampler, self.loader = sampler, loader
        self.labels, self.prepare = bool(labels), prepare
        self._lock = threading.Lock()
        self._futures: dict = {}            # seq -> Future
        self._seq = itertools.count()
        self._broken: str | None = None
        self._closed = False
        self._receiver = None
        self._unbind = None                 # while bound: each thread's cores before
        #: (trainer cores, [core of each process]) while bound, else None
        self.cores = core_plan(self.workers) if pin else None
        #: tasks the processes answered as skipped (cancelled before one took them)
        self.skipped = 0
        ctx = multiprocessing.get_context("fork")
        self._procs, self._socks = [], []
        # shared with the forked processes: the numbers of cancelled tasks (-1: none)
        self._cancelled_map = mmap.mmap(-1, 8 * self._SLOTS)
        self._cancelled = np.frombuffer(self._cancelled_map, dtype=np.int64)
        self._cancelled[:] = -1
        self._tasks, theirs_tasks = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            for w in range(self.workers):
                ours, theirs = socket.socketpair()
                p = ctx.Process(target=_stage_a_worker, name=f"moagcn-stage-a-{w}",
                                args=(theirs_tasks, theirs, [self._tasks, *self._socks, ours],
                                      self._cancelled, sampler, loader, self.labels, prepare,
                                      None if self.cores is None else self.cores[1][w]),
                                daemon=True)
                p.start()
                theirs.close()
                self._procs.append(p)
                self._socks.append(ours)
        except BaseException:
            self._closed = True
            theirs_tasks.close()
            self._end_processes()
            raise
        theirs_tasks.close()       # the processes hold the queue's reading end
        self._receiver = threading.Thread(target=self._receive, daemon=True,
                                          name="moagcn-prefetch-receive")
        self._receiver.start()
        if self.cores is not None:      # this process's threads off the processes' cores
            self._bind_threads()

    def serves(self, sampler, loader, labels, prepare) -> bool:
        return (self.sampler is sampler and self.loader is loader
                and self.labels == bool(labels) and self.prepare is prepare)

    def submit(self, targets, salt) -> Future:
        """Stage A of ``targets`` with ``salt`` in a process: a future of
        ``(mb, x, y, times, prepared)`` (:func:`stage_a` with numpy). The task joins the queue
        the processes take from in order; cancelling the future before a process takes it
        skips it. Blocks only while the queue's socket is full (some hundred kilobytes of
        tasks: their large target arrays travel in shared memory)."""
        with self._lock:
            if self._broken:
                raise BrokenProcessPool(self._broken)
            if self._closed:
                raise RuntimeError("these stage-A processes were closed")
            seq = next(self._seq)
            fut: Future = Future()
            self._futures[seq] = fut

        def skip(f, seq=seq):
            if f.cancelled():
                self._cancelled[seq % self._SLOTS] = seq
        fut.add_done_callback(skip)
        # contiguous: a large target array travels in shared memory, never in the record
        task = (seq, np.ascontiguousarray(targets), salt)
        try:
            ipc.send_record(self._tasks, task)
        except (ValueError, OSError) as e:
            with self._lock:
                self._futures.pop(seq, None)
                if isinstance(e, ValueError) or e.errno == errno.EMSGSIZE:
                    raise UserError(f"a stage-A task could not be queued: {e}") from None
                self._break("the stage-A processes are gone (their task queue closed)")
            raise BrokenProcessPool(self._broken) from None
        return fut

    def _break(self, why: str) -> None:
        """Under the lock: mark the pool broken and fail every batch in flight."""
        if self._broken:
            return
        self._broken = why
        for seq, fut in self._futures.items():
            self._cancelled[seq % self._SLOTS] = seq    # the live processes skip what is queued
            if fut.set_running_or_notify_cancel():
                fut.set_exception(BrokenProcessPool(why))
        self._futures.clear()

    def _receive(self) -> None:
        """The receiving thread: complete each task's future as its batch arrives. A process
        that ends (its socket's end of file, after any replies it sent) breaks the pool
        unless it was closed; the thread ends when every process has."""
        live = {s: w for w, s in enumerate(self._socks)}
        while live:
            for sock in multiprocessing.connection.wait(list(live)):
                w = live[sock]
                try:
                    seq, ok, value = ipc.recv(sock)
                except Exception as e:  # noqa: BLE001 (the end of file, or a broken reply)
                    del live[sock]
                    proc = self._procs[w]
                    if not isinstance(e, EOFError):
                        proc.kill()             # its replies can no longer be read
                    proc.join(1.0)
                    with self._lock:
                        if not self._closed:
                            why = "" if isinstance(e, EOFError) else \
                                f"; its reply could not be read: {type(e).__name__}: {e}"
                            self._break(f"stage-A process {w} ended (exit code "
                                        f"{proc.exitcode}){why}")
                    continue
                with self._lock:
                    fut = self._futures.pop(seq, None)
                    if ok is None:
                        self.skipped += 1
                if ok is None or fut is None or not fut.set_running_or_notify_cancel():
                    continue                            # skipped, cancelled or failed already
                if ok:
                    fut.set_result(value)
                else:
                    err, text = value
                    err.__cause__ = _RemoteTraceback(text)
                    fut.set_exception(err)

    def close(self) -> None:
        """Cancel the batches in flight, end the processes (each finishes the batch it is on,
        or is killed after :attr:`CLOSE_TIMEOUT_S`) and the receiving thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            futures = list(self._futures.values())
        for fut in futures:         # outside the lock: cancelling runs the futures' callbacks
            fut.cancel()
        self._end_processes()

    def _end_processes(self) -> None:
        # the processes skip the cancelled tasks before these; a queue that nobody reads any
        # more (the processes dead: the send fails at once, or stuck) must not hang here
        self._tasks.settimeout(self.CLOSE_TIMEOUT_S)
        for _ in self._procs:
            try:
                ipc.send_record(self._tasks, None)
            except OSError:
                break
        deadline = time.monotonic() + self.CLOSE_TIMEOUT_S
        for p in self._procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        receiver = getattr(self, "_receiver", None)
        if receiver is not None:          # every socket is at its end of file now
            receiver.join()
        for s in (*self._socks, self._tasks):
            s.close()
        if self._unbind is not None:    # every thread of this process: its cores back
            self._unbind_threads()

    def _bind_threads(self) -> None:
        """Bind every thread of this process to the trainers' cores, remembering each one's
        cores before (the calling thread first: where the system refuses, nothing is bound)."""
        me = threading.get_native_id()
        before = bind(self.cores[0], me)
        if before is None:
            self.cores = None
            return
        self._unbind = {"home": before, "threads": {me: before}}
        for tid in _threads():
            if tid != me:
                was = bind(self.cores[0], tid)
                if was is not None:
                    self._unbind["threads"][tid] = was

    def _unbind_threads(self) -> None:
        """Give every thread bound by :meth:`_bind_threads` its cores back, and threads
        started while the pool lived (bound to the trainers' cores by inheritance) those of
        the thread that made the pool."""
        home, threads = self._unbind["home"], self._unbind["threads"]
        self._unbind = None
        trainers = set(self.cores[0]) if self.cores is not None else set()
        for tid in _threads():
            was = threads.get(tid)
            if was is None:
                try:
                    if os.sched_getaffinity(tid) != trainers:
                        continue
                except OSError:
                    continue
                was = home
            bind(was, tid)

    def __enter__(self) -> "StageAProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
