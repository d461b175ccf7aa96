"""Stream binary32 operands through a simulated arithmetic unit.

Used by ``moagcn arith``, the arithmetic tests and the demo. The unit accepts one operation per
cycle; the testbench feeds operands (optionally with idle cycles) and collects results in order.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from moagcn.errors import UserError
from moagcn.core.registry import gateware
from moagcn.sim.arith import golden
from moagcn.sim.rtl.backends import run

OPS = {
    "add": ("fp32-add", 2),
    "mul": ("fp32-mul", 2),
    "muladd": ("fp32-muladd", 3),
}


async def stream_operands(io, payloads: list[int], idle_every: int = 0) -> list[int]:
    """Testbench: send ``payloads`` on ``i``, return the results from ``o`` in order.

    With ``idle_every = k > 0`` every k-th cycle is left idle (``valid`` low), which checks that
    the valid bit, not the cycle count, is what carries results through the pipeline.
    """
    results: list[int] = []
    n = len(payloads)
    sent = 0
    cycle = 0
    while len(results) < n:
        if sent < n and not (idle_every and cycle % idle_every == idle_every - 1):
            io.set("i__payload", payloads[sent])
            io.set("i__valid", 1)
            sent += 1
        else:
            io.set("i__valid", 0)
        await io.tick()
        cycle += 1
        if await io.get("o__valid"):
            results.append(await io.get("o__payload"))
    return results


def pack_operands(*operands: np.ndarray) -> list[int]:
    """Pack 32-bit operand arrays into payload integers (first operand in the low bits)."""
    out = np.zeros(len(operands[0]), dtype=object)
    for k, arr in enumerate(operands):
        out += np.asarray(arr, dtype=np.uint32).astype(object) << (32 * k)
    return out.tolist()


def design_config(op: str, latency: int | None = None, enable: bool = False):
    """Design and configuration for an operation (``latency`` None: the unit's default)."""
    if op not in OPS:
        raise UserError(f"unknown operation {op!r}; choose one of {', '.join(OPS)}")
    design = gateware(OPS[op][0])
    config = design.default_config()
    changes = {"enable": enable}
    if latency is not None:
        if op == "muladd":
            raise UserError("--latency applies to add and mul; set muladd latencies with "
                            "`moagcn hw generate fp32-muladd --param mul_latency=...`")
        changes["latency"] = latency
    try:
        config = dataclasses.replace(config, **changes)
    except ValueError as exc:
        raise UserError(f"--latency {latency}: {exc}") from None
    return design, config


def simulate(op: str, *operands: np.ndarray, simulator: str = "verilator",
             latency: int | None = None, idle_every: int = 0, chunk: int = 250_000,
             progress: bool = False, waves=None) -> np.ndarray:
    """Results of ``op`` on uint32 bit-pattern arrays, computed by the simulated unit.

    Long inputs run in chunks of ``chunk`` operations (one simulator launch each) so that a
    progress bar can follow them.
    """
    design, config = design_config(op, latency)
    arity = OPS[op][1]
    if len(operands) != arity:
        raise UserError(f"{op} takes {arity} operands, got {len(operands)}")
    n = len(operands[0])
    if any(len(x) != n for x in operands):
        raise UserError(f"operand arrays differ in length: {[len(x) for x in operands]}")
    out = np.empty(n, dtype=np.uint32)
    starts = range(0, n, chunk) if n else []
    if progress:
        from tqdm import tqdm
        starts = tqdm(starts, desc=f"{op} on {simulator}", unit="chunk")
    for s in starts:
        payloads = pack_operands(*(x[s:s + chunk] for x in operands))
        lat = getattr(config, "latency", 0)
        res = run(design, config, stream_operands, simulator, payloads=payloads,
                  idle_every=idle_every, waves=waves,
                  max_cycles=2 * len(payloads) + lat + 16)
        out[s:s + chunk] = np.asarray(res.value, dtype=np.uint32)
    return out


def expected(op: str, *operands: np.ndarray) -> np.ndarray:
    """Golden results (numpy float32, NaNs canonical)."""
    return golden.OPERATIONS[op](*operands)
