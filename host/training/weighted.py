"""What ``moagcn train`` can do with a weighted graph, checked before anything runs.

A GCN on a graph with edge weights (a dataset's ``edge_weight``: .npz ``data``, .pt
``edge_weight``) aggregates with ``D^-1/2 (A_w + I) D^-1/2`` (PyG's ``gcn_norm``: weighted
in-degrees, one self loop per node), which needs a weighted SpMM per pass, forward by the
operator and backward by its transpose (:func:`moagcn.host.nn.autograd._product`). The ``cpu``
device runs it in torch; an accelerator device (``model``, ``rtl``) runs it when its
configuration is the weighted S-SpMM (``--param weighted=true``: ``"weighted"`` in the
device's ``entry_ops``), one ``spmm_weighted`` job per pass with the normalised coefficients
as the entries' values. A binary configuration is **refused**, not switched over: the weighted
S-SpMM is a different (larger) design with other cycle counts, so the user turns it on. The
runtimes that cut the operator into pieces the weights do not follow (the fine-grain pipeline,
pre/post aggregation) are refused too. Each refusal is one line naming the option, the problem
and the fix; nothing falls back silently.
"""

from __future__ import annotations

from moagcn.errors import UserError


def _check_device(cfg, choice, name: str) -> None:
    """Refuse an accelerator choice whose configuration has no weighted aggregation."""
    if choice.device == "cpu":
        return
    spec = choice.spec
    if "weighted" in spec.entry_ops(choice.config()):
        return
    option = f"--devices {cfg.devices}" if cfg.devices else f"--device {choice.device}"
    param = dict(spec.entry_op_params).get("weighted")
    if param:
        where = (f"write that device {choice.text or choice.design}:{param}" if cfg.devices
                 else f"add --param {param}")
        raise UserError(f"{option}: dataset {name} has edge weights, and this {choice.design} "
                        "accelerator multiplies by a binary adjacency; "
                        f"{where} (the weighted S-SpMM), or train with --device cpu")
    raise UserError(f"{option}: dataset {name} has edge weights, and the {choice.design} "
                    "accelerator has no weighted aggregation; use --design sspmm --param "
                    "weighted=true, or train with --device cpu")


def check_weighted_training(cfg, dataset) -> None:
    """Raise a :class:`UserError` when ``cfg`` cannot train on ``dataset``'s edge weights."""
    if dataset.edge_weight is None:
        return
    name = dataset.name
    if cfg.model != "gcn":
        raise UserError(f"--model {cfg.model}: dataset {name} has edge weights and a "
                        f"{cfg.model} model takes none (as PyG's SAGEConv / GINConv); use "
                        "--model gcn, or drop the weights (the .npz data array, the .pt "
                        "edge_weight)")
    choices = cfg.accelerators()
    for c in choices if isinstance(choices, list) else [choices]:
        _check_device(cfg, c, name)
    if cfg.pipeline != "none":
        raise UserError(f"--pipeline {cfg.pipeline}: weighted graphs are not supported by the "
                        "fine-grain pipeline; leave --pipeline none")
    if cfg.parallelism == "partition" and cfg.aggregation != "post":
        raise UserError(f"--aggregation {cfg.aggregation}: weighted graphs need --aggregation "
                        "post (pre-aggregation does not carry edge weights)")
