"""One testbench API over every simulator.

A testbench is ``async def tb(io: SimIO, **kwargs)``. It drives and samples top-level ports by
their Verilog names (``i__payload``, ``o__valid``) and advances the clock with ``await io.tick()``.
The same function runs on the Amaranth simulator and, through cocotb, on Verilator and Icarus,
so a regression written once checks the design and the generated Verilog alike.

Timing rules (identical on every backend):

- ``io.set`` changes an input at once; it is sampled by the next rising edge;
- ``await io.get(name)`` returns the current value, with combinational logic settled (also after
  ``set`` in the same cycle, so a testbench may raise ``valid`` and then read ``ready``);
- ``await io.tick(n)`` returns after ``n`` rising edges, with registered outputs updated.
"""

from __future__ import annotations

import abc


class CycleLimitExceeded(RuntimeError):
    """The testbench ran longer than its ``max_cycles``: the design is probably stuck."""


class SimIO(abc.ABC):
    """Port access and clocking for a testbench; see the module documentation for timing."""

    def __init__(self, max_cycles: int | None = None):
        self.cycle = 0
        self.max_cycles = max_cycles

    @abc.abstractmethod
    def set(self, name: str, value: int) -> None:
        """Drive input port ``name``."""

    @abc.abstractmethod
    async def get(self, name: str) -> int:
        """Read port ``name`` (settled)."""

    @abc.abstractmethod
    async def _tick(self) -> None:
        ...

    @abc.abstractmethod
    async def reset(self, cycles: int = 2) -> None:
        """Assert the synchronous reset for ``cycles`` clock edges."""

    async def tick(self, n: int = 1) -> None:
        """Advance ``n`` clock cycles."""
        for _ in range(n):
            await self._tick()
            self.cycle += 1
        if self.max_cycles is not None and self.cycle > self.max_cycles:
            raise CycleLimitExceeded(
                f"testbench still running after {self.cycle} cycles (max_cycles="
                f"{self.max_cycles}); the design may be stuck waiting on a handshake")

    @property
    @abc.abstractmethod
    def backend(self) -> str:
        """Name of the simulator."""


class PysimIO(SimIO):
    """:class:`SimIO` on the Amaranth simulator (``ctx`` of ``add_testbench``)."""

    backend = "pysim"

    def __init__(self, ctx, ports: dict, rst, max_cycles: int | None = None):
        super().__init__(max_cycles)
        self._ctx = ctx
        self._rst = rst
        self._ports = {name: value for name, (value, _) in ports.items()}

    def _port(self, name):
        try:
            return self._ports[name]
        except KeyError:
            raise KeyError(f"no port {name!r}; ports: {', '.join(self._ports)}") from None

    def set(self, name, value):
        self._ctx.set(self._port(name), value)

    async def get(self, name):
        return self._ctx.get(self._port(name))

    async def _tick(self):
        await self._ctx.tick()

    async def reset(self, cycles=2):
        self._ctx.set(self._rst, 1)
        await self.tick(cycles)
        self._ctx.set(self._rst, 0)


class CocotbIO(SimIO):
    """:class:`SimIO` on a cocotb simulator (Verilator or Icarus).

    The testbench acts between falling and rising edges: after each rising edge the design has
    settled by the falling edge, where outputs are read and new inputs written.
    """

    def __init__(self, dut, backend: str, max_cycles: int | None = None):
        super().__init__(max_cycles)
        from cocotb.triggers import FallingEdge, Timer
        self._dut = dut
        self._backend = backend
        self._handles: dict = {}
        self._falling = FallingEdge(dut.clk)
        self._settle = Timer(1, "ps")
        self._dirty = False

    @property
    def backend(self):
        return self._backend

    def _handle(self, name):
        handle = self._handles.get(name)
        if handle is None:
            try:
                handle = getattr(self._dut, name)
            except AttributeError:
                raise KeyError(f"no port {name!r} on {self._dut._name}") from None
            self._handles[name] = handle
        return handle

    def set(self, name, value):
        self._handle(name).value = int(value)
        self._dirty = True

    async def get(self, name):
        if self._dirty:
            await self._settle
            self._dirty = False
        value = self._handle(name).value
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"port {name} is undefined ({value}) on {self._backend}; "
                             "an input may be undriven or a memory read uninitialised") from None

    async def _tick(self):
        await self._falling
        self._dirty = False

    async def reset(self, cycles=2):
        self._dut.rst.value = 1
        await self.tick(cycles)
        self._dut.rst.value = 0
