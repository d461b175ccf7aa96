"""HyScale-GNN's system performance model (seed 003, Sec. V, Eq. 5-13).

**The model** (:func:`predict`). One training iteration of ``n`` trainers, trainer ``i`` on a
mini-batch of ``|V_i^L|`` targets with ``|V_i^l|`` sampled vertices and ``|E_i^l|`` sampled
edges per layer:

- Eq. 5: ``Throughput = sum_i sum_l |E_i^l| / T_execution`` (reported in MTEPS; NVTPS, our
  addition, is ``sum_i sum_{l=0..L} |V_i^l| / T_execution``: every sampled vertex counted once
  per layer it appears in, the input layer included);
- Eq. 6: ``T_execution = max(T_samp, T_load, T_trans, T_prop)``;
- ``T_samp``: not an equation in the paper, a design-time measurement; here a linear fit of
  one-thread sampling time in the sampled edges (or in the targets) from :func:`~moagcn.host.hyscale.calibrate.calibrate`,
  ``T_samp = sum_i t_samp_i / sampler_threads`` (at least ``max_i t_samp_i`` where every
  mini-batch has one thread, as in moagcn);
- Eq. 7: ``T_load = sum_i |V_i^0| f^0 S_feat / BW_DDR`` (CPU memory bandwidth);
- Eq. 8: ``T_trans = |V^0| f^0 S_feat / BW_PCIe`` of one accelerator (the largest accelerator
  mini-batch: every accelerator has its own link);
- Eq. 9: ``T_prop = max_i T_Trainer,i + T_sync``;
- Eq. 10: ``T_Trainer = sum_{l=1..L} (+)(t_agg^l, t_upd^l) + t_upd^1 + sum_{l=2..L}
  (+)(t_agg^l, t_upd^l)`` with ``(+)`` = sum for trainers that do not pipeline aggregation and
  update (CPU) and max for those that do (the paper's FPGA kernels);
- Eq. 11: ``t_agg^l = |E^l| f^{l-1} S_feat / BW`` (BW of the memory the trainer aggregates
  from);
- Eq. 12: ``t_upd^l = |V^l| f_a^{l-1} f^l / (N freq)``;
- Eq. 13: ``T_sync = 2 sum_l f_a^{l-1} f^l S_feat / BW_PCIe``.

**Indices.** The paper's Eq. 11-12 are printed with shifted indices (``|E^{l-1}| x f^l`` and
``|V^l| x f^l x f^{l+1}`` for ``l = 1..L``, which would need ``E^0`` and ``f^{L+1}``, neither
defined); Eq. 13 and Table I number layers from 1 with ``V^0`` the input vertices. We use that
numbering throughout: layer ``l`` aggregates the ``f^{l-1}``-wide features of ``V^{l-1}`` over
its ``|E^l|`` sampled edges into ``V^l`` and updates them to width ``f^l``, which is what the
text says each equation counts ("the traffic of fetching the feature vector of the source
vertices", "the number of MAC operations"). ``f_a^{l-1}`` is the width of the aggregated vector
``a^l`` the update multiplies (Eq. 3-4): ``f^{l-1}`` for GCN, ``2 f^{l-1}`` for GraphSAGE
(``h_v || mean``); Eq. 13's "model size" uses the same weight shapes.

**Mini-batch sizes.** ``|V^l|, |E^l|`` come either from sampling a few mini-batches of the real
graph with :class:`~moagcn.host.graphs.minibatch.NeighborSampler` (:func:`sampled_sizes`; measured), or
analytically (:func:`analytic_sizes`; for the paper's datasets, whose graphs are not here): each
of ``|V^l|`` vertices draws ``min(k_l, d)`` neighbours (``E[min(d, k)]`` over the degree
distribution when one is given, else ``min(k, mean degree)``, an upper bound by Jensen), and the
distinct vertices of layer ``l - 1`` are ``|V^l|`` plus the expected number of distinct other
vertices hit by ``|E^l|`` uniform draws -- an over-estimate on power-law graphs, where the draws
repeat hubs.

**u250** (:func:`u250_platform`): Table II/IV: 4 Alveo U250 (77 GB/s DDR, m = 2048 MAC units
at 300 MHz), 2 x EPYC 7763 (205 GB/s and 3.6 TFLOPS each). The PCIe bandwidth, the number of
CPU trainers and the sampler threads are not in the paper: assumptions, listed in the preset's
``sources`` and printed. Table VI gives the paper's epoch times (25,10 fanouts; hidden 256 beside
PaGraph, 32 beside P^3); MAG240M's are only in Fig. 8 (not in the text), so none is printed.


Calibration on this host: :mod:`moagcn.host.hyscale.calibrate`; what the equations do not see here:
:mod:`moagcn.host.hyscale.shared_host`; the initial split: :mod:`moagcn.host.hyscale.split`; the
paper's datasets: :mod:`moagcn.host.hyscale.paper`; the bench: :mod:`moagcn.host.benches.hyscale_model`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.sim.hyscale.model import (COMBINES, t_aggregate, t_load, t_sync, t_trainer, t_trans,
                                      t_update, update_width)

# -- mini-batch sizes ---------------------------------------------------------------------------


@dataclass
class BatchSizes:
    """One trainer's mini-batch: ``V[l] = |V^l|`` for ``l = 0..L`` (``V[L]`` the targets) and
    ``E[l - 1] = |E^l|`` for ``l = 1..L`` (layer ``l``'s sampled edges); means when estimated."""

    V: list
    E: list
    source: str = "given"

    def __post_init__(self):
        if len(self.V) != len(self.E) + 1 or not self.E:
            raise UserError(f"BatchSizes: {len(self.V)} vertex counts and {len(self.E)} edge "
                            "counts; give L + 1 and L (L >= 1)")
        if min(self.V) < 0 or min(self.E) < 0:
            raise UserError("BatchSizes: counts must be >= 0")

    @property
    def layers(self) -> int:
        return len(self.E)

    @property
    def targets(self) -> float:
        return self.V[-1]

    @property
    def edges(self) -> float:
        return float(sum(self.E))


def sampled_sizes(graph, fanouts, batch: int, train_ids, samples: int = 4, seed: int = 0,
                  keep: bool = False):
    """Mean ``|V^l|, |E^l|`` of ``samples`` mini-batches of ``batch`` random training nodes,
    sampled with :class:`NeighborSampler` (measured, not modeled); with ``keep``, also the
    mini-batches."""
    ids = np.asarray(train_ids)
    if not 1 <= batch <= ids.size:
        raise UserError(f"sampled_sizes: batch {batch} does not fit {ids.size} training nodes")
    sampler = NeighborSampler(graph, list(fanouts), seed)
    rng = np.random.default_rng([seed, batch])
    mbs = [sampler.sample(rng.choice(ids, batch, replace=False), (7919, s))
           for s in range(samples)]
    V = [float(np.mean([mb.blocks[0].n_src for mb in mbs]))]
    V += [float(np.mean([mb.blocks[l].n_dst for mb in mbs])) for l in range(len(fanouts))]
    E = [float(np.mean([mb.blocks[l].graph.nnz for mb in mbs])) for l in range(len(fanouts))]
    sizes = BatchSizes(V, E, f"sampled ({samples} mini-batches)")
    return (sizes, mbs) if keep else sizes


def analytic_sizes(n_nodes: int, batch: int, fanouts, mean_degree: float | None = None,
                   degrees=None) -> BatchSizes:
    """Expected ``|V^l|, |E^l|`` without sampling (see the module docstring): ``degrees`` (the
    in-degree of every vertex) when known, else ``mean_degree``; ``fanouts`` input layer
    first, None for all neighbours."""
    if degrees is None and mean_degree is None:
        raise UserError("analytic_sizes: give mean_degree or degrees")
    L = len(fanouts)
    V = [0.0] * (L + 1)
    E = [0.0] * L
    V[L] = float(batch)
    d = None if degrees is None else np.asarray(degrees, dtype=np.float64)
    for l in range(L, 0, -1):
        k = fanouts[l - 1]
        if d is not None:
            capped = d if k is None else np.minimum(d, k)
            # targets are uniform; lower layers are reached along edges (weight ~ degree)
            per = capped.mean() if l == L else float((capped * d).sum() / max(d.sum(), 1.0))
        else:
            per = float(mean_degree) if k is None else min(float(k), float(mean_degree))
        E[l - 1] = V[l] * per
        others = max(n_nodes - V[l], 0.0)
        V[l - 1] = V[l] + others * (1.0 - math.exp(-E[l - 1] / max(n_nodes, 1)))
    return BatchSizes(V, E, "analytic")


# -- platforms ----------------------------------------------------------------------------------


@dataclass
class Platform:
    """What Eq. 5-13 need of a machine. Bandwidths in bytes/s, MAC rates in MAC/s.

    ``sampling``: ``{"basis": "edges"|"targets", "intercept_s", "slope_s"}``, one thread's
    sampling time of one mini-batch; ``sampler_threads`` threads sample, each its own
    mini-batches (``share_batches=False``: ``T_samp`` is at least the largest one's time, as
    in moagcn's prefetchers) or all of them together (``True``: the threads split every
    mini-batch, ``T_samp = sum_i t_samp_i / threads``).
    ``sources`` says where each number comes from (measured, paper, assumed).
    """

    name: str
    bw_ddr: float                 # CPU memory (Eq. 7)
    bw_pcie: float                # one accelerator's link (Eq. 8, Eq. 13)
    cpu_agg_bw: float             # Eq. 11 of a CPU trainer
    cpu_macs: float               # Eq. 12 of a CPU trainer (N x freq)
    accel_agg_bw: float           # Eq. 11 of an accelerator trainer (its device memory)
    accel_macs: float             # Eq. 12 of an accelerator trainer
    combine_cpu: str = "sum"
    combine_accel: str = "max"
    sampling: dict = field(default_factory=dict)
    sampler_threads: int = 1
    share_batches: bool = False
    sources: dict = field(default_factory=dict)

    def __post_init__(self):
        for k in ("bw_ddr", "bw_pcie", "cpu_agg_bw", "cpu_macs", "accel_agg_bw", "accel_macs"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise UserError(f"platform {self.name}: {k} = {v!r} must be a positive number")
        for k in ("combine_cpu", "combine_accel"):
            if getattr(self, k) not in COMBINES:
                raise UserError(f"platform {self.name}: {k} must be one of {COMBINES}")
        if self.sampler_threads < 1:
            raise UserError(f"platform {self.name}: sampler_threads must be >= 1")

    def agg_bw(self, kind: str) -> float:
        return self.accel_agg_bw if kind == "accel" else self.cpu_agg_bw

    def macs(self, kind: str) -> float:
        return self.accel_macs if kind == "accel" else self.cpu_macs

    def combine(self, kind: str) -> str:
        return self.combine_accel if kind == "accel" else self.combine_cpu

    def t_samp(self, sizes: BatchSizes) -> float:
        """One thread's sampling time of one mini-batch (0 without a sampling fit)."""
        s = self.sampling
        if not s:
            return 0.0
        x = sizes.edges if s.get("basis", "edges") == "edges" else sizes.targets
        return max(0.0, float(s["intercept_s"]) + float(s["slope_s"]) * x)

    def as_dict(self) -> dict:
        return asdict(self)


def local_platform(cal: dict) -> Platform:
    """This machine, from :func:`~moagcn.host.hyscale.calibrate.calibrate`'s measurements; the accelerator trainer is the
    S-SpMM cycle model with torch updates on the host (not pipelined: ``(+)`` = sum)."""
    acc = cal.get("accel") or {}
    return Platform(
        name="local", bw_ddr=cal["bw_ddr"], bw_pcie=cal["bw_pcie"],
        cpu_agg_bw=cal["cpu_agg_bw"], cpu_macs=cal["cpu_macs"],
        accel_agg_bw=acc.get("nominal_bw", cal["cpu_agg_bw"]), accel_macs=cal["cpu_macs"],
        combine_cpu="sum", combine_accel="sum",
        sampling=dict(cal["sampling"]["fits"][cal["sampling"]["basis"]],
                      basis=cal["sampling"]["basis"]),
        sampler_threads=int(cal.get("sampler_threads", 1)),
        sources={"bw_ddr": "measured: stage A's load after sampling",
                 "bw_pcie": "measured: stage B's copy of X', labels and blocks (no PCIe here)",
                 "cpu_agg_bw": "measured: torch CSR product",
                 "cpu_macs": "measured: torch linear",
                 "accel_agg_bw": "S-SpMM adders x 4 B x clock (datapath rate)",
                 "accel_macs": "measured (updates run in torch on the host)",
                 "sampling": "measured, linear fit",
                 "combine_accel": "sum: the trainer aggregates, then updates"})


#: the paper's Table II / IV, per device
U250 = {"ddr_gb_s": 77.0, "mac_units": 2048, "clock_mhz": 300.0, "peak_tflops": 0.6}
EPYC_7763 = {"ddr_gb_s": 205.0, "peak_tflops": 3.6, "clock_ghz": 2.45, "cores": 64}


def u250_platform(cal: dict | None = None, pcie_gb_s: float = 12.0, sockets: int = 2,
                  sampler_threads: int = 32, cpu_trainer_share: float = 1.0) -> Platform:
    """The paper's CPU-FPGA node: 2 x EPYC 7763 + 4 x Alveo U250 (Table II, IV).

    From the paper: U250 DDR 77 GB/s (Eq. 11 of an FPGA trainer), m = 2048 MAC units at 300
    MHz (Eq. 12), ``(+)`` = max (its aggregate and update kernels are pipelined); EPYC 7763
    205 GB/s and 3.6 TFLOPS per socket. Assumed (not in the paper): ``pcie_gb_s`` effective
    per U250 (PCIe Gen3 x16 is 15.75 GB/s raw); one CPU trainer using ``cpu_trainer_share`` of
    both sockets' peak (3.6 TFLOPS = 1.8 TMAC/s each) and their memory bandwidth (Eq. 7 and 11
    both get all of it: Eq. 6 takes a max, it does not add them); sampling at this machine's
    measured one-thread rate (``cal``) on ``sampler_threads`` EPYC cores, per sampled edge (the
    calibration's edge fit whichever fit this machine's graph prefers: the paper's graphs
    have far more sampled edges per target than a small local one, so a fit per target
    carries over to them only by accident; the two fits' products estimates differed
    sevenfold) -- without ``cal``, no sampling term.
    """
    bw_cpu = sockets * EPYC_7763["ddr_gb_s"] * 1e9
    cpu_macs = cpu_trainer_share * sockets * EPYC_7763["peak_tflops"] * 1e12 / 2
    sampling = {}
    if cal is not None:
        s = cal["sampling"]
        basis = "edges" if "edges" in s["fits"] else s["basis"]
        sampling = dict(s["fits"][basis], basis=basis)
    return Platform(
        name="u250", bw_ddr=bw_cpu, bw_pcie=pcie_gb_s * 1e9, cpu_agg_bw=bw_cpu,
        cpu_macs=cpu_macs, accel_agg_bw=U250["ddr_gb_s"] * 1e9,
        accel_macs=U250["mac_units"] * U250["clock_mhz"] * 1e6, combine_cpu="sum",
        combine_accel="max", sampling=sampling, sampler_threads=sampler_threads,
        share_batches=True, sources={
            "accel_agg_bw": "paper Table II (U250 77 GB/s)",
            "accel_macs": "paper Table IV (m = 2048) at Table II's 300 MHz",
            "bw_ddr": f"paper Table II ({sockets} x 205 GB/s)",
            "cpu_macs": f"paper Table II ({sockets} x 3.6 TFLOPS, 2 flops per MAC) x "
                        f"{cpu_trainer_share} (assumed: one CPU trainer)",
            "cpu_agg_bw": "paper Table II (CPU memory, as Eq. 11 says)",
            "bw_pcie": f"ASSUMED {pcie_gb_s} GB/s effective (not in the paper)",
            "sampling": (f"ASSUMED: this host's one-thread rate per sampled edge on "
                         f"{sampler_threads} cores" if cal is not None
                         else "none (no calibration)"),
            "combine_accel": "max (paper: FPGA pipelines aggregate and update)"})


# -- the equations --------------------------------------------------------------------------------


def predict(sizes: list, kinds: list, dims, platform: Platform, model: str = "sage",
            agg_seconds: dict | None = None, n_train: int | None = None,
            batches: list | None = None) -> dict:
    """Eq. 5-13 for one iteration of trainers ``kinds`` (``cpu``/``gpu``/``accel``) on
    mini-batches ``sizes`` (one :class:`BatchSizes` each), layer widths ``dims = [f^0, ...,
    f^L]``.

    ``agg_seconds``: ``{trainer index: [t_agg^1, ..., t_agg^L]}`` replacing Eq. 11 for those
    trainers (e.g. the S-SpMM cycle model's figure). ``n_train`` (training vertices) gives the
    epoch time: ``ceil(n_train / targets per iteration)`` iterations, or ``batches``
    (``[(count, per-iteration prediction)]``) when the caller predicts uneven batches itself.
    """
    if len(sizes) != len(kinds) or not sizes:
        raise UserError(f"predict: {len(sizes)} mini-batches for {len(kinds)} trainers")
    L = len(dims) - 1
    for s in sizes:
        if s.layers != L:
            raise UserError(f"predict: a mini-batch has {s.layers} layers, the model {L}")
    trainers = []
    for i, (s, k) in enumerate(zip(sizes, kinds)):
        if agg_seconds and i in agg_seconds:
            ta = [float(x) for x in agg_seconds[i]]
            agg_from = "given"
        else:
            ta = [t_aggregate(s.E[l - 1], dims[l - 1], platform.agg_bw(k)) for l in range(1, L + 1)]
            agg_from = "eq11"
        tu = [t_update(s.V[l], update_width(model, dims[l - 1]), dims[l], platform.macs(k))
              for l in range(1, L + 1)]
        how = platform.combine(k)
        trainers.append({"kind": k, "targets": s.targets, "t_aggregate": ta, "t_update": tu,
                         "combine": how, "agg_from": agg_from,
                         "T_trainer": t_trainer(ta, tu, how)})
    t_s = [platform.t_samp(s) for s in sizes]
    T_samp = sum(t_s) / platform.sampler_threads
    if not platform.share_batches:
        T_samp = max(T_samp, max(t_s))
    T_load = t_load([s.V[0] for s in sizes], dims[0], platform.bw_ddr)
    acc = [i for i, k in enumerate(kinds) if k == "accel"]
    T_trans = max((t_trans(sizes[i].V[0], dims[0], platform.bw_pcie) for i in acc), default=0.0)
    T_sync = t_sync(dims, platform.bw_pcie, model)
    T_prop = max(t["T_trainer"] for t in trainers) + T_sync
    stages = {"T_samp": T_samp, "T_load": T_load, "T_trans": T_trans, "T_prop": T_prop}
    T_exec = max(stages.values())
    edges = sum(s.edges for s in sizes)
    vertices = sum(sum(s.V) for s in sizes)
    targets = sum(s.targets for s in sizes)
    out = {"platform": platform.name, "model": model, "dims": list(dims), "kinds": list(kinds),
           "trainers": trainers, "t_samp": t_s, "T_sync": T_sync, **stages,
           "T_execution": T_exec, "bottleneck": max(stages, key=stages.get),
           "edges": edges, "vertices": vertices, "targets": targets,
           "MTEPS": edges / T_exec / 1e6 if T_exec else 0.0,
           "NVTPS": vertices / T_exec if T_exec else 0.0,
           "targets_per_s": targets / T_exec if T_exec else 0.0}
    if batches is not None:
        out["iterations_per_epoch"] = sum(c for c, _ in batches)
        out["epoch_s"] = sum(c * p["T_execution"] for c, p in batches)
    elif n_train is not None:
        its = math.ceil(n_train / targets)
        out["iterations_per_epoch"] = its
        out["epoch_s"] = its * T_exec
    return out


