"""The fine-grain pipeline executed in training (MixGCN Sec. 3.2.2, Prop. 3.5).

``moagcn train --parallelism mop --pipeline off|natural|rcm [--stages S]`` trains with
:class:`PipelinedMoP`: the nodes (in id order, or reverse Cuthill-McKee order with ``rcm``) are
cut into ``s`` batches (``s`` a multiple of the ``m`` workers, so that dense worker ``j`` owns
``s / m`` whole batches). Every layer runs batch by batch:

- the **sparse unit** (the ``m`` sparse devices, each on its feature columns) aggregates batch
  ``k`` as soon as the dense outputs of the previous layer's batches ``0 .. dep[k]`` exist
  (``dep[k]``: the last batch holding a neighbour of a node of batch ``k``);
- the **dense unit** (the batch's owning dense worker) updates batch ``k`` as soon as its
  aggregation is done.

The two units run in two threads that hand batches over as soon as they exist; their host
computations take turns (a lock), so that a dense task's measured time is its own and not the
simulation of a device competing for the same cores and the interpreter. Each task's cost is
taken from the run itself: a sparse batch costs its devices' cycles at their clock (the slowest
device's, as they work side by side), a dense batch its measured update time (the least over
the run's steps). The timeline (:func:`schedule`) places every task at the earliest moment its
unit is free and its inputs exist; with ``off`` every task waits for the one before it (no
overlap), on the same costs, so ``pipeline_speedup = makespan(off) / makespan`` compares the
schedules of one run.

The backward pass is pipelined the same way, in reverse (:meth:`PipelinedMoP._backward`, run by
autograd through :class:`_PipelineBoundary`): the dense unit back-propagates each batch through
its update as soon as the gradient of its pre-activation is complete, and the sparse unit
computes each batch's rows of the transposed aggregation as soon as the gradients of every
batch that read them exist. Its timeline is scheduled from its own measured costs.

All three modes compute the same batches (``off`` runs them one after another), so ``off`` and
``natural`` give bit-identical losses and gradients (``rcm`` relabels the nodes, which changes
the order of the sums).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.ops import contiguous_ranges
from moagcn.host.mixgcn.mop import MoPRuntime
from moagcn.host.mixgcn.pipeline import batch_dependencies, prop35_holds, stages_prop35
from moagcn.host.nn.autograd import AggregationOp, aggregate_backward
from moagcn.host.parallel.comm import FLOAT_BYTES

PIPELINES = ("off", "natural", "rcm")


def default_stages(n: int, b: int, m: int, cap: int = 64) -> int:
    """Prop. 3.5's ``ceil(2n / (n - b))`` (``cap`` when the bandwidth leaves no such ``s``),
    at least ``2 m``, rounded up to a multiple of ``m`` and at most ``cap``."""
    s = stages_prop35(n, b) if b < n else cap
    s = max(s, 2 * m)
    s = m * math.ceil(s / m)
    return min(s, m * max(1, cap // m))


def schedule(sparse, dense, owner, deps_ready, overlap: bool = True):
    """Start and end of every task: ``sparse[t]``, ``dense[t]`` durations of task ``t``
    (in order), ``owner[t]`` the dense worker of its batch, ``deps_ready(t, dense_end)`` the
    time its sparse part may start given the dense ends so far. Returns ``(sparse_start,
    sparse_end, dense_start, dense_end)`` lists."""
    n = len(sparse)
    ss, se, ds, de = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    sparse_free, dense_free, last = 0.0, {}, 0.0
    for t in range(n):
        start = max(sparse_free, deps_ready(t, de))
        if not overlap:
            start = max(start, last)
        ss[t], se[t] = start, start + sparse[t]
        sparse_free = se[t]
        d0 = max(dense_free.get(owner[t], 0.0), se[t])
        ds[t], de[t] = d0, d0 + dense[t]
        dense_free[owner[t]] = de[t]
        last = de[t]
    return ss, se, ds, de


class _TaskDevice:
    """One task's view of a sparse device: the cycles of its products are logged under
    ``(phase, layer, batch, device)``."""

    def __init__(self, device, log: dict, phase: str, layer: int, k: int, i: int):
        self._device, self._log, self._key = device, log, (phase, layer, k, i)

    def __getattr__(self, name):
        return getattr(self._device, name)

    def sspmm(self, csr, H, M=None):
        c0 = self._device.counters.cycles_total
        out = self._device.sspmm(csr, H, M)
        self._log[self._key] = self._log.get(self._key, 0) \
            + self._device.counters.cycles_total - c0
        return out


class _Aborted(Exception):
    """A task of the other unit failed (its error is re-raised instead)."""


class _Mailbox:
    """The blocks that pass between the pipeline's tasks, keyed ``(kind, layer, batch, src,
    dst)`` with ``src`` / ``dst`` worker ids: handed over in this process (an event per
    block), or, between the ranks of a torch.distributed run, as the communicator's tagged
    messages (:meth:`~moagcn.host.parallel.comm.Communicator.post`, sent without blocking;
    :meth:`~moagcn.host.parallel.comm.Communicator.fetch` when needed). Kinds: ``Z`` an
    aggregation block (device -> dense worker), ``P`` a pre-activation column slice (dense
    worker -> device), ``dZ`` / ``dP`` their gradients, ``fd`` / ``dd`` / ``sd`` tokens that a
    forward task / backward dense task / backward sparse task is done (``--pipeline off``).
    Bytes between different workers are counted on the communicator."""

    KINDS = ("Z", "P", "dZ", "dP", "fd", "dd", "sd")

    def __init__(self, comm, layers: int, stages: int):
        self.comm, self.local = comm, set(comm.local)
        self.layers, self.stages = layers, stages
        self._store: dict = {}
        self._events: dict = {}
        self._lock = threading.Lock()
        self._sends: list = []
        self.failed = False

    def _event(self, key) -> threading.Event:
        with self._lock:
            ev = self._events.get(key)
            if ev is None:
                ev = self._events[key] = threading.Event()
                if self.failed:
                    ev.set()
            return ev

    def _tag(self, kind: str, layer: int, k: int) -> int:
        return (self.KINDS.index(kind) * (self.layers + 1) + layer) * self.stages + k

    def post(self, kind, layer, k, src, dst, x, backward=False) -> None:
        if src != dst and kind in ("Z", "P", "dZ", "dP"):
            self.comm._count(FLOAT_BYTES * x.numel(), 0, backward)
        if dst in self.local:
            key = (kind, layer, k, src, dst)
            self._store[key] = x
            self._event(key).set()
            return
        buf = x.detach().to("cpu", torch.float32).contiguous()
        work = self.comm.post(buf, dst, self._tag(kind, layer, k))
        self._sends.append((work, buf))

    def take(self, kind, layer, k, src, dst, shape=(1,)) -> torch.Tensor:
        if src in self.local:
            key = (kind, layer, k, src, dst)
            self._event(key).wait()
            if self.failed:
                raise _Aborted
            return self._store.pop(key)
        return self.comm.fetch(shape, src, self._tag(kind, layer, k))

    def token(self, kind, layer, k, src, dsts) -> None:
        for d in dsts:
            self.post(kind, layer, k, src, d, torch.zeros(1))

    def flush(self) -> None:
        """Wait for every message sent (their buffers are kept until then)."""
        for work, _ in self._sends:
            work.wait()
        self._sends.clear()

    def abort(self) -> None:
        with self._lock:
            self.failed = True
            events = list(self._events.values())
        for ev in events:
            ev.set()


def _run_units(units) -> None:
    """Run the pipeline's unit functions in threads; re-raise the first error."""
    errors: list = []

    def wrap(fn, box):
        def run():
            try:
                fn()
            except _Aborted:
                pass
            except BaseException as exc:        # re-raised below
                errors.append(exc)
                box.abort()
        return run

    # daemon threads: after an error, a unit blocked receiving from another process (which
    # waits for this one) must not keep this process from reporting the error and exiting
    threads = [threading.Thread(target=wrap(fn, box), name=name, daemon=True)
               for name, fn, box in units]
    for t in threads:
        t.start()
    deadline = None
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.1)
        if errors and deadline is None:
            deadline = time.monotonic() + 2.0
        if deadline is not None and time.monotonic() > deadline:
            break
    if errors:
        raise errors[0]


class _PipelineBoundary(torch.autograd.Function):
    """The logits of a pipelined forward pass, tied to the model's parameters: autograd's
    backward through it runs the pipelined backward pass (:meth:`PipelinedMoP._backward`)
    and returns the parameters' gradients."""

    @staticmethod
    def forward(ctx, runtime, record, outputs, *params):
        ctx.runtime, ctx.record = runtime, record     # the forward pass's graphs and blocks
        return tuple(o.clone() for o in outputs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None) + tuple(ctx.runtime._backward(grads, ctx.record))


class PipelinedMoP(MoPRuntime):
    """MoP trained batch by batch with a sparse and a dense unit in two threads, forward and
    backward; in one process (all workers), or one worker per torch.distributed process."""

    def __init__(self, *args, pipeline: str = "natural", stages: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if pipeline not in PIPELINES:
            raise UserError(f"--pipeline {pipeline!r}: choose one of {', '.join(PIPELINES)}")
        n, m = self.n, self.m
        self.pipeline = pipeline
        self.bandwidth = int(self.op.adj.bandwidth())
        s = stages if stages is not None else default_stages(n, self.bandwidth, m)
        if s < m or s % m or s > n:
            raise UserError(f"--stages {s}: use a multiple of --workers {m} between {m} and "
                            f"the {n} nodes")
        self.s = s
        self.batches = contiguous_ranges(n, s)
        self.owner = [k * m // s for k in range(s)]          # dense worker of every batch
        self.dep = batch_dependencies(self.op.adj, s)
        #: the batches each dense worker owns, in order
        self.owned = [[k for k in range(s) if self.owner[k] == j] for j in range(m)]
        starts = np.array([a for a, _ in self.batches])
        col_batch = np.searchsorted(starts, self.op.adj.indices, side="right") - 1
        row_batch = np.searchsorted(starts, self.op.adj.row_ids(), side="right") - 1
        self.block_ops = [self.op.block(np.arange(a, b), np.arange(self.batches[self.dep[k]][1]))
                          for k, (a, b) in enumerate(self.batches)]
        # users[j]: the forward batches whose rows have an entry in batch j's columns, i.e.
        # whose gradients batch j's backward aggregation pulls
        pairs = np.unique(row_batch * s + col_batch)
        users = [[] for _ in range(s)]
        for u, j in zip(pairs // s, pairs % s):
            users[int(j)].append(int(u))
        self.users = users
        self.user_rows = [torch.from_numpy(np.concatenate(
            [np.arange(*self.batches[u]) for u in us] or [np.zeros(0, np.int64)]))
            for us in users]
        #: batch j's backward block: the operator's rows of its users by its own columns,
        #: taken from the transposed operator (what the device multiplies by; the transpose of
        #: the transpose is cached) so that each row keeps the whole-graph product's
        #: accumulation order
        adj_t = self.op.adj.transpose()
        back_t = [adj_t.block(np.arange(*self.batches[j]), rows.numpy())
                  for j, rows in enumerate(self.user_rows)]
        rs, cs = self.op.row_scale, self.op.col_scale
        self.back_ops = [AggregationOp(a.transpose(), None if rs is None else rs[rows.numpy()],
                                       None if cs is None else cs[slice(*self.batches[j])],
                                       self.op.kind)
                         for j, (a, rows) in enumerate(zip(back_t, self.user_rows))]
        self._cycles: dict = {}
        #: held by either unit while it computes: the units' waits and hand-offs overlap, their
        #: host computations do not, so a dense task's measured time is its own (a simulated
        #: device's time is its cycles, whatever the host took to simulate them)
        self._compute = threading.Lock()
        #: the least measured time of every dense task over the training steps so far, by
        #: (phase, layer, batch)
        self._dense_best: dict = {}
        # between processes the blocks travel as the communicator's tagged messages
        # (Communicator.post / fetch), prepared here, where every process passes
        self.comm.open_p2p()

    def _rows(self, k: int) -> int:
        return self.batches[k][1] - self.batches[k][0]

    @contextlib.contextmanager
    def _dense_task(self, store: dict, key):
        """Time a dense task (holding the compute lock; CUDA synchronised) into
        ``store[key]``."""
        with self._compute:
            t0 = time.perf_counter()
            yield
            if self.dense.type == "cuda":
                torch.cuda.synchronize(self.dense)
            store[key] = time.perf_counter() - t0

    def _record_dense(self, phase: str, times: dict) -> None:
        for (layer, k), t in times.items():
            key = (phase, layer, k)
            self._dense_best[key] = min(t, self._dense_best.get(key, t))

    def _width(self, layer: int, i: int) -> int:
        a, b = self.feat_ranges[layer][i]
        return b - a

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        if inputs is not None:
            raise UserError("--pipeline does not take label propagation inputs")
        model, m, L = self.model, self.m, self.model.n_layers
        s, batches, owner = self.s, self.batches, self.owner
        self._cycles.clear()
        dense_s = {}
        box = _Mailbox(self.comm, L, s)
        X_cols = dict(self.X_cols)
        X_rows = dict(self.X_rows) if model.uses_self else {}
        grad = torch.is_grad_enabled()       # grad mode is per thread: carry it over
        serial = self.pipeline == "off"      # every task after the one before, as run
        devices = sorted(self.moa.sparse)    # this process's sparse devices
        mine = sorted(k for j in self.local for k in self.owned[j])
        tape = {} if grad else None
        P_in = {}                            # (layer, batch, device): a received column slice
        masks = {}

        def sparse_unit():
            torch.set_grad_enabled(grad)
            for layer in range(L):
                fr = self.feat_ranges[layer]
                with self._compute:
                    mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
                masks[layer] = mask
                for k, (a, b) in enumerate(batches):
                    upto = batches[self.dep[k]][1]
                    for i in devices:
                        if serial and (layer or k):     # the task before this one is done
                            pl, pk = (layer, k - 1) if k else (layer - 1, s - 1)
                            box.take("fd", pl, pk, owner[pk], i)
                        if layer:            # the previous layer's rows this batch reads
                            for j in range(self.dep[k] + 1):
                                if (layer - 1, j, i) not in P_in:
                                    P_in[(layer - 1, j, i)] = box.take(
                                        "P", layer - 1, j, owner[j], i,
                                        (self._rows(j), self._width(layer, i)))
                        dev = _TaskDevice(self.moa.sparse[i], self._cycles, "forward",
                                          layer, k, i)
                        with self._compute:
                            if layer == 0:
                                H = X_cols[i][:upto]
                            else:            # detached: the backward pass is run by hand
                                H = torch.cat([P_in[(layer - 1, j, i)]
                                               for j in range(self.dep[k] + 1)])[:upto]
                            out_mask = None if mask is None else mask[a:b, slice(*fr[i])]
                            in_mask = None if mask is None else mask[:upto, slice(*fr[i])]
                            Z = self._aggregate(self.block_ops[k], H, i, out_mask, out_scale,
                                                layer, in_mask=in_mask, device=dev)
                        box.post("Z", layer, k, i, owner[k], Z)
                if layer:     # slices no batch read (a batch nobody depends on): take them too
                    for i in devices:
                        for j in range(s):
                            if (layer - 1, j, i) not in P_in:
                                P_in[(layer - 1, j, i)] = box.take(
                                    "P", layer - 1, j, owner[j], i,
                                    (self._rows(j), self._width(layer, i)))

        def dense_unit():
            torch.set_grad_enabled(grad)
            for layer in range(L):
                for k in mine:
                    a, b = batches[k]
                    j = owner[k]
                    Z = [box.take("Z", layer, k, i, j, (b - a, self._width(layer, i)))
                         for i in range(m)]
                    with self._dense_task(dense_s, (layer, k)):
                        Zk = torch.cat([z.to(self.dense) for z in Z], dim=1)
                        if grad and layer:       # the gradient the sparse backward pulls
                            Zk.requires_grad_()
                        hs = ps = None
                        if model.uses_self:
                            lo = self.node_ranges[j][0]
                            if layer == 0:
                                hs = X_rows[j][a - lo:b - lo]
                            else:
                                ps = tape_P[(layer - 1, k)]
                                if grad:
                                    ps = ps.detach().requires_grad_()
                                hs = torch.relu(ps)
                        Pk = model.update(layer, Zk, hs)
                    if grad:
                        tape[(layer, k)] = (Zk, ps, Pk)
                    tape_P[(layer, k)] = Pk = Pk.detach()
                    if count_ops:
                        self.dense_macs[j] += model.update_macs(layer, b - a, layer > 0)
                    if layer < L - 1:
                        fr2 = self.feat_ranges[layer + 1]
                        for i in range(m):
                            box.post("P", layer, k, j, i, Pk[:, slice(*fr2[i])].cpu())
                    if serial and (layer, k) != (L - 1, s - 1):
                        box.token("fd", layer, k, j, range(m))

        tape_P = {}                          # this process's dense outputs, by (layer, batch)
        _run_units([("moagcn-sparse-unit", sparse_unit, box),
                    ("moagcn-dense-unit", dense_unit, box)])
        box.flush()
        if grad:
            self._record_dense("forward", dense_s)
        keys = sorted(self.local)
        outs = [torch.cat([tape_P[(L - 1, k)] for k in self.owned[j]]) for j in keys]
        if not grad:
            return dict(zip(keys, outs))
        params = [p for p in model.parameters() if p.requires_grad]
        record = {"tape": tape, "P_in": P_in, "masks": masks, "out_scale": out_scale,
                  "keys": keys, "params": params}
        return dict(zip(keys, _PipelineBoundary.apply(self, record, outs, *params)))

    def _backward(self, grads, rec: dict) -> list:
        """The backward pass, pipelined as the forward one, in reverse: the dense unit
        back-propagates batch ``k`` of layer ``l`` through its update (the gradient of its
        aggregation output, and of the weights, accumulated batch by batch) as soon as the
        gradient of its pre-activation is complete; the sparse unit computes batch ``j``'s
        share of the transposed aggregation -- the gradient of the previous layer's
        pre-activation on batch ``j``'s rows, pulled from the gradients of every batch that
        read them (``users[j]``) -- as soon as those exist. ``rec`` is what the forward pass
        kept (its per-batch graphs, received blocks and masks). Returns the gradients of
        ``rec["params"]``."""
        tape, P_in, masks, out_scale = rec["tape"], rec["P_in"], rec["masks"], rec["out_scale"]
        m, L, s, owner = self.m, self.model.n_layers, self.s, self.owner
        params = rec["params"]
        serial = self.pipeline == "off"
        box = _Mailbox(self.comm, L, s)
        devices = sorted(self.moa.sparse)
        mine = sorted(k for j in self.local for k in self.owned[j])
        g_out = {}
        for j, g in zip(rec["keys"], grads):          # each worker's logits: its batches
            row = 0
            for k in self.owned[j]:
                g_out[k] = g[row:row + self._rows(k)]
                row += self._rows(k)
        pgrad = [None] * len(params)
        g_self: dict = {}
        dense_s: dict = {}

        def dense_unit():
            for l in reversed(range(L)):
                for k in reversed(mine):
                    j = owner[k]
                    if serial and l < L - 1 and k == self.owned[j][-1]:
                        for i in range(m):       # the layer above's sparse tasks are done
                            box.take("sd", l + 1, 0, i, j)
                    if l == L - 1:
                        g = g_out[k]
                    else:                        # every device's columns of this gradient
                        g = torch.cat([box.take("dP", l + 1, k, i, j,
                                                (self._rows(k), self._width(l + 1, i)))
                                       .to(self.dense) for i in range(m)], dim=1)
                    if (l, k) in g_self:
                        g = g + g_self.pop((l, k))
                    Zk, ps, Pk = tape.pop((l, k))
                    inputs = ([Zk] if l else []) + ([ps] if ps is not None else [])
                    with self._dense_task(dense_s, (l, k)):
                        out = torch.autograd.grad(Pk, inputs + params, g, allow_unused=True)
                        for idx, pg in enumerate(out[len(inputs):]):
                            if pg is not None:
                                pgrad[idx] = pg if pgrad[idx] is None else pgrad[idx] + pg
                    if ps is not None:
                        g_self[(l - 1, k)] = out[len(inputs) - 1]
                    if l:
                        fr = self.feat_ranges[l]
                        for i in range(m):
                            box.post("dZ", l, k, j, i, out[0][:, slice(*fr[i])].cpu(),
                                     backward=True)
                    if serial and l and k == self.owned[j][0]:
                        box.token("dd", l, k, j, range(m))    # this worker's last of the layer

        def sparse_unit():
            gZ = {}
            for l in reversed(range(1, L)):
                fr = self.feat_ranges[l]
                args = self._aggregation_args(masks[l], masks[l], out_scale, l)
                for j in reversed(range(s)):
                    a, b = batches[j]
                    rows = self.user_rows[j]
                    for i in devices:
                        if serial and j == s - 1:    # every dense task of the layer is done
                            for o in range(m):
                                box.take("dd", l, self.owned[o][0], o, i)
                        cols = slice(*fr[i])
                        w = fr[i][1] - fr[i][0]
                        for u in self.users[j]:
                            if (u, i) not in gZ:
                                gZ[(u, i)] = box.take("dZ", l, u, owner[u], i,
                                                      (self._rows(u), w))
                        t0 = time.perf_counter()
                        if not self.users[j] or w == 0:    # nothing reads these rows
                            dP = torch.zeros((b - a, w))
                        else:
                            dev = _TaskDevice(self.moa.sparse[i], self._cycles, "backward",
                                              l, j, i)
                            with self._compute:
                                G = torch.cat([gZ[(u, i)] for u in self.users[j]])
                                mask = args["mask"]
                                mask = None if mask is None else mask[rows][:, cols]
                                in_mask = args["in_mask"]
                                in_mask = None if in_mask is None else in_mask[a:b, cols]
                                dP = aggregate_backward(self.back_ops[j], dev, G,
                                                        P_in[(l - 1, j, i)], mask,
                                                        args["out_scale"], args["relu_input"],
                                                        in_mask, args["in_scale"])
                        if self.timer is not None:
                            self.timer.add("aggregate", time.perf_counter() - t0)
                        box.post("dP", l, j, i, owner[j], dP, backward=True)
                        if serial and j == 0:
                            box.token("sd", l, 0, i, range(m))
                for i in devices:    # gradients no batch pulled (rows nobody reads)
                    for u in range(s):
                        if (u, i) not in gZ:
                            box.take("dZ", l, u, owner[u], i, (self._rows(u), self._width(l, i)))
                gZ.clear()

        batches = self.batches
        _run_units([("moagcn-sparse-unit-bwd", sparse_unit, box),
                    ("moagcn-dense-unit-bwd", dense_unit, box)])
        box.flush()
        self._record_dense("backward", dense_s)
        return pgrad

    # -- the timeline of the run --------------------------------------------------------------

    def timeline(self) -> dict:
        """The forward and backward schedules of the last training step, from its costs: the
        devices' cycles of that step and the dense tasks' least measured times over the run
        (in a distributed run every process's costs are gathered: call it on every rank)."""
        L, s = self.model.n_layers, self.s
        clocks = {i: d.clock_mhz for i, d in self.moa.sparse.items()}
        # a dense task's cost: the least of its measured times over the run's training steps
        # (the same work every step; the host's interruptions and the thread pools competing
        # for its cores only ever add time), as timeit takes the best of its repeats
        best = self._dense_best
        local = ({(ph, l, k, i): c / (clocks[i] * 1e6) for (ph, l, k, i), c in
                  self._cycles.items() if clocks[i]},
                 {key[1:]: t for key, t in best.items() if key[0] == "forward"},
                 {key[1:]: t for key, t in best.items() if key[0] == "backward"},
                 all(clocks.values()))
        sparse_s, fwd_s, bwd_s, timed = {}, {}, {}, True
        for a, b, c, t in self.comm.gather(local):
            sparse_s.update(a)
            fwd_s.update(b)
            bwd_s.update(c)
            timed = timed and t
        if not timed:
            raise UserError("--pipeline timelines need accelerator devices (--device model or "
                            "rtl): the CPU device has no cycle count")
        # the m devices aggregate their columns side by side: a batch takes the slowest's time
        # (each device's cycles at its own clock)
        f_sparse = [max(sparse_s.get(("forward", l, k, i), 0.0) for i in range(self.m))
                    for l in range(L) for k in range(s)]
        f_dense = [fwd_s.get((l, k), 0.0) for l in range(L) for k in range(s)]
        owner = [self.owner[k] for _ in range(L) for k in range(s)]

        def fwd_ready(t, de):
            layer, k = divmod(t, s)
            return de[(layer - 1) * s + self.dep[k]] if layer else 0.0

        runs = {}
        for mode, overlap in (("pipelined", True), ("off", False)):
            ss, se, ds, de = schedule(f_sparse, f_dense, owner, fwd_ready, overlap)
            runs[mode] = (ss, se, ds, de)
        span = max(runs["pipelined"][3])
        off_span = max(runs["off"][3])
        mode = "off" if self.pipeline == "off" else "pipelined"
        ss, se, ds, de = runs[mode]
        makespan = max(de)
        busy_sparse = sum(f_sparse)
        busy_dense = [sum(d for d, o in zip(f_dense, owner) if o == j) for j in range(self.m)]
        busiest = max(busy_dense)
        bottleneck = "sparse" if busy_sparse >= busiest else "dense"
        busy = max(busy_sparse, busiest)
        # the sparse unit's waits between its first and last batch (dependency stalls)
        stall = sum(max(0.0, b - a) for a, b in zip(se[:-1], ss[1:]))
        # backward, in reverse (see _backward): the measured update back-propagations and the
        # recorded transposed products of every batch
        b_dense = {(l, k): bwd_s.get((l, k), 0.0) for l in range(L) for k in range(s)}
        b_sparse = {(l, j): max(sparse_s.get(("backward", l, j, i), 0.0) for i in range(self.m))
                    for l in range(1, L) for j in range(s)}
        back = {mode: self._backward_schedule(b_dense, b_sparse, overlap)
                for mode, overlap in (("pipelined", True), ("off", False))}
        b_span = back["off" if self.pipeline == "off" else "pipelined"]
        b_busy_sparse = sum(b_sparse.values())
        b_busy_dense = [sum(t for (l, k), t in b_dense.items() if self.owner[k] == j)
                        for j in range(self.m)]
        b_busy = max([b_busy_sparse] + b_busy_dense)
        device_busy = {ph: [sum(t for (p, _, _, i), t in sparse_s.items() if p == ph and i == d)
                            for d in range(self.m)] for ph in ("forward", "backward")}
        return {"stages": s, "bandwidth": self.bandwidth, "nodes": self.n,
                "prop35_stages": stages_prop35(self.n, self.bandwidth)
                if self.bandwidth < self.n else None,
                "prop35_holds": prop35_holds(self.n, self.bandwidth, s)
                if self.bandwidth < self.n else False,
                "pipeline": self.pipeline, "makespan_s": makespan,
                "pipelined_makespan_s": span, "off_makespan_s": off_span,
                "pipeline_speedup": off_span / span if span else 1.0,
                "sparse_busy_s": busy_sparse, "dense_busy_s": busy_dense,
                "sparse_idle_s": makespan - busy_sparse,
                # each sparse device on its own (the unit's batch takes the slowest's time)
                "device_busy_s": device_busy["forward"],
                "device_idle_s": [makespan - b for b in device_busy["forward"]],
                "backward_device_busy_s": device_busy["backward"],
                "dense_idle_s": [makespan - b for b in busy_dense],
                "sparse_stall_s": stall, "bottleneck": bottleneck,
                "idle_fraction": 1.0 - busy / makespan if makespan else 0.0,
                "backward_makespan_s": b_span,
                "backward_pipelined_makespan_s": back["pipelined"],
                "backward_off_makespan_s": back["off"],
                "backward_sparse_busy_s": b_busy_sparse, "backward_dense_busy_s": b_busy_dense,
                "backward_idle_fraction": 1.0 - b_busy / b_span if b_span else 0.0,
                "step_pipeline_speedup": ((off_span + back["off"]) / (span + back["pipelined"])
                                          if span + back["pipelined"] else 1.0)}

    def _backward_schedule(self, dense: dict, sparse: dict, overlap: bool) -> float:
        """Makespan of the backward pass from its task costs: layer by layer from the last,
        every batch's dense part ``dense[(l, k)]`` (descending ``k``, on its batch's worker;
        it needs the sparse part ``(l + 1, k)``), then the sparse parts ``sparse[(l, j)]``
        (descending ``j``, on the sparse unit; each needs the dense parts of ``users[j]``).
        Without ``overlap`` every task waits for the one before it."""
        L, s = self.model.n_layers, self.s
        end_d, end_s = {}, {}
        dense_free, sparse_free, last = {}, 0.0, 0.0
        for layer in reversed(range(L)):
            for k in reversed(range(s)):
                ready = end_s[(layer + 1, k)] if layer + 1 < L else 0.0
                j = self.owner[k]
                t0 = max(dense_free.get(j, 0.0), ready, 0.0 if overlap else last)
                end_d[(layer, k)] = dense_free[j] = last = t0 + dense[(layer, k)]
            if layer == 0:
                break
            for jb in reversed(range(s)):
                ready = max((end_d[(layer, u)] for u in self.users[jb]), default=0.0)
                t0 = max(sparse_free, ready, 0.0 if overlap else last)
                end_s[(layer, jb)] = sparse_free = last = t0 + sparse[(layer, jb)]
        return max(list(end_d.values()) + list(end_s.values()), default=0.0)
