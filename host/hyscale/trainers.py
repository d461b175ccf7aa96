"""HyScale-GNN's trainers (Sec. IV-A): one trainer per CPU group or accelerator, each running the
forward and backward pass of its share of a mini-batch on its device; the blocks' aggregation
operators; and how a batch is shared among the trainers.

:func:`moagcn.host.hyscale.train.train_hybrid` runs them with synchronous SGD;
:mod:`moagcn.host.hyscale.calibrate` times them for the system model.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.minibatch import batches
from moagcn.host.hyscale.minibatch import LoadedBatch
from moagcn.host.nn.autograd import AggregationOp, PhaseTimer, aggregate, linears_on_device
from moagcn.host.nn.layerwise import AGGREGATION_KIND, local_operator
from moagcn.host.nn.models import GNN


def epoch_batches(train_ids, batch: int, seed: int, epoch: int, trainers: int) -> list:
    """The epoch's shuffled batches (:func:`~moagcn.host.graphs.minibatch.batches`), a last one too
    small to give every trainer a node merged into the one before it."""
    bl = batches(train_ids, batch, seed, epoch)
    if len(bl) > 1 and bl[-1].size < trainers:
        bl[-2:] = [np.concatenate(bl[-2:])]
    return bl


def batch_sizes(n_train: int, batch: int, trainers: int) -> list[tuple[int, int]]:
    """``(count, size)`` of the batches :func:`epoch_batches` makes of ``n_train`` nodes."""
    full, last = divmod(n_train, batch)
    if last and last < trainers and full:
        return ([(full - 1, batch)] if full > 1 else []) + [(1, batch + last)]
    return [(full, batch)] + ([(1, last)] if last else [])


class Trainer:
    """One trainer: a model replica and a sparse device."""

    def __init__(self, index: int, kind: str, model: GNN, choice: AcceleratorChoice,
                 dense: torch.device, fanouts: list, dropout: float, seed: int,
                 degrees: np.ndarray, update_on: str = "device"):
        self.index, self.kind = index, kind
        self.degrees = degrees
        self.model = copy.deepcopy(model).to(dense)
        self.device = choice.make()
        self.dense = dense
        self.fanouts, self.dropout, self.seed = fanouts, dropout, seed
        self.timer = PhaseTimer()
        # dense layers on the accelerator (their time counted as device cycles, not host wall)
        if kind == "accel" and update_on == "device" and getattr(self.device, "has_dense", False):
            linears_on_device(self.model, self.device, self.timer)

    def step(self, lb: LoadedBatch, batch_total: int, iteration: int) -> dict:
        """Forward and backward on this trainer's sub-batch; the gradients of its share of the
        batch's mean loss, and what it cost."""
        model = self.model
        model.train()
        model.zero_grad(set_to_none=True)
        self.timer.reset()
        c0 = self.device.counters.cycles_total
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(int(self.seed) * 1000003 + iteration * 97 + self.index)
        kind = AGGREGATION_KIND[model.kind]
        H = lb.x.to(self.dense)
        H_self = H
        ops = lb.prepared or BlockOperators(model.kind, self.degrees, self.fanouts)(lb.batch)
        for layer, block in enumerate(lb.batch.blocks):
            adj, rs, cs = ops[layer]
            if self.dropout > 0:
                keep = torch.rand(H.shape, generator=gen) >= self.dropout
                H = H * keep.to(H.device) / (1.0 - self.dropout)
            Z = aggregate(AggregationOp(adj, rs, cs, kind), H, self.device, timer=self.timer)
            at = torch.from_numpy(block.dst_pos).to(self.dense)
            P = model.update(layer, Z, H_self[at])
            if layer + 1 < len(lb.batch.blocks):
                H = H_self = torch.relu(P)
        y = lb.y.to(self.dense)
        loss = F.cross_entropy(P, y, reduction="sum") / batch_total
        loss.backward()
        wall = time.perf_counter() - t0
        grads = [p.grad.detach().clone() if p.grad is not None else None
                 for p in model.parameters()]
        agg_wall = self.timer.seconds.get("aggregate", 0.0)
        cycles = self.device.counters.cycles_total - c0
        clock = self.device.clock_mhz
        if self.kind == "accel" and clock:
            seconds = wall - agg_wall + cycles / (clock * 1e6)   # the accelerator's own time
        else:
            seconds = wall
        correct = int((P.argmax(1) == y).sum())
        return {"grads": grads, "loss": float(loss.detach()) * batch_total, "n": int(y.numel()),
                "correct": correct, "seconds": seconds, "wall_s": wall, "cycles": cycles,
                "edges": int(lb.batch.edges)}


class BlockOperators:
    """A mini-batch's aggregation operators, ``(adj, row_scale, col_scale)`` per block (numpy
    only): made in stage A with the sampling, as a sampler makes its blocks."""

    def __init__(self, model_kind: str, degrees: np.ndarray, fanouts: list):
        self.model_kind, self.degrees, self.fanouts = model_kind, degrees, fanouts

    def __call__(self, mb) -> list:
        ops = []
        for layer, block in enumerate(mb.blocks):
            adj, rs, cs = local_operator(AGGREGATION_KIND[self.model_kind], block.graph, block.dst_pos)
            if self.model_kind == "gcn":      # each source's scale from its sampled in-degree
                cs = _gcn_source_scale(self.degrees[block.src], self.fanouts[layer])
            ops.append((adj, rs, cs))
        return ops


def _gcn_source_scale(deg: np.ndarray, k) -> np.ndarray:
    """``1 / sqrt(min(deg, k) + 1)`` of every source: its in-degree in its own sample, taken as
    the fanout cap (a mini-batch does not sample the sources' own rows; stored self loops are
    not told apart)."""
    d = deg if k is None else np.minimum(deg, k)
    return (1.0 / np.sqrt(d.astype(np.float64) + 1.0)).astype(np.float32)
