"""The configuration of a full-graph training run (``moagcn train``): :class:`TrainConfig`, its
checks (each bad field named in one line) and the fleet and accelerators it names.

:func:`moagcn.host.training.fullgraph.train` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moagcn.errors import UserError
from moagcn.host.devices.pair import require_weighted
from moagcn.host.devices.select import (DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR,
                                        AcceleratorChoice)
from moagcn.host.graphs.partition import PARTITION_METHODS
from moagcn.host.nn.models import GNN_NAMES
from moagcn.host.parallel.comm import COMM_BITS
from moagcn.host.parallel.runtime import DROPOUT_PLACES
from moagcn.host.supergcn.partition import AGGREGATIONS
from moagcn.host.training.runtimes import PARALLELISMS
from moagcn.host.vgnn.adjust import DEFAULT_BUDGET, DEFAULT_WARMUP
from moagcn.host.vgnn.fleet import BALANCES, fleet

REORDERS = ("none", "rcm")


@dataclass
class TrainConfig:
    """Hyper-parameters and system choices of one training run (Kipf & Welling defaults)."""

    model: str = "gcn"
    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 200
    seed: int = 0
    #: what aggregates: cpu | model | rtl (``torch`` only in :func:`train_reference`)
    device: str = DEFAULT_DEVICE
    #: the accelerator spec, its preset (None: the design's default) and ``--param`` overrides
    design: str = DEFAULT_DESIGN
    preset: str | None = None
    params: dict = field(default_factory=dict)
    #: what runs the RTL when ``device`` is ``rtl``
    simulator: str = DEFAULT_SIMULATOR
    workers: int = 1
    parallelism: str = "mop"
    partition: str = "contiguous"
    normalize_features: bool = True
    reorder: str = "none"
    #: where dropout acts: ``aggregate`` (the S-SpMM output mask, MixGCN Eq. 4) or ``input``
    #: (each layer's input, as PyG and Kipf & Welling; see docs/pyg.md for the trade-off)
    dropout_at: str = "aggregate"
    #: partition parallelism: ``post`` (halo rows), ``pre`` or ``prepost`` (SuperGCN Sec. 5)
    aggregation: str = "post"
    #: bits per value of every message between workers (32, 16 = bf16, 8, 4, 2; SuperGCN Sec. 6)
    comm_bits: int = 32
    #: masked label propagation: the fraction of training nodes whose labels are input (one-hot
    #: and added to their features) each epoch, re-drawn every epoch; the others give the loss
    label_prop: float = 0.0
    #: LayerNorm of every later layer's input rows before they are aggregated or sent
    #: (partition; the first layer's input features are loaded once, never sent)
    layer_norm: bool = False
    #: a mixed fleet: one device spec per worker (``sspmm:lanes=32,sspmm:lanes=8,cpu``)
    devices: str | None = None
    #: each worker's share of the work: ``uniform``, ``spec`` (peak capability) or ``vgnn``
    balance: str = "uniform"
    #: the fitted performance model of ``--balance vgnn`` (``moagcn perfmodel fit``); with
    #: another balance it only predicts the devices' times for the report
    perf_model: str | None = None
    #: re-partitions from the measured device times after warm-up (``--adjust``;
    #: :mod:`moagcn.host.vgnn.adjust`): None is the balance's default (``vgnn``: 3, the others:
    #: none), 0 a static split
    adjust: int | None = None
    #: epochs trained on a split before its device times are read (``--warmup``)
    warmup: int = DEFAULT_WARMUP
    #: MoP's executed fine-grain pipeline: ``none`` (whole layers), ``off`` (batches, no
    #: overlap), ``natural`` or ``rcm`` (node order); ``stages`` batches (None: Prop. 3.5)
    pipeline: str = "none"
    stages: int | None = None
    #: early stopping (Kipf & Welling's window): stop once an epoch's validation loss exceeds
    #: the mean of the ``early_stop`` epochs before it; 0 trains every epoch
    early_stop: int = 0
    #: ``--model gat`` (PyG's example GAT, :class:`~moagcn.host.nn.gat.GAT`): the hidden
    #: layer's attention heads (``hidden`` units each)
    heads: int = 8

    def _gat_checks(self) -> list:
        """What a GAT trained by the runtimes needs: two layers, whole layers (no fine-grain
        pipeline), no label propagation, layer norm, reordering or quantisation."""
        if self.model != "gat":
            return []
        return [
            (self.pipeline == "none",
             f"--pipeline {self.pipeline} with --model gat: MoP's fine-grain pipeline batches "
             "GCN layers; leave --pipeline out"),
            (self.layers == 2, f"--layers {self.layers} with --model gat: PyG's example GAT "
                               "has 2 layers; leave --layers out"),
            (isinstance(self.heads, int) and not isinstance(self.heads, bool)
             and self.heads >= 1, f"--heads {self.heads}: give a positive number of heads"),
            (self.label_prop == 0 and not self.layer_norm and self.reorder == "none"
             and self.comm_bits == 32,
             "--model gat trains without --label-prop, --layer-norm, --reorder and "
             "--comm-bits; leave them out"),
        ]

    def validate(self) -> "TrainConfig":
        """Raise :class:`UserError` naming the first bad field."""
        checks = [
            (self.model in GNN_NAMES,
             f"--model {self.model!r}: choose one of {', '.join(GNN_NAMES)}"),
            *self._gat_checks(),
            (self.layers >= 1, f"--layers {self.layers}: use at least 1"),
            (self.hidden >= 1, f"--hidden {self.hidden}: use at least 1"),
            (0.0 <= self.dropout < 1.0, f"--dropout {self.dropout}: must be in [0, 1)"),
            (self.lr > 0, f"--lr {self.lr}: must be > 0"),
            (self.weight_decay >= 0, f"weight decay {self.weight_decay}: must be >= 0"),
            (self.epochs >= 1, f"--epochs {self.epochs}: use at least 1"),
            (self.workers >= 1, f"--workers {self.workers}: use at least 1"),
            (self.parallelism in PARALLELISMS,
             f"--parallelism {self.parallelism!r}: choose one of {', '.join(PARALLELISMS)}"),
            (self.partition in PARTITION_METHODS,
             f"--partition {self.partition!r}: choose one of {', '.join(PARTITION_METHODS)}"),
            (self.reorder in REORDERS,
             f"--reorder {self.reorder!r}: choose one of {', '.join(REORDERS)}"),
            (self.aggregation in AGGREGATIONS,
             f"--aggregation {self.aggregation!r}: choose one of {', '.join(AGGREGATIONS)}"),
            (self.aggregation == "post" or self.parallelism == "partition",
             f"--aggregation {self.aggregation} needs --parallelism partition: under "
             f"{self.parallelism} no aggregation crosses a worker boundary"),
            (self.comm_bits in COMM_BITS,
             f"--comm-bits {self.comm_bits}: choose one of {', '.join(map(str, COMM_BITS))}"),
            (self.comm_bits == 32 or self.parallelism == "partition",
             f"--comm-bits {self.comm_bits} needs --parallelism partition (SuperGCN quantises "
             "the halo exchange; MoP's feature-slice all-to-all stays fp32)"),
            (0.0 <= self.label_prop < 1.0,
             f"--label-prop {self.label_prop}: must be in [0, 1) (the fraction of training "
             "labels shown as input; the rest give the loss)"),
            (not self.layer_norm or self.parallelism == "partition",
             "--layer-norm needs --parallelism partition (it normalises whole rows before "
             "they are sent; MoP's devices hold column slices)"),
            (self.dropout_at in DROPOUT_PLACES,
             f"--dropout-at {self.dropout_at!r}: choose one of {', '.join(DROPOUT_PLACES)}"),
            (self.pipeline in ("none", "off", "natural", "rcm"),
             f"--pipeline {self.pipeline!r}: choose one of off, natural, rcm"),
            (self.pipeline == "none" or self.parallelism == "mop",
             f"--pipeline {self.pipeline} needs --parallelism mop"),
            (self.pipeline != "rcm" or self.reorder in ("none", "rcm"),
             "--pipeline rcm reorders the nodes itself"),
            (self.balance in BALANCES,
             f"--balance {self.balance!r}: choose one of {', '.join(BALANCES)}"),
            (self.balance != "vgnn" or self.perf_model is not None,
             "--balance vgnn needs a fitted performance model: run moagcn perfmodel fit "
             "--devices ... --dataset D --out M.json, then pass --perf-model M.json"),
            (self.adjust is None or (isinstance(self.adjust, int) and self.adjust >= 0),
             f"--adjust {self.adjust}: the adjustment budget must be a whole number >= 1 "
             "(re-partitions after warm-up; 0: a static split)"),
            (not self.adjust or self.balance in ("vgnn", "spec"),
             f"--adjust needs --balance vgnn or spec (it corrects their split from the "
             f"measured device times); --balance {self.balance} is fixed"),
            (not self.adjust or self.devices,
             "--adjust needs a mixed fleet (--devices): with one design every worker is "
             "the same device"),
            (isinstance(self.early_stop, int) and self.early_stop >= 0,
             f"--early-stop {self.early_stop}: give the window of epochs whose mean validation "
             "loss an epoch must not exceed, a whole number >= 1 (0: no early stopping)"),
            (isinstance(self.warmup, int) and self.warmup >= 1,
             f"--warmup {self.warmup}: give the epochs trained on a split before its device "
             "times are read, a whole number >= 1"),
        ]
        for ok, msg in checks:
            if not ok:
                raise UserError(msg)
        if self.device != "torch":
            if self.devices:
                specs = self.fleet_specs()
                if len(specs) != self.workers:
                    raise UserError(f"--devices names {len(specs)} devices but --workers is "
                                    f"{self.workers}; give one device per worker")
            else:
                self.accelerators().config()  # a bad design, preset or parameter is named
            if self.model == "gat":
                self._check_gat_devices()
        return self

    def _check_gat_devices(self) -> None:
        """Every accelerator of a GAT run aggregates with attention weights: a binary S-SpMM
        (or another design) is refused naming ``weighted=true``, before any device is built."""
        if self.devices:
            for c in self.accelerators():
                require_weighted(c, f"--devices {c.key}")
        else:
            require_weighted(self.accelerators(), f"--device {self.device}")

    def adjust_budget(self) -> int:
        """Re-partitions after warm-up this run may make (0: a static split)."""
        if self.adjust is not None:
            return int(self.adjust)
        return DEFAULT_BUDGET if self.balance == "vgnn" and self.devices else 0

    def fleet_specs(self):
        """The parsed ``devices`` (one spec per worker; None without a mixed fleet)."""
        if not self.devices:
            return None
        return fleet(self.devices, self.device)[0]

    def accelerators(self):
        """The sparse devices' choice (device, design, configuration, simulator), or one per
        worker for a mixed fleet."""
        if self.devices:
            return fleet(self.devices, self.device)[1]
        return AcceleratorChoice(self.device, self.design, self.preset, dict(self.params),
                                 self.simulator)
