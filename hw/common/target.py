"""The platform marker of Verilog conversion (no dependencies: every gateware helper may test it)."""


class VerilogTarget:
    """Platform marker passed to ``verilog.convert``: elaborate RAMs as
    :data:`~moagcn.hw.common.ram.VERILOG_RAM` and word selects and simulation forms as their
    generated modules (:mod:`moagcn.hw.common.wordsel`)."""
