"""The platform marker of Verilog conversion (no dependencies: every gateware helper may test it)."""


class VerilogTarget:
    """Platform marker passed to ``verilog.convert``: elaborate RAMs as
    :data:`~moagcn.hw.common.ram.VERILOG_RAM` and word selects and simulation forms as their
    generated modules (:mod:`moagcn.hw.common.wordsel`).

    ``clocked_forms``: also the simulation forms that hold registers of their own (the binary32
    adder's, :mod:`moagcn.hw.arith.simform`; a held register's,
    :func:`moagcn.hw.common.wordsel.held_register`). Their synthesis branch is a wire to the
    design's gates, so a netlist is the same without them; the Verilog ``moagcn synth`` hands
    to yosys leaves them out, which keeps its text (so its net names, and nextpnr's placement
    at a seed) what it was before they existed.
    """

    def __init__(self, clocked_forms: bool = True):
        self.clocked_forms = clocked_forms
