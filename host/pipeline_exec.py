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

The two units run in two threads, so aggregation of batch ``k + 1`` really overlaps the update
of batch ``k``. Each task's cost is taken from the run itself: a sparse batch costs its devices'
cycles at their clock (the slowest device's, as they work side by side), a dense batch its
measured update time. The timeline (:func:`schedule`) places every task at the earliest moment
its unit is free and its inputs exist; with ``off`` every task waits for the one before it (no
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

import math
import queue
import threading
import time

import numpy as np
import torch

from moagcn.errors import UserError

from .graph import contiguous_ranges
from .autograd import AggregationOp, aggregate_backward
from .mop import LocalComm, MoPRuntime
from .pipeline import batch_dependencies, prop35_holds, stages_prop35

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


class _PipelineBoundary(torch.autograd.Function):
    """The logits of a pipelined forward pass, tied to the model's parameters: autograd's
    backward through it runs the pipelined backward pass (:meth:`PipelinedMoP._backward`)
    and returns the parameters' gradients."""

    @staticmethod
    def forward(ctx, runtime, outputs, *params):
        ctx.runtime = runtime
        ctx.n_params = len(params)
        return tuple(o.clone() for o in outputs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.runtime._backward(grads))


class PipelinedMoP(MoPRuntime):
    """MoP trained batch by batch with the sparse and dense units in two threads, forward and
    backward."""

    def __init__(self, *args, pipeline: str = "natural", stages: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if pipeline not in PIPELINES:
            raise UserError(f"--pipeline {pipeline!r}: choose one of {', '.join(PIPELINES)}")
        if not isinstance(self.comm, LocalComm):
            raise UserError("--pipeline runs the workers in one process (threads); leave out "
                            "--distributed")
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
        starts = np.array([a for a, _ in self.batches])
        col_batch = np.searchsorted(starts, self.op.adj.indices, side="right") - 1
        row_batch = np.searchsorted(starts, self.op.adj.row_ids(), side="right") - 1
        first = np.arange(s)
        np.minimum.at(first, row_batch, col_batch)
        self.first = first
        self.block_ops = [self.op.block(np.arange(a, b), np.arange(self.batches[self.dep[k]][1]))
                          for k, (a, b) in enumerate(self.batches)]
        self._cycles: dict = {}
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
        #: batch j's backward block: the operator's rows of its users by its own columns, and
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
        self._tape = None

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        if inputs is not None:
            raise UserError("--pipeline does not take label propagation inputs")
        model, m, L = self.model, self.m, self.model.n_layers
        s, batches = self.s, self.batches
        self._cycles.clear()
        dense_s = {}
        P = {l: [None] * s for l in range(L)}             # dense outputs, by layer and batch
        done = {l: [threading.Event() for _ in range(s)] for l in range(L)}
        handoff: queue.Queue = queue.Queue()
        errors: list = []
        X_cols = dict(self.X_cols)
        X_rows = dict(self.X_rows) if model.uses_self else {}
        grad = torch.is_grad_enabled()       # grad mode is per thread: carry it over
        serial = self.pipeline == "off"      # every task after the one before, as run
        tape = {} if grad else None
        masks = {}

        def fail(exc):
            errors.append(exc)
            handoff.put(None)
            for layer in range(L):           # nobody may wait for a batch that never comes
                for ev in done[layer]:
                    ev.set()

        def sparse_unit():
            torch.set_grad_enabled(grad)
            try:
                for layer in range(L):
                    fr = self.feat_ranges[layer]
                    mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
                    masks[layer] = mask
                    for k, (a, b) in enumerate(batches):
                        upto = batches[self.dep[k]][1]
                        wait = list(range(self.dep[k] + 1)) if layer else []
                        for j in wait:
                            done[layer - 1][j].wait()
                        if serial and (layer or k):
                            (done[layer][k - 1] if k else done[layer - 1][s - 1]).wait()
                        if errors:
                            return
                        Z = []
                        for i in range(m):
                            dev = _TaskDevice(self.moa.sparse[i], self._cycles, "forward",
                                              layer, k, i)
                            if layer == 0:
                                H = X_cols[i][:upto]
                            else:                # detached: the backward pass is run by hand
                                H = torch.cat([P[layer - 1][j][:, slice(*fr[i])]
                                               for j in range(self.dep[k] + 1)])[:upto]
                            out_mask = None if mask is None else mask[a:b, slice(*fr[i])]
                            in_mask = None if mask is None else mask[:upto, slice(*fr[i])]
                            Z.append(self._aggregate(self.block_ops[k], H, i, out_mask,
                                                     out_scale, layer, in_mask=in_mask,
                                                     device=dev))
                        handoff.put((layer, k, Z))
            except BaseException as exc:            # re-raised by forward()
                fail(exc)

        def dense_unit():
            torch.set_grad_enabled(grad)
            try:
                dense_batches()
            except BaseException as exc:            # re-raised by forward()
                fail(exc)

        def dense_batches():
            for layer in range(L):
                for k, (a, b) in enumerate(batches):
                    item = handoff.get()
                    if item is None:
                        return
                    _, _, Z = item
                    j = self.owner[k]
                    t0 = time.perf_counter()
                    Zk = torch.cat([z.to(self.dense) for z in Z], dim=1)
                    if grad and layer:       # the gradient the sparse backward pulls
                        Zk.requires_grad_()
                    hs = ps = None
                    if model.uses_self:
                        lo = self.node_ranges[j][0]
                        if layer == 0:
                            hs = X_rows[j][a - lo:b - lo]
                        else:
                            ps = P[layer - 1][k]
                            if grad:
                                ps = ps.detach().requires_grad_()
                            hs = torch.relu(ps)
                    Pk = model.update(layer, Zk, hs)
                    if grad:
                        tape[(layer, k)] = (Zk, ps, Pk)
                    P[layer][k] = Pk.detach()
                    dense_s[(layer, k)] = time.perf_counter() - t0
                    if count_ops:
                        self.dense_macs[j] += model.update_macs(layer, b - a, layer > 0)
                    done[layer][k].set()

        threads = [threading.Thread(target=sparse_unit, name="moagcn-sparse-unit"),
                   threading.Thread(target=dense_unit, name="moagcn-dense-unit")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self._dense_forward_s = dense_s
        keys = sorted(self.local)
        outs = [torch.cat([P[L - 1][k] for k in range(s) if self.owner[k] == j]) for j in keys]
        if not grad:
            return dict(zip(keys, outs))
        self._tape = {"tape": tape, "P": P, "masks": masks, "out_scale": out_scale,
                      "keys": keys}
        params = [p for p in model.parameters() if p.requires_grad]
        self._params = params
        return dict(zip(keys, _PipelineBoundary.apply(self, outs, *params)))

    def _backward(self, grads) -> list:
        """The backward pass, pipelined as the forward one, in reverse: the dense unit
        back-propagates batch ``k`` of layer ``l`` through its update (the gradient of its
        aggregation output, and of the weights, accumulated batch by batch) as soon as the
        gradient of its pre-activation is complete; the sparse unit computes batch ``j``'s
        share of the transposed aggregation -- the gradient of the previous layer's
        pre-activation on batch ``j``'s rows, pulled from the gradients of every batch that
        read them (``users[j]``) -- as soon as those exist. Returns the parameters' gradients
        in :attr:`_params` order."""
        if self._tape is None:
            raise RuntimeError("the pipelined backward pass needs a forward pass with grad")
        rec, self._tape = self._tape, None
        tape, P, masks, out_scale = rec["tape"], rec["P"], rec["masks"], rec["out_scale"]
        model, m, L, s, batches = self.model, self.m, self.model.n_layers, self.s, self.batches
        params = self._params
        serial = self.pipeline == "off"
        g_out = {}
        for j, g in zip(rec["keys"], grads):
            row = 0
            for k in range(s):
                if self.owner[k] == j:
                    n_k = batches[k][1] - batches[k][0]
                    g_out[k] = g[row:row + n_k]
                    row += n_k
        pgrad = [None] * len(params)
        gZ, g_sparse, g_self = {}, {}, {}
        dense_done = {(l, k): threading.Event() for l in range(L) for k in range(s)}
        sparse_done = {(l, k): threading.Event() for l in range(1, L) for k in range(s)}
        errors: list = []
        dense_s: dict = {}

        def fail(exc):
            errors.append(exc)
            for ev in list(dense_done.values()) + list(sparse_done.values()):
                ev.set()

        def dense_unit():
            try:
                for l in reversed(range(L)):
                    for k in reversed(range(s)):
                        if l < L - 1:
                            sparse_done[(l + 1, k)].wait()
                            if serial and k == s - 1:
                                sparse_done[(l + 1, 0)].wait()
                            if errors:
                                return
                        g = g_out[k] if l == L - 1 else g_sparse.pop((l + 1, k))
                        if (l, k) in g_self:
                            g = g + g_self.pop((l, k))
                        Zk, ps, Pk = tape.pop((l, k))
                        inputs = ([Zk] if l else []) + ([ps] if ps is not None else [])
                        t0 = time.perf_counter()
                        out = torch.autograd.grad(Pk, inputs + params, g, allow_unused=True)
                        if l:
                            gZ[(l, k)] = out[0]
                        if ps is not None:
                            g_self[(l - 1, k)] = out[len(inputs) - 1]
                        for idx, pg in enumerate(out[len(inputs):]):
                            if pg is not None:
                                pgrad[idx] = pg if pgrad[idx] is None else pgrad[idx] + pg
                        dense_s[(l, k)] = time.perf_counter() - t0
                        dense_done[(l, k)].set()
            except BaseException as exc:            # re-raised by _backward()
                fail(exc)

        def sparse_unit():
            try:
                for l in reversed(range(1, L)):
                    fr = self.feat_ranges[l]
                    args = self._aggregation_args(masks[l], masks[l], out_scale, l)
                    for j in reversed(range(s)):
                        for u in self.users[j]:
                            dense_done[(l, u)].wait()
                        if serial and j == s - 1:
                            dense_done[(l, 0)].wait()
                        if errors:
                            return
                        a, b = batches[j]
                        rows = self.user_rows[j]
                        t0 = time.perf_counter()
                        parts = []
                        for i in range(m):
                            cols = slice(*fr[i])
                            w = fr[i][1] - fr[i][0]
                            if not self.users[j] or w == 0:    # nothing reads these rows
                                parts.append(torch.zeros((b - a, w)))
                                continue
                            G = torch.cat([gZ[(l, u)][:, cols].cpu() for u in self.users[j]])
                            mask = args["mask"]
                            mask = None if mask is None else mask[rows][:, cols]
                            in_mask = args["in_mask"]
                            in_mask = None if in_mask is None else in_mask[a:b, cols]
                            dev = _TaskDevice(self.moa.sparse[i], self._cycles, "backward",
                                              l, j, i)
                            parts.append(aggregate_backward(
                                self.back_ops[j], dev, G, P[l - 1][j][:, cols].cpu(), mask,
                                args["out_scale"], args["relu_input"], in_mask,
                                args["in_scale"]))
                        g_sparse[(l, j)] = torch.cat(parts, dim=1).to(self.dense)
                        if self.timer is not None:
                            self.timer.add("aggregate", time.perf_counter() - t0)
                        sparse_done[(l, j)].set()
                    for k in range(s):              # every user of this layer is read
                        gZ.pop((l, k), None)
            except BaseException as exc:            # re-raised by _backward()
                fail(exc)

        threads = [threading.Thread(target=sparse_unit, name="moagcn-sparse-unit-bwd"),
                   threading.Thread(target=dense_unit, name="moagcn-dense-unit-bwd")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self._dense_backward_s = dense_s
        return pgrad

    # -- the timeline of the run --------------------------------------------------------------

    def timeline(self) -> dict:
        """The forward and backward schedules of the last training step, from its costs."""
        clocks = [d.clock_mhz for d in self.moa.sparse.values()]
        clock = max(clocks) if clocks and max(clocks) else 0.0
        L, s = self.model.n_layers, self.s
        if not clock:
            raise UserError("--pipeline timelines need accelerator devices (--device model or "
                            "rtl): the CPU device has no cycle count")
        hz = clock * 1e6
        # the m devices aggregate their columns side by side: a batch takes the slowest's time
        f_sparse = [max(self._cycles.get(("forward", l, k, i), 0) for i in self.moa.sparse) / hz
                    for l in range(L) for k in range(s)]
        f_dense = [self._dense_forward_s.get((l, k), 0.0) for l in range(L) for k in range(s)]
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
        bwd_s = getattr(self, "_dense_backward_s", {})
        b_dense = {(l, k): bwd_s.get((l, k), 0.0) for l in range(L) for k in range(s)}
        b_sparse = {(l, j): max(self._cycles.get(("backward", l, j, i), 0)
                                for i in self.moa.sparse) / hz
                    for l in range(1, L) for j in range(s)}
        back = {mode: self._backward_schedule(b_dense, b_sparse, overlap)
                for mode, overlap in (("pipelined", True), ("off", False))}
        b_span = back["off" if self.pipeline == "off" else "pipelined"]
        b_busy_sparse = sum(b_sparse.values())
        b_busy_dense = [sum(t for (l, k), t in b_dense.items() if self.owner[k] == j)
                        for j in range(self.m)]
        b_busy = max([b_busy_sparse] + b_busy_dense)
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
