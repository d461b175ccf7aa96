"""The command line: outputs, and one clear line (no traceback) on bad input."""

import contextlib
import io
import json
import subprocess
import sys
import traceback
import warnings

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.sim.arith import golden


def moagcn(*args, cwd=None, isolated=False):
    """``moagcn ARGS`` as a user runs it: exit status, stdout and stderr.

    In this process by default (``moagcn.cli.main.main`` with the streams captured, a
    traceback of an uncaught exception written to stderr with status 1, as the interpreter
    would): a new interpreter per call cost 2-3 s of imports, most of the CLI tests' time.
    ``isolated`` runs ``python -m moagcn`` in a subprocess, for what must hold in a fresh
    process."""
    argv = [str(a) for a in args]
    if isolated:
        return subprocess.run([sys.executable, "-m", "moagcn", *argv], capture_output=True,
                              text=True, cwd=cwd)
    out, err = io.StringIO(), io.StringIO()
    import torch
    threads = torch.get_num_threads()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("default")        # each call shows its warnings, as a new process
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        try:
            status = main(argv)
        except SystemExit as exc:               # argparse: --help (0), usage errors (2)
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:                   # what the interpreter prints, and status 1
            traceback.print_exc(file=err)
            status = 1
        finally:                                # --threads is the command's, not the tests'
            torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["moagcn", *argv], status, out.getvalue(),
                                       err.getvalue())


def test_help_lists_commands():
    out = moagcn("--help", isolated=True)       # the entry point in a process of its own
    assert out.returncode == 0
    for cmd in ("hw", "arith", "synth", "demo"):
        assert cmd in out.stdout


def test_bench_help_names_every_benchmark():
    out = moagcn("bench", "--help")
    assert out.returncode == 0
    # argparse wraps the description at hyphens ("hyscale-model-" / "kernel"): join those back
    text = " ".join(out.stdout.split()).replace("- ", "-")
    for name in ("sspmm", "sspmm-model", "hyscale", "hyscale-model-kernel", "hyscale-model",
                 "hyscale-drm", "deal-spmm", "pyg"):
        assert f"{name}: " in text, name


@pytest.mark.parametrize("design", ["fp32-add", "fp32-mul", "fp32-muladd"])
def test_hw_generate_writes_verilog_and_config_and_lints_clean(tmp_path, design):
    out = moagcn("hw", "generate", design, "--param", "enable=true", "--out", tmp_path, "--lint")
    assert out.returncode == 0, out.stderr
    text = (tmp_path / f"{design}.v").read_text()
    assert f"module {design.replace('-', '_')}(" in text
    cfg = json.loads((tmp_path / f"{design}.json").read_text())
    assert cfg["design"] == design and cfg["config"]["enable"] is True
    assert "lint: clean" in out.stdout


def test_sspmm_default_verilog_lints_clean(tmp_path):
    # the default preset's simulation forms included (a function argument hiding a port of its
    # module was a VARHIDDEN warning here)
    out = moagcn("hw", "generate", "sspmm", "--out", tmp_path, "--lint")
    assert out.returncode == 0, out.stderr
    assert "lint: clean" in out.stdout
    assert "moagcn_sim_form_chunksel" in (tmp_path / "sspmm.v").read_text()


def test_arith_round_trip_matches_numpy(tmp_path):
    a, b = golden.random_pairs(500, seed=5)
    np.save(tmp_path / "a.npy", golden.as_float(a).reshape(25, 20))
    np.save(tmp_path / "b.npy", golden.as_float(b).reshape(25, 20))
    out = moagcn("arith", "--op", "mul", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
                 "--out", tmp_path / "c.npy", "--simulator", "pysim", "--check", "--quiet",
                 "--latency", "3")
    assert out.returncode == 0, out.stderr
    c = np.load(tmp_path / "c.npy")
    assert c.shape == (25, 20) and c.dtype == np.float32
    assert np.array_equal(golden.canonical(golden.as_bits(c.ravel())), golden.mul(a, b))
    assert "0 differ" in out.stdout


@pytest.mark.parametrize("case,needle", [
    ("missing", "no such file"),
    ("dtype", "expected float32"),
    ("shape", "must have the same shape"),
    ("latency", "out of range"),
    ("muladd", "needs a third operand"),
])
def test_arith_bad_input_is_one_clear_line(tmp_path, case, needle):
    a = np.ones(4, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a if case != "shape" else np.ones(5, dtype=np.float32))
    np.save(tmp_path / "d.npy", a.astype(np.float64))
    args = ["arith", "--op", "add", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
            "--out", tmp_path / "o.npy", "--simulator", "pysim"]
    if case == "missing":
        args[4] = tmp_path / "nope.npy"
    if case == "dtype":
        args[6] = tmp_path / "d.npy"
    if case == "latency":
        args += ["--latency", "99"]
    if case == "muladd":
        args[2] = "muladd"
    out = moagcn(*args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    (["hw", "generate", "fp32-div", "--out", "x"], "unknown design"),
    (["hw", "generate", "fp32-add", "--param", "latncy=2", "--out", "x"], "has no parameter"),
    (["hw", "generate", "fp32-add", "--param", "latency", "--out", "x"], "expected KEY=VALUE"),
    (["hw", "generate", "fp32-add", "--param", "latency=two", "--out", "x"], "an integer"),
])
def test_hw_bad_input_is_one_clear_line(tmp_path, args, needle):
    out = moagcn(*args, cwd=tmp_path)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def device_args(where: str) -> list[str]:
    """The options that run a job on ``where``: ``model`` or a simulator of the RTL."""
    return ["--device", "model"] if where == "model" else ["--device", "rtl", "--simulator", where]


def test_hw_generate_takes_a_preset_and_params_on_top(tmp_path):
    out = moagcn("hw", "generate", "sspmm", "--preset", "tiny", "--param", "lanes=8",
                 "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    config = json.loads((tmp_path / "sspmm.json").read_text())["config"]
    assert config["lanes"] == 8 and config["max_nodes"] == 256      # tiny's buffers, P = 8
    out = moagcn("hw", "generate", "fp32-add", "--preset", "tiny", "--out", tmp_path)
    assert out.returncode == 2 and "has no presets" in out.stderr


_WITHOUT_HDL = """
import sys
class Block:
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in ('amaranth', 'cocotb', 'cocotb_tools'):
            raise ImportError('not installed here: ' + name)
sys.meta_path.insert(0, Block())
from moagcn.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("args", [
    ("train", "--dataset", "cora", "--device", "model", "--epochs", "1"),
    pytest.param(("hyscale", "train", "--dataset", "cora", "--design", "hyscale", "--device",
                  "model", "--epochs", "1", "--fanout", "5,5"), marks=pytest.mark.slow),
])
def test_host_runtime_runs_without_the_hdl_stack(args):
    # the bit-exact model device and the training loops need numpy / scipy / torch only
    out = subprocess.run([sys.executable, "-c", _WITHOUT_HDL, *args], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "accuracy" in out.stdout
