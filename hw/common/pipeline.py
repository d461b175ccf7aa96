"""Turn a chain of combinational stages into a pipeline of a chosen latency.

Arithmetic units are written as a list of combinational *stages*, each a function from a dict of
named values to a dict of named values. :class:`StagedPipeline` places ``latency`` register slices
between (and after) the stages, so the same description yields a combinational unit
(``latency=0``), a deeply pipelined one, or anything in between, always accepting one operation
per cycle. A valid bit travels with the data; an optional clock enable freezes every slice.
A stage may return a :class:`Retimed` value, one that a block with registers of its own (a DSP
block's, :mod:`moagcn.hw.arith.dsp`) delivers some slices later: those slices pass it on
unregistered. :func:`delay` is the plain case: a value through a line of registers.
"""

from __future__ import annotations

from typing import Callable

from amaranth.hdl import Module, Signal, Value

Stage = Callable[[Module, dict[str, Value]], dict[str, Value]]


def delay(m: Module, value: Value, cycles: int, name: str, reset_less: bool = True) -> list:
    """``value`` delayed by ``cycles`` registers: the list of the stages (``[0]`` is ``value``,
    ``[k]`` is ``value`` ``k`` cycles ago).

    Lines that carry a valid bit are reset (``reset_less=False``), so that no simulator sees an
    undefined valid after reset; pure data lines are not.
    """
    stages = [value]
    for k in range(cycles):
        reg = Signal(len(value), name=f"{name}_d{k + 1}", reset_less=reset_less)
        m.d.sync += reg.eq(stages[-1])
        stages.append(reg)
    return stages


class Retimed:
    """A stage's output ``value`` that already lies ``cycles`` register slices behind the
    stage's other outputs (it holds that many registers of its own): the next ``cycles`` slices
    of :class:`StagedPipeline` pass it on unregistered, and a stage may only keep it (pass it on
    under its key) until then."""

    def __init__(self, value: Value, cycles: int):
        if cycles < 1:
            raise ValueError(f"cycles={cycles}: a retimed value lies one or more slices behind")
        self.value, self.cycles = value, cycles

    def __repr__(self):
        return f"Retimed({self.value!r}, {self.cycles})"


def place_registers(n_stages: int, latency: int) -> list[int]:
    """How many register slices follow each stage.

    With ``latency <= n_stages`` the slices are spread evenly and the last one always sits after
    the final stage (so outputs come from flops); extra latency beyond ``n_stages`` is added after
    the final stage, where it costs only flops.

    >>> place_registers(6, 3)
    [0, 1, 0, 1, 0, 1]
    >>> place_registers(2, 4)
    [1, 3]
    """
    if n_stages < 1:
        raise ValueError("a pipeline needs at least one stage")
    if latency < 0:
        raise ValueError(f"latency must be >= 0, not {latency}")
    regs = [0] * n_stages
    if latency <= n_stages:
        for k in range(latency):
            # boundary after stage round((k+1) * n / L) - 1: evenly spread, last one at the end
            regs[round((k + 1) * n_stages / latency) - 1] += 1
    else:
        regs = [1] * n_stages
        regs[-1] += latency - n_stages
    return regs


class StagedPipeline:
    """Build stages into ``m`` with register slices placed by :func:`place_registers`.

    Parameters
    ----------
    m : Module
        The module to add logic to.
    stages : list of (name, Stage)
        Combinational stages, applied in order.
    latency : int
        Register slices in total; the result appears ``latency`` cycles after the operands.
    enable : Value or None
        Clock enable for every slice (``None``: always advancing).
    """

    def __init__(self, m: Module, stages: list[tuple[str, Stage]], latency: int,
                 enable: Value | None = None):
        self._m = m
        self._stages = stages
        self._latency = latency
        self._enable = enable
        self.registers = place_registers(len(stages), latency)

    def _register(self, tag: str, values: dict[str, Value]) -> dict[str, Value]:
        out = {}
        for key, value in values.items():
            if isinstance(value, Retimed):
                # this slice is one of the value's own registers
                out[key] = (value.value if value.cycles == 1
                            else Retimed(value.value, value.cycles - 1))
                continue
            value = Value.cast(value)
            # only the valid bit needs a reset: data registers without one are cheaper (no reset
            # multiplexer in the FPGA, no reset branch in a simulator)
            reg = Signal(value.shape(), name=f"{tag}_{key}", reset_less=(key != "valid"))
            if self._enable is None:
                self._m.d.sync += reg.eq(value)
            else:
                with self._m.If(self._enable):
                    self._m.d.sync += reg.eq(value)
            out[key] = reg
        return out

    def build(self, values: dict[str, Value]) -> dict[str, Value]:
        """Apply the stages to ``values`` (which may include ``valid``) and return the outputs.

        Keys a stage does not return are dropped; ``valid`` is carried through every stage.
        """
        for (name, stage), n_regs in zip(self._stages, self.registers):
            valid = values.get("valid")
            values = dict(stage(self._m, values))
            if valid is not None:
                values["valid"] = valid
            for k in range(n_regs):
                values = self._register(f"{name}_r{k}", values)
        late = [key for key, value in values.items() if isinstance(value, Retimed)]
        if late:
            raise ValueError(f"{', '.join(late)}: retimed past the pipeline's last register "
                             f"slice (slices {self.registers})")
        return values
