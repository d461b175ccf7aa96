"""The full-graph runtime by name: ``--parallelism mop|partition`` and ``--pipeline``.

This is where the systems meet: MixGCN's Mixture of Parallelism (with its fine-grain pipeline)
and partition parallelism with SuperGCN's exchange plans.
"""

from __future__ import annotations

from moagcn.core.names import PARALLELISMS  # noqa: F401 (the vocabulary; re-exported)
from moagcn.errors import UserError
from moagcn.host.mixgcn.mop import MoPRuntime
from moagcn.host.mixgcn.pipeline_exec import PipelinedMoP
from moagcn.host.parallel.runtime import Runtime
from moagcn.host.supergcn.partition import PartitionRuntime


def make_runtime(parallelism: str, *args, partition: str = "contiguous",
                 aggregation: str = "post", pipeline: str = "none", stages: int | None = None,
                 **kwargs) -> Runtime:
    """``mop`` -> :class:`MoPRuntime` (with ``pipeline`` off / natural / rcm:
    :class:`~moagcn.host.mixgcn.pipeline_exec.PipelinedMoP`), ``partition`` ->
    :class:`PartitionRuntime`."""
    if pipeline != "none" and parallelism != "mop":
        raise UserError(f"--pipeline {pipeline} needs --parallelism mop (the fine-grain pipeline "
                        "overlaps MoP's sparse devices and dense workers)")
    if parallelism == "mop":
        if pipeline != "none":
            return PipelinedMoP(*args, pipeline=pipeline, stages=stages, **kwargs)
        if aggregation != "post":
            raise UserError(f"--aggregation {aggregation} needs --parallelism partition: under "
                            "mop no aggregation crosses a worker boundary (workers exchange "
                            "feature slices, not cut edges)")
        return MoPRuntime(*args, **kwargs)
    if parallelism == "partition":
        return PartitionRuntime(*args, partition=partition, aggregation=aggregation,
                                **kwargs)
    raise UserError(f"unknown parallelism {parallelism!r}; choose one of "
                    f"{', '.join(PARALLELISMS)}")
