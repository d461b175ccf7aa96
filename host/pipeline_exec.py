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
schedules of one run. The backward pass goes through autograd; its per-batch device cycles are
recorded as well (a batch's transposed aggregation), its dense costs estimated as twice the
forward update's (two products instead of one), and its timeline scheduled in reverse.

All three modes compute the same batches, so ``off`` and ``natural`` give bit-identical losses
(``rcm`` relabels the nodes, which changes the order of the sums).
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
    """One batch's view of a sparse device: its first call is the batch's forward aggregation,
    any later one (autograd's) its backward; the cycles of each are logged under
    ``(phase, layer, batch, device)``."""

    def __init__(self, device, log: dict, layer: int, k: int, i: int):
        self._device, self._log, self._key = device, log, (layer, k, i)
        self._calls = 0

    def __getattr__(self, name):
        return getattr(self._device, name)

    def sspmm(self, csr, H, M=None):
        c0 = self._device.counters.cycles_total
        out = self._device.sspmm(csr, H, M)
        key = ("forward" if self._calls == 0 else "backward",) + self._key
        self._calls += 1
        self._log[key] = self._log.get(key, 0) + self._device.counters.cycles_total - c0
        return out


class PipelinedMoP(MoPRuntime):
    """MoP trained batch by batch with the sparse and dense units in two threads."""

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
        users = [[] for _ in range(s)]           # forward batches whose columns include batch j
        for k in range(s):
            for j in range(int(first[k]), int(self.dep[k]) + 1):
                users[j].append(k)
        self.users = users

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
                    for k, (a, b) in enumerate(batches):
                        upto = batches[self.dep[k]][1]
                        if layer:
                            for j in range(self.dep[k] + 1):
                                done[layer - 1][j].wait()
                                if errors:
                                    return
                        Z = []
                        for i in range(m):
                            dev = _TaskDevice(self.moa.sparse[i], self._cycles, layer, k, i)
                            if layer == 0:
                                H = X_cols[i][:upto]
                            else:
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
            H_self = {}
            for layer in range(L):
                for k, (a, b) in enumerate(batches):
                    item = handoff.get()
                    if item is None:
                        return
                    _, _, Z = item
                    j = self.owner[k]
                    t0 = time.perf_counter()
                    Zk = torch.cat([z.to(self.dense) for z in Z], dim=1)
                    hs = None
                    if model.uses_self:
                        lo = self.node_ranges[j][0]
                        hs = (X_rows[j][a - lo:b - lo] if layer == 0 else H_self[(layer, k)])
                    Pk = model.update(layer, Zk, hs)
                    if model.uses_self:
                        H_self[(layer + 1, k)] = torch.relu(Pk)
                    P[layer][k] = Pk
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
        out = {}
        for j in self.local:
            ks = [k for k in range(s) if self.owner[k] == j]
            out[j] = torch.cat([P[L - 1][k] for k in ks])
        return out

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
        # backward, in reverse: batch k of layer l first back-propagates through its update
        # (dense: estimated as twice the forward update, two products instead of one), then
        # through its aggregation (sparse: the recorded transposed product's cycles); it needs
        # the gradient of its rows from every batch of layer l + 1 that read them
        b_dense = [2.0 * self._dense_forward_s.get((l, k), 0.0) for l in range(L)
                   for k in range(s)]
        b_sparse = [max(self._cycles.get(("backward", l, k, i), 0) for i in self.moa.sparse)
                    / hz for l in range(L) for k in range(s)]
        back = {mode: self._backward_schedule(b_dense, b_sparse, overlap)
                for mode, overlap in (("pipelined", True), ("off", False))}
        b_span = back["off" if self.pipeline == "off" else "pipelined"]
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
                "backward_sparse_s": sum(b_sparse), "backward_dense_s_estimate": sum(b_dense),
                "step_pipeline_speedup": ((off_span + back["off"]) / (span + back["pipelined"])
                                          if span + back["pipelined"] else 1.0)}

    def _backward_schedule(self, dense, sparse, overlap: bool) -> float:
        """Makespan of the backward pass: tasks ``(l, k)`` from the last layer and batch down,
        each a dense part on its batch's worker, then a sparse part on the sparse unit."""
        L, s = self.model.n_layers, self.s
        end = {}
        dense_free, sparse_free, last = {}, 0.0, 0.0
        for layer in reversed(range(L)):
            for k in reversed(range(s)):
                t = layer * s + k
                ready = max((end[(layer + 1, u)] for u in self.users[k]), default=0.0) \
                    if layer + 1 < L else 0.0
                j = self.owner[k]
                d0 = max(dense_free.get(j, 0.0), ready, last if not overlap else 0.0)
                dense_free[j] = d1 = d0 + dense[t]
                s0 = max(sparse_free, d1)
                sparse_free = s1 = s0 + sparse[t]
                end[(layer, k)] = last = s1
        return max(end.values(), default=0.0)
