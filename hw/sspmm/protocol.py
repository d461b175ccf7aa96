"""The S-SpMM accelerator's interface as the host sees it, and the timing constants its cycle
model shares with the gateware. Plain Python: importing it loads no gateware.
"""

from __future__ import annotations

#: load streams of the top level, in the order a job fills them
STREAMS = ("indptr_in", "indices_in", "mask_in", "feat_in")
#: the output stream (compressed rows of Z, ``lanes`` words per beat)
OUTPUT = "out"
#: job scalars set before ``start``: rows of A (and Z), columns of A (= rows of H loaded in the
#: node buffer), features
SCALARS = ("n_rows", "n_cols", "n_features")
COUNTER_BITS = 32
#: status counters of the top level, per job (``cycles_total`` = compute + output in the
#: hardware); ``cycles_load_hidden``: the job's load cycles that overlapped the job before
COUNTERS = ("cycles_total", "cycles_load", "cycles_load_hidden", "cycles_compute",
            "cycles_output", "stall_no_job", "stall_output", "stall_no_context", "bubbles",
            "rows_fetched", "rows_read", "stall_bank")
#: error flags: a job that raises one stops cleanly
FLAGS = ("err_index", "err_indptr")
#: jobs follow one another without a reset; with two load banks the next job's loads overlap
#: the running one
RESTARTABLE = True
#: the design samples its scalars at ``start``: the next job's may be set as soon as a job has
#: started (its loads need ``n_features``: a feature row's beats)
SCALARS_AT_START = True

#: cycles from a row read's issue to its packet entering the tree: the issue registered, the
#: column index read, the feature row read (one more with the index registered, see
#: :func:`issue_to_root`)
ISSUE_TO_ROOT = 3
#: the same with the shared, banked node buffer (``node_banks`` > 0) when no bank conflict
#: delays it: the index also joins the reader's request queue
ISSUE_TO_ROOT_SHARED = 4

#: cycles a fetched row spends in the scheduler's check stage (its pointers and mask row
#: registered) before it can be queued
ROW_CHECK_LATENCY = 1
#: cycles a queued row spends in the job emitter's head register before its first job is offered
ROW_HEAD_LATENCY = 1
#: cycles from a turn's issue to its operands entering the adders: the local-buffer read, its
#: data's register, the operand register
FRONT_END_LATENCY = 3
#: a weighted configuration's lane multipliers (``SSpmmConfig.weighted``): stages of the
#: binary32 multiplier between the operand register and the adder, ``round(w * h)``
MUL_LATENCY = 7


def row_check_latency(config) -> int:
    """Cycles a fetched row spends in the scheduler's check stages: :data:`ROW_CHECK_LATENCY`,
    and one more with two or more root links (the mask's count and ranks registered before
    the row queue: the check's carry chains into the queue's LUT RAM were a longest path of
    the larger design)."""
    return ROW_CHECK_LATENCY + (1 if config.fetch_rows > 1 else 0)


def idle_latency(config) -> int:
    """Cycles between the engine going idle and the output stream starting: one with two or
    more root links (the idle test registered: the busy flags of the larger design's groups
    and fetchers into the output stream's start were a longest path), none with one."""
    return 1 if config.fetch_rows > 1 else 0


def local_write_latency(config) -> int:
    """Cycles an arriving entry spends in a register before its local-buffer write: one with
    two or more root links (``fetch_rows`` > 1: the buffer is two block-RAM banks, often placed
    far from the leaf's word selects, and the selects' way to them was a longest path), none
    with one."""
    return 1 if config.fetch_rows > 1 else 0


def leaf_to_buffer(config) -> int:
    """Cycles from a row read's packet entering the tree to its entry being readable in a local
    buffer: the tree's stages, the write register (:func:`local_write_latency`), the write."""
    return tree_depth(config.groups, config.tree_radix) + local_write_latency(config) + 1


def index_beat_words(config) -> int:
    """32-bit words of one ``indices_in`` beat: ``load_width`` column indices, and with
    ``weighted`` their ``load_width`` edge values after them (one beat, the same count of
    beats as without values)."""
    return config.load_width * (2 if config.weighted else 1)


def front_end_latency(config) -> int:
    """Cycles from a turn's issue to its addend entering the adders: :data:`FRONT_END_LATENCY`,
    and with ``weighted`` the multiplier's :data:`MUL_LATENCY` stages."""
    return FRONT_END_LATENCY + (MUL_LATENCY if config.weighted else 0)


def tree_depth(leaves: int, radix: int) -> int:
    """Switch levels between the root and the leaves (at least one register stage)."""
    depth, span = 1, radix
    while span < leaves:
        depth += 1
        span *= radix
    return depth


def issue_to_root(config) -> int:
    """Cycles from a row read's issue to its packet entering the tree in ``config``: the
    shared node buffer's, or the own one's with or without the index register."""
    if config.node_banks:
        return ISSUE_TO_ROOT_SHARED
    return ISSUE_TO_ROOT + (1 if config.registered_index else 0)
