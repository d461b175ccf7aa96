"""HyScale-GNN performance model (HyScale-GNN Sec. V, Eq. 5-13).

Times are in seconds, sizes in elements (``S_feat = 4`` bytes per binary32 feature), bandwidths
in bytes per second. :func:`aggregate_cycles` and :func:`update_cycles` restate Eq. 11 and 12 in
clock cycles of a :class:`~moagcn.hw.hyscale.HyScaleConfig`, for comparison with the RTL.
"""

from __future__ import annotations

from typing import Sequence

from moagcn.hw.hyscale.config import HyScaleConfig

S_FEAT = 4  #: bytes per feature element (binary32)


def throughput(edges_per_trainer_layer: Sequence[Sequence[int]], t_execution: float) -> float:
    """Eq. 5: edges traversed per second, summed over trainers i and layers l."""
    return sum(sum(layers) for layers in edges_per_trainer_layer) / t_execution


def t_execution(t_samp: float, t_load: float, t_trans: float, t_prop: float) -> float:
    """Eq. 6: one iteration of the four-stage pipeline takes as long as its slowest stage."""
    return max(t_samp, t_load, t_trans, t_prop)


def t_load(input_vertices: Sequence[int], f0: int, bw_ddr: float) -> float:
    """Eq. 7: loading every trainer's input features |V^0| x f^0 from CPU memory."""
    return sum(input_vertices) * f0 * S_FEAT / bw_ddr


def t_trans(input_vertices: int, f0: int, bw_pcie: float) -> float:
    """Eq. 8: sending one mini-batch's input features to an accelerator over PCIe."""
    return input_vertices * f0 * S_FEAT / bw_pcie


def t_prop(trainer_times: Sequence[float], t_sync_s: float) -> float:
    """Eq. 9: the slowest trainer plus the gradient synchronisation."""
    return max(trainer_times) + t_sync_s


def t_trainer(t_aggregate_l: Sequence[float], t_update_l: Sequence[float],
              pipelined: bool) -> float:
    """Eq. 10: forward (layers 1..L) plus backward (update of layer 1, then layers 2..L).

    With a fused, pipelined datapath (the FPGA trainer) aggregate and update of a layer overlap
    (``⊕ = max``); otherwise (a CPU trainer) they add (``⊕ = +``).
    """
    join = max if pipelined else (lambda a, b: a + b)
    forward = sum(join(a, u) for a, u in zip(t_aggregate_l, t_update_l))
    backward = t_update_l[0] + sum(join(a, u) for a, u in zip(t_aggregate_l[1:], t_update_l[1:]))
    return forward + backward


def t_aggregate(edges_prev: int, f: int, bw: float) -> float:
    """Eq. 11: fetching a source feature vector per edge of layer l - 1, over bandwidth ``bw``."""
    return edges_prev * f * S_FEAT / bw


def t_update(vertices: int, f_in: int, f_out: int, macs: int, freq_hz: float) -> float:
    """Eq. 12: |V^l| f^l f^(l+1) multiply-adds on ``macs`` units at ``freq_hz``."""
    return vertices * f_in * f_out / (macs * freq_hz)


def t_sync(dims: Sequence[int], bw_pcie: float) -> float:
    """Eq. 13: all-reduce of the weights (gathered and scattered back: twice over PCIe)."""
    return 2 * sum(a * b for a, b in zip(dims[:-1], dims[1:])) * S_FEAT / bw_pcie


def aggregate_cycles(edges: int, f: int, config: HyScaleConfig) -> float:
    """Eq. 11 in cycles: ``edges * f`` words at the kernel's bandwidth.

    The paper sizes n so that the S-PEs keep up with DDR; in cycles of a configuration the
    bandwidth is ``min(mem_words_per_cycle, spes)`` elements per cycle, since each S-PE takes
    one element per cycle.
    """
    return edges * f / min(config.mem_words_per_cycle, config.spes)


def update_cycles(vertices: int, f_in: int, f_out: int, config: HyScaleConfig) -> float:
    """Eq. 12 in cycles: ``vertices * f_in * f_out`` multiply-adds on ``macs`` units."""
    return vertices * f_in * f_out / config.macs
