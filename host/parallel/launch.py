"""Parallel runtimes across torch.distributed processes (one worker per process): the
communicator and the process launcher.

:class:`DistComm` implements :class:`~moagcn.host.parallel.comm.Communicator` with ``all_to_all_single``
(blocks of different widths are flattened into one buffer with per-peer split sizes) inside an
autograd function whose backward is the reverse all-to-all; weight gradients are summed with
``all_reduce``. The process group uses NCCL when there is a CUDA GPU for every worker and gloo
otherwise (:func:`process_group_backend`).

:func:`launch` starts local processes with ``torch.multiprocessing.start_processes`` (what
``moagcn train --distributed``, DEAL's inference and HyScale's distributed trainers do), forked
from a fork server that has loaded torch once (``spawn`` where there is no fork server); under
``torchrun`` a process joins the group the environment describes
(:func:`moagcn.host.training.distributed.train_from_env`). Both join the group through
:func:`init_group`, which loads ``torch._dynamo`` first (see there
why a group created before it cannot be torn down cleanly).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import queue as queue_mod
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from moagcn.errors import UserError
from moagcn.host.nn.autograd import PhaseTimer
from moagcn.host.parallel.comm import Communicator, Exchange
from moagcn.host.parallel.quant import dequantize, from_bytes, quantize, to_bytes, wire_bytes


def process_group_backend(world: int = 1) -> str:
    """``nccl`` when NCCL is available and there is a CUDA GPU for each of the ``world`` ranks,
    else ``gloo``. NCCL refuses two ranks of one communicator on the same GPU ("duplicate GPU"),
    so on a machine with fewer GPUs than workers the group uses gloo and the dense work stays on
    the CPU, as on a machine without GPUs."""
    if (torch.cuda.is_available() and dist.is_nccl_available()
            and torch.cuda.device_count() >= world):
        return "nccl"
    return "gloo"


class _AllToAll(torch.autograd.Function):
    """Differentiable variable-size all-to-all of 2-D blocks (one per peer)."""

    @staticmethod
    def forward(ctx, comm, recv_shapes, call, *blocks):
        ctx.comm, ctx.call = comm, call
        ctx.send_shapes = [tuple(b.shape) for b in blocks]
        ctx.send_devices = [b.device for b in blocks]
        ctx.recv_shapes = [tuple(s) for s in recv_shapes]
        return tuple(comm._exchange(list(blocks), ctx.recv_shapes, "forward", call))

    @staticmethod
    def backward(ctx, *grads):
        back = ctx.comm._exchange([g.contiguous() for g in grads], ctx.send_shapes, "backward",
                                  ctx.call)
        return (None, None, None) + tuple(g.to(d) for g, d in zip(back, ctx.send_devices))


class DistComm(Communicator):
    """This process is worker ``dist.get_rank()`` of ``dist.get_world_size()``."""

    def __init__(self, timer: PhaseTimer | None = None):
        if not dist.is_initialized():
            raise UserError("DistComm needs an initialised torch.distributed process group "
                            "(launch with torchrun or moagcn train --distributed)")
        rank, world = dist.get_rank(), dist.get_world_size()
        super().__init__(world, [rank], timer)
        self.rank = rank
        self.backend = dist.get_backend()
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if self.backend == "nccl" else torch.device("cpu"))
        self._round = 0
        self._p2p_group = None

    def _exchange(self, blocks, recv_shapes, direction: str, call: int = 0):
        if self.bits != 32:
            return self._exchange_packed(blocks, recv_shapes, direction, call)
        t0 = time.perf_counter()
        send_sizes = [b.numel() for b in blocks]
        recv_sizes = [int(np.prod(s)) for s in recv_shapes]
        flat = torch.cat([b.reshape(-1).to(self.device, torch.float32) for b in blocks]) \
            if blocks else torch.zeros(0, device=self.device)
        out = torch.empty(sum(recv_sizes), dtype=torch.float32, device=self.device)
        dist.all_to_all_single(out, flat, recv_sizes, send_sizes)
        self._count(4 * (sum(send_sizes) - send_sizes[self.rank]), 0, direction == "backward")
        parts = torch.split(out, recv_sizes)
        self._time(time.perf_counter() - t0)
        return [p.reshape(s) for p, s in zip(parts, recv_shapes)]

    def _exchange_packed(self, blocks, recv_shapes, direction: str, call: int):
        """The all-to-all with quantised messages: every block for another rank is quantised
        here (the draws seeded as :class:`~moagcn.host.parallel.comm.LocalComm`'s, so the run equals the
        in-process one), packed into bytes (payload, then per-row parameters) and sent as one
        uint8 buffer; the receiver unpacks and dequantises. A rank's own block stays here."""
        t0 = time.perf_counter()
        backward = direction == "backward"
        r, bits = self.rank, self.bits
        bufs, data, params = [], 0, 0
        for k, b in enumerate(blocks):
            if k == r:
                bufs.append(torch.zeros(0, dtype=torch.uint8))
                continue
            packet = quantize(b.detach().float().cpu(), bits,
                              self._generator(call, r, k, backward))
            data += packet.data_bytes
            params += packet.param_bytes
            bufs.append(to_bytes(packet))
        send_sizes = [int(x.numel()) for x in bufs]
        recv_sizes = [0 if k == r else sum(wire_bytes(s[0], s[1], bits))
                      for k, s in enumerate(recv_shapes)]
        out = torch.empty(sum(recv_sizes), dtype=torch.uint8, device=self.device)
        dist.all_to_all_single(out, torch.cat(bufs).to(self.device), recv_sizes, send_sizes)
        self._count(data, params, backward)
        result = []
        for k, (part, shape) in enumerate(zip(torch.split(out.cpu(), recv_sizes), recv_shapes)):
            if k == r:
                result.append(blocks[r].detach().float().reshape(shape))
            else:
                result.append(dequantize(from_bytes(part, tuple(shape), bits)))
        self._time(time.perf_counter() - t0)
        return [x.to(self.device) for x in result]

    def all_to_all(self, send, recv_shapes):
        r = self.rank
        out = _AllToAll.apply(self, recv_shapes[r], self._wire_calls, *send[r])
        self.counters.exchanges += 1
        self._wire_calls += 1
        return {r: list(out)}

    def all_reduce_grads(self, params) -> None:
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads]).to(self.device)
        dist.all_reduce(flat)
        for g, part in zip(grads, torch.split(flat, [g.numel() for g in grads])):
            g.copy_(part.reshape(g.shape))

    def sum(self, values):
        t = torch.as_tensor(np.asarray(values, dtype=np.float64), device=self.device)
        dist.all_reduce(t)
        out = t.cpu().numpy()
        return out if np.ndim(values) else float(out)

    def gather(self, obj) -> list:
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def start(self, sends, expect, on_done=None):
        tag = self._round
        self._round += 1
        works, got = [], {}
        me = self.rank
        for (src, dst), x in sends.items():
            if src != dst and x.numel():
                works.append(dist.isend(x.contiguous(), dst, tag=tag))
        for (src, dst), (shape, dtype) in expect.items():
            if dst != me:
                raise RuntimeError(f"exchange: rank {me} cannot receive for worker {dst}")
            if src == dst:
                got[(src, dst)] = sends[(src, dst)]
                continue
            buf = torch.empty(shape, dtype=dtype)
            if buf.numel():
                works.append(dist.irecv(buf, src, tag=tag))
            got[(src, dst)] = buf
        return Exchange(got, works, on_done)

    def open_p2p(self) -> None:
        # tagged messages between threads travel through a gloo group of their own (CPU
        # tensors, safe from two threads), whatever the main backend
        if self._p2p_group is None:
            self._p2p_group = dist.new_group(backend="gloo")

    def post(self, x, dst, tag):
        if self._p2p_group is None:
            raise RuntimeError("DistComm.post before open_p2p()")
        return dist.isend(x, dst, group=self._p2p_group, tag=tag)

    def fetch(self, shape, src, tag):
        if self._p2p_group is None:
            raise RuntimeError("DistComm.fetch before open_p2p()")
        buf = torch.empty(shape, dtype=torch.float32)
        dist.recv(buf, src, group=self._p2p_group, tag=tag)
        return buf


def init_group(backend: str, **kwargs) -> None:
    """``dist.init_process_group(backend, **kwargs)``, with ``torch._dynamo`` loaded first.

    ``torch.optim`` loads ``torch._dynamo`` when the first optimiser is built, and some modules it
    loads keep a reference to the process group that exists at that moment (for one,
    ``torch.distributed.fsdp.ShardedGradScaler`` takes ``dist.group.WORLD`` as a default
    argument). ``destroy_process_group`` then leaves the group and its gloo worker threads
    alive, and a worker thread still releasing the last collective's tensors when the
    interpreter exits cannot take the GIL: the process aborts ("terminate called without an
    active exception", SIGABRT) after a successful run. Loaded before the group exists, those
    modules hold none, and ``destroy_process_group`` joins the worker threads.
    """
    importlib.import_module("torch._dynamo")
    dist.init_process_group(backend, **kwargs)


#: what the fork server loads before it forks the workers: a spawned worker spent seconds
#: importing torch and torch._dynamo (docs/sim.md, "Why these options")
_PRELOAD = ["moagcn.host.parallel.launch", "torch._dynamo"]


def _start_method() -> str:
    """``forkserver`` (workers forked from a server that has loaded :data:`_PRELOAD`, without
    threads or CUDA) where the platform has it, else ``spawn``."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        multiprocessing.set_forkserver_preload(_PRELOAD)  # read when the server first starts
        return "forkserver"
    return "spawn"


def _store_server() -> dist.TCPStore:
    """The rendezvous store of a spawned run, on a port the OS picks, held by this process until
    the workers are done (a free port chosen, closed and bound later by rank 0 can be taken by
    another process in between)."""
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


def dense_for_rank(backend: str, rank: int) -> torch.device:
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _entry(rank: int, world: int, port: int, backend: str, worker, args, events, threads: int,
           timeout_s: float | None):
    """A spawned process: join the group, run ``worker(rank, world, dense, emit, *args)``, and
    report its result (or its error) to the parent."""
    import datetime
    torch.set_num_threads(threads)
    try:
        store = dist.TCPStore("127.0.0.1", port, is_master=False)
        extra = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
        init_group(backend, store=store, rank=rank, world_size=world, **extra)
        dense = dense_for_rank(backend, rank)
        result = worker(rank, world, dense,
                        lambda payload: events.put(("event", pickle.dumps(payload))), *args)
        # by value: torch's queue would pass a tensor's storage as a file descriptor that the
        # parent fetches from this process, which may have exited by then
        events.put(("done", (rank, pickle.dumps(result))))
    except Exception as exc:  # the parent re-raises it with the rank
        events.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}"))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch(worker, world: int, args: tuple, on_event=None, backend: str | None = None,
           what: str = "distributed run", timeout_s: float | None = None) -> list:
    """Run ``worker(rank, world, dense, emit, *args)`` in ``world`` local processes that form
    one torch.distributed group; return the workers' results by rank.

    ``emit(payload)`` in a worker calls ``on_event(payload)`` here. A worker that raises ends
    the run with its message; a worker that dies (killed, out of memory) ends it at once with
    one line naming it, the others stopped rather than left waiting in a collective; with
    ``timeout_s``, a collective or message that waits longer fails (a hung peer).
    """
    backend = backend or process_group_backend(world)
    threads = max(1, (os.cpu_count() or 1) // world)
    method = _start_method()
    events = mp.get_context(method).Queue()
    store = _store_server()
    procs = mp.start_processes(_entry, nprocs=world, join=False, start_method=method,
                               args=(world, store.port, backend, worker, args, events, threads,
                                     timeout_s))
    results, error, stopped = {}, None, set()
    while len(results) < world and error is None:
        try:
            kind, payload = events.get(timeout=1.0)
        except queue_mod.Empty:
            if all(not p.is_alive() for p in procs.processes):
                break
            dead = [(k, p.exitcode) for k, p in enumerate(procs.processes)
                    if not p.is_alive() and p.exitcode != 0]
            if dead:   # the others could wait in a collective until gloo's timeout: stop them
                for p in procs.processes:
                    if p.is_alive():
                        stopped.add(p.pid)
                        p.terminate()
                error = "a worker died"
            continue
        if kind == "event" and on_event is not None:
            on_event(pickle.loads(payload))
        elif kind == "done":
            results[payload[0]] = pickle.loads(payload[1])
        elif kind == "error":
            error = payload
    if error is not None:   # the survivors may wait for the failed one: stop them
        for p in procs.processes:
            if p.is_alive():
                stopped.add(p.pid)
                p.terminate()
    try:
        while not procs.join():
            pass
    except Exception as exc:  # ProcessRaisedException / ProcessExitedException
        error = error or str(exc).strip().splitlines()[-1]
    for p in procs.processes:  # a terminated worker's exception above is expected
        p.join(timeout=10)
    # a worker we stopped ends by SIGTERM; one that was still being reaped when we stopped the
    # others (a peer's error arrived first) ends by its own signal: that one died
    dead = [(k, p.exitcode) for k, p in enumerate(procs.processes)
            if p.exitcode is not None and p.exitcode < 0
            and (p.pid not in stopped or p.exitcode != -15)]
    if dead:   # killed by a signal (out of memory, kill): say so before what the others saw
        # SIGTERM is how torch's join stops the survivors once one has failed: name the first
        # worker that died otherwise
        k, code = sorted(dead, key=lambda d: d[1] == -15)[0]
        error = (f"worker process {k} died (exit code {code}) before the run finished; the "
                 "other workers were stopped")
    del store  # the workers have exited
    if error is None and len(results) < world:
        error = f"no result from rank(s) {sorted(set(range(world)) - set(results))}"
    if error is not None:
        raise UserError(f"{what} failed: {error}")
    return [results[k] for k in range(world)]


def under_torchrun() -> bool:
    """True when the environment describes a torchrun process group."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ
