"""The gather-sum unit as the host sees it. Plain Python: importing it loads no gateware."""

#: load streams, filled in parallel before ``start``
STREAMS = ("indptr_in", "indices_in", "feat_in")
#: one output row per beat, ``lanes`` words
OUTPUT = "out"
#: job scalars: output rows, feature rows
SCALARS = ("n_rows", "n_cols")
COUNTER_BITS = 32
COUNTERS = ("cycles_load", "cycles_compute")
#: a column index at or beyond ``n_cols``: the job stops
FLAGS = ("err_index",)

#: cycles of a row besides its edges: its two pointers read, the first edge or the output set up,
#: the output beat
ROW_CYCLES = 4
#: cycles of an edge besides the adder: its index read, its feature row read, the operands issued
EDGE_CYCLES = 3
