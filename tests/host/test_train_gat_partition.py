"""GAT on the partition-parallel runtime (``moagcn train --model gat --parallelism partition``):
workers, accelerators, ``--distributed`` and fleets.

- Without dropout, any worker count trains the same trajectory as the one-process GAT
  (``train_gat``, PyG's layer conventions, itself checked against PyG and a dense formula);
  with dropout (one global mask per layer input and per attention layer), 1, 2 and 4 workers
  train the same trajectory, on an awkward graph (hub, isolated nodes, self loops, repeated
  edges) and with every partition method.
- ``model`` against ``cpu`` within fp32 tolerance; ``rtl`` against ``model`` bit for bit.
- ``--distributed`` (2 processes) equals the in-process run (fp32 summation order) and moves
  the same bytes.
- Refusals: another parallelism, pre-aggregation, a binary S-SpMM, the SDDMM preset.
"""

import json

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.graphs.data import save_npz
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train
from moagcn.host.training.gat import GATConfig, train_gat



@pytest.fixture(scope="module")
def small(gat_small):
    return gat_small


def gat_cfg(**kw):
    base = dict(model="gat", hidden=3, heads=2, dropout=0.5, lr=0.01, epochs=3, device="cpu",
                parallelism="partition")
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def odd(gat_awkward):
    return gat_awkward


def test_without_dropout_any_worker_count_is_the_one_process_gat(small):
    ref = train_gat(small, GATConfig(heads=2, hidden=3, dropout=0.0, lr=0.01, epochs=3))
    for m in (1, 3):
        r = train(small, gat_cfg(dropout=0.0, workers=m))
        assert np.allclose(r.train_loss, ref.loss, rtol=1e-5, atol=0), m


@pytest.mark.parametrize("partition", ["contiguous", "rcm", "metis"])
def test_worker_counts_train_one_trajectory(odd, partition):
    one = train(odd, gat_cfg(workers=1))
    for m in (2, 4):
        r = train(odd, gat_cfg(workers=m, partition=partition))
        assert np.allclose(r.train_loss, one.train_loss, rtol=1e-5, atol=0), (m, partition)
        assert r.history[-1].val_acc == one.history[-1].val_acc


def test_model_is_near_cpu_and_rtl_is_model_bit_for_bit(small):
    cpu = train(small, gat_cfg(workers=2, epochs=2))
    runs = {}
    for device in ("model", "rtl"):
        runs[device] = train(small, gat_cfg(workers=2, epochs=2, device=device, preset="tiny",
                                            params={"weighted": "true"}))
    assert np.allclose(runs["model"].train_loss, cpu.train_loss, rtol=1e-5, atol=0)
    assert runs["rtl"].train_loss == runs["model"].train_loss
    sc = runs["model"].report()["sim_cycles"]
    assert sc["per_epoch"] > sc["per_epoch_max_device"] > 0    # both workers' devices worked
    # (the weighted S-SpMM's cycle model is within 3 % of its RTL, the SDDMM's exact)
    assert runs["rtl"].report()["sim_cycles"]["per_epoch"] == pytest.approx(sc["per_epoch"],
                                                                        rel=0.03)


def test_a_mixed_fleet_splits_the_attention_by_its_shares(small):
    """Two weighted S-SpMMs of unequal lanes and a cpu worker, split by capability: the same
    trajectory as one worker, each accelerator's cycles its own."""
    one = train(small, gat_cfg(workers=1))
    r = train(small, gat_cfg(device="model", devices="sspmm:lanes=16:weighted=true,"
                             "sspmm:lanes=4:weighted=true,cpu", workers=3, balance="spec"))
    assert np.allclose(r.train_loss, one.train_loss, rtol=1e-5, atol=0)
    shares = r.report()["shares"]
    assert shares[0] > shares[1] > 0 and abs(sum(shares) - 1) < 1e-9


def test_distributed_equals_in_process(small, tmp_path):
    path = tmp_path / "s.npz"
    save_npz(small, path)
    reps = []
    for extra in ([], ["--distributed"]):
        rep = tmp_path / f"r{len(extra)}.json"
        assert main(["train", "--model", "gat", "--parallelism", "partition", "--workers", "2",
                     "--device", "cpu", "--dataset", str(path), "--epochs", "3", "--heads", "2",
                     "--hidden", "3", "--quiet", "--report", str(rep)] + extra) == 0
        reps.append(json.loads(rep.read_text()))
    # the processes all-reduce their gradients: the sums differ from one process's in order
    np.testing.assert_allclose(reps[1]["train_loss"], reps[0]["train_loss"], rtol=1e-6)
    assert reps[1]["comm_bytes"] == reps[0]["comm_bytes"] > 0


@pytest.mark.parametrize("extra,match", [
    (["--reorder", "rcm"], r"--reorder rcm: not available .* with --workers, --devices or "
                           r"--distributed"),
    (["--workers", "2", "--pipeline", "natural"], r"--pipeline natural with --model gat"),
    (["--parallelism", "partition", "--aggregation", "pre"], r"--aggregation pre with --model "
                                                              r"gat"),
    (["--parallelism", "partition", "--device", "model"], r"--param weighted=true"),
    (["--parallelism", "partition", "--device", "model", "--param", "weighted=true",
      "--sddmm-preset", "tiny"], r"--sddmm-preset tiny"),
    (["--parallelism", "partition", "--label-prop", "0.5"], r"--label-prop"),
    (["--workers", "2", "--device", "model", "--devices", "sspmm:lanes=8,cpu"],
     r"--devices sspmm:lanes=8: GAT aggregates .* add --param weighted=true"),
    (["--workers", "2", "--device", "model", "--design", "hyscale"],
     r"--device model: .* hyscale accelerator .* use --design sspmm"),
])
def test_refusals_are_one_line(small, tmp_path, capsys, extra, match):
    path = tmp_path / "s.npz"
    save_npz(small, path)
    argv = ["train", "--model", "gat", "--dataset", str(path), "--epochs", "1", "--device",
            "cpu", "--report", str(tmp_path / "r.json")]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    import re
    assert re.search(match, err), err


def test_config_refuses_gat_in_the_fine_grain_pipeline():
    with pytest.raises(UserError, match="--pipeline natural with --model gat"):
        gat_cfg(parallelism="mop", pipeline="natural").validate()


# -- MoP ------------------------------------------------------------------------------------

def test_mop_trains_the_same_trajectory_and_moves_its_analytic_bytes(odd, small):
    """GAT under MoP (beyond MixGCN): without dropout the one-process trajectory; with
    dropout, 2 and 3 workers (3 does not divide the heads' columns: a head cut between two
    devices) the same as one; the bytes counted equal the analytic count."""
    ref = train_gat(small, GATConfig(heads=2, hidden=3, dropout=0.0, lr=0.01, epochs=3))
    r = train(small, gat_cfg(dropout=0.0, workers=3, parallelism="mop"))
    assert np.allclose(r.train_loss, ref.loss, rtol=1e-5, atol=0)
    one = train(odd, gat_cfg(workers=1, parallelism="mop"))
    for m in (2, 3):
        r = train(odd, gat_cfg(workers=m, parallelism="mop"))
        assert np.allclose(r.train_loss, one.train_loss, rtol=1e-5, atol=0), m
        rep = r.report()
        assert rep["comm_bytes_per_epoch"]["data"] == rep["comm_bytes_analytic"] > 0


def test_mop_gat_on_the_accelerators(small):
    cpu = train(small, gat_cfg(workers=2, epochs=2, parallelism="mop"))
    kw = dict(workers=2, epochs=2, parallelism="mop", preset="tiny",
              params={"weighted": "true"})
    model = train(small, gat_cfg(device="model", **kw))
    rtl = train(small, gat_cfg(device="rtl", **kw))
    assert np.allclose(model.train_loss, cpu.train_loss, rtol=1e-5, atol=0)
    assert rtl.train_loss == model.train_loss
