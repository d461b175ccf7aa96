"""moagcn's pipeline on a shared host: what HyScale-GNN's Eq. 5-13 do not see here (our extensions).

**What Eq. 5-13 do not see on this host** (reported, not hidden; our extensions, used only
for the comparison with ``train_hybrid``, never in :func:`predict`):

1. *Pipeline shape.* moagcn's prefetcher samples and loads in one stage (A) per trainer and
   copies in another (B), so its iteration is ``max_i max(A_i, B_i, T_Trainer,i)``
   (:func:`pipeline_times`; without prefetching the per-trainer sum).
2. *Host overhead.* A trainer step here spends most of its time outside Eq. 10's terms
   (dropout masks, autograd bookkeeping, Python; the sparse operators are built in stage A,
   with the sampling, and timed there): fitted at
   calibration on ``Trainer.step`` itself as ``a + b x elements + c x edges`` of what Eq. 10
   leaves (``trainer_overhead``), and added to ``T_Trainer`` in the pipeline variants.
3. *Shared cores.* All stages share two vCPUs with the trainers, which run one after another
   in the main thread (stage A in forked processes by default, so the GIL only between
   threads: stage B and, with ``stage_a="thread"``, stage A). :func:`host_shared` replays one
   iteration of that schedule, every worker at the speed :func:`interference` measured for the
   mix of workers running at that moment (a stage-A loop ``A``: sample, prepare, gather
   and, in a process, pack the batch to send it back; a trainer step ``T`` on a batch
   received that way, unpacked first; alone and as AA, AT, AAT; in the mixes with a trainer
   a stage-B thread beside it copies a batch once per step, as the prefetcher's does), so
   that overlapping stages stretch as they do when measured.
4. *Fluctuation.* ``train_hybrid``'s ``iteration_s`` is, per iteration, the slowest of stages
   whose times fluctuate by 20-40 % under sharing; its median exceeds the slowest stage's
   median when stages are close. :func:`expected_max` gives the median (and mean, for epochs)
   of that maximum from the spreads :func:`interference` measured.

The paper's platform has separate cores and links per stage and needs none of it; Eq. 6 as
written is printed beside them.
"""

from __future__ import annotations

import math

import numpy as np

from moagcn.errors import UserError
from moagcn.host.hyscale.perf import Platform
from moagcn.sim.hyscale.model import S_FEAT


def pipeline_times(pred: dict, sizes: list, platform: Platform, prefetch: bool = True,
                   overhead: list | None = None) -> dict:
    """The same terms arranged as moagcn's prefetcher runs them (our extension): per trainer,
    stage A (its sampling + its loading, one thread), stage B (the copy of its ``X'``: every
    trainer's, the CPU's too) and its training (Eq. 10 plus ``overhead[i]``, the calibrated host
    time Eq. 10 does not count); the iteration is ``max_i max(A_i, B_i, T_i)`` with prefetching,
    ``max_i (A_i + B_i + T_i)`` without, plus ``T_sync`` (Eq. 9). Also the stage times under
    ``hyscale_train``'s names (``T_SC``, ``T_SA``, ``T_Load``, ``T_Tran``, ``T_TC``, ``T_TA``),
    each group's sum as there (the trainers' the slowest), and each group's slowest trainer's
    share of the iteration (``G_C``, ``G_A``: its slowest stage, or their sum without
    prefetching), which the DRM's work balance weighs."""
    f0 = pred["dims"][0]
    kinds = pred["kinds"]
    over = overhead or [0.0] * len(kinds)
    A = [pred["t_samp"][i] + s.V[0] * f0 * S_FEAT / platform.bw_ddr for i, s in enumerate(sizes)]
    B = [s.V[0] * f0 * S_FEAT / platform.bw_pcie for s in sizes]
    T = [t["T_trainer"] + o for t, o in zip(pred["trainers"], over)]
    per = [max(a, b, t) if prefetch else a + b + t for a, b, t in zip(A, B, T)]
    cpu = [i for i, k in enumerate(kinds) if k != "accel"]
    acc = [i for i, k in enumerate(kinds) if k == "accel"]
    stage = {"T_SC": sum(pred["t_samp"][i] for i in cpu),
             "T_SA": sum(pred["t_samp"][i] for i in acc),
             "T_Load": sum(A[i] - pred["t_samp"][i] for i in range(len(kinds))),
             "T_Tran": sum(B[i] for i in acc),
             "T_TC": max((T[i] for i in cpu), default=0.0),
             "T_TA": max((T[i] for i in acc), default=0.0),
             "G_C": max((per[i] for i in cpu), default=0.0),
             "G_A": max((per[i] for i in acc), default=0.0)}
    return {"A": A, "B": B, "T": T, "overhead": list(over), "stage_s": stage,
            "iteration_s": max(per) + pred["T_sync"], "prefetch": prefetch}


def mix_rate(cls: str, mix: str, cores: float, speeds: dict | None = None) -> float:
    """Speed (work per second, 1 = alone) of a thread of class ``cls`` while the threads
    ``mix`` run (one letter per thread, e.g. ``"AAT"``): the measured speed when ``speeds``
    (``{cls: {mix: speed}}``, :func:`calibrate`'s ``interference``) has this mix, else fair
    sharing of ``cores``: ``min(1, cores / len(mix))``."""
    mix = "".join(sorted(mix))
    if len(mix) <= 1:
        return 1.0
    if speeds and mix in speeds.get(cls, {}):
        return float(speeds[cls][mix])
    return min(1.0, cores / len(mix))


def processor_sharing(threads: list, cores: float, classes: list | None = None,
                      speeds: dict | None = None, mix_log: list | None = None) -> list:
    """Replay threads that start together on shared cores: every runnable thread progresses at
    :func:`mix_rate` of the runnable mix (without ``speeds``: ``min(1, cores / runnable)``).
    ``threads``: lists of segment works (seconds alone); ``classes``: a letter per thread
    (default all ``"A"``); returns each segment's ``(start, end, shared)``, ``shared`` the
    seconds of it during which other threads ran too. ``mix_log`` (a list) receives, per thread
    and segment, ``{mix: seconds}``: how long the segment ran beside each mix."""
    if cores <= 0:
        raise UserError("processor_sharing: cores must be > 0")
    classes = classes or ["A"] * len(threads)
    pos = [0] * len(threads)                 # current segment of each thread
    left = [t[0] if t else 0.0 for t in threads]
    spans = [[None] * len(t) for t in threads]
    starts = [0.0] * len(threads)
    shared = [0.0] * len(threads)
    log = [[{} for _ in t] for t in threads]
    if mix_log is not None:
        mix_log[:] = log
    now = 0.0
    while True:
        run = [j for j, t in enumerate(threads) if pos[j] < len(t)]
        if not run:
            return spans
        mix = "".join(classes[j] for j in run)
        rate = {j: mix_rate(classes[j], mix, cores, speeds) for j in run}
        dt = min(left[j] / rate[j] for j in run)
        now += dt
        key = "".join(sorted(mix))
        for j in run:
            left[j] -= dt * rate[j]
            if len(run) > 1:
                shared[j] += dt
            if dt > 0:
                seg = log[j][pos[j]]
                seg[key] = seg.get(key, 0.0) + dt
            while pos[j] < len(threads[j]) and left[j] <= 1e-15:
                spans[j][pos[j]] = (starts[j], now, shared[j])
                pos[j] += 1
                starts[j] = now
                shared[j] = 0.0
                left[j] = threads[j][pos[j]] if pos[j] < len(threads[j]) else 0.0


def expected_max(stages: list, draws: int = 20000, seed: int = 0) -> dict:
    """Median and mean of ``max`` over independent stage times, each log-normal with the given
    ``(mean, cv)``: what the median and the sum of per-iteration maxima measure when the
    stages fluctuate (deterministic: a fixed seed)."""
    rng = np.random.default_rng(seed)
    best = np.zeros(draws)
    for mean, cv in stages:
        if mean <= 0:
            continue
        if cv <= 0:
            best = np.maximum(best, mean)
            continue
        s2 = math.log1p(cv * cv)
        best = np.maximum(best, rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), draws))
    return {"median": float(np.median(best)), "mean": float(best.mean())}


def host_shared(pred: dict, pipe: dict, cores: float, accel_sim_s: list | None = None,
                sync_s: float = 0.0, speeds: dict | None = None,
                cv: dict | None = None, stage_a_workers: int | None = None) -> dict:
    """Our extension for this host: one iteration of ``hyscale_train``'s schedule replayed with
    processor sharing (:func:`processor_sharing`): the main thread is of class ``T``, the
    stage-A threads of class ``A``, each running at its measured speed in the current mix
    (``speeds``), or at a fair share of ``cores`` where a mix was not measured.

    At the start of an iteration every trainer's stage A begins its next mini-batch (one
    worker each: sampling, then loading, then its stage B copy; with ``stage_a_workers`` = w,
    the trainers share w workers, trainer ``i``'s batch queued on worker ``i mod w`` after
    those of the trainers before it, as ``hyscale_train``'s shared pool of stage-A processes
    takes them) while the main thread runs
    the trainers one after another (in their order) and the synchronizer (``sync_s``). An
    accelerator trainer's aggregation terms of Eq. 10 are device time (added to its stage
    time, no CPU); its host segment is the rest plus ``accel_sim_s`` (the wall time of
    simulating the device, which occupies the CPU but is not counted in its time). Stage times
    are the replayed spans, as ``hyscale_train`` measures them (wall clock).

    ``iteration_s`` is the slowest stage of the replay. What ``hyscale_train`` reports per
    iteration is the slowest of stages that fluctuate, whose median is larger when several
    stages are close: with ``cv`` (``{cls: {mix: spread}}``, :func:`interference`'s, the class
    letter itself standing for "alone") each stage gets its class's spread in each mix
    weighted by the time the replay spends in it, and ``iteration_median_s`` /
    ``iteration_mean_s`` are :func:`expected_max`'s (the median to compare with a median, the
    mean for epochs). ``trainer_s``: every trainer's replayed stage times (``sample``,
    ``load``, ``transfer``, ``train``), what the re-check during training scales
    (:mod:`~moagcn.host.hyscale.recheck`)."""
    kinds = pred["kinds"]
    n = len(kinds)
    dev = [0.0] * n
    for i, t in enumerate(pred["trainers"]):
        if kinds[i] == "accel":
            if t["combine"] != "sum":
                raise UserError("host_shared: an accelerator trainer that pipelines (max) has "
                                "no host segment to replay; use combine_accel='sum'")
            dev[i] = t["t_aggregate"][0] + 2 * sum(t["t_aggregate"][1:])
    sim = accel_sim_s or [0.0] * n
    host_T = [pipe["T"][i] - (dev[i] if kinds[i] == "accel" else 0.0) for i in range(n)]
    main = [host_T[i] + (sim[i] if kinds[i] == "accel" else 0.0) for i in range(n)] + [sync_s]
    w = n if stage_a_workers is None else max(1, min(int(stage_a_workers), n))
    chains: list = [[] for _ in range(w)]
    where = []                                   # trainer i: (its worker, its first segment)
    for i in range(n):
        where.append((i % w, len(chains[i % w])))
        chains[i % w] += [pred["t_samp"][i], pipe["A"][i] - pred["t_samp"][i], pipe["B"][i]]
    log: list = []
    replay = processor_sharing([main] + chains, cores, ["T"] + ["A"] * w, speeds, log)
    spans = [replay[0]] + [replay[1 + c][k:k + 3] for c, k in where]
    log = [log[0]] + [log[1 + c][k:k + 3] for c, k in where]

    def dur(sp):
        return sp[1] - sp[0]

    def spread(cls, *segs):
        """Time-weighted spread of class ``cls`` over the mixes of these segments."""
        if not cv:
            return 0.0
        tot, acc = 0.0, 0.0
        for seg in segs:
            for mix, t in seg.items():
                known = cv.get(cls, {})
                acc += t * known.get(mix, max(known.values(), default=0.0))
                tot += t
        return acc / tot if tot > 0 else 0.0

    T, T_cv = [], []
    for i in range(n):
        host = dur(spans[0][i])
        if kinds[i] == "accel":                          # its host wall less the simulation
            host = host * host_T[i] / max(main[i], 1e-15)
        T.append(host + dev[i])
        T_cv.append(spread("T", log[0][i]) * host / max(T[i], 1e-15))
    samp = [dur(spans[1 + i][0]) for i in range(n)]
    load = [dur(spans[1 + i][1]) for i in range(n)]
    copy = [dur(spans[1 + i][2]) for i in range(n)]
    A_cv = [spread("A", log[1 + i][0], log[1 + i][1]) for i in range(n)]
    per = [max(samp[i] + load[i], copy[i], T[i]) for i in range(n)]
    cpu = [i for i in range(n) if kinds[i] != "accel"]
    acc = [i for i in range(n) if kinds[i] == "accel"]
    stage = {"T_SC": sum(samp[i] for i in cpu), "T_SA": sum(samp[i] for i in acc),
             "T_Load": sum(load), "T_Tran": sum(copy[i] for i in acc),
             "T_TC": max((T[i] for i in cpu), default=0.0),
             "T_TA": max((T[i] for i in acc), default=0.0),
             "G_C": max((per[i] for i in cpu), default=0.0),
             "G_A": max((per[i] for i in acc), default=0.0)}
    em = expected_max([(samp[i] + load[i], A_cv[i]) for i in range(n)]
                      + [(copy[i], 0.0) for i in range(n)]
                      + [(T[i], T_cv[i]) for i in range(n)])
    return {"stage_s": stage, "iteration_s": max(per) + pred["T_sync"],
            "iteration_median_s": em["median"] + pred["T_sync"],
            "iteration_mean_s": em["mean"] + pred["T_sync"],
            "stage_cv": {"A": A_cv, "T": T_cv}, "cores": cores,
            "trainer_s": [{"sample": samp[i], "load": load[i], "transfer": copy[i],
                           "train": T[i]} for i in range(n)],
            "wall_s": max(sp[1] for th in spans for sp in th if sp is not None)}
