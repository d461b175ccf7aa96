"""Full-graph training with aggregation on sparse devices, and the plain torch reference.

:func:`train` runs a :class:`~moagcn.host.parallel.runtime.Runtime` (MoP or partition parallelism, ``m``
workers, in this process or, with a ``DistComm``, across torch.distributed processes) for
``epochs`` steps of Adam on the cross-entropy of the training nodes, evaluating the accuracy of
the train/val/test splits after every step (without dropout). :func:`train_reference` trains the
same model (same initial weights, same dropout masks) with plain torch sparse aggregation.

Defaults follow Kipf & Welling for GCN: 2 layers, 16 hidden units, dropout 0.5, Adam with
lr 0.01 and weight decay 5e-4, 200 epochs, row-normalised features.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.devices.select import dense_device
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.partition import imbalance
from moagcn.host.nn.autograd import PhaseTimer
from moagcn.host.nn.gat import GAT
from moagcn.host.nn.models import GNN, DropoutMasks, aggregation_op, reference_forward
from moagcn.host.parallel.comm import Communicator
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.runtimes import make_runtime
from moagcn.host.training.weighted import check_weighted_training
from moagcn.host.vgnn.adjust import EQUAL, WORSE, ShareAdjuster
from moagcn.host.vgnn.fleet import (gat_predicted_times, predicted_times, step_keeps,
                                   work_shares)
from moagcn.host.vgnn.features import ENTRY_OPS
from moagcn.host.vgnn.perfmodel import PerfModel


@dataclass
class EpochRecord:
    """One training step and the evaluation after it."""

    epoch: int
    loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    time_s: float
    eval_time_s: float
    phase_time_s: dict
    comm_bytes: int
    sim_cycles: int
    sim_cycles_max_device: int
    #: of ``comm_bytes``, the quantiser's per-row zero points and scales
    comm_param_bytes: int = 0
    #: a mixed fleet: each device's time in this step (cycles at its clock, or wall time),
    #: the performance model's prediction for the same blocks (None without a model) and the
    #: split the step ran
    device_time_s: list | None = None
    predicted_device_time_s: list | None = None
    shares: list | None = None
    #: mean cross-entropy of the validation nodes in the evaluation after the step
    val_loss: float | None = None


@dataclass
class TrainResult:
    """A finished run: the per-epoch history and the counters of the last training step."""

    config: TrainConfig
    dataset: str
    history: list[EpochRecord] = field(default_factory=list)
    worker_ops: list[dict] = field(default_factory=list)
    feature_bytes: list[int] = field(default_factory=list)
    comm_bytes_analytic: int = 0
    device_counters: list[dict] = field(default_factory=list)
    halo_sizes: list[int] | None = None
    #: partition runs: rows per exchange and the pre/post split of the cut entries
    exchange: dict | None = None
    #: partition runs: method, edge_cut, entries, cut_fraction, part_sizes, balance
    partition: dict | None = None
    processes: int = 1
    dense_device: str = "cpu"
    clock_mhz: float = 200.0
    #: each worker's fraction of the work (None: equal); the last split, and the first
    shares: list | None = None
    initial_shares: list | None = None
    #: the re-partitions from measured device times (:class:`~moagcn.host.vgnn.adjust.Adjustment`)
    adjustments: list = field(default_factory=list)
    #: the executed pipeline's timeline of the last training step (--pipeline)
    pipeline: dict | None = None
    #: ``early_stop`` ended the run before ``epochs`` (its last epoch is the history's)
    stopped_early: bool = False
    #: the trained weights (CPU tensors) and what :func:`moagcn.host.nn.checkpoint.save` needs
    model_state: dict | None = None
    model_meta: dict | None = None

    @property
    def train_loss(self) -> list[float]:
        return [r.loss for r in self.history]

    @property
    def test_acc(self) -> float:
        return self.history[-1].test_acc

    @property
    def val_acc(self) -> float:
        return self.history[-1].val_acc

    def report(self) -> dict:
        """The JSON report (see ``docs/runtime.md`` for every field)."""
        h = self.history
        epochs = len(h)
        phases = {}
        for r in h:
            for k, v in r.phase_time_s.items():
                phases[k] = phases.get(k, 0.0) + v
        ops = {k: [w[k] for w in self.worker_ops]
               for k in ("sparse_adds", "spmm_adds", "dense_macs")}
        total_cycles = sum(r.sim_cycles for r in h)
        return {
            "dataset": self.dataset,
            "model": self.config.model,
            "device": self.config.device,
            "design": self.config.design,
            "parallelism": self.config.parallelism,
            "workers": self.config.workers,
            "processes": self.processes,
            "dense_device": self.dense_device,
            "config": asdict(self.config),
            "test_acc": self.test_acc,
            "val_acc": self.val_acc,
            "train_acc": h[-1].train_acc,
            "train_loss": [r.loss for r in h],
            "val_acc_curve": [r.val_acc for r in h],
            "val_loss_curve": [r.val_loss for r in h],
            "epochs_run": epochs,
            "stopped_early": self.stopped_early,
            "test_acc_curve": [r.test_acc for r in h],
            "epoch_time_s": sum(r.time_s for r in h) / epochs,
            "epoch_time_s_curve": [r.time_s for r in h],
            "eval_time_s": sum(r.eval_time_s for r in h) / epochs,
            "phase_time_s": {k: v / epochs for k, v in phases.items()},
            "comm_bytes": h[-1].comm_bytes,
            "comm_bytes_analytic": self.comm_bytes_analytic,
            "comm_bytes_curve": [r.comm_bytes for r in h],
            "comm_bytes_per_epoch": {"data": h[-1].comm_bytes - h[-1].comm_param_bytes,
                                     "params": h[-1].comm_param_bytes,
                                     "bits": self.config.comm_bits},
            "exchange": self.exchange,
            "worker_ops": self.worker_ops,
            "worker_ops_max_over_avg": {k: imbalance(v) for k, v in ops.items()},
            "feature_bytes": self.feature_bytes,
            "halo_sizes": self.halo_sizes,
            "partition": self.partition,
            "sim_cycles": {
                "total": total_cycles,
                "per_epoch": h[-1].sim_cycles,
                "per_epoch_max_device": h[-1].sim_cycles_max_device,
                "clock_mhz": self.clock_mhz,
                # the devices work in parallel: the busiest one sets the accelerator time
                "accelerator_s_per_epoch": (h[-1].sim_cycles_max_device
                                            / (self.clock_mhz * 1e6) if self.clock_mhz else 0.0),
                "devices": self.device_counters,
            },
            # per device, last epoch: cycles at its own clock, or measured time (CPU)
            "device_time_s": device_times(self.device_counters),
            "makespan_s": max(device_times(self.device_counters), default=0.0),
            "pipeline": self.pipeline,
            "fleet": self.config.devices,
            "balance": self.config.balance,
            "shares": self.shares,
            **self._fleet_report(),
        }

    def _fleet_report(self) -> dict:
        """A mixed fleet's split over the run: the first and last shares, every re-partition,
        and per epoch the devices' times beside the performance model's prediction of them
        with its error (predicted / measured - 1 per device, and their mean absolute value)."""
        if not self.config.devices:
            return {}
        h = self.history
        pred = h[-1].predicted_device_time_s

        def errors(r):
            if r.predicted_device_time_s is None:
                return None
            return [p / t - 1.0 if t > 0 else float("nan")
                    for p, t in zip(r.predicted_device_time_s, r.device_time_s)]
        errs = [errors(r) for r in h]
        return {
            "predicted_device_time_s": pred,
            "predicted_makespan_s": None if pred is None else max(pred),
            "initial_shares": self.initial_shares,
            "adjust": {"budget": self.config.adjust_budget(), "warmup": self.config.warmup,
                       "used": sum(a["reason"] == "correct" for a in self.adjustments),
                       "log": self.adjustments},
            "device_time_s_curve": [r.device_time_s for r in h],
            "predicted_device_time_s_curve": [r.predicted_device_time_s for r in h],
            "prediction_error_curve": errs,
            "prediction_mape_curve": [None if e is None else float(np.mean(np.abs(e)))
                                      for e in errs],
            "makespan_s_curve": [max(r.device_time_s, default=0.0) for r in h],
            "shares_curve": [r.shares for r in h],
        }


def work_shares_of(cfg: TrainConfig, dataset: Dataset, widths) -> np.ndarray | None:
    """The workers' shares of ``cfg.balance`` (None for ``uniform``)."""
    if cfg.balance == "uniform":
        return None
    specs = cfg.fleet_specs()
    if specs is None:     # one design for every worker: equal capabilities
        return None
    perf = PerfModel.load(cfg.perf_model, specs) if cfg.balance == "vgnn" else None
    op, keeps = None, (1.0, None)
    if perf is not None:
        if cfg.model == "gat":
            perf.require_ops(ENTRY_OPS, f"--perf-model {cfg.perf_model}")
        op = aggregation_op(cfg.model, dataset.graph).adj
        keeps = step_keeps(cfg.dropout, cfg.dropout_at, relu=not cfg.layer_norm)
    return work_shares(cfg.balance, specs, dataset.graph, widths, cfg.parallelism, perf,
                       partition=cfg.partition, operator=op, keep=keeps[0],
                       back_keep=keeps[1], gat_layers=gat_layers(cfg, dataset),
                       att_keep=1.0 - cfg.dropout)


def gat_layers(cfg: TrainConfig, dataset: Dataset) -> list[tuple[int, int]] | None:
    """Each layer's ``(heads, C)`` of the GAT ``cfg`` trains (None for another model)."""
    if cfg.model != "gat":
        return None
    return GAT.head_shapes(cfg.hidden, cfg.heads, dataset.n_classes)


def device_predictor(cfg: TrainConfig, dataset: Dataset, widths):
    """``predict(shares)`` -> the seconds the performance model (``cfg.perf_model``) predicts
    each device needs for one training step on the blocks the runtime builds for ``shares``
    (:func:`~moagcn.host.vgnn.fleet.predicted_times`: the model's operator, the halo columns,
    the dropout and ReLU masks, the backward aggregations); None without a fleet or a model."""
    specs = cfg.fleet_specs()
    if specs is None or cfg.perf_model is None:
        return None
    perf = PerfModel.load(cfg.perf_model, specs)
    if cfg.model == "gat":
        perf.require_ops(ENTRY_OPS, f"--perf-model {cfg.perf_model}")
    op = aggregation_op(cfg.model, dataset.graph).adj
    keep, back_keep = step_keeps(cfg.dropout, cfg.dropout_at, relu=not cfg.layer_norm)
    if cfg.aggregation != "post":
        return None      # pre / prepost aggregation builds other blocks than the solver's

    layers = gat_layers(cfg, dataset)

    def predict(shares):
        shares = None if shares is None else np.asarray(shares)
        if layers is not None:
            return gat_predicted_times(perf, specs, dataset.graph, layers, cfg.parallelism,
                                       shares, cfg.partition, op, 1.0 - cfg.dropout)
        return predicted_times(perf, specs, dataset.graph, widths, cfg.parallelism, shares,
                               cfg.partition, exact=True, operator=op, keep=keep,
                               back_keep=back_keep)
    return predict


def device_times(devices: list[dict]) -> list[float]:
    """Seconds each device spent in one epoch: its cycles at its clock (an accelerator), or
    the measured time of its calls (torch on the CPU)."""
    out = []
    for d in devices:
        if d.get("accelerator_s") is not None:     # two designs, each at its own clock
            out.append(float(d["accelerator_s"]))
        elif d.get("clock_mhz"):
            out.append(d["cycles_total"] / (d["clock_mhz"] * 1e6))
        else:
            out.append(float(d.get("wall_s", 0.0)))
    return out


def _split_counts(logits: dict, runtime, labels: torch.Tensor, masks: dict[str, np.ndarray]):
    """Correct predictions and sizes of every split over the local workers' rows."""
    out = []
    for name in ("train", "val", "test"):
        correct = total = 0
        for j, lg in logits.items():
            rows = runtime.rows(j)
            sel = np.nonzero(masks[name][rows])[0]
            if sel.size:
                idx = torch.from_numpy(sel).to(lg.device)
                pred = lg[idx].argmax(dim=1)
                correct += int((pred == labels[torch.from_numpy(rows[sel]).to(lg.device)])
                               .sum())
                total += sel.size
        out += [correct, total]
    return out


def _val_loss_sum(logits: dict, runtime, labels: torch.Tensor, val_mask: np.ndarray) -> float:
    """Summed cross-entropy of the validation nodes among the local workers' rows."""
    total = 0.0
    for j, lg in logits.items():
        rows = runtime.rows(j)
        sel = np.nonzero(val_mask[rows])[0]
        if sel.size:
            idx = torch.from_numpy(sel).to(lg.device)
            y = labels[torch.from_numpy(rows[sel]).to(lg.device)]
            total += float(F.cross_entropy(lg[idx], y, reduction="sum"))
    return total


def should_stop(history: list, window: int) -> bool:
    """Kipf & Welling's early stopping: from epoch ``window + 2`` on, stop when the last
    epoch's validation loss is above the mean of the ``window`` epochs before it."""
    if window <= 0 or len(history) <= window + 1:
        return False
    last = history[-1].val_loss
    before = [r.val_loss for r in history[-window - 1:-1]]
    return last > sum(before) / window


def prepare(dataset: Dataset, cfg: TrainConfig):
    """The dataset in the configured node order, its (row-normalised) input features and the
    order (``None``, or ``order[k]`` = original id of node ``k``)."""
    order = None
    if cfg.reorder == "rcm" or cfg.pipeline == "rcm":
        order = dataset.graph.rcm_order()
        dataset = dataset.permute(order)
    X = row_normalize(dataset.features) if cfg.normalize_features else dataset.features
    return dataset, X, order


def train(dataset: Dataset, cfg: TrainConfig, comm: Communicator | None = None,
          on_epoch: Callable[[EpochRecord], None] | None = None,
          dense: torch.device | None = None,
          on_adjust: Callable | None = None, shares=None) -> TrainResult:
    """Train ``cfg.model`` on ``dataset`` with aggregation on ``cfg.device`` devices.

    ``comm`` selects where the workers run (default: all in this process). ``on_epoch`` is
    called after every epoch (progress bars), ``on_adjust`` with every re-partition of a
    mixed fleet's split (:class:`~moagcn.host.vgnn.adjust.Adjustment`). ``shares``: a fixed
    split to run instead of ``cfg.balance``'s (a sweep of static splits). Every process of a distributed run returns the
    same result.
    """
    cfg.validate()
    dataset, X, order = prepare(dataset, cfg)
    check_weighted_training(cfg, dataset)
    dense = dense if dense is not None else dense_device()
    torch.manual_seed(cfg.seed)
    if cfg.label_prop > 0 and int(round(cfg.label_prop * dataset.train_mask.sum())) >= \
            dataset.train_mask.sum():
        raise UserError(f"--label-prop {cfg.label_prop} leaves no training node for the loss "
                        f"({int(dataset.train_mask.sum())} training nodes); use a smaller "
                        "fraction")
    if cfg.model == "gat":      # PyG's example GAT; the partition runtime attends
        model = GAT(dataset.n_features, cfg.hidden, cfg.heads, dataset.n_classes,
                    cfg.dropout).to(dense)
    else:
        model = GNN(cfg.model, dataset.n_features, cfg.hidden, dataset.n_classes, cfg.layers,
                    label_embedding=cfg.label_prop > 0, layer_norm=cfg.layer_norm).to(dense)
    model.use_edge_weights(dataset.graph, dataset.edge_weight)
    X = model.pad_input(X)   # the label columns of masked label propagation (zeros: no label)
    timer = PhaseTimer()
    choice = cfg.accelerators()
    if shares is None:
        shares = work_shares_of(cfg, dataset, model.dims[:-1])
    else:
        shares = np.asarray(shares, dtype=np.float64) / np.sum(shares)
    if shares is not None and comm is not None:   # every process uses rank 0's (measured) split
        shares = comm.gather(shares)[0]
    predict = device_predictor(cfg, dataset, model.dims[:-1])
    budget = cfg.adjust_budget()
    adjuster = None
    if budget:
        # warm-up also measures the simpler splits: the capability ratio's and the equal one
        probes = [EQUAL]
        if cfg.balance == "vgnn":
            probes.insert(0, work_shares("spec", cfg.fleet_specs(), dataset.graph,
                                         model.dims[:-1], cfg.parallelism))
        # cycle-timed devices repeat their times exactly: any slower split is reverted
        timed = [choice] if not isinstance(choice, list) else choice
        noise = WORSE if any(c.device == "cpu" for c in timed) else 0.0
        adjuster = ShareAdjuster(shares, predict, budget, cfg.warmup, probes=probes,
                                 noise=noise)

    def build(shares, comm):
        return make_runtime(cfg.parallelism, model, dataset.graph, X, cfg.workers, choice,
                            comm=comm, dense=dense, timer=timer,
                            partition=cfg.partition, dropout_at=cfg.dropout_at,
                            aggregation=cfg.aggregation, layer_norm=cfg.layer_norm,
                            shares=shares, pipeline=cfg.pipeline, stages=cfg.stages)

    runtime = build(shares, comm)
    comm = runtime.comm
    predicted = {}       # shares (tuple; None: equal) -> the predictor's device times

    def predicted_now():
        if predict is None:
            return None
        key = None if shares is None else tuple(float(x) for x in shares)
        if key not in predicted:
            predicted[key] = [float(x) for x in predict(shares)]
        return predicted[key]
    comm.set_wire(cfg.comm_bits, cfg.seed)
    labels = torch.from_numpy(dataset.labels).to(dense)
    split = {"train": dataset.train_mask, "val": dataset.val_mask, "test": dataset.test_mask}
    train_ids = np.nonzero(dataset.train_mask)[0]

    def loss_rows(shown):
        """Per local worker, its training rows whose labels are not shown as input."""
        out = {}
        for j in runtime.local:
            rows = runtime.rows(j)
            sel = np.nonzero(dataset.train_mask[rows] & ~shown[rows])[0]
            out[j] = (torch.from_numpy(sel).to(dense),
                      labels[torch.from_numpy(rows[sel]).to(dense)])
        return out, int(dataset.train_mask.sum() - shown.sum())

    def label_inputs(shown):
        """``inputs`` of the runtime: one-hot label columns of the shown nodes (None: no LP)."""
        if cfg.label_prop == 0:
            return None
        shown_labels = torch.from_numpy(np.where(shown, dataset.labels, -1)).to(dense)
        return lambda ids: model.label_input(shown_labels[torch.from_numpy(ids).to(dense)])

    no_labels = np.zeros(dataset.n_nodes, dtype=bool)
    train_rows, n_train = loss_rows(no_labels)
    k_shown = int(round(cfg.label_prop * train_ids.size))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    drop = DropoutMasks(cfg.dropout, cfg.seed, order)
    first = choice[0] if isinstance(choice, list) else choice
    result = TrainResult(cfg, dataset.name, processes=len(comm.gather(0)),
                         dense_device=str(dense),
                         clock_mhz=(first.spec.clock_mhz(first.config())
                                    if first.device != "cpu" else 0.0))
    result.initial_shares = None if shares is None else [float(x) for x in shares]

    def describe_runtime():
        result.shares = None if shares is None else [float(x) for x in shares]
        result.comm_bytes_analytic = runtime.comm_bytes_analytic(backward=True)
        result.feature_bytes = runtime.feature_bytes()
        result.halo_sizes = runtime.halo_sizes() if hasattr(runtime, "halo_sizes") else None
        result.partition = runtime.quality() if hasattr(runtime, "quality") else None
        result.exchange = runtime.exchange_summary() if hasattr(runtime, "exchange_summary") \
            else None

    describe_runtime()
    for epoch in range(cfg.epochs):
        runtime.reset_counters()
        timer.reset()
        model.train()
        t0 = time.perf_counter()
        opt.zero_grad()
        shown = no_labels
        if k_shown:   # masked label propagation: a fresh draw of shown labels every epoch
            rng = np.random.default_rng([cfg.seed, epoch, 0x4C50])
            shown = np.zeros(dataset.n_nodes, dtype=bool)
            shown[rng.choice(train_ids, k_shown, replace=False)] = True
            train_rows, n_train = loss_rows(shown)
        logits = runtime.forward(lambda layer, shape: drop.mask(epoch, layer, shape), drop.scale,
                                 inputs=label_inputs(shown))
        loss = sum(F.cross_entropy(logits[j][idx], y, reduction="sum")
                   for j, (idx, y) in train_rows.items()) / n_train
        loss.backward()
        t_comm = time.perf_counter()
        comm.all_reduce_grads(list(model.parameters()))
        timer.add("communicate", time.perf_counter() - t_comm)
        opt.step()
        step_s = time.perf_counter() - t0
        may_end = epoch == cfg.epochs - 1 or cfg.early_stop > 0
        if cfg.pipeline != "none" and may_end:
            result.pipeline = runtime.timeline()
        phases = dict(timer.seconds)
        phases.setdefault("aggregate", 0.0)
        phases.setdefault("communicate", 0.0)
        phases["update"] = max(0.0, step_s - phases["aggregate"] - phases["communicate"])
        counters = runtime.device_counters()
        cycles = [c.cycles_total for c in counters.values()]
        step_counters = {i: c.as_dict() for i, c in counters.items()}   # before evaluating
        comm_bytes = comm.counters.bytes_total
        comm_params = comm.counters.param_bytes_forward + comm.counters.param_bytes_backward
        loss_value = float(loss.detach())
        if may_end:
            ops = runtime.worker_ops()
            dev = {i: c.as_dict() for i, c in counters.items()}
        # evaluation (no dropout; not part of the step's counters or phases)
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            # every training label is shown when evaluating (never a validation or test one)
            eval_logits = runtime.forward(None, count_ops=False,
                                          inputs=label_inputs(dataset.train_mask))
        counts = _split_counts(eval_logits, runtime, labels, split)
        val_loss_sum = _val_loss_sum(eval_logits, runtime, labels, dataset.val_mask)
        eval_s = time.perf_counter() - t1
        totals = comm.sum(np.array([loss_value, comm_bytes, sum(cycles)] + counts
                                   + [comm_params, val_loss_sum], dtype=np.float64))
        max_cycles = max(c for c in comm.gather(max(cycles, default=0)))
        loss_value, comm_bytes, cycle_sum = totals[0], int(totals[1]), int(totals[2])
        acc = [totals[3 + 2 * k] / max(totals[4 + 2 * k], 1) for k in range(3)]
        record = EpochRecord(epoch, float(loss_value), float(acc[0]), float(acc[1]),
                             float(acc[2]), step_s, eval_s, phases, comm_bytes, cycle_sum,
                             int(max_cycles), int(totals[-2]))
        record.val_loss = float(totals[-1] / max(totals[6], 1))
        if cfg.devices:
            # every process's devices, in worker order: cycles at each clock, or wall time
            merged = {}
            for part in comm.gather(step_counters):
                merged.update(part)
            record.device_time_s = device_times([merged[i] for i in sorted(merged)])
            record.predicted_device_time_s = predicted_now()
            record.shares = None if shares is None else [float(x) for x in shares]
        result.history.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if should_stop(result.history, cfg.early_stop):
            result.stopped_early = epoch < cfg.epochs - 1
            break
        if adjuster is not None and epoch < cfg.epochs - 1:
            new = adjuster.observe(epoch, record.device_time_s)
            if new is not None:
                new = comm.gather(new)[0]          # every process takes rank 0's split
                shares = None if isinstance(new, str) else new
                runtime = build(shares, comm)
                comm.set_wire(cfg.comm_bits, cfg.seed)
                train_rows, n_train = loss_rows(no_labels)
                describe_runtime()
                result.adjustments.append(adjuster.log[-1].as_dict())
                if on_adjust is not None:
                    on_adjust(adjuster.log[-1])
    result.model_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    result.model_meta = {"model": cfg.model, "in_features": dataset.n_features,
                         "hidden": cfg.hidden, "n_classes": dataset.n_classes,
                         "layers": cfg.layers, "label_embedding": cfg.label_prop > 0,
                         "layer_norm": cfg.layer_norm,
                         "normalize_features": cfg.normalize_features,
                         "dataset": dataset.name, "n_nodes": dataset.n_nodes,
                         "test_acc": result.history[-1].test_acc}
    if cfg.model == "gat":      # the checkpoint's GAT (moagcn infer)
        result.model_meta.update(heads=cfg.heads, dropout=cfg.dropout)
    for part in comm.gather((ops, dev)):
        p_ops, p_dev = part
        for i in sorted(p_ops):
            result.worker_ops.append({"worker": i, **p_ops[i]})
            result.device_counters.append({"worker": i, **p_dev[i]})
    return result


def train_reference(dataset: Dataset, cfg: TrainConfig,
                    on_epoch: Callable[[EpochRecord], None] | None = None) -> TrainResult:
    """The same model, initial weights and dropout masks, with plain torch aggregation.

    Runs on CPU in one process; the result's ``device`` is ``torch``.
    """
    cfg = dataclasses.replace(cfg, device="torch", workers=1, parallelism="mop",
                              pipeline="none").validate()
    dataset, X, order = prepare(dataset, cfg)
    torch.manual_seed(cfg.seed)
    model = GNN(cfg.model, dataset.n_features, cfg.hidden, dataset.n_classes, cfg.layers)
    model.use_edge_weights(dataset.graph, dataset.edge_weight)
    op = model.aggregation(dataset.graph)
    Xt = torch.from_numpy(X)
    y = torch.from_numpy(dataset.labels)
    tr = torch.from_numpy(np.nonzero(dataset.train_mask)[0])
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    drop = DropoutMasks(cfg.dropout, cfg.seed, order)
    result = TrainResult(cfg, dataset.name)
    splits = [dataset.train_mask, dataset.val_mask, dataset.test_mask]
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        masks = [drop.mask(epoch, l, (dataset.n_nodes, model.dims[l]))
                 for l in range(model.n_layers)]
        logits = reference_forward(model, op, Xt, masks, drop.scale, cfg.dropout_at)
        loss = F.cross_entropy(logits[tr], y[tr])
        loss.backward()
        opt.step()
        step_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            out = reference_forward(model, op, Xt, None)
        pred = out.argmax(dim=1).numpy()
        acc = [float((pred[m] == dataset.labels[m]).mean()) for m in splits]
        record = EpochRecord(epoch, float(loss.detach()), acc[0], acc[1], acc[2], step_s,
                             time.perf_counter() - t1, {"update": step_s}, 0, 0, 0)
        va = torch.from_numpy(np.nonzero(dataset.val_mask)[0])
        record.val_loss = float(F.cross_entropy(out[va], y[va])) if va.numel() else 0.0
        result.history.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if should_stop(result.history, cfg.early_stop):
            result.stopped_early = epoch < cfg.epochs - 1
            break
    return result

