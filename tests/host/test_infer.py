"""`moagcn infer` and its drivers: checkpoints, in-process vs torch.distributed runs, failing
processes, and the command line's bad input."""

import json
import os
import signal
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist

from moagcn.errors import UserError
from moagcn.host.deal.engine import InferConfig
from moagcn.host.deal.infer import infer, model_input
from moagcn.host.graphs.generators import sbm
from moagcn.host.nn.checkpoint import load, save
from moagcn.host.nn.layerwise import layer_graphs, layerwise_forward
from moagcn.host.nn.models import GNN
from moagcn.host.parallel.launch import launch

from ..cli.test_cli import moagcn


def small():
    return sbm(n_nodes=120, n_classes=3, avg_degree=5.0, seed=2)


def test_distributed_run_equals_the_in_process_one():
    d = small()
    torch.manual_seed(0)
    model = GNN("sage", d.n_features, 10, d.n_classes, 2)
    meta = {"normalize_features": True}
    cfg = InferConfig(2, 2, [4, 3], groups=3, seed=3)
    e1, r1 = infer(d, model, meta, cfg)
    e2, r2 = infer(d, model, meta, cfg, distributed=True, timeout_s=60)
    assert np.array_equal(e1, e2)
    for key in ("gemm_bytes_received", "spmm_bytes_received", "peak_feature_bytes"):
        assert r1[key] == r2[key], key
    ref = layerwise_forward(model, layer_graphs(d.graph, [4, 3], 3),
                            torch.from_numpy(model_input(model, meta, d))).numpy()
    assert np.abs(e2 - ref).max() < 1e-5 * np.abs(ref).max()
    assert r2["distributed"] and len(r2["processes"]) == 4


# workers for launch(): module-level so that the started processes can import them

def _dies(rank, world, dense, emit):
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return rank


def _raises(rank, world, dense, emit):
    if rank == 0:
        raise ValueError("bad block")
    dist.barrier()
    return rank


def _hangs(rank, world, dense, emit):
    if rank == 1:
        time.sleep(120)
    dist.barrier()
    return rank


def _emits(rank, world, dense, emit):
    emit(("hello", rank))
    dist.barrier()
    return rank * 10


def test_launch_returns_results_by_rank_and_relays_events():
    seen = []
    assert launch(_emits, 3, (), on_event=seen.append) == [0, 10, 20]
    assert sorted(seen) == [("hello", 0), ("hello", 1), ("hello", 2)]


def test_a_process_that_dies_ends_the_run_with_one_line():
    with pytest.raises(UserError, match="worker process 1 died"):
        launch(_dies, 2, (), what="inference")


def test_a_process_that_raises_names_its_rank_and_error():
    with pytest.raises(UserError, match="rank 0: ValueError: bad block"):
        launch(_raises, 2, (), what="inference")


def test_a_hung_peer_ends_the_run_within_the_timeout():
    t0 = time.perf_counter()
    with pytest.raises(UserError, match="inference failed"):
        launch(_hangs, 2, (), what="inference", timeout_s=3)
    assert time.perf_counter() - t0 < 60     # not the sleeping peer's 120 s


# -- checkpoints -------------------------------------------------------------------------------

def test_checkpoint_round_trip_and_mismatches(tmp_path):
    torch.manual_seed(0)
    net = GNN("gin", 12, 6, 3, 2, layer_norm=True)
    meta = {"model": "gin", "in_features": 12, "hidden": 6, "n_classes": 3, "layers": 2,
            "label_embedding": False, "layer_norm": True, "normalize_features": False}
    path = save(tmp_path / "c.pt", net.state_dict(), meta)
    back, m = load(path, 12, "gin")
    for (k, a), (_, b) in zip(net.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), k
    with pytest.raises(UserError, match="12 input features"):
        load(path, 13)
    with pytest.raises(UserError, match="holds a gin model, not the gcn"):
        load(path, 12, "gcn")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="not a readable checkpoint"):
        load(tmp_path / "junk.pt")
    with pytest.raises(UserError, match="no such file"):
        load(tmp_path / "missing.pt")


# -- the command line --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    out = moagcn("train", "--dataset", "cora", "--device", "cpu", "--epochs", "3", "--quiet",
                 "--report", d / "r.json", "--save", d / "c.pt")
    assert out.returncode == 0, out.stderr
    return d / "c.pt"


def test_infer_writes_embeddings_equal_to_the_reference(checkpoint, tmp_path):
    out = moagcn("infer", "--dataset", "cora", "--checkpoint", checkpoint, "--device", "cpu",
                 "--grid", "2x2", "--fanout", "5,5",
                 "--processes", "4", "--out", tmp_path / "e.npy", "--report", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    emb = np.load(tmp_path / "e.npy")
    from moagcn.host.graphs.datasets import load_dataset
    d = load_dataset("cora")
    model, meta = load(checkpoint, d.n_features)
    ref = layerwise_forward(model, layer_graphs(d.graph, [5, 5], 0),
                            torch.from_numpy(model_input(model, meta, d))).numpy()
    assert np.abs(emb - ref).max() < 1e-5 * np.abs(ref).max()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert len(rep["gemm_bytes_received"]) == 4 and min(rep["spmm_bytes_received"]) > 0
    assert not list(tmp_path.glob("*.partial*"))


@pytest.mark.parametrize("args,message", [
    (["--dataset", "citeseer"], "trained on 1433 input features"),
    (["--model", "sage"], "holds a gcn model, not the sage"),
    (["--grid", "2x1", "--processes", "3"], "does not equal --grid 2x1 = 2 processes"),
    (["--fanout", "5,5,5"], "3 fanouts but the model has 2"),
    (["--out", "e.txt"], "path ending in .npy"),
    (["--grid", "1x0"], "must be at least 1"),
    (["--grid", "1x99"], "use P <= 2708 and M <= 7"),
    (["--subgroups", "0"], "--subgroups 0: use at least 1 sub-group"),
])
def test_bad_input_is_one_line(checkpoint, tmp_path, args, message):
    argv = ["infer", "--checkpoint", checkpoint, "--device", "cpu", "--out",
            tmp_path / "e.npy", "--report", tmp_path / "r.json"] + [
        str(tmp_path / a) if a == "e.txt" else a for a in args]
    out = moagcn(*argv)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "e.npy").exists()


def test_unwritable_output_is_refused_before_work(checkpoint, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = moagcn("infer", "--checkpoint", checkpoint, "--device", "cpu",
                 "--out", blocker / "e.npy", "--report", tmp_path / "r.json")
    assert out.returncode != 0 and "--out" in out.stderr and "Traceback" not in out.stderr


def test_gat_checkpoint_trains_saves_and_embeds(tmp_path):
    """``moagcn train --model gat --save`` then ``moagcn infer``: the embeddings are the saved
    model's own layers over the same samples; a GAT checkpoint is not a GCN one and the
    reverse; a binary S-SpMM is refused for its attention before any build."""
    ck = tmp_path / "gat.pt"
    out = moagcn("train", "--model", "gat", "--dataset", "cora", "--device", "cpu",
                 "--epochs", "2", "--heads", "2", "--hidden", "4", "--quiet", "--report",
                 tmp_path / "t.json", "--save", ck)
    assert out.returncode == 0, out.stderr
    out = moagcn("infer", "--dataset", "cora", "--checkpoint", ck, "--device", "cpu",
                 "--grid", "2x2", "--fanout", "4,6", "--model", "gat",
                 "--out", tmp_path / "e.npy", "--report", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    assert "attention SDDMM bytes received per process" in out.stdout
    from moagcn.host.graphs.datasets import load_dataset
    d = load_dataset("cora")
    model, meta = load(ck, d.n_features, "gat")
    assert meta["heads"] == 2 and model.dims == [d.n_features, 8, d.n_classes]
    ref = layerwise_forward(model, layer_graphs(d.graph, [4, 6], 0),
                            torch.from_numpy(model_input(model, meta, d))).numpy()
    emb = np.load(tmp_path / "e.npy")
    assert np.abs(emb - ref).max() < 1e-5 * np.abs(ref).max()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert min(rep["sddmm_bytes_received"]) > 0
    assert rep["formulas"]["sddmm_bytes_per_process_table3"]["approach_ii"] > 0
    for argv, message in (
            (["--checkpoint", ck, "--model", "gcn"], "holds a gat model, not the gcn"),
            (["--checkpoint", ck, "--device", "model"], "--param weighted=true")):
        out = moagcn("infer", *argv, "--out", tmp_path / "x.npy", "--report",
                     tmp_path / "x.json")
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
