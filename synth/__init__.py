"""yosys / nextpnr flows and report parsing (``import moagcn.synth``)."""

from moagcn.synth.flow import TARGETS, synthesize

__all__ = ["TARGETS", "synthesize"]
