"""Mixed fleets and non-uniform work splits (vGNN, seed 002, Sec. 4.4).

``--devices sspmm:lanes=32,sspmm:lanes=8,sspmm:lanes=8:clock_mhz=150,cpu`` names one sparse
device per worker (:func:`~moagcn.host.vgnn.perfmodel.parse_devices`); ``--device model|rtl`` still
says whether the accelerators run as the bit-exact model or as RTL. ``--balance`` decides each
worker's share of the work:

- ``uniform``: ``1 / m`` each (what every runtime did before);
- ``spec``: in proportion to peak capability, lanes x clock (the CPU: its measured or stated
  additions per second) -- vGNN's "partition by peak spec ratio" baseline;
- ``vgnn``: so that the fitted performance model (:mod:`moagcn.host.vgnn.perfmodel`) predicts equal
  times: shares start at the predicted rates and are refined by a fixed-point iteration
  ``share_i <- share_i / t_i(share_i)`` (normalised) at the sizes each worker would really get.

**BF16 (Sec. 4.5).** ``cpu:format=bf16`` stores and moves features as bfloat16 (the sums in
fp32: torch has no bfloat16 sparse product on the CPU). With ``--balance spec`` a fleet with
BF16 devices gets vGNN's Eq. 7 re-weighting: each BF16 device's share is multiplied by
``N(t) = N0 exp(-λ t) + b`` at ``t`` = the graph's vertices, with ``N0, λ, b`` fitted to the
BF16 / FP32 speed ratio this machine measures on sub-graphs of several sizes
(:func:`calibrate_bf16`), then the shares are renormalised. (``vgnn`` needs no shift: its
model is fitted on the BF16 device itself.)

Under MoP a share is a fraction of every layer's feature columns (each sparse device aggregates
all N rows over its columns); under partition parallelism a fraction of the nodes (the
partitioner takes target part weights: id ranges or runs of the RCM order cut at the shares of
the aggregation work ``Σ (deg + 1)``, or METIS with that work as vertex weights and ``tpwgts``).
The vGNN solver predicts each worker's time on the rows it would really get: for a GCN-style
model a training step's aggregations (:func:`predicted_times`), for a GAT its weighted
aggregations and SDDMMs (:func:`gat_predicted_times`, a model fitted with the per-entry ops).
"""

from __future__ import annotations

import numpy as np

from moagcn.errors import UserError
from moagcn.host.devices.select import parse_devices
from moagcn.host.graphs.ops import CSRGraph, contiguous_ranges
from moagcn.host.graphs.partition import partition_nodes, weighted_ranges
from moagcn.host.vgnn.augment import induced_subgraph, worker_block

BALANCES = ("uniform", "spec", "vgnn")


def fleet(text: str, device_kind: str):
    """``(specs, choices)``: the parsed ``--devices`` (:func:`~moagcn.host.devices.select.parse_devices`)
    and the choice each worker runs, on ``device_kind`` (model or rtl for the accelerators; the
    CPU is torch)."""
    specs = parse_devices(text)
    if device_kind not in ("model", "rtl", "cpu"):
        raise UserError(f"--device {device_kind!r}: use model or rtl with --devices")
    for s in specs:
        if device_kind == "cpu" and not s.is_cpu:
            raise UserError(f"--devices {s.text or s.key} is an accelerator but --device "
                            "cpu was given; use --device model or rtl with --devices")
    return specs, [s if s.is_cpu else s.on(device_kind) for s in specs]


def predicted_times(perf_model, specs, graph: CSRGraph, widths, parallelism: str, shares,
                    partition: str = "contiguous", exact: bool = True,
                    operator: CSRGraph | None = None, keep: float = 1.0,
                    back_keep: float | None = None) -> np.ndarray:
    """Seconds the performance model predicts each worker needs for ``shares`` in one training
    step: the sum over the layers' aggregation widths of one aggregation, plus for every layer
    after the first its backward aggregation (the transposed operator; the first layer's input
    features need no gradient). Under MoP a worker aggregates all N rows over its columns;
    under partition parallelism it aggregates the rows the partitioner gives it for those
    shares with the columns they read, its own rows and its halo (``shares`` None: the equal
    split the runtimes make without one). Under MoP a worker's columns are those the runtime
    gives it (``exact``; a worker may get none) or, for the solver's iterations, its share of
    each width rounded on its own and at least one (smooth in the share).

    ``operator`` is the sparsity the devices really run (the model's aggregation operator, e.g.
    GCN's ``A + I``: :func:`moagcn.host.nn.models.aggregation_op`); the blocks are cut from it,
    the partition from ``graph``, as the runtimes do. ``None``: ``graph`` itself.

    ``keep`` / ``back_keep``: the kept fraction of the output masks of the forward / backward
    aggregations (1: none; training's forward carries the dropout mask, ``1 - p``, and its
    backward the ReLU's, :func:`step_keeps`); ``back_keep`` None: ``keep``."""
    op = graph if operator is None else operator
    if (op.n_rows, op.n_cols) != (graph.n_rows, graph.n_cols):
        raise UserError(f"the operator is {op.n_rows} x {op.n_cols} but the graph "
                        f"{graph.n_rows} x {graph.n_cols}; pass the operator of this graph")
    widths = [int(w) for w in np.atleast_1d(widths)]
    fractions = np.full(len(specs), 1.0 / len(specs)) if shares is None else shares
    if parallelism == "mop":
        blocks = [op] * len(specs)
    else:
        parts = partition_nodes(graph, len(specs), partition, shares)
        blocks = [worker_block(op, p) for p in parts]
    if parallelism == "mop":
        # the columns each device gets, cut as MoPRuntime cuts them (a device may get none)
        cuts = [contiguous_ranges(w, len(specs)) if shares is None
                else weighted_ranges(w, fractions) for w in widths]
    t = np.zeros(len(specs))
    for i, (s, f, block) in enumerate(zip(specs, fractions, blocks)):
        if parallelism != "mop":
            cols = widths
        elif exact:
            cols = [b - a for a, b in (c[i] for c in cuts)]
        else:
            cols = [max(1, int(round(f * w))) for w in widths]
        bk = keep if back_keep is None else back_keep
        t[i] = sum(perf_model.predict(block, w, s, keep) for w in cols if w)
        if len(cols) > 1:
            back = block.transpose()
            t[i] += sum(perf_model.predict(back, w, s, bk) for w in cols[1:] if w)
    return t


def _gat_worker_time(perf_model, spec, block: CSRGraph, segs, att_keep: float) -> float:
    """Predicted seconds of one GAT layer's sparse products, forward and backward, on one
    device holding ``block`` and the head segments ``segs`` (``(head, a, b)``,
    :func:`~moagcn.host.nn.attention.head_segments`) of the layer's ``h``: the scores (an
    SDDMM of width 2 per head), the weighted aggregation of each segment (one call for equal
    segments, as :func:`~moagcn.host.nn.attention.spmm_segments` makes them), and in the
    backward the gradient of the attention weights (an SDDMM of the segment's width under the
    attention dropout's mask, keeping ``att_keep``), the transposed aggregation and the two
    weighted products of width 2 that give the scores' operands their gradients."""
    if not segs:
        return 0.0
    k = len(segs)
    back = block.transpose()

    def p(graph, op, width, heads, keep=1.0):
        return perf_model.predict(graph, int(width), spec, keep, op, int(heads))

    t = p(block, "sddmm", 2, k) + p(block, "weighted", 2, k) + p(back, "weighted", 2, k)
    widths = [b - a for _, a, b in segs]
    groups = [(widths[0], k)] if len(set(widths)) == 1 else [(w, 1) for w in widths]
    for w, heads in groups:
        t += (p(block, "weighted", w, heads) + p(block, "sddmm", w, heads, att_keep)
              + p(back, "weighted", w, heads))
    return t


def gat_predicted_times(perf_model, specs, graph: CSRGraph, layers, parallelism: str, shares,
                        partition: str = "contiguous", operator: CSRGraph | None = None,
                        att_keep: float = 1.0) -> np.ndarray:
    """Seconds the performance model (fitted with the per-entry ops) predicts each worker
    needs for the sparse products of one GAT training step (:func:`_gat_worker_time` for
    every layer; ``layers``: each layer's ``(heads, C)``). Under partition parallelism a
    worker scores and aggregates its rows' entries over its own and halo columns (its
    :func:`~moagcn.host.vgnn.augment.worker_block`) for every head; under MoP every row, for
    the heads its columns of ``h`` touch (cut by the shares, as ``MoPRuntime`` cuts them).
    ``att_keep``: the kept fraction of the attention dropout (1: none)."""
    from moagcn.host.nn.attention import head_segments  # lazy: the nn layer imports torch
    perf_model.require_ops(("weighted", "sddmm"), "--perf-model")
    op = graph if operator is None else operator
    m = len(specs)
    if parallelism == "mop":
        blocks = [op] * m
    else:
        blocks = [worker_block(op, p) for p in partition_nodes(graph, m, partition, shares)]
    t = np.zeros(m)
    for heads, C in layers:
        w = int(heads) * int(C)
        if parallelism == "mop":
            cuts = (contiguous_ranges(w, m) if shares is None
                    else weighted_ranges(w, np.asarray(shares, dtype=np.float64)))
            segs = [head_segments(int(C), a, b) for a, b in cuts]
        else:
            segs = [[(h, h * int(C), (h + 1) * int(C)) for h in range(int(heads))]] * m
        for i, (spec, block) in enumerate(zip(specs, blocks)):
            t[i] += _gat_worker_time(perf_model, spec, block, segs[i], att_keep)
    return t


#: the kept fraction of the ReLU mask a backward aggregation carries (the share of positive
#: pre-activations: about half at Glorot initialisation; measured 0.41-0.48 with dropout 0.5)
RELU_KEEP = 0.5


def step_keeps(dropout: float, dropout_at: str = "aggregate", relu: bool = True
               ) -> tuple[float, float]:
    """``(keep, back_keep)`` of a training step's aggregations (:func:`predicted_times`): the
    forward ones carry the dropout mask when it sits on the aggregation's output, the backward
    ones the ReLU mask (and, with the dropout on the layer's input, the dropout mask too)."""
    drop_keep = 1.0 - float(dropout)
    keep = drop_keep if dropout_at == "aggregate" and dropout > 0 else 1.0
    back = RELU_KEEP if relu else 1.0
    if dropout_at != "aggregate" and dropout > 0:
        back *= drop_keep
    return keep, back


def bf16_weight(t, n0: float, lam: float, b: float):
    """vGNN's Eq. 7: ``N(t) = N0 exp(-λ t) + b``."""
    return n0 * np.exp(-lam * np.asarray(t, dtype=np.float64)) + b


def calibrate_bf16(graph: CSRGraph, sizes=None, width: int = 64, repeats: int = 5,
                   seed: int = 0) -> dict:
    """Eq. 7's parameters for the CPU's BF16 storage: the speed ratio ``t_fp32 / t_bf16`` of
    one aggregation, measured (median of ``repeats``) on induced sub-graphs of ``sizes``
    vertices, fitted by ``N0 exp(-λ t) + b`` (scipy's bounded least squares)."""
    import time

    from scipy.optimize import curve_fit

    # lazy: keeps torch out of this module's import
    from moagcn.core.device import CpuDevice
    n = graph.n_rows
    sizes = sorted({max(2, int(x)) for x in (sizes if sizes is not None else
                                            np.geomspace(max(2, n // 64), n, 6))})
    rng = np.random.default_rng(seed)
    ratios = []
    for t in sizes:
        g = induced_subgraph(graph, np.sort(rng.choice(n, size=min(t, n), replace=False)))
        H = rng.standard_normal((g.n_cols, width)).astype(np.float32)
        times = {}
        for fmt in ("fp32", "bf16"):
            dev = CpuDevice(fmt)
            dev.sspmm(g, H)                               # warm the cached CSR
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                dev.sspmm(g, H)
                runs.append(time.perf_counter() - t0)
            times[fmt] = float(np.median(runs))
        ratios.append(times["fp32"] / times["bf16"])
    x, y = np.array(sizes, dtype=np.float64), np.array(ratios)
    import warnings

    from scipy.optimize import OptimizeWarning
    try:
        with warnings.catch_warnings():   # a few points: no covariance, which is not used
            warnings.simplefilter("ignore", OptimizeWarning)
            (n0, lam, b), _ = curve_fit(bf16_weight, x, y,
                                        p0=(y[0] - y[-1], 1.0 / x.mean(), y[-1]),
                                        bounds=([-10, 0, 0], [10, 1.0, 10]), maxfev=20000)
    except (RuntimeError, ValueError):                     # flat data: a constant ratio
        n0, lam, b = 0.0, 0.0, float(np.mean(y))
    return {"n0": float(n0), "lambda": float(lam), "b": float(b), "sizes": list(map(int, sizes)),
            "ratio": [float(r) for r in ratios], "width": width}


def bf16_shift(shares, specs, graph: CSRGraph, calibration: dict | None = None) -> tuple:
    """Eq. 7 applied to ``shares``: ``(shares, factor, calibration)``; unchanged when no
    device stores BF16."""
    bf = np.array([s.param("format") == "bf16" for s in specs])
    if not bf.any():
        return np.asarray(shares), 1.0, None
    cal = calibration or calibrate_bf16(graph)
    factor = float(bf16_weight(graph.n_rows, cal["n0"], cal["lambda"], cal["b"]))
    out = np.asarray(shares, dtype=np.float64) * np.where(bf, max(factor, 1e-3), 1.0)
    return out / out.sum(), factor, cal


def work_shares(balance: str, specs, graph: CSRGraph, widths, parallelism: str,
                perf_model=None, iterations: int = 6,
                partition: str = "contiguous", operator: CSRGraph | None = None,
                keep: float = 1.0, back_keep: float | None = None,
                gat_layers=None, att_keep: float = 1.0) -> np.ndarray:
    """Each worker's fraction of the work (sums to 1); ``widths`` are the aggregation widths of
    the layers (the vGNN prediction of a worker is the sum over them); ``operator``, ``keep``
    and ``back_keep``: the sparsity the devices run and the output masks' kept fractions (see
    :func:`predicted_times`). ``gat_layers`` (each layer's ``(heads, C)``): a GAT, whose
    step the solver predicts with :func:`gat_predicted_times` (``att_keep``: its attention
    dropout's kept fraction)."""
    widths = [int(w) for w in np.atleast_1d(widths)]
    m = len(specs)
    if balance not in BALANCES:
        raise UserError(f"--balance {balance!r}: choose one of {', '.join(BALANCES)}")
    if balance == "uniform":
        return np.full(m, 1.0 / m)
    if balance == "spec":
        cap = np.array([s.capability() for s in specs], dtype=np.float64)
        if np.any(cap <= 0):
            raise UserError("--balance spec: a device has no capability (lanes x clock = 0)")
        return bf16_shift(cap / cap.sum(), specs, graph)[0]
    if perf_model is None:
        raise UserError("--balance vgnn needs a fitted performance model: run moagcn perfmodel "
                        "fit --devices ... --dataset D --out M.json, then pass --perf-model "
                        "M.json")
    perf_model.require(specs, "--perf-model")

    def predicted(shares):
        if gat_layers is not None:
            return np.maximum(gat_predicted_times(perf_model, specs, graph, gat_layers,
                                                  parallelism, shares, partition, operator,
                                                  att_keep), 1e-12)
        return np.maximum(predicted_times(perf_model, specs, graph, widths, parallelism, shares,
                                          partition, exact=False, operator=operator,
                                          keep=keep, back_keep=back_keep), 1e-12)

    op = graph if operator is None else operator
    if gat_layers is not None:     # each device alone on the whole operator, every head
        full = np.array([sum(_gat_worker_time(perf_model, s, op,
                                              [(h, h * int(C), (h + 1) * int(C))
                                               for h in range(int(H))], att_keep)
                             for H, C in gat_layers) for s in specs])
    else:
        full = np.array([sum(perf_model.predict(op, w, s, keep) for w in widths)
                         for s in specs])
    shares = (1.0 / np.maximum(full, 1e-12))
    shares /= shares.sum()
    for _ in range(iterations):
        t = predicted(shares)
        shares = shares / t
        shares /= shares.sum()
    return shares
