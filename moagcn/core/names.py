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
