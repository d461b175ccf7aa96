"""Cycle model of the S-SpMM accelerator.

Work is split into *jobs*: one per (row v, chunk of W = lanes / groups unmasked features), for rows
with at least one neighbour and one unmasked feature. A job takes one *turn* per neighbour; a
turn adds one neighbour's W selected features into W accumulators. Each of the G groups issues
one turn per cycle, interleaving ``adder_latency`` jobs so that an accumulator's previous sum
leaves the adder exactly when its next operand arrives. Hence

    turns          = sum_v deg(v) * ceil(|S_v| / W)
    cycles_compute ~ max(turns / G, jobs issued at one per cycle) + pipeline fill and drain
    utilisation    = work_adds / (lanes * cycles_compute)

Load cycles: the four load streams fill in parallel (row pointers, column indices and feature
words ``load_width`` per beat, one mask row per beat), so the longest stream sets them; output
cycles stream Z back at one word per lane per cycle.
The RTL comparison and the remaining error are documented in docs/sspmm.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.group import FRONT_END_LATENCY
from moagcn.sparse import degrees

from .golden.sspmm import normalise_mask


@dataclass
class SSpmmCycles:
    """Predicted (or, from the RTL, measured) cycle counts of one S-SpMM job."""

    cycles_load: int
    cycles_compute: int
    cycles_output: int
    work_adds: int
    turns: int
    jobs: int
    lanes: int

    @property
    def cycles_total(self) -> int:
        return self.cycles_load + self.cycles_compute + self.cycles_output

    @property
    def utilization(self) -> float:
        """work_adds / (lanes * cycles_compute)."""
        return self.work_adds / (self.lanes * self.cycles_compute) if self.cycles_compute else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["cycles_total"] = self.cycles_total
        d["utilization"] = self.utilization
        return d


def job_counts(indptr, mask, config: SSpmmConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per row: degree and number of jobs (feature chunks of W lanes)."""
    deg = degrees(indptr)
    unmasked = np.asarray(mask).astype(bool).sum(axis=1)
    w = config.group_lanes
    jobs = np.where(deg > 0, -(-unmasked // w), 0)
    return deg, jobs


def estimate(indptr, mask, n_features: int, config: SSpmmConfig) -> SSpmmCycles:
    """Predicted cycles for a job on ``config`` (mask ``None``: all ones)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    mask = normalise_mask(mask, (n, n_features))
    deg, jobs = job_counts(indptr, mask, config)
    turns = int(np.dot(deg, jobs))
    n_jobs = int(jobs.sum())
    issue = max(-(-turns // config.groups), n_jobs)
    compute = issue + (FRONT_END_LATENCY + config.adder_latency if n_jobs else 0) + 1
    # the load streams fill in parallel, one beat per stream per cycle: the longest one counts
    lw = config.load_width
    load = max(-(-(n + 1) // lw), -(-int(indptr[-1]) // lw), n, n * -(-n_features // lw))
    output = n * -(-n_features // config.lanes)
    work = int(np.dot(deg, mask.sum(axis=1)))
    return SSpmmCycles(load, compute, output, work, turns, n_jobs, config.lanes)
