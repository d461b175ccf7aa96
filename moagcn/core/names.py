"""The names the whole toolkit uses for what computes and what simulates, defined once.

- ``--device``: what computes an aggregation or a job. ``cpu`` (torch), ``model`` (the design's
  bit-exact golden model and its cycle model) or ``rtl`` (the design's RTL in a simulator).
- ``--simulator``: what runs the RTL: ``verilator`` (the lean harness, or cocotb when a waveform,
  a mid-job reset or a per-cycle run is asked for), ``icarus`` (cocotb) or ``pysim`` (Amaranth).

Plain Python: the CLI reads these without importing torch or the gateware.
"""

DEVICE_KINDS = ("cpu", "model", "rtl")
#: the one default of every command and of ``TrainConfig``: the simulated accelerator
DEFAULT_DEVICE = "rtl"
SIMULATORS = ("verilator", "icarus", "pysim")
DEFAULT_SIMULATOR = "verilator"
DEFAULT_DESIGN = "sspmm"

#: the GNNs of full-graph training and DEAL inference (``--model``)
MODELS = ("gcn", "sage", "gin")
#: every GNN a command may name: the models above and GAT (``moagcn train --model gat``,
#: :mod:`moagcn.host.training.gat`)
GNN_NAMES = MODELS + ("gat",)
#: how a full-graph run splits its work (``--parallelism``)
PARALLELISMS = ("mop", "partition")
#: how the graph's nodes are split into parts (``--partition``)
PARTITION_METHODS = ("contiguous", "rcm", "kway", "metis")
#: DEAL's dense-layer schemes (``moagcn infer --gemm``)
GEMMS = ("deal", "cagnet", "auto")

# -- vGNN's performance model (``moagcn perfmodel fit``; :mod:`moagcn.host.vgnn.perfmodel`) --
#: its regressors, by name (:data:`moagcn.host.vgnn.regressors.REGRESSORS` builds them)
PERF_REGRESSORS = ("cost_terms", "linear", "ridge", "lasso", "decision_tree", "svr",
                   "adaboost", "bagging", "random_forest", "gradient_boosting", "knn")
#: node ratios of the sampled sub-graphs (1.0: the whole graph, sampled once)
PERF_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: feature widths of the sampled runs; 100 is a multiple of no lane count (8, 16, 32)
PERF_WIDTHS = (16, 32, 64, 100, 128)
#: sub-graphs drawn per ratio
PERF_SEEDS = 3
#: kept fractions of the output masks the runs are timed with by default (1: no mask; 0.5: a
#: dropout of 0.5, or a ReLU mask, as training's aggregations carry)
PERF_KEEPS = (1.0, 0.5)
#: one head's widths the per-entry products (weighted aggregation, SDDMM) are timed at: GAT's
#: scores (2), its heads' widths and the classes
PERF_ENTRY_WIDTHS = (2, 4, 8, 16, 64)
#: heads the per-entry products are timed with
PERF_HEADS = (1, 8)
#: fraction of the sub-graphs held out to score the regressors
PERF_TEST_FRACTION = 0.25
