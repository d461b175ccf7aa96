"""Record layouts shared by the S-SpMM blocks (one definition for gateware, model and driver)."""

from __future__ import annotations

from amaranth.lib import data

from .config import SSpmmConfig


def widths(config: SSpmmConfig) -> dict[str, int]:
    """Bit widths of row ids, edge addresses and feature indices for a configuration."""
    return {
        "row": max(config.max_nodes - 1, 1).bit_length(),
        "edge": config.max_edges.bit_length(),
        "feature": max(config.max_feature_width - 1, 1).bit_length(),
    }


def job_layout(config: SSpmmConfig) -> data.StructLayout:
    """A job: ``deg`` turns over the neighbours at ``ptr`` for the lanes' features of ``row``.

    ``chunk`` is the job's index among its row's jobs: lane k works on the row's
    ``chunk * W + k``-th unmasked feature, which is where its sum goes in the compressed output
    row.
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
    })


def chunks(config: SSpmmConfig) -> int:
    """Jobs a fully unmasked row of ``max_feature_width`` features splits into."""
    return -(-config.max_feature_width // config.group_lanes)


def row_record_layout(config: SSpmmConfig) -> data.StructLayout:
    """What the row fetcher hands to the job emitter."""
    w = widths(config)
    return data.StructLayout({
        "row": w["row"],
        "ptr": w["edge"],
        "deg": w["edge"],
        "mask": config.max_feature_width,
        "jobs": range(chunks(config) + 1),
    })
