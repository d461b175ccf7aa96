"""``moagcn experiment deal`` end to end on a tiny R-MAT graph: the files, the rows and that their
numbers are the reports' own."""

import csv
import json

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.experiments.deal import PHASES, SYSTEMS, parse_grid


def test_experiment_deal_smoke(tmp_path, capsys):
    assert main(["experiment", "deal", "--datasets", "rmat", "--rmat-scale", "9",
                 "--grid", "1x1,2x2", "--rmat-epochs", "2", "--repeats", "2",
                 "--models", "gcn", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "DEAL >= 3x faster than ego-network" in printed and "7.7x" in printed
    with open(tmp_path / "deal.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["P"], r["M"], r["system"]) for r in rows] == \
        [(p, m, s) for p, m in (("1", "1"), ("2", "2")) for s in SYSTEMS]
    report = json.loads((tmp_path / "deal.json").read_text())
    assert report["training"]["rmat-9"]["epochs"] == 2
    assert len(report["rows"]) == len(rows) == 8
    for row, crow in zip(report["rows"], rows):
        assert float(crow["end_to_end_s"]) == pytest.approx(row["end_to_end_s"])
        assert row["end_to_end_s"] > 0 and row["t_sample_s"] > 0 and row["t_spmm_s"] > 0
        assert row["end_to_end_s_min"] <= row["end_to_end_s"] <= row["end_to_end_s_max"]
        # in-process: the phases are parts of the wall time, the rest is "other"
        assert sum(row[f"t_{ph}_s"] for ph in PHASES) == pytest.approx(row["end_to_end_s"])
        assert row["max_rel_diff_from_deal"] < 1e-4          # every system embeds the same
        reps = report["runs"][f"rmat-9 {row['P']}x{row['M']}"]
        assert len(reps) == 2
        if row["system"] == "ego":
            assert row["gemm_bytes_mean"] == row["spmm_bytes_mean"] == 0
            assert row["peak_feature_bytes_max"] in \
                [c["runs"]["ego"]["peak_feature_bytes"] for c in reps]
            continue
        for c in reps:      # bytes do not depend on the repeat: every report has the row's
            run = c["runs"][row["system"]]
            assert row["gemm_bytes_mean"] == np.mean(run["gemm_bytes_received"])
            assert row["gemm_bytes_max"] == max(run["gemm_bytes_received"])
            assert row["spmm_bytes_mean"] == np.mean(run["spmm_bytes_received"])
            assert row["peak_feature_bytes_max"] == max(run["peak_feature_bytes"])
            which = "cagnet" if row["system"] == "cagnet_gemm" else "deal"
            assert row["gemm_bytes_formula"] == \
                run["formulas"]["gemm_bytes_per_process"][which]
            assert row["spmm_bytes_table2"] == run["formulas"]["spmm_bytes_per_process_table2"]
        if row["P"] == 2:
            assert row["gemm_bytes_mean"] > 0 and row["spmm_bytes_mean"] > 0
            assert row["processes"] == 4
    gemm = report["targets"][2]
    assert gemm["verdict"].startswith("met")
    assert max(v["rel_deviation"] for v in gemm["values"]) <= 0.01
    assert set(report["targets"][3]["values"]) == {"rmat-9"}   # pipelining, evaluated at 2x2
    for name in ("deal_time.png", "deal_bytes.png", "deal_memory.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_experiment_deal_gat_rows(tmp_path, capsys):
    """The GAT's rows: its SDDMM columns are the reports' own and beside Table 3's terms; its
    own end-to-end target line."""
    assert main(["experiment", "deal", "--datasets", "rmat", "--rmat-scale", "9",
                 "--grid", "2x2", "--rmat-epochs", "1", "--repeats", "1", "--models", "gat",
                 "--heads", "4", "--hidden", "16", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "(rmat-9 gat, 2 layers): DEAL >= 2x faster than ego-network" in printed
    report = json.loads((tmp_path / "deal.json").read_text())
    rows = report["rows"]
    assert {r["panel"] for r in rows} == {"rmat-9 gat"} and len(rows) == len(SYSTEMS)
    run = report["runs"]["rmat-9 gat 2x2"][0]["runs"]["deal"]
    row = next(r for r in rows if r["system"] == "deal")
    assert row["sddmm_bytes_mean"] == np.mean(run["sddmm_bytes_received"]) > 0
    t3 = run["formulas"]["sddmm_bytes_per_process_table3"]
    assert row["sddmm_bytes_table3"] == t3["approach_ii"] > 0
    assert row["t_sddmm_s"] > 0
    # 16 wide, 4 heads over M = 2 blocks: each block holds 2 whole heads, so the dest term is
    # Table 3's exactly up to the uneven sub-ranges (N = 512 divides by P M)
    assert row["sddmm_dest_bytes_mean"] == pytest.approx(row["sddmm_dest_bytes_table3"])
    sd = next(t for t in report["targets"] if "SDDMM" in t["target"])
    assert sd["values"][0]["dest_measured"] == row["sddmm_dest_bytes_mean"]


def test_bad_models_are_one_line(tmp_path, capsys):
    assert main(["experiment", "deal", "--models", "gcn,gin", "--out", str(tmp_path)]) != 0
    assert "--models" in capsys.readouterr().err
    assert main(["experiment", "deal", "--heads", "5", "--out", str(tmp_path)]) != 0
    assert "--heads 5" in capsys.readouterr().err


@pytest.mark.parametrize("grid", ["", "2by2", "0x1", "2x"])
def test_bad_grid_is_a_user_error(grid):
    with pytest.raises(UserError, match="--grid"):
        parse_grid(grid)


def test_bad_dataset_is_one_line(tmp_path, capsys):
    assert main(["experiment", "deal", "--datasets", "pubmed", "--out", str(tmp_path)]) != 0
    assert "--datasets" in capsys.readouterr().err
