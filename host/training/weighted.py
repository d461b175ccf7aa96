"""What ``moagcn train`` can do with a weighted graph, checked before anything runs.

A GCN on a graph with edge weights (a dataset's ``edge_weight``: .npz ``data``, .pt
``edge_weight``) aggregates with ``D^-1/2 (A_w + I) D^-1/2`` (PyG's ``gcn_norm``), which needs
a weighted SpMM per pass. The ``cpu`` device runs it; the accelerator devices (``model``,
``rtl``) of the binary S-SpMM cannot, and neither do the runtimes that cut the operator into
pieces the weights do not follow (the fine-grain pipeline, pre/post aggregation). Each refusal
is one line naming the option, the problem and the fix; nothing falls back silently.
"""

from __future__ import annotations

from moagcn.errors import UserError


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
        if c.device != "cpu":
            option = f"--devices {cfg.devices}" if cfg.devices else f"--device {c.device}"
            raise UserError(f"{option}: dataset {name} has edge weights, and training on the "
                            f"{c.design} accelerator ({c.device}) multiplies by a binary "
                            "adjacency (the weighted S-SpMM, --param weighted=true, runs "
                            "`moagcn sspmm run` and spmm_weighted, not training); train the "
                            "weighted graph with --device cpu")
    if cfg.pipeline != "none":
        raise UserError(f"--pipeline {cfg.pipeline}: weighted graphs are not supported by the "
                        "fine-grain pipeline; leave --pipeline none")
    if cfg.parallelism == "partition" and cfg.aggregation != "post":
        raise UserError(f"--aggregation {cfg.aggregation}: weighted graphs need --aggregation "
                        "post (pre-aggregation does not carry edge weights)")
