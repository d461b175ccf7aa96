"""Predictions of a ``train_hybrid`` run from the system model, and the initial CPU / accelerator
split (Sec. IV's design-time mapping): :func:`model_split` calibrates the model and predicts an
epoch at every CPU share of :data:`SPLIT_SHARES`; the shortest is where training starts.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict

import numpy as np

from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.minibatch import training_ids
from moagcn.host.hyscale.calibrate import (CALIBRATION_SIZES, _accel_agg, calibrate,
                                           overhead_seconds)
from moagcn.host.hyscale.perf import Platform, local_platform, predict, sampled_sizes
from moagcn.host.hyscale.shared_host import host_shared, pipeline_times
from moagcn.host.hyscale.trainers import batch_sizes


def split_sizes(batch: int, kinds: list, cpu_share: float) -> list:
    """Each trainer's part of a batch, exactly as ``hyscale_train``'s splitter cuts it."""
    n_cpu = sum(k != "accel" for k in kinds)
    n_acc = len(kinds) - n_cpu
    share = 1.0 if n_acc == 0 else 0.0 if n_cpu == 0 else cpu_share
    w = np.array([share / n_cpu if k != "accel" else (1 - share) / n_acc for k in kinds])
    sizes = np.maximum(1, np.floor(w / w.sum() * batch).astype(np.int64))
    sizes[int(np.argmax(w))] += batch - int(sizes.sum())
    return [int(s) for s in sizes]


def run_share(cfg) -> float:
    """The CPU trainers' share of each batch in a run of ``cfg`` (DRM off), as
    ``hyscale_train`` starts from: ``cfg.cpu_share``, or an even split over the trainers."""
    kinds = cfg.kinds()
    n_cpu = sum(k != "accel" for k in kinds)
    return cfg.cpu_share if cfg.cpu_share is not None else n_cpu / len(kinds)


def calibration_sizes(cfg, n_train: int) -> list:
    """The batch sizes to calibrate a run of ``cfg`` at: the defaults, every trainer's part of
    the run's batch (the full one, as ``hyscale_train`` cuts it at ``cfg.cpu_share``) and half
    the smallest part, so that the fits are measured where the run's trainers work rather
    than extrapolated there (a batch of 64 split 19 / 45 was predicted 30-60 % low from
    sizes of 80 and more). ``calibrate`` caps them at the training set."""
    kinds = cfg.kinds()
    _, full = [g for g in batch_sizes(n_train, cfg.batch, len(kinds)) if g[0]][0]
    parts = split_sizes(full, kinds, run_share(cfg))
    return sorted(set(CALIBRATION_SIZES) | set(parts) | {max(1, min(parts) // 2)})


def predict_run(dataset, cfg, cal: dict, platform: Platform | None = None, samples: int = 4,
                seed: int = 0, memo: dict | None = None) -> dict:
    """Predictions for ``train_hybrid(dataset, cfg)`` (DRM off: a fixed ``cfg.cpu_share``):
    per distinct batch of an epoch (the full ones and the last, partial one), mini-batch sizes
    sampled from the dataset, and for the accelerator trainers both Eq. 11 and the S-SpMM cycle
    model; returns per-iteration and per-epoch times of every variant. The sampled sizes and
    the cycle model's figures depend on the run, not on the calibration: ``memo`` (a dict, one
    per dataset and run configuration) keeps them for further calls."""
    kinds = cfg.kinds()
    # every trainer has its own stage-A thread(s): that many mini-batches are sampled at once
    platform = dataclasses.replace(platform or local_platform(cal),
                                   sampler_threads=len(kinds) * cfg.sampler_threads)
    fanouts = cfg.fanout_list()
    dims = [dataset.n_features] + [cfg.hidden] * (len(fanouts) - 1) + [dataset.n_classes]
    ids = training_ids(dataset.train_mask, labels=dataset.labels)
    share = run_share(cfg)
    memo = {} if memo is None else memo
    groups = [(count, size) for count, size in batch_sizes(ids.size, cfg.batch, len(kinds))
              if count]
    dev = AcceleratorChoice("model", cfg.design, cfg.preset, dict(cfg.params)).make() \
        if "accel" in kinds else None
    cores = float(cal.get("cores_effective", 1.0))
    inter = cal.get("interference") or {}
    speeds = inter.get("speeds")
    cv = inter.get("cv")
    sim_per = float((cal.get("accel") or {}).get("sim_wall_per_device_s", 0.0))
    fits = cal.get("trainer_overhead") or {}
    sync_s = float(cal.get("sync_s", 0.0))
    per_batch = []
    for count, b in groups:
        parts = split_sizes(b, kinds, share)
        sizes, cyc = [], {}
        for i, (k, p) in enumerate(zip(kinds, parts)):
            key = (p, seed + i, k == "accel")
            if key not in memo:
                s, mbs = sampled_sizes(dataset.graph, fanouts, p, ids, samples, seed + i,
                                       keep=True)
                agg = None
                if k == "accel":
                    rs = [_accel_agg(mb, dims, cfg.model, dev) for mb in mbs]
                    agg = [float(np.mean([r["seconds"][l] for r in rs]))
                           for l in range(len(fanouts))]
                memo[key] = (s, agg)
            s, agg = memo[key]
            sizes.append(s)
            if agg is not None:
                cyc[i] = agg
        over = [overhead_seconds(fits.get("accel" if k == "accel" else "cpu"), s, dims)
                for k, s in zip(kinds, sizes)]
        dev_s = [sum(cyc.get(i, [0.0])) for i in range(len(kinds))]
        sim_s = [d * sim_per for d in dev_s]
        variants = {}
        for name, agg in (("eq11", None), ("cycles", cyc)):
            pr = predict(sizes, kinds, dims, platform, cfg.model, agg_seconds=agg)
            pipe = pipeline_times(pr, sizes, platform, cfg.prefetch, over)
            host = host_shared(pr, pipe, cores, sim_s, sync_s, speeds, cv,
                               cfg.sampler_threads if cfg.stage_a == "process" else None) \
                if cfg.prefetch else None
            variants[name] = {"eq6": pr, "pipeline": pipe, "host": host}
        per_batch.append({"count": count, "batch": b, "parts": parts,
                          "sizes": [asdict(s) for s in sizes], "overhead_s": over,
                          "accel_device_s": dev_s, "variants": variants})
    # epoch times of every variant
    epoch = {}
    for name in ("eq11", "cycles"):
        for view in ("eq6", "pipeline", "host"):
            vals = []
            for pb in per_batch:
                v = pb["variants"][name][view]
                if v is None:
                    break
                vals.append(pb["count"] * (v["T_execution"] if view == "eq6" else
                                           v["iteration_mean_s"] if view == "host" else
                                           v["iteration_s"]))
            else:
                epoch[f"{name}/{view}"] = sum(vals)
    return {"platform": platform.as_dict(), "dims": dims, "kinds": kinds, "cpu_share": share,
            "batches": per_batch, "epoch_s": epoch,
            "iterations_per_epoch": sum(c for c, _ in groups)}


#: the CPU shares :func:`model_split` predicts (the design-time mapping's grid)
SPLIT_SHARES = tuple(round(0.05 * k, 2) for k in range(1, 20))


def model_split(dataset, cfg, shares=SPLIT_SHARES, samples: int = 2, progress=None,
                cal: dict | None = None) -> dict:
    """The design-time task mapping on this machine (Sec. IV: the performance model picks the
    initial split of each mini-batch): calibrate here as ``moagcn bench hyscale-model`` does
    (sampling timed at design time, as the paper times it), predict an epoch of ``cfg`` at
    every CPU share of ``shares`` with the variant that follows this machine (``cycles/host``
    with prefetching, ``cycles/pipeline`` without), and return the fastest:
    ``{"cpu_share", "predicted_epoch_s", "predicted_epoch_s_by_share", "variant", "table",
    "calibration_s", "seconds"}`` (``table``: :func:`model_table`, what ``train_hybrid``
    re-checks the model with during training). With only CPU or only accelerator trainers there is
    nothing to split (share 1 or 0, no calibration). The calibration measures the trainers
    at the parts of the even split and of the grid's two extreme shares. ``cal``: a
    calibration of this dataset and model to use instead of a new one."""
    t0 = time.perf_counter()
    say = progress or (lambda text: None)
    kinds = cfg.kinds()
    n_cpu = sum(k != "accel" for k in kinds)
    if n_cpu in (0, len(kinds)):
        share = 1.0 if n_cpu else 0.0
        return {"cpu_share": share, "predicted_epoch_s": None, "predicted_epoch_s_by_share": {},
                "variant": None, "calibration_s": 0.0, "seconds": 0.0}
    even = dataclasses.replace(cfg, cpu_share=None, drm=False)
    n_train = training_ids(dataset.train_mask, labels=dataset.labels).size
    if cal is None:
        say("initial split: calibrating the performance model on this machine")
        # measured where the grid's trainers work, its extreme shares' parts included
        sizes = sorted(set().union(*(calibration_sizes(
            dataclasses.replace(even, cpu_share=x), n_train) for x in
            (None, min(shares), max(shares)))))
        cal = calibrate(dataset, cfg.fanout_list(), cfg.model, cfg.hidden,
                        batch_sizes=sizes, repeats=3,
                        seed=cfg.seed, threads=cfg.trainer_threads, accel=True,
                        design=cfg.design, preset=cfg.preset,
                        normalize_features=cfg.normalize_features, dropout=cfg.dropout,
                        stage_a=cfg.stage_a, pin_cores=cfg.pin_cores)
    plat = local_platform(cal)
    variant = "cycles/host" if cfg.prefetch else "cycles/pipeline"
    memo: dict = {}
    by_share = {}
    runs = []
    for share in shares:
        run = dataclasses.replace(even, cpu_share=float(share))
        runs.append(predict_run(dataset, run, cal, plat, samples, cfg.seed, memo))
        by_share[float(share)] = runs[-1]["epoch_s"][variant]
    best = min(by_share, key=by_share.get)
    say(f"initial split: CPU share {best:.2f} (predicted epoch {by_share[best]:.3f} s; "
        f"calibrated in {cal['calibration_s']:.1f} s)")
    return {"cpu_share": best, "predicted_epoch_s": by_share[best],
            "predicted_epoch_s_by_share": by_share, "variant": variant,
            "table": model_table(runs, variant, kinds, cfg.prefetch),
            "calibration_s": cal["calibration_s"], "seconds": time.perf_counter() - t0}


def model_table(runs: list, variant: str, kinds: list, prefetch: bool) -> dict:
    """What the re-check during training needs of :func:`predict_run`'s predictions at the
    grid's shares (``runs``, one per share): per batch size of an epoch and per share, the
    ``variant``'s iteration time and every trainer's stage times (``sample``, ``load``,
    ``transfer``, ``train``); read by :class:`~moagcn.host.hyscale.recheck.ModelTable`."""
    name, view = variant.split("/")
    batches = []
    for k, pb0 in enumerate(runs[0]["batches"]):
        rows = []
        for pr in runs:
            pb = pr["batches"][k]
            v = pb["variants"][name]
            if view == "host":
                it, trainers = v["host"]["iteration_mean_s"], v["host"]["trainer_s"]
            else:
                pipe, ts = v["pipeline"], v["eq6"]["t_samp"]
                it = pipe["iteration_s"]
                trainers = [{"sample": ts[i], "load": pipe["A"][i] - ts[i],
                             "transfer": pipe["B"][i], "train": pipe["T"][i]}
                            for i in range(len(kinds))]
            rows.append({"iteration_s": float(it),
                         "trainers": [{s: float(t[s]) for s in ("sample", "load", "transfer",
                                                                 "train")} for t in trainers]})
        batches.append({"batch": int(pb0["batch"]), "count": int(pb0["count"]),
                        "by_share": rows})
    return {"variant": variant, "kinds": list(kinds), "prefetch": bool(prefetch),
            "shares": [float(pr["cpu_share"]) for pr in runs], "batches": batches}
