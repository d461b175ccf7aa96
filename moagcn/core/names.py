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
