"""HyScale-GNN performance model (HyScale-GNN Sec. V, Eq. 5-13).

The one implementation of the paper's equations: times are in seconds, sizes in elements
(``S_feat = 4`` bytes per binary32 feature), bandwidths in bytes per second; the system model
(:mod:`moagcn.host.hyscale.perf`) builds on them. :func:`aggregate_cycles` and
:func:`update_cycles` restate Eq. 11 and 12 in clock cycles of a
:class:`~moagcn.hw.hyscale.HyScaleConfig`. :func:`kernel_cycles` is the cycle model of the RTL
(``hw/hyscale/``) itself: load, aggregate and update phases from the kernels' structure
(distinct source rows, per-bank edge counts, column passes, row blocks, pipeline depths).
"""

from __future__ import annotations

from typing import Sequence

from moagcn.errors import UserError
from moagcn.hw.hyscale.config import HyScaleConfig

S_FEAT = 4  #: bytes per feature element (binary32)


def throughput(edges_per_trainer_layer: Sequence[Sequence[int]], t_execution: float) -> float:
    """Eq. 5: edges traversed per second, summed over trainers i and layers l."""
    return sum(sum(layers) for layers in edges_per_trainer_layer) / t_execution


def t_execution(t_samp: float, t_load: float, t_trans: float, t_prop: float) -> float:
    """Eq. 6: one iteration of the four-stage pipeline takes as long as its slowest stage."""
    return max(t_samp, t_load, t_trans, t_prop)


def t_load(input_vertices: Sequence[float], f0: float, bw_ddr: float) -> float:
    """Eq. 7: loading every trainer's input features ``|V_i^0| f^0`` from CPU memory."""
    return sum(input_vertices) * f0 * S_FEAT / bw_ddr


def t_trans(input_vertices: float, f0: float, bw_pcie: float) -> float:
    """Eq. 8: sending one mini-batch's input features to an accelerator over its link."""
    return input_vertices * f0 * S_FEAT / bw_pcie


def t_prop(trainer_times: Sequence[float], t_sync_s: float) -> float:
    """Eq. 9: the slowest trainer plus the gradient synchronisation."""
    return max(trainer_times) + t_sync_s


#: the ``(+)`` of Eq. 10: ``sum`` where a trainer aggregates, then updates (a CPU), ``max``
#: where its datapath pipelines the two (the paper's FPGA kernels)
COMBINES = ("sum", "max")


def combine(a: float, b: float, how: str) -> float:
    """The ``(+)`` of Eq. 10: ``sum`` (not pipelined) or ``max`` (pipelined)."""
    if how == "sum":
        return a + b
    if how == "max":
        return max(a, b)
    raise UserError(f"combine {how!r}: use one of {', '.join(COMBINES)}")


def t_trainer(t_agg: Sequence[float], t_upd: Sequence[float], how: str) -> float:
    """Eq. 10: forward over layers 1..L, backward over 2..L plus layer 1's update
    (``t_agg[l - 1]``, ``t_upd[l - 1]`` are layer ``l``'s; ``how``: see :func:`combine`)."""
    L = len(t_agg)
    fwd = sum(combine(t_agg[l], t_upd[l], how) for l in range(L))
    bwd = t_upd[0] + sum(combine(t_agg[l], t_upd[l], how) for l in range(1, L))
    return fwd + bwd


def t_aggregate(edges: float, f_in: float, bw: float) -> float:
    """Eq. 11: ``|E^l| f^{l-1} S_feat / BW``: a source feature vector per sampled edge of layer
    ``l``, fetched over the bandwidth of the memory the trainer aggregates from."""
    return edges * f_in * S_FEAT / bw


def update_width(model: str, f: float) -> float:
    """Width of the vector the update multiplies by W (Eq. 3-4): ``f`` (GCN), ``2 f`` (SAGE)."""
    if model not in ("gcn", "sage"):
        raise UserError(f"model {model!r}: the HyScale model covers gcn and sage")
    return 2.0 * f if model == "sage" else float(f)


def t_update(vertices: float, f_a: float, f_out: float, mac_rate: float) -> float:
    """Eq. 12: ``|V^l| f_a^{l-1} f^l / (N freq)``, ``mac_rate`` = N x freq multiply-adds per
    second."""
    return vertices * f_a * f_out / mac_rate


def t_sync(dims: Sequence[float], bw_pcie: float, model: str = "gcn") -> float:
    """Eq. 13: the weights gathered and scattered back, twice the model size over PCIe."""
    size = sum(update_width(model, dims[l - 1]) * dims[l] for l in range(1, len(dims)))
    return 2.0 * size * S_FEAT / bw_pcie


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


# -- the kernel cycle model (the RTL in hw/hyscale/) ---------------------------------------------

def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def aggregate_bound_cycles(distinct_sources: int, bank_edges: Sequence[int], f_in: int,
                           config: HyScaleConfig) -> int:
    """The aggregate phase in closed form, a lower bound of ``cycles_aggregate``::

        max(S B, max(B, EDGE_HEAD - 2) + (E_max - 1) c) + AGG_HEAD + f_in + tail

    the slower of the feature duplicator (``S`` distinct rows of ``B`` beats) and the busiest
    bank (``E_max`` edges, one per ``c`` cycles) sets the pace (see
    :func:`aggregate_kernel_cycles` for the terms); what it leaves out are the conflicts: a full
    bank queue holding up the in-order dispatcher, the ring's ``feature_slots`` limit."""
    e_max = max(bank_edges) if len(bank_edges) else 0
    if e_max == 0:
        return 0
    B = _ceil(f_in, config.mem_words_per_cycle)
    c = max(f_in + 1, config.gather_slot)
    paced = max(distinct_sources * B, max(B, EDGE_HEAD - 2) + (e_max - 1) * c)
    return paced + AGG_HEAD + f_in + aggregate_tail(config)


#: the first edge's grant is at cycle ``B + AGG_HEAD`` of the aggregate phase (cycle 1 is its
#: first): the first row's beats are read at cycles 1 .. B (the source list's address is set
#: at start), its last beat is written into the ring at B + 1, its slot is ready (the edge is
#: dispatched) at B + 2, the edge is in its pair's input register at B + 3, the S-PE pops it at
#: B + 4 and is granted the G-PE at B + 5; its ``f_in`` reads follow at B + 6 onward.
AGG_HEAD = 5

#: edge ``e`` is in the dispatcher's prefetch buffer from cycle ``EDGE_HEAD + e`` on: the edge
#: buffer is read from cycle 1, its read data registered, then buffered (only a job of one
#: beat per row, whose first row is ready at cycle 3, waits for it)
EDGE_HEAD = 4


#: cycles of the aggregate phase of a job without edges (start, then nothing to wait for)
EMPTY_AGGREGATE = 2


def aggregate_tail(config: HyScaleConfig) -> int:
    """Cycles from the last S-PE read to the end of the aggregate phase: the element's product
    (1 + mul_latency), the G-PE's read, operand register and add (2 + add_latency), the
    kernel's done timer (mul_latency + 3), the kernel's and the layer's done flags (2)."""
    return 2 * config.mul_latency + config.add_latency + 8


def aggregate_kernel_cycles(edge_sources: Sequence[int], edge_banks: Sequence[int], f_in: int,
                            config: HyScaleConfig) -> int:
    """Cycles of the aggregate phase (``cycles_aggregate``), replaying ``AggregateKernel``'s
    in-order schedule of the job's edges.

    ``edge_sources``: for each edge in the order the kernel takes them (sorted by source), the
    position of its source in the source list (0, 0, 1, 2, 2, ...); ``edge_banks``: the G-PE
    bank of its destination (after the host's bank balancing).

    - **Duplicator.** Each *distinct* source row is read once, ``B = ceil(f_in / words)`` beats
      at one beat per cycle (traffic O(V), not O(E)), into the ring of ``K = feature_slots``
      slots: row ``r`` starts when row ``r - 1`` is read and row ``r - K`` has been released; it
      is ready for dispatch two cycles after its last beat (memory latency, ring write).
    - **Dispatcher.** One edge per cycle in order, once its row is ready; one cycle more
      between two sources (the ring's dispatch pointer passes over the finished slot); it waits
      while the bank's queue holds ``Q = edge_queue`` edges (head-of-line blocking): the
      dispatcher counts the queue's free places itself, a place freed by a pop counts two
      cycles after it; edge ``e`` is prefetched by cycle ``EDGE_HEAD + e``.
    - **Bank.** An edge reaches its pair's queue through a register (a cycle); the S-PE
      pops it when free (the cycle of its previous edge's last read), is granted one cycle
      later but at least a gather slot ``max(f_in, add_latency + 3)``
      after its previous grant, and reads ``f_in`` elements: an edge every ``c = max(f_in + 1,
      add_latency + 3)`` cycles when busy.
    - **Release.** A slot is freed (in order) a cycle after its row is dispatched and its last
      edge's last element read (the ring reads the PEs' registered answer), at least two
      cycles after the slot before.
    - **End.** The last read plus :func:`aggregate_tail`.

    With no conflicts this is :func:`aggregate_bound_cycles`.
    """
    end, _ = aggregate_replay(edge_sources, edge_banks, f_in, config)
    return end


def aggregate_replay(edge_sources: Sequence[int], edge_banks: Sequence[int], f_in: int,
                     config: HyScaleConfig) -> tuple[int, list]:
    """:func:`aggregate_kernel_cycles` and, for each edge, the cycle its S-PE issues its last
    read (from which its row's last write follows)."""
    n_edges = len(edge_sources)
    reads_of = []
    if n_edges == 0:
        return EMPTY_AGGREGATE, reads_of
    B = _ceil(f_in, config.mem_words_per_cycle)
    K, Q = config.feature_slots, config.edge_queue
    slot_len = max(f_in, config.gather_slot)
    banks = config.spes
    pops = [[] for _ in range(banks)]          # pop cycle of each edge of the bank, in order
    last_grant = [-slot_len] * banks
    last_read = [0] * banks
    released = []                             # release cycle of each row
    dup_next = 1                              # the duplicator's next free read cycle
    dispatched = 0                            # dispatch cycle of the previous edge
    end = 0
    e = 0
    r = 0
    while e < n_edges:
        src = edge_sources[e]
        start = max(dup_next, released[r - K] + 1 if r >= K else 0)
        dup_next = start + B
        ready = start + B + 1
        last_dispatch = last_use = 0
        first = True
        while e < n_edges and edge_sources[e] == src:
            b = edge_banks[e]
            t = max(ready, dispatched + (2 if first and e else 1), EDGE_HEAD + e)
            if len(pops[b]) >= Q:            # the queue's credit, a cycle after its pop
                t = max(t, pops[b][-Q] + 2)
            pop = max(t + 2, last_read[b])       # through the pair's input register
            grant = max(pop + 1, last_grant[b] + slot_len)
            read = grant + f_in
            pops[b].append(pop)
            reads_of.append(read)
            last_grant[b], last_read[b] = grant, read
            dispatched = last_dispatch = t
            last_use = max(last_use, read)
            first = False
            e += 1
        # the ring sees the PEs' answer for its head a cycle late: a release is a cycle after
        # the slot is spent and unused, two after the one before
        released.append(max(released[-1] + 2 if released else 0, ready + 1, last_dispatch + 2,
                            last_use + 2))
        end = max(end, last_use)
        r += 1
    return end + aggregate_tail(config), reads_of


def update_kernel_cycles(destinations: int, f_in: int, f_out: int,
                         config: HyScaleConfig, ready_at=None) -> int:
    """Cycles of the update phase (``cycles_update``), from ``UpdateKernel``, exactly (no
    output backpressure).

    Items are (row, column group) pairs: ``destinations * ceil(f_out / m)`` of them (one
    column pass per group of ``m`` outputs). Blocks of ``R = add_latency`` items feed ``R
    f_in`` tokens (the last block's idle slots included) after one cycle to open the block.
    The block's last token is fed at cycle ``L``; it is held by MAC 0 at ``L + 3`` (the
    activation read, two cycles) and by MAC ``m - 1`` at ``L + m + 2``, and its result is
    written ``2 + mul_latency + add_latency`` cycles later (weight read, the operands'
    register beside the multiplier, multiplier, adder).
    The drain starts two cycles after the write (block full, first beat valid) or after the
    previous block's drain, and sends ``ceil(cols / words)`` beats per item, one per cycle (the last
    block only its real items), each through the drain's output register a cycle later. Block
    ``k + 2`` opens only once block ``k`` has been read out (the results are double-buffered).
    The recurrence below walks the blocks (``drained``: each block's last beat read out of the
    buffers); the phase ends two cycles after the last read (its beat sent, then the done
    flag).

    ``ready_at`` (pipelined layers): ``ready_at[k]``, the cycle from which rows ``0 .. k - 1``
    are final; a block opens no earlier than its rows' (its first row and the ``R - 1`` after
    it, within the job).
    """
    M = config.macs
    R = config.rows_per_block
    words = config.mem_words_per_cycle
    groups = _ceil(f_out, M)
    items = destinations * groups
    if items == 0:
        return 1
    beats_of_group = [_ceil(min(M, f_out - g * M), words) for g in range(groups)]
    to_result = M + 4 + config.mul_latency + config.add_latency
    drained = []           # cycle each block's last beat is read out of the buffers
    t_open = 1             # the cycle a block opens (the first one: the phase's first cycle)
    for k in range(_ceil(items, R)):
        if k >= 2:
            t_open = max(t_open, drained[k - 2] + 1)
        if ready_at is not None:
            t_open = max(t_open, ready_at[min((k * R) // groups + R, destinations)])
        last_fed = t_open + R * f_in
        beats = sum(beats_of_group[i % groups] for i in range(k * R, min(items, (k + 1) * R)))
        start = max(last_fed + to_result + 2, drained[k - 1] + 2 if k else 0)
        drained.append(start + beats - 1)
        t_open = last_fed + 1
    return drained[-1] + 2


def row_final_delay(config: HyScaleConfig) -> int:
    """Cycles from an edge's last read (:func:`aggregate_replay`) to the cycle its row's bit in
    the layer's ``row_final`` vector is set: the product, the G-PE's read, operand register
    and adder, the write, the report's register, the vector's register."""
    return config.mul_latency + config.add_latency + 5


def pipelined_compute_cycles(edge_sources: Sequence[int], edge_banks: Sequence[int],
                             edge_rows: Sequence[int], destinations: int, f_in: int, f_out: int,
                             config: HyScaleConfig) -> dict:
    """The compute cycles of a ``pipelined`` layer: the aggregate replay gives each row's last
    read, hence the cycle it is final (:func:`row_final_delay`; rows without in-edges at the
    start); the scanner moves ``rows_ready`` one row per cycle over final rows, and to the
    last row when the aggregation ends; the update replay opens each block once its rows are
    ready. ``edge_rows``: each edge's destination row (the hardware row). Returns
    ``{"aggregate", "update", "compute"}`` (the update runs from the start, so ``compute`` is
    the later of the two ends)."""
    agg, reads = aggregate_replay(edge_sources, edge_banks, f_in, config)
    final = [0] * destinations
    delay = row_final_delay(config)
    for row, read in zip(edge_rows, reads):
        final[row] = max(final[row], read + delay)
    # ready_at[k]: the first cycle the update's block gate sees rows_ready >= k (the gate
    # registers the watermark: one cycle after the scanner's)
    ready_at = [0] * (destinations + 1)
    t = 1       # the scanner's first step is in the cycle after start: rows_ready >= 1 from 2
    for r in range(destinations):
        t = max(t + 1, final[r] + 1)
        ready_at[r + 1] = min(t, agg + 1) + 1
    upd = update_kernel_cycles(destinations, f_in, f_out, config, ready_at)
    return {"aggregate": agg, "update": upd, "compute": max(agg, upd)}


def load_cycles(feature_rows: int, distinct_sources: int, edges: int, destinations: int,
                f_in: int, f_out: int, config: HyScaleConfig) -> int:
    """Cycles of the load phase (``cycles_load``) when every stream is offered a beat each
    cycle (the lean harness with no idle cycles): the streams fill in parallel, so the longest
    counts: feature rows (``max_feature_width / words`` beats each), distinct sources, edges,
    destinations, weight rows (``(f_in + 1)`` per column group)."""
    return max(feature_rows * config.beats_per_row, distinct_sources, edges, destinations,
               (f_in + 1) * _ceil(f_out, config.macs))


def kernel_cycles(config: HyScaleConfig, *, edges: int, distinct_sources: int,
                  destinations: int, f_in: int, f_out: int,
                  bank_edges: Sequence[int] | None = None,
                  schedule: tuple[Sequence[int], Sequence[int]] | None = None,
                  feature_rows: int | None = None,
                  edge_rows: Sequence[int] | None = None) -> dict:
    """The RTL's cycles for one job: ``{"load", "aggregate", "update", "compute", "total"}``.

    ``schedule``: ``(edge_sources, edge_banks)`` as :func:`aggregate_kernel_cycles` takes them
    (``moagcn.sim.hyscale.spec.kernel_schedule`` builds it from a job); without it the
    aggregate phase is :func:`aggregate_bound_cycles` on ``bank_edges`` (edges per G-PE bank;
    ``None``: ``ceil(edges / spes)`` each). ``feature_rows``: rows of ``X`` streamed into the
    external memory (``None``: ``distinct_sources``). ``compute = aggregate + update`` (the
    layer's own ``cycles_total`` counter); ``total = load + compute`` (the report's
    ``cycles_total``). A ``pipelined`` configuration with ``schedule`` and ``edge_rows`` (each
    edge's hardware row) overlaps the two: :func:`pipelined_compute_cycles`.
    """
    rows = distinct_sources if feature_rows is None else feature_rows
    load = load_cycles(rows, distinct_sources, edges, destinations, f_in, f_out, config)
    if not edges:
        agg = EMPTY_AGGREGATE
    elif schedule is not None:
        agg = aggregate_kernel_cycles(schedule[0], schedule[1], f_in, config)
    else:
        if bank_edges is None:
            bank_edges = [_ceil(edges, config.spes)] * config.spes
        agg = aggregate_bound_cycles(distinct_sources, bank_edges, f_in, config)
    if config.pipelined and schedule is not None and edge_rows is not None:
        p = pipelined_compute_cycles(schedule[0], schedule[1], edge_rows, destinations, f_in,
                                     f_out, config)
        return {"load": load, "aggregate": p["aggregate"], "update": p["update"],
                "compute": p["compute"], "total": load + p["compute"]}
    upd = update_kernel_cycles(destinations, f_in, f_out, config)
    return {"load": load, "aggregate": agg, "update": upd, "compute": agg + upd,
            "total": load + agg + upd}
