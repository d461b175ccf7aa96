"""Full-graph training across torch.distributed processes (one worker per process).

Two ways to start a run:

- :func:`train_distributed` starts ``cfg.workers`` local processes through
  :func:`moagcn.host.parallel.launch.launch` (what ``moagcn train --distributed`` does);
- under ``torchrun``, :func:`train_from_env` joins the group described by the environment
  (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).
"""

from __future__ import annotations

import dataclasses
import os

import torch.distributed as dist

from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset
from moagcn.host.parallel.launch import (DistComm, dense_for_rank, init_group, launch,
                                         process_group_backend)
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import TrainResult, train


def _train_worker(rank: int, world: int, dense, emit, dataset: Dataset, cfg: TrainConfig):
    result = train(dataset, cfg, comm=DistComm(), on_epoch=emit if rank == 0 else None,
                   dense=dense)
    return result if rank == 0 else None


def train_distributed(dataset: Dataset, cfg: TrainConfig, on_epoch=None,
                      backend: str | None = None) -> TrainResult:
    """Train with ``cfg.workers`` local processes (one worker each) and return rank 0's result.

    ``on_epoch`` runs in this process for every epoch record rank 0 reports.
    """
    cfg.validate()
    world = cfg.workers
    if world < 2:
        raise UserError("--distributed needs --workers of at least 2 (one process per worker)")
    return launch(_train_worker, world, (dataset, cfg), on_event=on_epoch, backend=backend,
                  what="distributed training")[0]


def train_from_env(dataset: Dataset, cfg: TrainConfig, on_epoch=None) -> TrainResult:
    """Join the torchrun-described process group and train; every rank returns the result."""
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if key not in os.environ:
            raise UserError(f"{key} is not set: run under torchrun, or use --distributed "
                            "without torchrun to spawn local processes")
    backend = process_group_backend(int(os.environ["WORLD_SIZE"]))
    init_group(backend)
    try:
        cfg = dataclasses.replace(cfg, workers=dist.get_world_size())
        dense = dense_for_rank(backend, dist.get_rank())
        return train(dataset, cfg, comm=DistComm(), on_epoch=on_epoch if dist.get_rank() == 0
                     else None, dense=dense)
    finally:
        dist.destroy_process_group()
