"""Checkpoints: what ``moagcn train --save C.pt`` writes and ``moagcn infer`` reads.

A checkpoint is a ``torch.save``'d dict: ``format`` (``"moagcn-checkpoint"``), ``version``,
``meta`` (model kind, widths, layers, whether the model embeds labels or normalises layers,
whether the input features were row-normalised, the training dataset's name and size and the
final test accuracy) and ``state_dict`` (the :class:`~moagcn.host.nn.models.GNN`'s weights, or
with ``model = "gat"`` the :class:`~moagcn.host.nn.gat.GAT`'s, whose meta adds ``heads`` and
``dropout``).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from moagcn.errors import UserError

from moagcn.host.nn.gat import GAT
from moagcn.host.nn.models import GNN, GNN_NAMES

FORMAT = "moagcn-checkpoint"
VERSION = 1


def save(path, state: dict, meta: dict) -> Path:
    """Write a checkpoint atomically (a partly written file never has the final name)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".partial")
        torch.save({"format": FORMAT, "version": VERSION, "meta": dict(meta),
                    "state_dict": state}, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"--save {path}: cannot write the checkpoint ({exc.strerror or exc}); "
                        "choose a writable path") from None
    return path


def load(path, n_features: int | None = None, model: str | None = None
         ) -> tuple[GNN | GAT, dict]:
    """The model of a checkpoint and its ``meta``; checks it against the dataset's feature
    width and the model named (``None``: not checked)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--checkpoint {path}: no such file; write one with "
                        "moagcn train --save C.pt")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which, not how torch failed
        raise UserError(f"--checkpoint {path}: not a readable checkpoint "
                        f"({type(exc).__name__}); write one with moagcn train --save C.pt"
                        ) from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise UserError(f"--checkpoint {path}: not a moagcn checkpoint (no "
                        f"format={FORMAT!r}); write one with moagcn train --save C.pt")
    if blob.get("version") != VERSION:
        raise UserError(f"--checkpoint {path}: checkpoint version {blob.get('version')} is not "
                        f"the supported {VERSION}")
    meta = blob["meta"]
    if meta.get("model") not in GNN_NAMES:
        raise UserError(f"--checkpoint {path}: unknown model {meta.get('model')!r}")
    if model is not None and model != meta["model"]:
        raise UserError(f"--checkpoint {path} holds a {meta['model']} model, not the {model} "
                        f"named by --model; pass --model {meta['model']} or another checkpoint")
    if n_features is not None and n_features != meta["in_features"]:
        raise UserError(f"--checkpoint {path} was trained on {meta['in_features']} input "
                        f"features ({meta.get('dataset')}), but the dataset has {n_features}; "
                        "use the dataset it was trained on or a matching checkpoint")
    if meta["model"] == "gat":
        net = GAT(meta["in_features"], meta["hidden"], meta["heads"], meta["n_classes"],
                  meta.get("dropout", 0.0))
    else:
        net = GNN(meta["model"], meta["in_features"], meta["hidden"], meta["n_classes"],
                  meta["layers"], label_embedding=meta.get("label_embedding", False),
                  layer_norm=meta.get("layer_norm", False))
    try:
        net.load_state_dict(blob["state_dict"])
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError(f"--checkpoint {path}: weights do not fit a {meta['model']} model "
                        f"({first})") from None
    net.eval()
    return net, meta
