"""GAT training (``moagcn train --model gat``): PyG's Cora GAT example with moagcn's layer.

The model is PyTorch Geometric's ``examples/gat.py``::

    x = dropout(x, p);  x = elu(GATConv(F, hidden, heads, dropout=p)(x))
    x = dropout(x, p);  logits = GATConv(hidden * heads, C, heads=1, concat=False, dropout=p)(x)

(8 heads x 8 hidden, p = 0.6, Adam lr 0.005, weight decay 5e-4, 200 epochs, row-normalised
features), built from :class:`moagcn.host.nn.gat.GATConv` (``impl="moagcn"``: the attention
scores an SDDMM and the aggregation a weighted SpMM on the sparse device) or from PyG's own
``GATConv`` (``impl="pyg"``, the reference; needs torch-geometric). With the same seed both
start from the same weights and draw the same dropout masks, so they follow one trajectory up
to fp32 rounding. Full graph, one process.

The sparse products run on ``cpu``, or on two accelerator devices (``model`` / ``rtl``,
:class:`~moagcn.host.devices.pair.AttentionDevice`, one pair shared by both layers): the
weighted aggregation and its transpose on the weighted S-SpMM (``--design sspmm --param
weighted=true``), the SDDMMs (forward scores, gradient of the attention weights) on the
``sddmm`` design (preset :func:`~moagcn.host.devices.pair.default_sddmm_preset`, or
``sddmm_preset``). Softmax, LeakyReLU, dropout and the projections stay in torch. As for a
weighted GCN (:mod:`moagcn.host.training.weighted`), a binary S-SpMM configuration is refused
in one line naming ``--param weighted=true``, never switched over; another design is refused
naming ``--design sspmm``. Every epoch records the training step's cycles of each design.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.devices.pair import attention_device, default_sddmm_preset, require_weighted
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.pyg import to_edge_index
from moagcn.host.nn.gat import GAT

IMPLS = ("moagcn", "pyg")


@dataclass
class GATConfig:
    """PyG's Cora GAT example's settings (the defaults)."""

    heads: int = 8
    hidden: int = 8
    dropout: float = 0.6
    lr: float = 0.005
    weight_decay: float = 5e-4
    epochs: int = 200
    seed: int = 0
    device: str = "cpu"
    design: str = "sspmm"
    normalize_features: bool = True
    #: the aggregating accelerator's preset (None: its default), ``--param`` fields, simulator
    preset: str | None = None
    params: dict = field(default_factory=dict)
    simulator: str = "verilator"
    #: the SDDMM's preset (None: ``tiny`` beside a tiny S-SpMM, else ``default``)
    sddmm_preset: str | None = None

    def choice(self) -> AcceleratorChoice:
        """The aggregating device's choice (``cpu``, or the S-SpMM on model / rtl)."""
        return AcceleratorChoice(self.device, self.design, self.preset,
                                 {k: str(v) for k, v in self.params.items()}, self.simulator)

    def validate(self, dataset: Dataset | None = None) -> "GATConfig":
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads <= 0:
            raise UserError(f"--heads {self.heads}: give a positive number of attention heads "
                            "(PyG's Cora example: 8)")
        if self.hidden < 1 or self.epochs < 1:
            raise UserError(f"--hidden {self.hidden} and --epochs {self.epochs} must be >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"--dropout {self.dropout}: must be in [0, 1)")
        self._check_device()
        if dataset is not None and dataset.edge_weight is not None:
            raise UserError(f"--model gat: dataset {dataset.name} has edge weights and GAT "
                            "takes none (as PyG's GATConv); use --model gcn, or drop the "
                            "weights")
        return self

    def _check_device(self) -> None:
        """Refuse, in one line, an accelerator choice that cannot pair with the SDDMM."""
        if self.device == "cpu":
            if self.sddmm_preset is not None:
                raise UserError(f"--sddmm-preset {self.sddmm_preset}: the cpu device computes "
                                "the SDDMM itself; use --device model or rtl, or leave it out")
            return
        option = f"--device {self.device}"
        choice = self.choice()
        choice.config()   # a bad preset or parameter is named
        if self.design != "sspmm":
            raise UserError(f"--design {self.design}: GAT on {option} runs its weighted "
                            "aggregation on the S-SpMM and its attention scores on the sddmm "
                            "design; use --design sspmm --param weighted=true, or train with "
                            "--device cpu")
        require_weighted(choice, option)
        preset = self.sddmm_preset or default_sddmm_preset(choice)
        try:
            AcceleratorChoice(self.device, "sddmm", preset).config()
        except UserError as exc:
            raise UserError(f"--sddmm-preset {preset}: {exc}") from None

    def device_label(self) -> str:
        """``cpu``, or ``model: sspmm:weighted=True + sddmm:tiny`` (what runs what)."""
        if self.device == "cpu":
            return "cpu"
        choice = self.choice()
        preset = self.sddmm_preset or default_sddmm_preset(choice)
        return f"{self.device}: {choice.key} + sddmm:{preset}"

    def sparse_device(self):
        """What both layers' sparse products run on: ``"cpu"``, or the accelerator pair."""
        if self.device == "cpu":
            return "cpu"
        return attention_device(self.choice(), self.sddmm_preset)


@dataclass
class GATResult:
    impl: str
    loss: list = field(default_factory=list)
    train_acc: list = field(default_factory=list)
    val_acc: list = field(default_factory=list)
    test_acc: list = field(default_factory=list)
    epoch_s: list = field(default_factory=list)
    #: per epoch, the training step's seconds (``epoch_s`` adds the evaluation pass)
    step_s: list = field(default_factory=list)
    model: torch.nn.Module | None = None
    #: per epoch, the training step's counters of each accelerator design (``{"sspmm": {...},
    #: "sddmm": {...}}``; empty on cpu)
    counters: list = field(default_factory=list)

    @property
    def final_test_acc(self) -> float:
        return self.test_acc[-1]

    @property
    def best_val_test_acc(self) -> float:
        """Test accuracy at the epoch of the best validation accuracy (the first such epoch):
        what PyG's example prints."""
        return self.test_acc[int(np.argmax(self.val_acc))]

    def report(self) -> dict:
        return {"model": "gat", "impl": self.impl, "train_loss": self.loss,
                "train_acc_curve": self.train_acc, "val_acc_curve": self.val_acc,
                "test_acc_curve": self.test_acc, "test_acc": self.final_test_acc,
                "val_acc": self.val_acc[-1], "best_val_test_acc": self.best_val_test_acc,
                "epoch_s_median": float(np.median(self.epoch_s)), "epochs_run": len(self.loss),
                **self.cycles_report()}

    def model_meta(self, dataset: Dataset, cfg: GATConfig) -> dict:
        """The checkpoint's ``meta`` of the trained model (:mod:`moagcn.host.nn.checkpoint`)."""
        return {"model": "gat", "in_features": dataset.n_features, "hidden": cfg.hidden,
                "heads": cfg.heads, "n_classes": dataset.n_classes, "layers": 2,
                "dropout": cfg.dropout, "normalize_features": cfg.normalize_features,
                "dataset": dataset.name, "n_nodes": dataset.n_nodes,
                "test_acc": self.final_test_acc}

    def cycles_report(self) -> dict:
        """The accelerators' cycles per training step: each design's per epoch and their sum,
        the last epoch's counters of each, and the accelerator time at their clocks."""
        if not self.counters:
            return {}
        designs = list(self.counters[-1])
        per = {d: [c[d]["cycles_total"] for c in self.counters] for d in designs}
        last = self.counters[-1]
        return {"sim_cycles": {
            "per_epoch": {d: v[-1] for d, v in per.items()},
            "per_epoch_total": sum(v[-1] for v in per.values()),
            "curve": per,
            "accelerator_s_per_epoch": sum(last[d]["cycles_total"] / (last[d]["clock_mhz"] * 1e6)
                                           for d in designs if last[d]["clock_mhz"]),
            "devices": last}}


def build(impl: str, f_in: int, classes: int, cfg: GATConfig) -> torch.nn.Module:
    if impl == "moagcn":
        return GAT(f_in, cfg.hidden, cfg.heads, classes, cfg.dropout,
                   device=cfg.sparse_device())
    if impl == "pyg":
        # lazy: torch-geometric is optional (the reference implementation)
        from moagcn.host.graphs.pyg import require_pyg
        tg = require_pyg()
        import torch_geometric.nn  # noqa: F401
        return GAT(f_in, cfg.hidden, cfg.heads, classes, cfg.dropout, conv=tg.nn.GATConv)
    raise UserError(f"GAT implementation {impl!r}: choose one of {', '.join(IMPLS)}")


def train_gat(dataset: Dataset, cfg: GATConfig, impl: str = "moagcn",
              on_epoch=None) -> GATResult:
    """Train PyG's example GAT on ``dataset`` (full graph); every epoch a training step and an
    evaluation pass. ``on_epoch(epoch, result)`` after each."""
    cfg.validate(dataset)
    X = row_normalize(dataset.features) if cfg.normalize_features else dataset.features
    x = torch.from_numpy(np.ascontiguousarray(X))
    ei = to_edge_index(dataset.graph)
    y = torch.from_numpy(dataset.labels)
    masks = [torch.from_numpy(m) for m in (dataset.train_mask, dataset.val_mask,
                                           dataset.test_mask)]
    torch.manual_seed(cfg.seed)
    model = build(impl, dataset.n_features, dataset.n_classes, cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    result = GATResult(impl, model=model)
    device = getattr(model.conv1, "sparse_device", None)
    pair = getattr(device, "parts", None)     # the accelerator pair (model / rtl)
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        if pair:
            device.reset()
        model.train()
        opt.zero_grad()
        out = model(x, ei)
        loss = F.cross_entropy(out[masks[0]], y[masks[0]])
        loss.backward()
        opt.step()
        result.step_s.append(time.perf_counter() - t0)
        if pair:                  # the training step's counters, before the evaluation
            result.counters.append({d: dev.counters.as_dict() for d, dev in pair.items()})
        model.eval()
        with torch.no_grad():
            pred = model(x, ei).argmax(dim=-1)
        result.epoch_s.append(time.perf_counter() - t0)
        accs = [float((pred[m] == y[m]).float().mean()) for m in masks]
        result.loss.append(float(loss.detach()))
        result.train_acc.append(accs[0])
        result.val_acc.append(accs[1])
        result.test_acc.append(accs[2])
        if on_epoch is not None:
            on_epoch(epoch, result)
    return result
