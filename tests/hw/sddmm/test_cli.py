"""``moagcn sddmm run`` / ``estimate`` / ``hw generate sddmm``: outputs, reports and bad input
(one line naming the input, the problem and the valid range; exit status 2; no traceback)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from moagcn.cli.main import main
from tests.hw.sddmm.graphs import awkward_pattern, loop_reference


@pytest.fixture()
def files(tmp_path):
    indptr, indices = awkward_pattern(20, 20, seed=1)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices)
    rng = np.random.default_rng(2)
    arrays = {"q": rng.standard_normal((20, 12)), "k": rng.standard_normal((20, 12)),
              "k_narrow": rng.standard_normal((20, 8)), "q_short": rng.standard_normal((19, 12)),
              "q_nan": rng.standard_normal((20, 12)), "k_inf": rng.standard_normal((20, 12))}
    arrays["q_nan"][4, 2] = np.nan
    arrays["k_inf"][0, 7] = -np.inf
    paths = {"g": str(tmp_path / "g.npz"), "dir": tmp_path, "indptr": indptr,
             "indices": indices}
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
        paths[name] = str(tmp_path / f"{name}.npy")
    np.save(tmp_path / "q64.npy", arrays["q"])                    # float64
    paths["q64"] = str(tmp_path / "q64.npy")
    np.save(tmp_path / "mask_bad.npy", np.ones((5, 3), bool))
    paths["mask_bad"] = str(tmp_path / "mask_bad.npy")
    return paths


def test_run_on_the_model_writes_s_and_a_report(files):
    out, rep = files["dir"] / "s.npy", files["dir"] / "r.json"
    assert main(["sddmm", "run", "--graph", files["g"], "--q", files["q"], "--k", files["k"],
                 "--heads", "3", "--device", "model", "--preset", "tiny", "--out", str(out),
                 "--report", str(rep)]) == 0
    S = np.load(out)
    Q, K = np.load(files["q"]), np.load(files["k"])
    ref = loop_reference(files["indptr"], files["indices"], Q, K, 3, 4)
    assert np.array_equal(S.view(np.uint32), ref.view(np.uint32))
    r = json.loads(rep.read_text())
    assert r["heads"] == 3 and r["entries"] == files["indices"].size
    assert r["work_adds"] == files["indices"].size * 12 and r["tiles"] > 1
    assert 0 < r["utilization"] <= 1


def test_estimate_equals_the_model_run(files):
    rep_run, rep_est = files["dir"] / "r.json", files["dir"] / "e.json"
    assert main(["sddmm", "run", "--graph", files["g"], "--q", files["q"], "--k", files["k"],
                 "--heads", "2", "--device", "model", "--preset", "tiny", "--out",
                 str(files["dir"] / "s.npy"), "--report", str(rep_run)]) == 0
    assert main(["sddmm", "estimate", "--graph", files["g"], "--width", "12", "--heads", "2",
                 "--preset", "tiny", "--report", str(rep_est)]) == 0
    run, est = json.loads(rep_run.read_text()), json.loads(rep_est.read_text())
    for key in ("cycles_total", "cycles_compute", "cycles_load", "work_adds", "tiles"):
        assert run[key] == est[key], key


def test_hw_generate(tmp_path):
    assert main(["hw", "generate", "sddmm", "--preset", "tiny", "--out", str(tmp_path)]) == 0
    assert "module sddmm" in (tmp_path / "sddmm.v").read_text()


BAD = [
    (["--q", "{q}", "--k", "{k}", "--heads", "5"], "--heads 5 does not divide the width 12"),
    (["--q", "{q}", "--k", "{k}", "--heads", "0"], "--heads 0: use a whole number of at least 1"),
    (["--q", "{q}", "--k", "{k}", "--heads", "-2"], "--heads -2"),
    (["--q", "{q}", "--k", "{k_narrow}"], "--k has 8 columns but --q has 12"),
    (["--q", "{q_short}", "--k", "{k}"], "--q has 19 rows but the graph has 20 rows"),
    (["--q", "{q_nan}", "--k", "{k}"], "must be finite"),
    (["--q", "{q}", "--k", "{k_inf}"], "must be finite"),
    (["--q", "{q64}", "--k", "{k}"], "expected a 2-D float32 array"),
    (["--q", "{q}", "--k", "{k}", "--mask", "{mask_bad}"], "--mask"),
    (["--q", "{q}", "--k", "{k}", "--heads", "4", "--param", "max_heads=2"], "max_heads=2"),
]


@pytest.mark.parametrize("extra,text", BAD)
def test_bad_input_is_one_line_and_exit_status_2(files, capsys, extra, text):
    argv = ["sddmm", "run", "--graph", files["g"], "--device", "model", "--preset", "tiny",
            "--out", str(files["dir"] / "s.npy")] + [a.format(**files) for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and text in err, err


@pytest.mark.parametrize("extra,text", [(["--width", "12", "--heads", "0"], "at least 1"),
                                        (["--width", "12", "--heads", "7"], "does not divide"),
                                        (["--width", "0"], "--width 0")])
def test_bad_estimate_input(files, capsys, extra, text):
    argv = ["sddmm", "estimate", "--graph", files["g"], "--report",
            str(files["dir"] / "e.json")] + extra
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and text in err, err
