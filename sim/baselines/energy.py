"""Energy of an aggregation from a model's event counts: 28 nm per-operation and per-byte costs.

``energy(counters)`` turns the counters every model in :mod:`moagcn.sim.baselines.accelerators` reports
(``adds``, ``mults``, ``sram_read_bytes``, ``sram_write_bytes``, ``hbm_bytes``) into joules,
with a breakdown. The SPU's own report (:func:`moagcn.sim.sspmm.memory.estimate_graph`) has
``work_adds`` and ``hbm_bytes`` but no SRAM traffic; :func:`moagcn.sim.baselines.accelerators.spu` adds the
SRAM bytes (see :func:`moagcn.sim.baselines.accelerators.spu_sram_traffic`) under the same names.

Constants (:data:`TECH_28NM`; docs/mixgcn.md has the table):

- **Arithmetic**: Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC
  2014, Fig. 1.1.9 (45 nm, 0.9 V): binary32 add 0.9 pJ, binary32 multiply 3.7 pJ.
- **SRAM**: the same table, a 64-bit access of an 8 KB array: 10 pJ, i.e. 1.25 pJ per byte at
  45 nm (32 KB: 20 pJ, 1 MB: 100 pJ). The 100 MB of the accelerators must deliver thousands of
  words per cycle, so they are banked into many small arrays; an access costs a small array's
  energy. Wires between banks and datapath are left out (an underestimate). Writes are charged
  as reads (Horowitz gives reads only).
- **Scaling 45 -> 28 nm** (the MixGCN accelerator's node, Sec. 4.1): first-order dynamic
  energy ``C V^2`` with capacitance proportional to the feature size and the same 0.9 V supply:
  ``28 / 45 = 0.622``. Stillmaker and Baas (Integration 58, 2017) tabulate measured factors;
  this first-order one is within their spread for these nodes and is what we state.
- **HBM**: O'Connor et al., "Fine-Grained DRAM: Energy-Efficient DRAM for Extreme Bandwidth
  Systems", MICRO 2017: HBM2 about 3.9 pJ per bit moved (array, on-die data movement and I/O;
  their FGDRAM halves it). A DRAM device's energy does not scale with the accelerator's node,
  so it is used as published.

Static (leakage) energy is not modelled: these are dynamic-energy estimates. The MixGCN paper
quotes 38.96 W for its accelerator at 500 MHz (Sec. 4.1); :func:`average_power` lets a report
put a model's implied power beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: first-order 45 nm -> 28 nm dynamic-energy factor (capacitance ~ feature size, same 0.9 V)
SCALE_45_TO_28 = 28.0 / 45.0


@dataclass(frozen=True)
class EnergyModel:
    """Energy per event; every figure names its source in :attr:`sources`."""

    name: str
    add_pj: float                   # one binary32 addition
    mul_pj: float                   # one binary32 multiplication
    sram_read_pj_per_byte: float
    sram_write_pj_per_byte: float
    hbm_pj_per_bit: float
    sources: tuple = ()

    def as_dict(self) -> dict:
        d = asdict(self)
        d["sources"] = list(self.sources)
        return d


#: the constants above, at 28 nm
TECH_28NM = EnergyModel(
    name="28nm",
    add_pj=0.9 * SCALE_45_TO_28,
    mul_pj=3.7 * SCALE_45_TO_28,
    sram_read_pj_per_byte=10.0 / 8 * SCALE_45_TO_28,
    sram_write_pj_per_byte=10.0 / 8 * SCALE_45_TO_28,
    hbm_pj_per_bit=3.9,
    sources=(
        "add/mul: Horowitz ISSCC 2014 (45 nm: fp32 add 0.9 pJ, mul 3.7 pJ) x 28/45",
        "SRAM: Horowitz ISSCC 2014 (45 nm, 8 KB array, 64-bit access 10 pJ) / 8 B x 28/45; "
        "writes = reads",
        "HBM: O'Connor et al. MICRO 2017 (HBM2 ~3.9 pJ/bit), not scaled",
    ),
)

#: the counters :func:`energy` reads
COUNTER_FIELDS = ("adds", "mults", "sram_read_bytes", "sram_write_bytes", "hbm_bytes")


def energy(counters: dict, model: EnergyModel = TECH_28NM) -> dict:
    """Joules of one run from its counters (missing fields count as zero).

    Returns ``compute_j``, ``sram_j``, ``hbm_j`` and their sum ``energy_j``."""
    def get(k):
        v = counters.get(k)
        return 0.0 if v is None else float(v)

    for k in COUNTER_FIELDS:
        if get(k) < 0:
            raise ValueError(f"counter {k} = {counters[k]} is negative")
    compute = (get("adds") * model.add_pj + get("mults") * model.mul_pj) * 1e-12
    sram = (get("sram_read_bytes") * model.sram_read_pj_per_byte
            + get("sram_write_bytes") * model.sram_write_pj_per_byte) * 1e-12
    hbm = get("hbm_bytes") * 8 * model.hbm_pj_per_bit * 1e-12
    return {"energy_j": compute + sram + hbm, "compute_j": compute, "sram_j": sram,
            "hbm_j": hbm}


def energy_at_power(time_s: float, power_w: float) -> float:
    """Joules of a device drawing ``power_w`` for ``time_s`` (the CPU rows)."""
    return float(time_s) * float(power_w)


def average_power(energy_j: float, time_s: float) -> float | None:
    """Watts a model's energy implies over its time (None for a zero time)."""
    return energy_j / time_s if time_s else None
