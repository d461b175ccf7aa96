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
