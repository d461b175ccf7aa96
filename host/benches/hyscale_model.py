"""HyScale-GNN's system performance model (Eq. 5-13) against measured training runs.

``moagcn bench hyscale-model [--rmat-scale 13] [--epochs 3] [--cpu-share 0.3] [--device model]
[--design sspmm] [--preset NAME] [--param KEY=VALUE] [--out DIR]``: the accelerator trainers
run the accelerator that ``--device``, ``--design``, ``--preset`` and ``--param`` choose, as
``moagcn hyscale train`` takes them (default: the S-SpMM's default preset on its model).

**Judging the model on a shared host** (:func:`run`). On a shared machine the prediction a
calibration leads to moves from one calibration to the next (docs/hyscale.md gives the
measured spread), while the host's speed also drifts between a calibration and runs a minute
later. The bench therefore calibrates before the first round of measured runs (one
with prefetching, one without) and again after every round (``bracket``; ``--no-bracket``:
once), and judges each round against the mean of the two predictions calibrated around it
(:func:`bracketed`; the median over the rounds is the verdict printed), beside the first
calibration's prediction alone and the median over all calibrations. No calibration sees a
measured run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from moagcn.core.options import Accelerator, accelerator, add_renamed
from moagcn.errors import UserError
from moagcn.host.benches import add_trainer_accelerator_flags
from moagcn.host.benches.hyscale_train import _dataset, trainer_fields
from moagcn.host.graphs.minibatch import training_ids
from moagcn.host.hyscale.calibrate import calibrate
from moagcn.host.hyscale.paper import paper_predictions
from moagcn.host.hyscale.perf import local_platform, u250_platform
from moagcn.host.hyscale.split import calibration_sizes, predict_run
from moagcn.host.hyscale.train import HybridConfig, train_hybrid


def measured_runs(reports: list, skip: int = 1) -> dict:
    """:func:`measured_summary` over several runs of the same configuration: each figure the
    median of the runs', with the runs' range of the iteration and epoch times (on a shared
    machine the same run differs by 15-30 % from one minute to the next, which no model of
    this host predicts) and every run's summary."""
    runs = [measured_summary(r, skip) for r in reports]
    out = {k: float(np.median([x[k] for x in runs]))
           for k in ("iteration_s", "epoch_s", "epoch_wall_s", "edges_per_s")}
    out["stage_s"] = {k: float(np.median([x["stage_s"][k] for x in runs]))
                      for k in runs[0]["stage_s"]}
    out["iterations"] = runs[0]["iterations"]
    out["steady_iterations"] = sum(x["steady_iterations"] for x in runs)
    out["runs"] = len(runs)
    for k in ("iteration_s", "epoch_s"):
        out[f"{k}_range"] = [min(x[k] for x in runs), max(x[k] for x in runs)]
    out["per_run"] = runs
    return out


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas if meas else float("nan")


def measured_summary(report: dict, skip: int = 1) -> dict:
    """Medians of ``train_hybrid``'s full iterations (the first ``skip`` of each epoch left out:
    warm-up) and the epoch times as the sum of ``iteration_s`` per epoch (the system's epoch
    on separate hardware) and as wall clock (this host, trainers one after another)."""
    its = report["iterations"]
    full_b = max(r["targets"] for r in its)
    by_epoch = {}
    for r in its:
        by_epoch.setdefault(r["epoch"], []).append(r)
    steady = [r for e in by_epoch.values() for r in e[skip:] if r["targets"] == full_b]
    steady = steady or [r for r in its if r["targets"] == full_b]
    keys = list(its[0]["stage_s"])
    return {"iterations": len(its), "steady_iterations": len(steady),
            "stage_s": {k: float(np.median([r["stage_s"][k] for r in steady])) for k in keys},
            "iteration_s": float(np.median([r["iteration_s"] for r in steady])),
            "epoch_s": float(np.median([sum(r["iteration_s"] for r in e)
                                        for e in by_epoch.values()])),
            "epoch_wall_s": float(np.median([sum(r["wall_s"] for r in e)
                                             for e in by_epoch.values()])),
            "edges_per_s": float(np.median([r["edges_per_s"] for r in steady]))}


def run(scale: int = 13, epochs: int = 3, cpu_share: float = 0.3, batch: int = 1024,
        fanouts: str = "25,10", hidden: int = 128, model: str = "sage",
        trainers: str = "cpu:1,accel:1", seed: int = 0, repeats: int = 5, samples: int = 4,
        paper_pcie_gb_s: float = 12.0, paper_fanouts=(10, 25), paper_sampler_threads: int = 32,
        progress=None, measure_repeats: int = 5, bracket: bool = True,
        accel: Accelerator | None = None) -> dict:
    """Calibrate, predict, train ``measure_repeats`` times with and without prefetching, and
    compare; predictions for the paper's platform beside. With ``bracket`` the host is
    calibrated again after every round of the two runs, and each round is also judged against
    the mean of the predictions calibrated just before and just after it (``bracketed``): on a
    shared machine the host's speed drifts by more than the target between a calibration and
    runs minutes later, and a calibration on each side of a run follows that drift (a linear
    one exactly) without looking at the run itself. The first calibration's prediction is
    reported as well (``prediction``). ``accel``: the accelerator trainers' device, design,
    preset and ``--param`` fields (default: the S-SpMM's default preset on its model)."""
    say = progress or (lambda s: None)
    d = _dataset(scale, seed)
    cfg = HybridConfig(model=model, hidden=hidden, fanouts=fanouts, batch=batch,
                       trainers=trainers, epochs=epochs, seed=seed, drm=False,
                       cpu_share=cpu_share, **trainer_fields(accel))
    cfg.validate(d)
    nopf_cfg = dataclasses.replace(cfg, prefetch=False)
    cal_sizes = calibration_sizes(cfg, training_ids(d.train_mask, labels=d.labels).size)
    memo: dict = {}         # the runs' sampled sizes and cycles, the same for every calibration

    def calibrated():
        c = calibrate(d, cfg.fanout_list(), model, hidden, batch_sizes=cal_sizes,
                      repeats=repeats, seed=seed, threads=cfg.trainer_threads,
                      accel="accel" in cfg.kinds(), design=cfg.design, preset=cfg.preset,
                      stage_a=cfg.stage_a, pin_cores=cfg.pin_cores)
        p = local_platform(c)
        return c, p, {True: predict_run(d, cfg, c, p, samples, seed, memo),
                      False: predict_run(d, nopf_cfg, c, p, samples, seed, memo)}

    cals = [calibrated()]
    cal, plat, first = cals[0]
    pred, pred_nopf = first[True], first[False]
    say(f"calibrated in {cal['calibration_s']:.1f} s and predicted")
    measured = {}
    # the two kinds of run alternate, so that a slow minute of a shared machine does not fall
    # on one of them only
    reports = {True: [], False: []}
    for k in range(measure_repeats):
        for pf in (True, False):
            reports[pf].append(train_hybrid(d, dataclasses.replace(cfg, prefetch=pf)))
        if bracket:
            cals.append(calibrated())
        say(f"trained with and without prefetching ({k + 1}/{measure_repeats})"
            + (", calibrated again" if bracket else ""))
    for pf in (True, False):
        measured["prefetch" if pf else "no_prefetch"] = measured_runs(reports[pf])
    u250 = u250_platform(cal, pcie_gb_s=paper_pcie_gb_s, sampler_threads=paper_sampler_threads)
    paper = paper_predictions(u250, fanouts=tuple(paper_fanouts))
    res = {"dataset": f"rmat-{scale}", "nodes": d.graph.n_rows, "edges": d.graph.nnz,
           "train_nodes": int(d.train_mask.sum()), "config": dataclasses.asdict(cfg),
           "calibration": cal, "platform": plat.as_dict(), "prediction": pred,
           "prediction_no_prefetch": pred_nopf, "measured": measured,
           "u250_platform": u250.as_dict(), "paper_fanouts": list(paper_fanouts),
           "u250": paper}
    if bracket:
        res["bracketed"] = bracketed(cals, measured)
        res["calibrations"] = [_calibration_digest(c) for c, _, _ in cals]
    res["summary"] = summary(res)
    return res


def _calibration_digest(cal: dict) -> dict:
    """What moves from one calibration to the next (the bench keeps every calibration's,
    the first one whole)."""
    s = cal["sampling"]
    inter = cal.get("interference") or {}
    return {"calibration_s": cal["calibration_s"], "sampling_fit": s["fits"][s["basis"]],
            "sampling_basis": s["basis"], "bw_ddr": cal["bw_ddr"], "cpu_macs": cal["cpu_macs"],
            "cpu_agg_bw": cal["cpu_agg_bw"], "speeds": inter.get("speeds"),
            "alone_s": inter.get("alone_s"), "trainer_overhead": cal.get("trainer_overhead")}


def _headline_epoch(pred: dict, key: str) -> float:
    name, view = HEADLINE[key]
    return pred["epoch_s"][f"{name}/{view}"]


def bracketed(cals: list, measured: dict) -> dict:
    """Each measured round against the mean of the headline predictions calibrated just
    before and just after it (``cals``: ``(calibration, platform, {prefetch: prediction})``,
    one more than the rounds), per variant: the rounds' predicted and measured epochs and
    errors, how many are within 15 %, and the medians' error (the verdict the bench prints);
    and ``pooled``: the median of every calibration's prediction against the median measured
    epoch. On a shared host a calibration's prediction moves from one to the next more than
    the measured runs of one kind do: the pair around a round follows the host's drift, the
    median over all of them only damps the calibrations' own noise; both are reported."""
    out = {}
    for pf, key in ((True, "prefetch"), (False, "no_prefetch")):
        preds = [_headline_epoch(c[2][pf], key) for c in cals]
        rounds = []
        for k, run_ in enumerate(measured[key]["per_run"]):
            p = 0.5 * (preds[k] + preds[k + 1])
            rounds.append({"predicted_epoch_s": p, "before_s": preds[k],
                           "after_s": preds[k + 1], "measured_epoch_s": run_["epoch_s"],
                           "epoch_error": _err(p, run_["epoch_s"])})
        p_med = float(np.median([r["predicted_epoch_s"] for r in rounds]))
        m_med = float(np.median([r["measured_epoch_s"] for r in rounds]))
        pooled = float(np.median(preds))
        out[key] = {"variant": "/".join(HEADLINE[key]), "rounds": rounds,
                    "within_15": sum(abs(r["epoch_error"]) <= 0.15 for r in rounds),
                    "epoch_s": p_med, "measured_epoch_s": m_med,
                    "epoch_error": _err(p_med, m_med),
                    "calibrations_epoch_s": preds, "pooled_epoch_s": pooled,
                    "pooled_error": _err(pooled, m_med)}
    return out


#: the variant judged against the issue's target (15 %) for each measured run
HEADLINE = {"prefetch": ("cycles", "host"), "no_prefetch": ("cycles", "pipeline")}


def summary(res: dict) -> dict:
    """The errors of the headline variants (and of Eq. 6 as written) on the iteration and the
    epoch, and the throughput (Eq. 5) predicted and measured."""
    out = {}
    for key, (name, view) in HEADLINE.items():
        pr = res["prediction" if key == "prefetch" else "prediction_no_prefetch"]
        meas = res["measured"][key]
        v = pr["batches"][0]["variants"][name][view]
        edges = pr["batches"][0]["variants"][name]["eq6"]["edges"]
        it = v.get("iteration_median_s", v["iteration_s"])
        out[key] = {"variant": f"{name}/{view}", "iteration_s": it,
                    "measured_iteration_s": meas["iteration_s"],
                    "iteration_error": _err(it, meas["iteration_s"]),
                    "epoch_s": pr["epoch_s"][f"{name}/{view}"],
                    "measured_epoch_s": meas["epoch_s"],
                    "epoch_error": _err(pr["epoch_s"][f"{name}/{view}"], meas["epoch_s"]),
                    "MTEPS": edges / it / 1e6,
                    "measured_MTEPS": meas["edges_per_s"] / 1e6}
    e6 = res["prediction"]["batches"][0]["variants"]["cycles"]["eq6"]
    m = res["measured"]["prefetch"]
    out["eq6_as_written"] = {"T_execution": e6["T_execution"], "bottleneck": e6["bottleneck"],
                             "iteration_error": _err(e6["T_execution"], m["iteration_s"]),
                             "epoch_error": _err(res["prediction"]["epoch_s"]["cycles/eq6"],
                                                 m["epoch_s"])}
    return out


def _table(res: dict) -> list:
    """Rows (what, predicted, measured, error) of the prefetching run and the run without."""
    rows = []
    full = {True: res["prediction"]["batches"][0],
            False: res["prediction_no_prefetch"]["batches"][0]}
    for pf, key in ((True, "prefetch"), (False, "no_prefetch")):
        meas = res["measured"][key]
        pb = full[pf]
        for name in ("eq11", "cycles"):
            views = ("pipeline", "host") if pf else ("pipeline",)
            for view in views:
                v = pb["variants"][name][view]
                label = f"{key} {name}/{view}"
                for k, m in meas["stage_s"].items():
                    if k in v["stage_s"]:
                        rows.append((label, k, v["stage_s"][k], m))
                rows.append((label, "iteration", v["iteration_s"], meas["iteration_s"]))
                if "iteration_median_s" in v:
                    rows.append((label, "iteration (median of max)", v["iteration_median_s"],
                                 meas["iteration_s"]))
                ep = res["prediction" if pf else "prediction_no_prefetch"]["epoch_s"]
                rows.append((label, "epoch", ep[f"{name}/{view}"], meas["epoch_s"]))
            if pf:
                e6 = pb["variants"][name]["eq6"]
                rows.append((f"{key} {name}/eq6", "iteration", e6["T_execution"],
                             meas["iteration_s"]))
    return rows


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn bench hyscale-model",
                                 description="HyScale-GNN's performance model (Eq. 5-13): "
                                 "calibrate, predict, train, compare; u250 predictions")
    ap.add_argument("--rmat-scale", type=int, default=13, dest="scale", metavar="K",
                    help="R-MAT graph of 2^K nodes (default 13)")
    add_renamed(ap, "--scale", "--rmat-scale")
    ap.add_argument("--epochs", type=int, default=3,
                    help="epochs of every measured run (default 3)")
    ap.add_argument("--cpu-share", type=float, default=0.3,
                    help="the CPU trainers' fixed share of each batch, in (0, 1) (default 0.3)")
    ap.add_argument("--batch-size", type=int, default=1024, dest="batch",
                    help="targets per mini-batch (default 1024)")
    add_renamed(ap, "--batch", "--batch-size")
    ap.add_argument("--fanout", default="25,10", dest="fanouts", metavar="K1,K2",
                    help="neighbours per node and layer, input layer first (default 25,10)")
    add_renamed(ap, "--fanouts", "--fanout")
    ap.add_argument("--hidden", type=int, default=128, help="hidden units (default 128)")
    ap.add_argument("--model", default="sage", choices=("gcn", "sage"),
                    help="the GNN (default sage)")
    ap.add_argument("--trainers", default="cpu:1,accel:1", metavar="KIND:N,...",
                    help="the trainers, as moagcn hyscale train takes them (default "
                         "cpu:1,accel:1)")
    add_trainer_accelerator_flags(ap)
    ap.add_argument("--repeats", type=int, default=5, help="calibration repeats")
    ap.add_argument("--measure-repeats", type=int, default=5,
                    help="training runs with and without prefetching (medians reported, with "
                    "their range)")
    ap.add_argument("--no-bracket", action="store_true",
                    help="calibrate once, before the runs (default: again after every round "
                    "of the two runs, and judge each round against the predictions "
                    "calibrated on either side of it)")
    ap.add_argument("--samples", type=int, default=4,
                    help="mini-batches sampled per distinct batch for the predicted sizes "
                         "(default 4)")
    ap.add_argument("--seed", type=int, default=0, help="graph, sampling and training seed")
    ap.add_argument("--pcie-gb-s", type=float, default=12.0,
                    help="u250 preset: effective PCIe bandwidth per FPGA (not in the paper)")
    ap.add_argument("--paper-sampler-threads", type=int, default=32,
                    help="u250 predictions: EPYC cores sampling at this host's rate (assumed)")
    ap.add_argument("--paper-fanout", default="10,25", dest="paper_fanouts", metavar="K1,K2",
                    help="u250 predictions, input layer first (10,25 = PyG/GraphSAGE 25,10)")
    add_renamed(ap, "--paper-fanouts", "--paper-fanout")
    ap.add_argument("--out", default="reports/bench-hyscale-model", metavar="DIR",
                    help="folder of hyscale_model.json (default reports/bench-hyscale-model)")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.cpu_share < 1:
        raise UserError(f"--cpu-share {args.cpu_share}: must be in (0, 1)")
    if min(args.epochs, args.repeats, args.samples, args.measure_repeats) < 1:
        raise UserError("--epochs, --repeats, --measure-repeats and --samples must be at "
                        "least 1")
    try:
        pf = tuple(int(x) for x in args.paper_fanouts.split(","))
    except ValueError:
        raise UserError(f"--paper-fanout {args.paper_fanouts!r}: give two whole numbers, "
                        "e.g. 10,25") from None
    res = run(args.scale, args.epochs, args.cpu_share, args.batch, args.fanouts, args.hidden,
              args.model, args.trainers, args.seed, args.repeats, args.samples,
              args.pcie_gb_s, pf, args.paper_sampler_threads,
              progress=lambda s: print(f"  {s}", flush=True),
              measure_repeats=args.measure_repeats, bracket=not args.no_bracket,
              accel=accelerator(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hyscale_model.json"
    path.write_text(json.dumps(res, indent=2) + "\n")
    cal = res["calibration"]
    print(f"{res['dataset']} ({res['nodes']:,} nodes, {res['edges']:,} edges, "
          f"{res['train_nodes']:,} training nodes), {res['config']['model']}, batch "
          f"{res['config']['batch']}, fanouts {res['config']['fanouts']}, "
          f"{res['config']['trainers']}, CPU share {res['config']['cpu_share']}, DRM off")
    s = cal["sampling"]
    fit = s["fits"][s["basis"]]
    print(f"calibration: sampling {fit['intercept_s'] * 1e3:.2f} ms + "
          f"{fit['slope_s'] * 1e9:.1f} ns x {s['basis']} (rel. RMS {fit['rel_rms']:.0%}); "
          f"BW_DDR {cal['bw_ddr'] / 1e9:.2f} GB/s (gather); BW_PCIe stand-in "
          f"{cal['bw_pcie'] / 1e9:.2f} GB/s (clone); CPU {cal['cpu_macs'] / 1e9:.1f} GMAC/s, "
          f"aggregation {cal['cpu_agg_bw'] / 1e9:.2f} GB/s; C_eff {cal['cores_effective']:.2f}")
    if cal.get("accel"):
        a = cal["accel"]
        print(f"  S-SpMM ({a['lanes']} adders at {a['clock_mhz']:.0f} MHz): Eq. 11 rate "
              f"{a['nominal_bw'] / 1e9:.2f} GB/s, cycle model's effective "
              f"{a['cycle_model_bw'] / 1e9:.2f} GB/s")
    pb = res["prediction"]["batches"][0]
    for i, (k, p) in enumerate(zip(res["prediction"]["kinds"], pb["parts"])):
        tr_e = pb["variants"]["eq11"]["eq6"]["trainers"][i]
        tr_c = pb["variants"]["cycles"]["eq6"]["trainers"][i]
        sz = pb["sizes"][i]
        print(f"  trainer {i} ({k}, {p} targets): |V^l| {[round(v) for v in sz['V']]}, "
              f"|E^l| {[round(e) for e in sz['E']]}; t_agg (Eq. 11) "
              f"{[round(t * 1e3, 2) for t in tr_e['t_aggregate']]} ms"
              + (f", cycle model {[round(t * 1e3, 2) for t in tr_c['t_aggregate']]} ms"
                 if k == "accel" else "")
              + f", t_upd {[round(t * 1e3, 2) for t in tr_e['t_update']]} ms")
    print(f"\npredicted vs measured (medians of full iterations, ms; epoch: sum of iteration_s; "
          f"measured: the median of {res['measured']['prefetch']['runs']} runs of each kind)")
    print("| variant | stage | predicted | measured | error |")
    print("|---|---|---|---|---|")
    for label, k, p, m in _table(res):
        print(f"| {label} | {k} | {p * 1e3:.2f} | {m * 1e3:.2f} | {_err(p, m):+.0%} |")
    print("variants: eq11/cycles = accelerator aggregation by Eq. 11 or the S-SpMM cycle model; "
          "eq6 = Eq. 6 as written; pipeline = moagcn's stages (A: sample+load, B: copy, "
          "training; Eq. 10 + calibrated host overhead) alone; host = the pipeline replayed "
          "with the measured thread interference; 'median of max' = the median of the "
          "slowest of fluctuating stages, what iteration_s measures (epoch: their mean)")
    me = res["measured"]["prefetch"]
    print(f"measured wall clock per epoch (this host, trainers in turn, device simulated): "
          f"{me['epoch_wall_s']:.3f} s")
    sm = res["summary"]
    for key in ("prefetch", "no_prefetch"):
        x = sm[key]
        # the target is the epoch time; the iteration's error is printed beside it
        ok = abs(x["epoch_error"]) <= 0.15
        lo, hi = res["measured"][key]["epoch_s_range"]
        print(f"measured, {key}: epoch {lo:.3f} .. {hi:.3f} s over "
              f"{res['measured'][key]['runs']} runs (the model's error against the fastest "
              f"{_err(x['epoch_s'], lo):+.0%}, the slowest {_err(x['epoch_s'], hi):+.0%})")
        # with calibrations around every round their line below is the verdict
        verdict = ("(the first calibration alone; the verdict is the bracketed line)"
                   if "bracketed" in res else
                   f"target (epoch) <= 15 %: {'met' if ok else 'NOT met'}")
        print(f"system model, {key} ({x['variant']}): iteration {x['iteration_s'] * 1e3:.2f} vs "
              f"{x['measured_iteration_s'] * 1e3:.2f} ms ({x['iteration_error']:+.0%}), epoch "
              f"{x['epoch_s']:.3f} vs {x['measured_epoch_s']:.3f} s ({x['epoch_error']:+.0%}), "
              f"Eq. 5 {x['MTEPS']:.1f} vs {x['measured_MTEPS']:.1f} MTEPS; {verdict}")
    for key, b in res.get("bracketed", {}).items():
        errs = ", ".join(f"{r['epoch_error']:+.0%}" for r in b["rounds"])
        print(f"bracketed, {key} ({b['variant']}; each round against the mean of the "
              f"predictions calibrated before and after it): rounds {errs}; within 15 %: "
              f"{b['within_15']} of {len(b['rounds'])}; medians {b['epoch_s']:.3f} vs "
              f"{b['measured_epoch_s']:.3f} s ({b['epoch_error']:+.0%}); target (epoch) "
              f"<= 15 %: {'met' if abs(b['epoch_error']) <= 0.15 else 'NOT met'}")
        print(f"pooled, {key}: the median of {len(b['calibrations_epoch_s'])} calibrations' "
              f"predictions ({min(b['calibrations_epoch_s']):.3f} .. "
              f"{max(b['calibrations_epoch_s']):.3f} s) {b['pooled_epoch_s']:.3f} vs "
              f"{b['measured_epoch_s']:.3f} s ({b['pooled_error']:+.0%})")
    e6 = sm["eq6_as_written"]
    print(f"Eq. 6 as written (no host overhead, no core sharing): {e6['T_execution'] * 1e3:.2f} "
          f"ms ({e6['bottleneck']}), iteration error {e6['iteration_error']:+.0%}, epoch "
          f"{e6['epoch_error']:+.0%}")
    print(f"\nu250 preset (paper Table II/IV; ASSUMED: PCIe {args.pcie_gb_s} GB/s per FPGA, one "
          f"CPU trainer, sampling at this host's rate on {args.paper_sampler_threads} cores), 4 "
          f"FPGA + 1 CPU trainer, 1024 targets per trainer per iteration, fanouts "
          f"{res['paper_fanouts']} (input layer first), analytic mini-batch sizes; split: even "
          "(paper's setup) or the CPU share Eq. 6 finds best (design-time mapping)")
    print("| dataset | model | hidden | split | CPU share | T_samp ms | T_load ms | T_trans ms "
          "| T_prop ms | bottleneck | MTEPS | NVTPS (M) | epoch s | w/o T_samp s | paper s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res["u250"]:
        paper = f"{r['paper_epoch_s']:.2f}" if r["paper_epoch_s"] is not None else "-"
        print(f"| {r['dataset']} | {r['model']} | {r['hidden']} | {r['split']} | "
              f"{r['cpu_share']:.2f} | {r['T_samp'] * 1e3:.2f} | {r['T_load'] * 1e3:.2f} | "
              f"{r['T_trans'] * 1e3:.2f} | {r['T_prop'] * 1e3:.2f} | {r['bottleneck']} | "
              f"{r['MTEPS']:,.0f} | {r['NVTPS'] / 1e6:,.1f} | {r['epoch_s']:.2f} | "
              f"{r['epoch_no_samp_s']:.2f} | {paper} |")
    print(f"written: {path}")
    return 0
