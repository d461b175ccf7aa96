"""The SDDMM accelerator as the host sees it: streams, scalars, counters, flags and the timing
constants the cycle model shares with the gateware. Plain Python: importing it loads no
gateware."""

from __future__ import annotations

#: load streams, filled in parallel before ``start``: the entries (64 bits: Q row in bits 0-15,
#: K row in bits 16-31, the head mask in bits 32-63), and Q and K as rows of chunks of ``lanes``
#: words (each row ``heads x chunks`` beats, head by head)
STREAMS = ("entries_in", "q_in", "k_in")
#: one score per beat, one word: the unmasked (entry, head) pairs in stored order, heads in order
OUTPUT = "out"
#: job scalars: entries, Q rows, K rows, heads, chunks per head, chunks per row (heads x chunks)
SCALARS = ("n_entries", "n_rows", "n_cols", "heads", "chunks", "row_chunks")
COUNTER_BITS = 32
#: cycles with a load beat taken; cycles from start to done; cycles a chunk entered the tree
#: (an operand pair in every multiplier); (entry, head) pairs computed
COUNTERS = ("cycles_load", "cycles_compute", "chunks_issued", "pairs_done")
#: an entry names a Q row, a K row or a head at or beyond the job's: the job stops
FLAGS = ("err_index",)

#: counted cycles before the first chunk is issued: the walker's output register filled
START_CYCLES = 1
#: counted cycles after the last sum leaves the accumulating adder: it enters the output queue,
#: leaves it, and the pairs in flight reach zero (``done`` the cycle after)
DRAIN_CYCLES = 2
#: counted cycles of a job without a pair to compute
EMPTY_CYCLES = 1


def tree_depth(lanes: int) -> int:
    """Levels of the binary adder tree over ``lanes`` products."""
    return max(lanes - 1, 0).bit_length()


def pipeline_latency(config) -> int:
    """Cycles from a chunk issued to its (entry, head)'s sum leaving the accumulating adder:
    the buffer read, the operand registers, the multipliers, the tree, the accumulator."""
    return 2 + config.mul_latency + tree_depth(config.lanes) * config.add_latency + \
        config.add_latency


def output_depth(config) -> int:
    """Words of the output queue: enough that, with a consumer that takes a word every cycle,
    a group of ``add_latency`` pairs never waits for room (the cycle model's assumption); a
    power of two."""
    need = pipeline_latency(config) + 2 * config.add_latency + DRAIN_CYCLES + 4
    return 1 << (need - 1).bit_length()
