"""The rows of ``moagcn experiment deal`` (:mod:`moagcn.host.experiments.deal`): one per
dataset, model, ``P x M`` and system, from the median-time repeat of its runs; the time
breakdown by phase and the bytes beside DEAL's formulas (Tables 1-3)."""

from __future__ import annotations

import numpy as np

from moagcn.host.graphs.data import Dataset

SYSTEMS = ("deal", "cagnet_gemm", "no_pipeline", "ego")
LABELS = {"deal": "DEAL", "cagnet_gemm": "CAGNET GEMM", "no_pipeline": "no pipeline",
          "ego": "ego-network"}
PHASES = ("sample", "gather", "gemm", "sddmm", "spmm", "comm", "other")


def panel(dataset: str, model: str) -> str:
    """A (dataset, model) pair's name in tables and plots: the dataset for GCN, ``"cora
    gat"`` for GAT."""
    return dataset if model == "gcn" else f"{dataset} {model}"


def find_row(rows, key, P, M, system):
    """The row of ``key`` (:func:`panel`), ``P x M`` and ``system``."""
    for r in rows:
        if (r["panel"], r["P"], r["M"], r["system"]) == (key, P, M, system):
            return r
    return None


# -- one system of one run -----------------------------------------------------------------------

def _e2e(run: dict, system: str, distributed: bool) -> float:
    if system != "ego" and distributed:
        return float(run["time_s"]["total"])
    return float(run["wall_s"])


def breakdown(run: dict, system: str, distributed: bool) -> dict:
    """Seconds by phase (see the module doc); ``other`` is the end-to-end time's remainder."""
    e2e = _e2e(run, system, distributed)
    t = dict.fromkeys(PHASES, 0.0)
    if system == "ego":
        for ph in ("sample", "gather", "gemm", "sddmm", "spmm"):
            t[ph] = float(run["time_s"].get(ph, 0.0))
    elif distributed:
        for ph in ("sample", "gemm", "sddmm", "spmm"):
            t[ph] = float(run["time_s"].get(ph, 0.0))
        t["comm"] = float(run["time_s"].get("spmm_comm", 0.0)
                          + run["time_s"].get("sddmm_comm", 0.0))
    else:
        procs = run["processes"]
        for ph in ("sample", "gemm", "sddmm", "spmm"):
            t[ph] = float(sum(p["time_s"].get(ph, 0.0) for p in procs))
        t["comm"] = float(max(p["time_s"].get("spmm_comm", 0.0) for p in procs)
                          + max(p["time_s"].get("sddmm_comm", 0.0) for p in procs))
    t["other"] = max(e2e - sum(t[ph] for ph in PHASES if ph != "other"), 0.0)
    return t


def system_row(dataset: str, d: Dataset, P: int, M: int, system: str, runs: list[dict],
               agree: list[dict], distributed: bool, model: str = "gcn") -> tuple[dict, int]:
    """The row of one system (its median-time repeat) and that repeat's index."""
    times = [_e2e(r, system, distributed) for r in runs]
    k = int(np.argsort(times)[(len(times) - 1) // 2])
    run = runs[k]
    t = breakdown(run, system, distributed)
    row = {"dataset": dataset, "model": model, "panel": panel(dataset, model),
           "nodes": d.n_nodes, "edges": int(d.graph.nnz), "P": P, "M": M,
           "processes": 1 if system == "ego" else P * M, "system": system,
           "distributed": bool(distributed and system != "ego"), "repeats": len(runs),
           "end_to_end_s": times[k], "end_to_end_s_min": min(times),
           "end_to_end_s_max": max(times), "wall_s": float(run["wall_s"])}
    row.update({f"t_{ph}_s": t[ph] for ph in PHASES})
    if system == "ego":
        row.update({"gemm_bytes_mean": 0.0, "gemm_bytes_max": 0, "gemm_bytes_formula": None,
                    "gemm_formula": "", "spmm_bytes_mean": 0.0, "spmm_bytes_max": 0,
                    "spmm_bytes_table2": None, "sddmm_bytes_mean": 0.0,
                    "sddmm_bytes_max": 0, "sddmm_bytes_table3": None,
                    **{f"sddmm_{p}_bytes_mean": 0.0 for p in ("ids", "dest", "src", "scores")},
                    **{f"sddmm_{p}_bytes_table3": None for p in ("dest", "src", "scores")},
                    "peak_feature_bytes_max": int(run["peak_feature_bytes"]),
                    "peak_feature_bytes_mean": float(run["peak_feature_bytes"]),
                    "resident_block_bytes": None,
                    "nodes_computed": sum(run["nodes_computed"])})
    else:
        f = run["formulas"]
        which = "cagnet" if system == "cagnet_gemm" else "deal"
        g, s, pk = run["gemm_bytes_received"], run["spmm_bytes_received"], \
            run["peak_feature_bytes"]
        row.update({"gemm_bytes_mean": float(np.mean(g)), "gemm_bytes_max": int(max(g)),
                    "gemm_bytes_formula": float(f["gemm_bytes_per_process"][which]),
                    "gemm_formula": which, "spmm_bytes_mean": float(np.mean(s)),
                    "spmm_bytes_max": int(max(s)),
                    "spmm_bytes_table2": float(f["spmm_bytes_per_process_table2"]),
                    **_sddmm_columns(run),
                    "peak_feature_bytes_max": int(max(pk)),
                    "peak_feature_bytes_mean": float(np.mean(pk)),
                    "resident_block_bytes": int(f["resident_block_bytes"]),
                    "nodes_computed": (len(run["dims"]) - 1) * d.n_nodes})
    diff = [a.get(system) for a in agree if a.get(system) is not None]
    row["max_rel_diff_from_deal"] = float(max(diff)) if diff else 0.0
    return row, k


def _sddmm_columns(run: dict) -> dict:
    """A GAT run's SDDMM bytes per process by kind (mean) beside DEAL's Table 3 terms (approach
    ii); zeros and None for the other models."""
    t3 = run["formulas"].get("sddmm_bytes_per_process_table3") or {}
    procs = run["processes"]
    out = {"sddmm_bytes_mean": float(np.mean(run.get("sddmm_bytes_received", [0]))),
           "sddmm_bytes_max": int(max(run.get("sddmm_bytes_received", [0]))),
           "sddmm_bytes_table3": float(t3["approach_ii"]) if t3 else None}
    for part in ("ids", "dest", "src", "scores"):
        out[f"sddmm_{part}_bytes_mean"] = float(np.mean(
            [p.get(f"sddmm_{part}_bytes_received", 0) for p in procs]))
        if part != "ids":
            out[f"sddmm_{part}_bytes_table3"] = float(t3[part]) if t3 else None
    return out


