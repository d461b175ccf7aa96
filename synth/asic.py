"""Area and power of the S-SpMM accelerator as an ASIC, from cited per-unit figures.

MixGCN (Sec. 4.1) builds its sparse processing unit in a commercial 28 nm process (Design
Compiler and the foundry's memory compilers): 16,384 binary32 adders and 100 MB of SRAM, 283.35
mm² and 38.96 W at 500 MHz, the SRAM 77.6 % of the area. :func:`sspmm_area` charges a
configuration the two things that dominate that figure, and nothing else:

- **adders**: ``slices x lanes`` binary32 adders at :data:`ADD_AREA_UM2` each, switching
  :data:`ADD_ENERGY_PJ` per add;
- **SRAM**: the buffers the configuration names (node features, output, column indices, output
  mask; sizes below), at :data:`SRAM_MM2_PER_MIB`, and :data:`SRAM_PJ_PER_BIT` per bit read or
  written.

Per-unit figures (the sources are named in docs/sspmm.md, "Area and power (ASIC)"):

- binary32 adder at 45 nm, 0.9 V: 4,184 µm², 0.9 pJ per add (M. Horowitz, "Computing's
  energy problem (and what we can do about it)", ISSCC 2014, the 45 nm energy and area table);
- 64-bit read of a 32 KB SRAM at 45 nm: 20 pJ (same table);
- scaled to 28 nm: area with the square of the feature size ((28 / 45)² = 0.387), energy with
  the feature size (28 / 45 = 0.622: capacitance at an unchanged supply; an assumption, the
  0.9 V of the 45 nm figures and 28 nm's 0.9-1.0 V are close);
- SRAM density at 28 nm: a 0.127 µm² 6T bit cell (TSMC's 28 nm high-density cell) at 60 %
  array efficiency (the cell share of a compiled macro; an assumption): 1.78 mm² per MiB.

Buffers (bytes): node features ``max_nodes x max_feature_width x 4``, output the same, column
indices ``max_edges x 4``, mask ``max_nodes x max_feature_width / 8``. One of each, as the
paper builds them (one 32 MB node buffer the slices share); the RTL's own organisation, where
every slice reads a copy of the node and index buffers (``node_banks`` 0), is reported beside it
(``sram_mib_rtl_copies``), since at 512 slices it is not buildable.

Power: ``activity`` (the fraction of adder-cycles doing an add: the cycle model's
``utilization``) x (adds x adder energy + 32 bits read per add from the node buffer, the
operand) x clock, plus the output writes (one word per ``lanes`` adds, an assumption of a full
reduction per row chunk), the index reads (one 32-bit index per row fetched: one per
``max_feature_width`` adds) and the mask reads (a bit per output word). Leakage, clock tree,
control logic, the crossbar and the wiring are not modelled.
"""

from __future__ import annotations

from typing import Any

#: 45 nm figures (Horowitz, ISSCC 2014) and the scaling to 28 nm
NODE_NM = 28.0
SOURCE_NM = 45.0
ADD_AREA_UM2_45 = 4184.0
ADD_ENERGY_PJ_45 = 0.9
SRAM_READ_64B_PJ_45 = 20.0     # 64-bit read of a 32 KB SRAM
AREA_SCALE = (NODE_NM / SOURCE_NM) ** 2
ENERGY_SCALE = NODE_NM / SOURCE_NM
ADD_AREA_UM2 = ADD_AREA_UM2_45 * AREA_SCALE
ADD_ENERGY_PJ = ADD_ENERGY_PJ_45 * ENERGY_SCALE
SRAM_PJ_PER_BIT = SRAM_READ_64B_PJ_45 * ENERGY_SCALE / 64

#: 28 nm SRAM: bit cell area and the cell share of a compiled macro
BITCELL_UM2 = 0.127
ARRAY_EFFICIENCY = 0.60
MIB = 1 << 20
SRAM_MM2_PER_MIB = MIB * 8 * BITCELL_UM2 / ARRAY_EFFICIENCY / 1e6

#: MixGCN Sec. 4.1, the figures the model is set beside
MIXGCN = {"adders": 16384, "sram_mib": 100.0, "area_mm2": 283.35, "power_w": 38.96,
          "clock_mhz": 500.0, "sram_share": 0.776, "node_nm": 28}


def buffers_bytes(config) -> dict[str, int]:
    """The on-chip buffers of an S-SpMM configuration, bytes each (see the module docstring)."""
    rows = config.max_nodes * config.max_feature_width
    return {"node": rows * 4, "output": rows * 4, "index": config.max_edges * 4,
            "mask": rows // 8}


def sspmm_area(config, activity: float = 1.0) -> dict[str, Any]:
    """Area (mm²) and power (W) of ``config`` at 28 nm; ``activity`` in [0, 1]."""
    if not 0.0 <= activity <= 1.0:
        raise ValueError(f"activity={activity} must be within 0..1")
    adders = config.slices * config.lanes
    buffers = buffers_bytes(config)
    sram_mib = sum(buffers.values()) / MIB
    copies = config.slices if config.node_banks == 0 else 1
    rtl_mib = (sram_mib + (copies - 1) * (buffers["node"] + buffers["index"]) / MIB)
    adder_mm2 = adders * ADD_AREA_UM2 / 1e6
    sram_mm2 = sram_mib * SRAM_MM2_PER_MIB
    area = adder_mm2 + sram_mm2
    adds = activity * adders                                  # per cycle
    bits = adds * (32                                         # the operand from the node buffer
                   + 32 * 2 / config.lanes                    # output: read and write per chunk
                   + 32 / config.max_feature_width            # column index per row fetched
                   + 1 / config.lanes)                        # mask bit per output word
    hz = config.clock_mhz * 1e6
    adder_w = adds * ADD_ENERGY_PJ * 1e-12 * hz
    sram_w = bits * SRAM_PJ_PER_BIT * 1e-12 * hz
    return {
        "adders": adders, "clock_mhz": config.clock_mhz, "activity": activity,
        "node_nm": NODE_NM,
        "buffers_mib": {k: v / MIB for k, v in buffers.items()}, "sram_mib": sram_mib,
        "sram_mib_rtl_copies": rtl_mib,
        "adder_area_um2": ADD_AREA_UM2, "adder_energy_pj": ADD_ENERGY_PJ,
        "sram_mm2_per_mib": SRAM_MM2_PER_MIB, "sram_pj_per_bit": SRAM_PJ_PER_BIT,
        "adder_mm2": adder_mm2, "sram_mm2": sram_mm2, "area_mm2": area,
        "sram_share": sram_mm2 / area if area else 0.0,
        "area_mm2_rtl_copies": adder_mm2 + rtl_mib * SRAM_MM2_PER_MIB,
        "adder_w": adder_w, "sram_w": sram_w, "power_w": adder_w + sram_w,
    }


def comparison(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(quantity, this model, MixGCN) rows for a table or the terminal."""
    p = MIXGCN
    logic_paper = p["area_mm2"] * (1 - p["sram_share"])
    sram_paper = p["area_mm2"] * p["sram_share"]
    return [
        ("adders", f"{result['adders']:,}", f"{p['adders']:,}"),
        ("SRAM (MiB)", f"{result['sram_mib']:.1f}", f"{p['sram_mib']:.0f}"),
        ("logic area (mm²)", f"{result['adder_mm2']:.1f} (adders only)", f"{logic_paper:.1f}"),
        ("SRAM area (mm²)", f"{result['sram_mm2']:.1f}", f"{sram_paper:.1f}"),
        ("area (mm²)", f"{result['area_mm2']:.1f}", f"{p['area_mm2']}"),
        ("SRAM share of area", f"{100 * result['sram_share']:.1f} %",
         f"{100 * p['sram_share']:.1f} %"),
        (f"power at {result['clock_mhz']:g} MHz (W)",
         f"{result['power_w']:.2f} (activity {result['activity']:g}: adders "
         f"{result['adder_w']:.2f}, SRAM {result['sram_w']:.2f})", f"{p['power_w']}"),
    ]
