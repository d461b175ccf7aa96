"""Record layouts shared by the S-SpMM blocks (one definition for gateware, model and driver),
and the signature of the links that carry neighbour rows between them."""

from __future__ import annotations

from amaranth.hdl import Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import Out

from moagcn.hw.common.bits import bits_for
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.mask_decoder import chunk_shape, lane_shape


def widths(config: SSpmmConfig) -> dict[str, int]:
    """Bit widths of row ids, edge addresses and feature indices for a configuration."""
    return {
        "row": bits_for(config.max_nodes),
        "edge": config.max_edges.bit_length(),
        "feature": bits_for(config.max_feature_width),
    }


def job_layout(config: SSpmmConfig) -> data.StructLayout:
    """A job: ``deg`` turns over the neighbours at ``ptr`` for the lanes' features of ``row``.

    ``chunk`` is the job's index among its row's jobs: lane k works on the row's
    ``chunk * W + k``-th unmasked feature, which is where its sum goes in the compressed output
    row. ``row_last`` marks the row's last job.
    """
    w = widths(config)
    lanes = config.group_lanes
    return data.StructLayout({
        "row": w["row"],
        "ptr": w["edge"],
        "deg": w["edge"],
        "sel": data.ArrayLayout(w["feature"], lanes),
        "lane_valid": lanes,
        "chunk": range(chunks(config)),
        "row_last": 1,
    })


def entry_layout(config: SSpmmConfig) -> data.StructLayout:
    """One local-buffer entry: a neighbour's W selected features and its job's bookkeeping;
    with ``weighted`` also its edge's value (binary32), which every lane multiplies by."""
    w = widths(config)
    lanes = config.group_lanes
    return data.StructLayout({
        "words": 32 * lanes,
        "first": 1,
        "last": 1,
        "row": w["row"],
        "chunk": range(chunks(config)),
        "lane_valid": lanes,
        **({"value": 32} if config.weighted else {}),
    })


def sel_layout(config: SSpmmConfig) -> data.ArrayLayout:
    """A job's lane features: which feature of the row each of the W lanes adds."""
    return data.ArrayLayout(widths(config)["feature"], config.group_lanes)


def packet_layout(config: SSpmmConfig, groups: int) -> data.StructLayout:
    """A neighbour row's marks on its way down the distribution tree, for ``groups`` groups
    (all of them at the root, one at a leaf; the row's words travel beside it, see
    :func:`row_words_shape`).

    ``dest`` has one bit per job context (``L = adder_latency`` per group). ``slot[g]`` is the
    destination context within group ``g`` and ``sel[g]`` its job's lane features: both are
    looked up once, in the fetcher, a register stage before the row arrives, so that a leaf
    only selects the words (decoding ``dest`` and looking up the context there was the
    longest path of the design).

    With ``weighted`` the packet also carries its entry's edge value (``value``, binary32,
    read from the edge-value buffer at the column index's address): every destination
    context of the row multiplies its features by it.
    """
    return data.StructLayout({
        "valid": 1,
        "first": 1,
        "last": 1,
        "dest": groups * config.adder_latency,
        "slot": data.ArrayLayout(range(config.adder_latency), groups),
        "sel": data.ArrayLayout(sel_layout(config), groups),
        **({"value": 32} if config.weighted else {}),
    })


def row_words_shape(config: SSpmmConfig) -> int:
    """Bits of a feature row (``max_feature_width`` binary32 words).

    The words move beside their packet rather than inside it: a simulator copies a struct
    built from parts on every cycle, while a plain signal passed along is one variable.
    """
    return 32 * config.max_feature_width


class RowLinkSignature(wiring.Signature):
    """One lane of the distribution tree, as its sender sees it: a neighbour row's packet
    (:func:`packet_layout` for ``groups`` groups) and, beside it, the row.

    Members
    -------
    packet : Out(packet_layout(config, dest_bits))
        ``valid``, ``first`` / ``last`` of its pass, the destination contexts, and per group
        the destination context and its lane features.
    words : Out(row_words_shape(config))
        The row's ``max_feature_width`` binary32 words.
    """

    def __init__(self, config: SSpmmConfig, groups: int):
        super().__init__({
            "packet": Out(packet_layout(config, groups)),
            "words": Out(row_words_shape(config)),
        })


def chunks(config: SSpmmConfig) -> int:
    """Jobs a fully unmasked row of ``max_feature_width`` features splits into."""
    return -(-config.max_feature_width // config.group_lanes)


def ranks_in_record(config: SSpmmConfig) -> bool:
    """Whether the row record carries its features' ranks (one slice: ranked before the row
    queue). With S > 1 the records wait in the dispatcher's 64-row queues, block RAM whose
    read yosys merges with the emitter's head register; records that wide took more block
    RAM, and the ranks then came from that late read (14.8-15.0 ns at S = 2), so each
    slice's emitter ranks the row as it takes it instead."""
    return config.slices == 1


def row_record_layout(config: SSpmmConfig) -> data.StructLayout:
    """What the row fetcher hands to the job emitter: the row, its pointer and degree, its
    mask, its jobs, and with :func:`ranks_in_record` each feature's job and lane
    (``chunk_of``, ``lane_of``: the rank of the feature among the mask's set bits, split as
    :class:`~.mask_decoder.MaskRanks` does)."""
    w = widths(config)
    F, W = config.max_feature_width, config.group_lanes
    fields = {
        "row": w["row"],
        "ptr": w["edge"],
        "deg": w["edge"],
        "mask": F,
        "jobs": range(chunks(config) + 1),
    }
    if ranks_in_record(config):
        fields["chunk_of"] = data.ArrayLayout(chunk_shape(F, W), F)
        fields["lane_of"] = data.ArrayLayout(lane_shape(W), F)
    if turns_in_record(config):
        fields["turns"] = w["edge"] + len(Signal(range(chunks(config) + 1)))
    return data.StructLayout(fields)


def turns_in_record(config: SSpmmConfig) -> bool:
    """Whether a row record carries its work, ``deg * jobs`` turns, multiplied in the scheduler
    before the row queue: with several slices and rows never split, the row dispatcher adds it
    to the chosen slice's assigned work (multiplied from the queue's read, on the way into those
    sums, it was the two-slice design's longest path)."""
    return config.slices > 1 and not config.split_degree
