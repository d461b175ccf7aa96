"""GAT training (``moagcn train --model gat``): PyG's Cora GAT example with moagcn's layer.

The model is PyTorch Geometric's ``examples/gat.py``::

    x = dropout(x, p);  x = elu(GATConv(F, hidden, heads, dropout=p)(x))
    x = dropout(x, p);  logits = GATConv(hidden * heads, C, heads=1, concat=False, dropout=p)(x)

(8 heads x 8 hidden, p = 0.6, Adam lr 0.005, weight decay 5e-4, 200 epochs, row-normalised
features), built from :class:`moagcn.host.nn.gat.GATConv` (``impl="moagcn"``: the attention
scores an SDDMM and the aggregation a weighted SpMM on the sparse device) or from PyG's own
``GATConv`` (``impl="pyg"``, the reference; needs torch-geometric). With the same seed both
start from the same weights and draw the same dropout masks, so they follow one trajectory up
to fp32 rounding. Full graph, one process; the sparse products run on ``cpu`` (the accelerator
devices of the binary S-SpMM refuse GAT in one line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.pyg import to_edge_index
from moagcn.host.nn.gat import GATConv

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

    def validate(self, dataset: Dataset | None = None) -> "GATConfig":
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads <= 0:
            raise UserError(f"--heads {self.heads}: give a positive number of attention heads "
                            "(PyG's Cora example: 8)")
        if self.hidden < 1 or self.epochs < 1:
            raise UserError(f"--hidden {self.hidden} and --epochs {self.epochs} must be >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"--dropout {self.dropout}: must be in [0, 1)")
        if self.device != "cpu":
            raise UserError(f"--device {self.device}: GAT needs per-edge attention scores (an "
                            f"SDDMM) and a weighted aggregation, which the {self.design} "
                            "accelerator cannot run yet (its S-SpMM multiplies by a binary "
                            "adjacency); train GAT with --device cpu")
        if dataset is not None and dataset.edge_weight is not None:
            raise UserError(f"--model gat: dataset {dataset.name} has edge weights and GAT "
                            "takes none (as PyG's GATConv); use --model gcn, or drop the "
                            "weights")
        return self


@dataclass
class GATResult:
    impl: str
    loss: list = field(default_factory=list)
    train_acc: list = field(default_factory=list)
    val_acc: list = field(default_factory=list)
    test_acc: list = field(default_factory=list)
    epoch_s: list = field(default_factory=list)
    model: torch.nn.Module | None = None

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
                "epoch_s_median": float(np.median(self.epoch_s)), "epochs_run": len(self.loss)}


class GAT(torch.nn.Module):
    """PyG's example GAT with ``conv`` as the layer class."""

    def __init__(self, conv, f_in: int, classes: int, cfg: GATConfig, **kw):
        super().__init__()
        self.p = cfg.dropout
        self.conv1 = conv(f_in, cfg.hidden, heads=cfg.heads, dropout=cfg.dropout, **kw)
        self.conv2 = conv(cfg.hidden * cfg.heads, classes, heads=1, concat=False,
                          dropout=cfg.dropout, **kw)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=self.p, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=self.p, training=self.training)
        return self.conv2(x, edge_index)


def build(impl: str, f_in: int, classes: int, cfg: GATConfig) -> torch.nn.Module:
    if impl == "moagcn":
        return GAT(GATConv, f_in, classes, cfg, device=cfg.device)
    if impl == "pyg":
        # lazy: torch-geometric is optional (the reference implementation)
        from moagcn.host.graphs.pyg import require_pyg
        tg = require_pyg()
        import torch_geometric.nn  # noqa: F401
        return GAT(tg.nn.GATConv, f_in, classes, cfg)
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
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(x, ei)
        loss = F.cross_entropy(out[masks[0]], y[masks[0]])
        loss.backward()
        opt.step()
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
