"""Calibration of HyScale-GNN's system model on this host (the paper's "design time").

**Calibration** (:func:`calibrate`, the paper's "design time"; every number is measured on this
machine): sampling time per mini-batch at several batch sizes and its linear fits; the effective
bandwidth of stage A's load (``BW_DDR``: the gather and the labels, timed right after each
calibration batch is sampled, as stage A runs them); of stage B's copy (the features, labels
and blocks, as the prefetcher copies them; our transfer is a CPU copy: the ``BW_PCIe``
stand-in); the MAC rate of a torch ``linear`` of the layers'
shapes (``N freq`` of the CPU trainer, and of the accelerator trainer, whose updates run in
torch here); the effective aggregation bandwidth of the CPU trainer's torch sparse product;
for the accelerator the S-SpMM cycle model's cycles on the sampled blocks; and, for the
extensions below only, the trainers' host overhead, the synchronizer's time and the threads'
interference.

**Accelerator trainers on this machine.** Their aggregations run on the S-SpMM cycle model and
their updates in torch on the host, one after the other (not pipelined), so the ``local``
platform's accelerator ``(+)`` is a sum and its ``N freq`` is the host's; the ``u250`` preset
uses max, as the paper's FPGA. Their aggregation time is given two ways: Eq. 11 with the
S-SpMM datapath's rate (``adders x 4 B x clock``, the "bandwidth" at which it consumes
neighbour features; platform metadata, as the paper uses) and the cycle model's figure on
sampled blocks (forward of every layer, backward of layers 2..L, as the trainer runs them;
load, compute and output cycles). The bench prints both.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
import time
import weakref

import numpy as np
import torch

from moagcn.core.device import CpuDevice
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.minibatch import NeighborSampler, training_ids
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.hyscale.minibatch import LoadedBatch, transfer
from moagcn.host.hyscale.perf import BatchSizes
from moagcn.host.hyscale.stage_a import FeatureLoader, bind, core_plan, stage_a
from moagcn.host.hyscale.trainers import BlockOperators, Trainer
from moagcn.host.nn.layerwise import AGGREGATION_KIND, local_operator
from moagcn.host.nn.models import GNN
from moagcn.host.parallel import ipc
from moagcn.sim.hyscale.model import S_FEAT, t_aggregate, t_trainer, t_update, update_width


def _median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(statistics.median(ts))


def _fit(x, y) -> dict:
    """Least-squares ``y = a + b x`` with its relative RMS error."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    A = np.stack([np.ones_like(x), x], 1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    pred = a + b * x
    err = float(np.sqrt(np.mean(((pred - y) / y) ** 2)))
    return {"intercept_s": float(a), "slope_s": float(b), "rel_rms": err}


def _accel_agg(mb, dims, model: str, device) -> dict:
    """The S-SpMM cycle model on one mini-batch as ``Trainer.step`` runs it: the forward
    product of every layer at width ``f^{l-1}``, the backward (transposed) product of layers
    2..L; per layer seconds at the device clock, and the simulation's wall time."""
    kind = AGGREGATION_KIND[model]
    secs, wall = [], 0.0
    clock = device.clock_mhz * 1e6
    for l, block in enumerate(mb.blocks, start=1):
        adj, _, _ = local_operator(kind, block.graph, block.dst_pos)
        f = int(dims[l - 1])
        c0 = device.counters.cycles_total
        t0 = time.perf_counter()
        device.sspmm(adj, np.zeros((adj.n_cols, f), dtype=np.float32))
        if l >= 2:
            device.sspmm(adj.transpose(), np.zeros((adj.n_rows, f), dtype=np.float32))
        wall += time.perf_counter() - t0
        secs.append((device.counters.cycles_total - c0) / clock)
    return {"seconds": secs, "wall_s": wall}


def _spread(v) -> float:
    """``std / mean`` of durations without the slowest 5 % (one descheduling outlier in a short
    window would dominate the standard deviation)."""
    v = np.sort(np.asarray(v, dtype=np.float64))
    if v.size < 2:
        return 0.0
    v = v[:max(2, int(math.ceil(0.95 * v.size)))]
    return float(v.std() / v.mean()) if v.mean() > 0 else 0.0


def _loop_unit(fn, start, stop, conn, cores=None) -> None:
    """One looping worker of :func:`interference` (a thread, or a forked process): bind to
    ``cores`` (None: not bound), wait for the start, run ``fn`` until ``stop``, send back the
    units' durations and the elapsed time (or the error that stopped it, as text: the caller
    raises it)."""
    bind(cores)
    start.wait()
    t0 = time.perf_counter()
    durs, elapsed = [], 0.0
    try:
        while not stop.is_set():
            t1 = time.perf_counter()
            fn()
            durs.append(time.perf_counter() - t1)
            elapsed = time.perf_counter() - t0
    except Exception as e:      # noqa: BLE001 (reported to the caller)
        conn.send(f"{type(e).__name__}: {e}")
        return
    conn.send((durs, elapsed))


def _beside(fn, period_s: float, stop, cores=None) -> None:
    """A stage-B thread beside a trainer in a mix of :func:`interference`: ``fn`` (one
    batch's transfer) once per ``period_s`` (a trainer step alone) until ``stop``; bound to
    ``cores`` (the trainers') when given."""
    bind(cores)
    while not stop.is_set():
        t0 = time.perf_counter()
        fn()
        stop.wait(max(0.0, period_s - (time.perf_counter() - t0)))


def interference(units: dict, window_s: float = 0.5, alone_reps: int = 7,
                 processes: str = "", beside_t=None, pin: bool = False) -> dict:
    """How the stages' workers slow each other down (this host's two cores, and the GIL between
    threads): ``units`` maps a class letter (``A``: a stage-A sampling, ``T``: a trainer
    step) to a function running one unit of its work; the classes in ``processes`` run in
    forked processes (as ``hyscale_train``'s stage A does by default; their unit must not call
    torch), the others in threads of this process. Each unit's time alone is measured;
    then every mix of ``AA``, ``AT``, ``AAT`` (those whose classes are given) runs for
    ``window_s``, every worker looping its unit, and a worker's speed is its completed units'
    alone time over the time they took (1 = as fast as alone, the most it counts). The alone
    times are the medians of runs before and after the mixes. ``cores``: the speeds of the
    largest mix summed (the effective number of cores for fair sharing). ``beside_t``
    (optional): stage B's work on one batch; in every mix with a trainer a thread of this
    process runs it once per trainer step (alone time), as the prefetcher's stage-B thread
    copies each batch while the trainer trains. ``cv[cls][mix]``: the
    spread (:func:`_spread`) of a unit's duration in that mix (``cv[cls][cls]``: alone) --
    with three workers on two vCPUs the scheduler's time slices make it large. ``pin``: in
    every mix the workers of the forked classes are bound to cores as ``hyscale_train``'s
    stage-A processes are (:func:`~moagcn.host.hyscale.stage_a.core_plan` of their number: each on
    its own core, the threads of this process on the others), where there are enough cores."""
    import multiprocessing

    alone_ts: dict = {c: [] for c in units}

    def time_alone():
        for c, fn in units.items():
            fn()
            for _ in range(alone_reps):
                t0 = time.perf_counter()
                fn()
                alone_ts[c].append(time.perf_counter() - t0)

    # alone before and after the mixes (a shared host's speed drifts: alone times taken in a
    # slow spell made a mix look faster than alone, and the host more than two cores)
    time_alone()
    alone_t = float(statistics.median(alone_ts["T"])) if "T" in alone_ts else 0.0
    speeds: dict = {c: {} for c in units}
    cv: dict = {c: {} for c in units}
    mixes = [m for m in ("AA", "AT", "AAT") if all(c in units for c in m)]
    mix_runs = []
    ctx = multiprocessing.get_context("fork") if processes else None
    for mix in mixes:
        forked = any(c in processes for c in mix)
        plan = core_plan(sum(c in processes for c in mix)) if pin and forked else None
        own = iter(plan[1]) if plan else None
        stop = ctx.Event() if forked else threading.Event()
        start = ctx.Barrier(len(mix) + 1) if forked else threading.Barrier(len(mix) + 1)
        workers, conns = [], []
        for c in mix:
            ours, theirs = multiprocessing.Pipe(duplex=False)
            kind = ctx.Process if c in processes else threading.Thread
            cores = None if plan is None else (next(own) if c in processes else plan[0])
            workers.append(kind(target=_loop_unit, args=(units[c], start, stop, theirs, cores),
                                daemon=True))
            conns.append(ours)
        for w in workers:
            w.start()
        start.wait()
        helpers = []
        if beside_t is not None and "T" in mix:
            halt = threading.Event()
            helpers = [threading.Thread(target=_beside,
                                        args=(beside_t, alone_t, halt, plan and plan[0]),
                                        name="moagcn-calibration-stage-b", daemon=True)
                       for _ in range(mix.count("T"))]
            for h in helpers:
                h.start()
        time.sleep(window_s)
        stop.set()
        if helpers:
            halt.set()
            for h in helpers:
                h.join()
        got = [conn.recv() for conn in conns]
        for w in workers:
            w.join()
        for c, g in zip(mix, got):
            if isinstance(g, str):
                raise RuntimeError(f"interference: a unit of class {c} failed in mix {mix}: {g}")
        mix_runs.append((mix, got))
    time_alone()
    alone = {c: float(statistics.median(ts)) for c, ts in alone_ts.items()}
    alone_cv = {c: _spread(ts) for c, ts in alone_ts.items()}
    for mix, got in mix_runs:
        durs = [d for d, _ in got]
        done = [[len(d), e] for d, e in got]
        for c in set(mix):
            # a worker in a mix is no faster than alone: a speed above 1 is the host's noise
            v = [min(1.0, done[k][0] * alone[c] / done[k][1]) for k, x in enumerate(mix)
                 if x == c and done[k][1] > 0]
            speeds[c][mix] = float(np.mean(v)) if v else 1.0
            cv[c][mix] = _spread([d for k, x in enumerate(mix) if x == c for d in durs[k]])
    big = mixes[-1] if mixes else "A"
    cores = sum(speeds[c].get(big, 1.0) for c in big)
    return {"alone_s": alone, "speeds": speeds, "cores": float(cores), "window_s": window_s,
            "cv": {c: dict(cv[c], **{c: alone_cv[c]}) for c in units},
            "processes": processes, "stage_b_beside": beside_t is not None, "pinned": pin}


def _eq10_updates(sizes: BatchSizes, dims, model: str, macs: float) -> float:
    """Eq. 10's update terms alone (forward of every layer, backward of 1..L)."""
    tu = [t_update(sizes.V[l], update_width(model, dims[l - 1]), dims[l], macs)
          for l in range(1, len(dims))]
    return sum(tu) + tu[0] + sum(tu[1:])


def dropout_elements(sizes: BatchSizes, dims) -> float:
    """Elements of the features every layer reads (``sum_l |V^{l-1}| f^{l-1}``): what
    ``Trainer.step`` draws dropout masks over, a regressor of the host overhead."""
    return float(sum(sizes.V[l - 1] * dims[l - 1] for l in range(1, len(dims))))


def overhead_seconds(fit: dict | None, sizes: BatchSizes, dims) -> float:
    """The calibrated host overhead of one trainer step (0 without a fit)."""
    if not fit:
        return 0.0
    return max(0.0, fit["a_s"] + fit["per_element_s"] * dropout_elements(sizes, dims)
               + fit["per_edge_s"] * sizes.edges)


def _fit_overhead(rows: list) -> dict:
    """Non-negative least squares of ``residual = a + b x elements + c x edges``."""
    from scipy.optimize import nnls
    A = np.array([[1.0, r["elements"], r["edges"]] for r in rows])
    y = np.array([r["residual_s"] for r in rows])
    scale = np.maximum(A.max(0), 1e-30)
    coef, _ = nnls(A / scale, np.maximum(y, 0.0))
    coef = coef / scale
    pred = A @ coef
    return {"a_s": float(coef[0]), "per_element_s": float(coef[1]),
            "per_edge_s": float(coef[2]),
            "rel_rms": float(np.sqrt(np.mean(((pred - y) / np.maximum(y, 1e-9)) ** 2)))}


def _sizes_of(mb) -> BatchSizes:
    return BatchSizes([mb.blocks[0].n_src] + [b.n_dst for b in mb.blocks],
                      [b.graph.nnz for b in mb.blocks], "sampled")


#: the mini-batch sizes :func:`calibrate` times by default (targets per trainer)
CALIBRATION_SIZES = (128, 256, 512, 1024)


def calibrate(dataset, fanouts=(25, 10), model: str = "sage", hidden: int = 128,
              batch_sizes=CALIBRATION_SIZES, repeats: int = 5, seed: int = 0,
              threads: int = 1, accel: bool = True, design: str = "sspmm",
              preset: str | None = None, normalize_features: bool = True,
              dropout: float = 0.5, trainer_steps: int = 3, stage_a: str = "process",
              pin_cores: bool = True) -> dict:
    """Design-time measurements on this machine (see the module docstring); JSON-able.

    Sampling: every batch size ``repeats`` times, fitted linearly in sampled edges and in
    targets (the better fit is used). Bandwidths and rates: medians over ``repeats`` after a
    warm-up, bytes (MACs) over seconds summed over the batch sizes. ``threads``: torch
    intra-op threads (``hyscale_train``'s ``trainer_threads``). ``trainer_steps`` > 0 also
    times ``Trainer.step`` (CPU, and accelerator with ``accel``) on the calibration
    mini-batches and fits what Eq. 10 does not explain (``trainer_overhead``), and times one
    synchronizer step (``sync_s``): both only for our host variant, not part of Eq. 5-13.
    Sampling is timed with the blocks' operators (:class:`~moagcn.host.hyscale.train.
    BlockOperators`), as ``hyscale_train``'s stage A makes them, and the trainer steps take
    them made; ``stage_a`` (``process`` or ``thread``, as ``HybridConfig.stage_a``) is how the
    interference of the stage-A workers with the trainers is measured, with the processes
    bound to cores as ``HybridConfig.pin_cores`` binds them (``pin_cores``).
    """

    fanouts = list(fanouts)
    ids = training_ids(dataset.train_mask, labels=dataset.labels)
    prepare = BlockOperators(model, dataset.graph.degrees().astype(np.int64), fanouts)
    sizes_b = sorted({min(int(b), ids.size) for b in batch_sizes})
    X = row_normalize(dataset.features) if normalize_features else \
        np.asarray(dataset.features, dtype=np.float32)
    dims = [dataset.n_features] + [hidden] * (len(fanouts) - 1) + [dataset.n_classes]
    loader = FeatureLoader(X, dataset.labels)
    sampler = NeighborSampler(dataset.graph, fanouts, seed)
    rng = np.random.default_rng([seed, 3])
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    t_start = time.perf_counter()
    try:
        points, mbs = [], {}
        for r in range(2):                                   # warm-up
            mb = sampler.sample(rng.choice(ids, sizes_b[-1], replace=False), (1, r))
            prepare(mb)
            loader.gather(mb.input_nodes).clone()
        # the load as stage A makes it (FeatureLoader.load): right after its batch is sampled
        # (the features are not in the cache then: 2-3x the time of gathering the same rows
        # again), with numpy in the stage-A processes, torch in threads
        gathers = []
        for b in sizes_b:
            for r in range(repeats):
                tg = rng.choice(ids, b, replace=False)
                t0 = time.perf_counter()
                mb = sampler.sample(tg, (b, r))
                prepare(mb)
                t1 = time.perf_counter()
                x, _ = loader.load(mb, numpy=stage_a == "process")
                t2 = time.perf_counter()
                points.append({"targets": b, "edges": mb.edges, "seconds": t1 - t0,
                               "V": _sizes_of(mb).V, "E": _sizes_of(mb).E})
                gathers.append((int(np.prod(x.shape)) * S_FEAT, t2 - t1))
                mbs.setdefault(b, []).append(mb)
        fits = {"edges": _fit([p["edges"] for p in points], [p["seconds"] for p in points]),
                "targets": _fit([p["targets"] for p in points], [p["seconds"] for p in points])}
        basis = min(fits, key=lambda k: fits[k]["rel_rms"])
        # bandwidths: the loads above (BW_DDR) and stage B's copy (BW_PCIe): the features,
        # the labels and the blocks' topology, as the prefetcher copies them
        copies = []
        cpu = torch.device("cpu")
        for b in sizes_b:
            mb = mbs[b][0]
            x, y = loader.load(mb)
            nbytes = x.numel() * S_FEAT
            copies.append((nbytes, _median_time(lambda: transfer(mb, x, y, cpu), repeats)))
        bw_ddr = sum(b for b, _ in gathers) / sum(t for _, t in gathers)
        bw_pcie = sum(b for b, _ in copies) / sum(t for _, t in copies)
        big = mbs[sizes_b[-1]][0]
        # N freq: torch linear of every layer's update shape on the largest batch
        macs, msec = 0.0, 0.0
        for l in range(1, len(dims)):
            rows = big.blocks[l - 1].n_dst
            fa = int(update_width(model, dims[l - 1]))
            a = torch.randn(rows, fa)
            w = torch.randn(dims[l], fa)
            torch.nn.functional.linear(a, w)
            msec += _median_time(lambda: torch.nn.functional.linear(a, w), repeats)
            macs += rows * fa * dims[l]
        cpu_macs = macs / msec
        # the CPU trainer's aggregation bandwidth: the torch CSR product of each block
        cpu = CpuDevice()
        abytes, asec = 0.0, 0.0
        for l, block in enumerate(big.blocks, start=1):
            adj, _, _ = local_operator(AGGREGATION_KIND[model], block.graph, block.dst_pos)
            H = np.random.default_rng(l).random((adj.n_cols, dims[l - 1]), dtype=np.float32)
            cpu.sspmm(adj, H)
            asec += _median_time(lambda: cpu.sspmm(adj, H), repeats)
            abytes += block.graph.nnz * dims[l - 1] * S_FEAT
        cpu_agg_bw = abytes / asec
        out = {"machine": "this host", "threads": threads, "model": model, "dims": dims,
               "fanouts": fanouts, "batch_sizes": sizes_b, "repeats": repeats,
               "sampling": {"points": points, "fits": fits, "basis": basis},
               "gathers": gathers, "copies": copies,
               "bw_ddr": bw_ddr, "bw_pcie": bw_pcie, "cpu_macs": cpu_macs,
               "cpu_agg_bw": cpu_agg_bw, "sampler_threads": 1}
        dev = None
        if accel:
            dev = AcceleratorChoice("model", design, preset).make()
            per = []
            for b in sizes_b:
                for mb in mbs[b][:2]:
                    r = _accel_agg(mb, dims, model, dev)
                    traffic = sum(mb.blocks[l - 1].graph.nnz * dims[l - 1] * S_FEAT
                                  * (1 if l == 1 else 2) for l in range(1, len(dims)))
                    per.append({"targets": b, "edges": mb.edges, "seconds": r["seconds"],
                                "wall_s": r["wall_s"], "traffic_bytes": traffic})
            dev_s = sum(sum(p["seconds"]) for p in per)
            out["accel"] = {
                "design": design, "preset": preset, "lanes": dev.lanes,
                "clock_mhz": dev.clock_mhz,
                "nominal_bw": dev.lanes * S_FEAT * dev.clock_mhz * 1e6,
                "cycle_model_bw": sum(p["traffic_bytes"] for p in per) / dev_s,
                "sim_wall_per_device_s": sum(p["wall_s"] for p in per) / dev_s,
                "points": per}
        mid = mbs[sizes_b[len(sizes_b) // 2]][0]        # the interference units' batch
        units = {"A": _stage_a_unit(sampler, loader, prepare, mid.targets,
                                    stage_a == "process")}
        if trainer_steps > 0:
            tr_out, units["T"] = _calibrate_trainers(
                dataset, loader, mbs, sizes_b, dims, fanouts, model, hidden, cpu_agg_bw,
                cpu_macs, dropout, seed, trainer_steps, dev, design, preset, prepare,
                received=stage_a == "process")
            out.update(tr_out)
        # stage B beside the trainer, as the prefetcher's thread copies each batch received
        xb, yb = loader.load(mid, True, numpy=stage_a == "process")
        if isinstance(xb, np.ndarray):
            xb, yb = torch.from_numpy(xb), torch.from_numpy(yb)
        out["interference"] = interference(
            units, processes="A" if stage_a == "process" else "",
            beside_t=lambda: transfer(mid, xb, yb, torch.device("cpu")),
            pin=pin_cores and stage_a == "process")
        out["cores_effective"] = out["interference"]["cores"]
    finally:
        torch.set_num_threads(before)
    out["calibration_s"] = time.perf_counter() - t_start
    return out


def _stage_a_unit(sampler, loader, prepare, targets, process: bool):
    """One unit of stage A's work for :func:`interference`, as ``hyscale_train``'s prefetcher
    does it: sample a mini-batch of ``targets`` (a new salt each time), prepare its operators,
    gather its features and labels, and, in a forked stage-A process, pack all of it to send
    it back (:func:`~moagcn.host.parallel.ipc.pack`: its arrays into a shared-memory file;
    ``Prefetcher`` does not time that, but the process does it before it can take the next
    batch)."""
    count = itertools.count()

    def unit():
        batch = stage_a(sampler, loader, targets, (97, next(count)), True, prepare,
                        numpy=process)
        if process:
            _, fd = ipc.pack(batch)
            if fd is not None:
                os.close(fd)
    return unit


def _calibrate_trainers(dataset, loader, mbs, sizes_b, dims, fanouts, model, hidden,
                        cpu_agg_bw, cpu_macs, dropout, seed, steps, dev, design, preset,
                        prepare, received: bool = False) -> dict:
    """``Trainer.step`` on the calibration mini-batches: its time minus Eq. 10 (with the
    measured rates; for the accelerator the cycle model's aggregation time), fitted per kind;
    and one synchronizer step (gradient sum, Adam, weights back to two replicas). Returns
    those and a function running one CPU trainer step (for :func:`interference`); with
    ``received``, on a batch unpacked first (:func:`~moagcn.host.parallel.ipc.unpack`), as a trainer's
    process receives each batch from a stage-A process (its arrays in shared memory, mapped
    by that process)."""
    torch.manual_seed(seed)
    master = GNN(model, dims[0], hidden, dims[-1], len(fanouts))
    degrees = dataset.graph.degrees().astype(np.int64)
    out = {"trainer_overhead": {}, "trainer_points": {}}
    kinds = ["cpu"] + (["accel"] if dev is not None else [])
    for kind in kinds:
        choice = AcceleratorChoice("model", design, preset) if kind == "accel" else \
            AcceleratorChoice("cpu")
        tr = Trainer(0, kind, master, choice, torch.device("cpu"), fanouts, dropout, seed,
                     degrees)
        rows, it = [], 0
        for b in sizes_b:
            for j, mb in enumerate(mbs[b][:steps]):
                lb = LoadedBatch(it, mb, loader.gather(mb.input_nodes),
                                 loader.labels_of(mb.targets), [], prepared=prepare(mb))
                if j == 0:
                    # warm-up at every size: the first step at a new size ran 15-40 % slower
                    # than the next ones (and than a training run's steady iterations)
                    tr.step(lb, b, 10_000)
                r = tr.step(lb, b, it)
                it += 1
                sz = _sizes_of(mb)
                if kind == "accel":
                    eq10 = r["cycles"] / (tr.device.clock_mhz * 1e6) + \
                        _eq10_updates(sz, dims, model, cpu_macs)
                else:
                    ta = [t_aggregate(sz.E[l - 1], dims[l - 1], cpu_agg_bw)
                          for l in range(1, len(dims))]
                    tu = [t_update(sz.V[l], update_width(model, dims[l - 1]), dims[l], cpu_macs)
                          for l in range(1, len(dims))]
                    eq10 = t_trainer(ta, tu, "sum")
                rows.append({"targets": b, "edges": sz.edges,
                             "elements": dropout_elements(sz, dims), "seconds": r["seconds"],
                             "eq10_s": eq10, "residual_s": r["seconds"] - eq10})
        out["trainer_points"][kind] = rows
        out["trainer_overhead"][kind] = _fit_overhead(rows)
    # the synchronizer of hyscale_train: sum the replicas' gradients, one Adam step, copy back
    reps = [GNN(model, dims[0], hidden, dims[-1], len(fanouts)) for _ in range(2)]
    opt = torch.optim.Adam(master.parameters(), lr=1e-3)
    grads = [[torch.randn_like(p) for p in master.parameters()] for _ in reps]

    def sync():
        for j, p in enumerate(master.parameters()):
            p.grad = torch.stack([g[j] for g in grads]).sum(0)
        opt.step()
        state = master.state_dict()
        for m in reps:
            m.load_state_dict(state)

    sync()
    out["sync_s"] = _median_time(sync, 5)
    # one CPU trainer step on the middle batch size: the unit of class T in interference()
    tr = Trainer(0, "cpu", master, AcceleratorChoice("cpu"), torch.device("cpu"), fanouts,
                 dropout, seed, degrees)
    mb = mbs[sizes_b[len(sizes_b) // 2]][0]
    lb = LoadedBatch(0, mb, loader.gather(mb.input_nodes), loader.labels_of(mb.targets), [],
                     prepared=prepare(mb))
    if not received:
        return out, lambda: tr.step(lb, mb.targets.size, 0)
    x, y = loader.load(mb, True, numpy=True)
    header, fd = ipc.pack((mb, x, y, {}, lb.prepared))

    def step():
        got, gx, gy, _, prepared = ipc.unpack(header, None if fd is None else os.dup(fd))
        tr.step(LoadedBatch(0, got, torch.from_numpy(gx), torch.from_numpy(gy), [],
                            prepared=prepared), mb.targets.size, 0)
    if fd is not None:
        weakref.finalize(step, os.close, fd)
    return out, step
