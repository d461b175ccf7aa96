"""The HyScale-GNN fused layer's interface as the host sees it. Plain Python: importing it
loads no gateware."""

from __future__ import annotations

COUNTER_BITS = 32
#: counters of the aggregate kernel (external reads, S-PE activity, stalls)
AGG_COUNTERS = ("feature_reads", "words_read", "spe_busy", "stall_feature", "stall_gather")
#: counters of the update kernel
UPD_COUNTERS = ("words_written", "stall_output")
#: status counters of the layer (``cycles_total`` = aggregate + update in the hardware), per
#: job; ``cycles_load_hidden``: the job's load cycles that overlapped the previous job
COUNTERS = ("cycles_total", "cycles_load", "cycles_load_hidden", "cycles_aggregate",
            "cycles_update",
            *AGG_COUNTERS, *UPD_COUNTERS)
#: error flags: a job that raises one stops cleanly
FLAGS = ("err_source", "err_dest", "err_edges")
#: load streams of the layer (features come through the memory port)
LAYER_STREAMS = ("src_in", "edge_in", "dst_in", "weight_in")
#: load streams of the simulated system (the layer plus its memory model)
STREAMS = ("feat_in", *LAYER_STREAMS)
#: the output stream (rows of Y, ``mem_words_per_cycle`` words per beat)
OUTPUT = "out"
#: job scalars set before ``start``
SCALARS = ("n_dst", "f_in", "f_out", "relu")
#: jobs follow one another without a reset; with two load banks the next job's loads overlap
#: the running one
RESTARTABLE = True

#: the edge list's word (``edge_in``, 64 bits): its fields from bit 0 up, ``(name, bits)``.
#: ``weight`` is the binary32 edge weight, ``dst`` the destination's hardware row, ``last``
#: marks the last edge into that destination (read with ``pipelined`` only), ``first`` the
#: first; ``unused`` is zero. The gateware's layout is built from this table
#: (:data:`moagcn.hw.hyscale.layouts.EDGE_WORD_LAYOUT`), and so is the host's packing.
EDGE_WORD = (("weight", 32), ("dst", 16), ("unused", 14), ("last", 1), ("first", 1))
#: the source list's word (``src_in``, 32 bits): the source's feature row (``index``) and its
#: out-edge count, from bit 0 up
SOURCE_WORD = (("index", 16), ("count", 16))


def field_offsets(fields) -> dict[str, int]:
    """The lowest bit of each field of a word described as ``(name, bits)`` pairs from bit 0
    up (:data:`EDGE_WORD`, :data:`SOURCE_WORD`).

    >>> field_offsets(SOURCE_WORD)
    {'index': 0, 'count': 16}
    """
    offsets, at = {}, 0
    for name, bits in fields:
        offsets[name] = at
        at += bits
    return offsets
