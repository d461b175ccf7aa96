"""MixGCN's Fig. 10/11 and Table 4 experiments (smoke runs with real values)."""

import json

import pytest

from moagcn.cli.main import main


def test_fig10_volumes_and_balance(tmp_path, capsys):
    assert main(["experiment", "fig10", "--datasets", "reddit,papers100m", "--worker-list", "2,4",
                 "--scale", "0.3", "--hidden", "16", "--layers", "2", "--out",
                 str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fig10.json").read_text())
    assert len(rows) == 2 * 2 * 3
    by = {(r["dataset"], r["workers"], r["system"]): r for r in rows}
    for name in ("reddit", "papers100m"):
        mop2, mop4 = by[(name, 2, "mop")], by[(name, 4, "mop")]
        # Prop. 3.4: MoP's volume at m workers is (m-1)/m of the full exchange
        assert mop4["comm_bytes"] / mop2["comm_bytes"] == pytest.approx(1.5, rel=0.02)
        assert mop2["flops_max_over_mean"] < 1.02
        assert by[(name, 4, "partition-metis")]["edge_cut"] > 0
    assert (tmp_path / "fig10.png").exists() and (tmp_path / "fig10.csv").exists()
    assert "volume growth" in capsys.readouterr().out


def test_table4_runs_both_orders(tmp_path, capsys):
    """Each order's bandwidth against the stand-in graph's entries and scipy's reverse
    Cuthill-McKee order (symmetrised structure), Prop. 3.5's condition ``(n - b) s >= 2n`` by
    hand, the speed-ups as the ratios of the makespans, and the pipeline between its bounds:
    never slower than the same costs without overlap, never faster than that over the
    workers plus the sparse unit."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    from moagcn.host.experiments.mixgcn_fig10 import stand_in

    assert main(["experiment", "table4", "--datasets", "papers100m", "--scale", "0.1",
                 "--workers", "2", "--stages", "4", "--epochs", "1", "--param", "clock_mhz=40",
                 "--out", str(tmp_path)]) == 0
    assert "S-SpMM at 40 MHz" in capsys.readouterr().out
    (row,) = json.loads((tmp_path / "table4.json").read_text())
    g = stand_in("papers100m", 0.1, 0)[0]
    n = g.n_rows
    rows = np.repeat(np.arange(n), np.diff(g.indptr))
    cols = np.asarray(g.indices)
    assert (row["nodes"], row["entries"]) == (n, cols.size)
    A = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(n, n))
    perm = reverse_cuthill_mckee(sp.csr_matrix(A + A.T), symmetric_mode=True)
    pos = np.argsort(perm)
    off = rows != cols
    b = {"natural": int(np.abs(rows - cols)[off].max()),
         "rcm": int(np.abs(pos[rows] - pos[cols])[off].max())}
    for order in ("natural", "rcm"):
        assert row[f"{order}_bandwidth"] == b[order], order
        assert row[f"{order}_prop35_holds"] == ((n - b[order]) * 4 >= 2 * n), order
        assert 1.0 <= row[f"{order}_speedup_over_off"] <= 3.0, order
        assert 0.0 <= row[f"{order}_idle_fraction"] < 1.0, order
        assert row[f"{order}_step_makespan_s"] == pytest.approx(
            row[f"{order}_makespan_s"] + row[f"{order}_backward_makespan_s"], rel=1e-12)
    assert b["rcm"] < b["natural"]
    assert row["rcm_speedup"] == pytest.approx(
        row["natural_makespan_s"] / row["rcm_makespan_s"], rel=1e-12)
    assert row["rcm_step_speedup"] == pytest.approx(
        row["natural_step_makespan_s"] / row["rcm_step_makespan_s"], rel=1e-12)


def test_bad_worker_lists(tmp_path, capsys):
    for bad in ("2,2", "0,4", "x"):
        assert main(["experiment", "fig10", "--worker-list", bad, "--out", str(tmp_path)]) != 0
        assert "--worker-list" in capsys.readouterr().err
