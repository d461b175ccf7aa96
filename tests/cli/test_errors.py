"""Every ``UserError`` a command module raises (moagcn/cli/*.py) is reached by a case here: one
line on stderr (``moagcn: error: ...``), exit status 2, no traceback.

Each case names the raise site it is for by its module and a piece of its message's literal
text; the case checks that the error it gets was raised at that site (the line the error was
made on, against the module's syntax tree), and :func:`test_every_raise_site_has_a_case` that
every ``raise UserError(...)`` in moagcn/cli has exactly one case or one stated exemption. A new
error in a command module without a case fails that test."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.errors import UserError

CLI = Path(__file__).resolve().parents[2] / "moagcn" / "cli"


def _template(node: ast.expr) -> str:
    """The literal text of a message, ``{}`` for each formatted part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp):
        return _template(node.left) + _template(node.right)
    return "{}"


def raise_sites() -> dict:
    """``{(module file name, first line): (last line, message template)}`` of every ``raise
    UserError(...)`` in moagcn/cli."""
    sites = {}
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and getattr(node.exc.func, "id", None) == "UserError"):
                msg = _template(node.exc.args[0]) if node.exc.args else ""
                sites[(path.name, node.lineno)] = (node.end_lineno, msg)
    return sites


@dataclass
class Case:
    """``argv`` (``{name}`` replaced by the path of a prepared file), the raise site (module,
    a piece of its message template) and a piece of the printed line."""

    name: str
    argv: list
    module: str
    site: str
    line: str = ""
    env: dict = field(default_factory=dict)


def C(name, argv, module, site, line=""):
    return Case(name, argv.split(), module, site, line or site)


G = "--graph {g}"
INFER = "infer --device cpu --dataset {ds} --checkpoint {ckpt} "
CASES = [
    # common.py
    C("npy-missing", "arith --op add --a {tmp}/none.npy --b {b} --out {tmp}/o.npy", "common.py",
      "{}: no such file"),
    C("npy-not-npy", "arith --op add --a {text} --b {b} --out {tmp}/o.npy", "common.py",
      "not a .npy array file"),
    C("npy-not-float32", "arith --op add --a {i32} --b {b} --out {tmp}/o.npy", "common.py",
      "expected {}, got {} with shape", "expected float32, got int32"),
    C("out-folder-not-made", f"sspmm run {G} --features {{h}} --out {{text}}/z.npy --device model",
      "common.py", "cannot create its folder"),
    C("out-is-folder", f"sspmm run {G} --features {{h}} --out {{tmp}} --device model", "common.py",
      "is a folder; give a file name"),
    C("out-not-writable", f"sspmm run {G} --features {{h}} --out /proc/version --device model",
      "common.py", "cannot be written"),
    C("report-not-json", "pipeline --batches 2 --report {tmp}/r.txt", "common.py",
      "the report is a JSON file"),
    C("report-write-fails", "graph synth --like reddit --scale 0.001 --out {tmp}/s.npz "
      "--report {full_json}", "common.py", "cannot write the report"),
    C("device-cpu-no-accelerator", f"sspmm run {G} --features {{h}} --out {{tmp}}/z.npy "
      "--backend cpu", "common.py", "--device cpu has no accelerator"),
    C("backend-unknown", f"sspmm run {G} --features {{h}} --out {{tmp}}/z.npy --backend gpu",
      "common.py", "--backend {}: use --device"),
    # compare.py
    C("compare-rectangular", "sspmm compare --graph {rect} --width 4 --report {tmp}/c.json",
      "compare.py", "the aggregation needs a square"),
    C("compare-column-out-of-range", "sspmm compare --graph {badcol} --width 4 "
      "--report {tmp}/c.json", "compare.py", "names column {} but the graph has"),
    C("compare-negative-column", "sspmm compare --graph {negcol} --width 4 "
      "--report {tmp}/c.json", "compare.py", "a column index is negative"),
    C("compare-plot-write-fails", "sspmm compare --graph {g} --width 4 --report {tmp}/c.json "
      "--systems spu,cpu --repeats 1 --plot {full_png}", "compare.py",
      "--plot {}: cannot be written"),
    C("compare-plot-suffix", "sspmm compare --graph {g} --width 4 --report {tmp}/c.json "
      "--plot {tmp}/p.txt", "compare.py", "give a .png, .pdf or .svg"),
    C("compare-repeats", "sspmm compare --graph {g} --width 4 --report {tmp}/c.json --repeats 0",
      "compare.py", "--repeats {}: use at least 1"),
    C("compare-threads", "sspmm compare --graph {g} --width 4 --report {tmp}/c.json --threads 0",
      "compare.py", "--threads {}: use at least 1"),
    C("compare-graph-missing", "sspmm compare --graph {tmp}/none.npz --width 4 "
      "--report {tmp}/c.json", "compare.py", "--graph {}: no such file"),
    # graph.py
    C("synth-out-suffix", "graph synth --like cora --out {tmp}/s.txt", "graph.py",
      "the graph is written as an .npz"),
    C("synth-like", "graph synth --like nothing --out {tmp}/s.npz", "graph.py",
      "--like {}: choose one of"),
    # hyscale.py
    C("hyscale-cpu-share", "hyscale train --cpu-share half", "hyscale.py",
      "--cpu-share {}: give a share in (0, 1)"),
    C("hyscale-features-rows", "hyscale run --graph {rect} --features {h} --weight {w} "
      "--out {tmp}/y.npy --device model", "hyscale.py", "columns (sources) but --features has"),
    # infer.py
    C("infer-out-write-fails", INFER + "--out {tmp}/blocked.npy "
      "--report {tmp}/i.json", "infer.py", "cannot write the embeddings"),
    C("infer-grid-syntax", INFER + "--out {tmp}/e.npy "
      "--report {tmp}/i.json --grid 2by2", "infer.py", "give PxM"),
    C("infer-grid-zero", INFER + "--out {tmp}/e.npy "
      "--report {tmp}/i.json --grid 0x1", "infer.py", "P and M must be at least 1"),
    C("infer-out-suffix", INFER + "--out {tmp}/e.txt "
      "--report {tmp}/i.json", "infer.py", "embeddings are written as a NumPy .npy"),
    C("infer-grid-too-large", INFER + "--out {tmp}/e.npy "
      "--report {tmp}/i.json --grid 1x16", "infer.py", "the narrowest layer is"),
    C("infer-processes", INFER + "--out {tmp}/e.npy "
      "--report {tmp}/i.json --grid 2x1 --processes 3", "infer.py", "does not equal --grid"),
    # main.py
    C("arith-c-without-muladd", "arith --op add --a {a} --b {b} --c {a} --out {tmp}/o.npy",
      "main.py", "--c is only used by --op muladd"),
    C("arith-muladd-without-c", "arith --op muladd --a {a} --b {b} --out {tmp}/o.npy", "main.py",
      "needs a third operand"),
    C("arith-shapes", "arith --op add --a {a} --b {a3} --out {tmp}/o.npy", "main.py",
      "operands must have the same shape"),
    C("synth-timeout", "synth fp32-add --target ecp5-25k --out {tmp}/syn --timeout 0", "main.py",
      "give a positive number of seconds"),
    C("synth-units", "synth fp32-add --target ecp5-25k --out {tmp}/syn --units", "main.py",
      "--units assembles a U250 report"),
    C("synth-model-only", "synth sspmm --target ecp5-25k --param simulate=false --out {tmp}/syn",
      "main.py", "cannot be built for {}"),
    C("synth-model-only-no-units", "synth sspmm --target xcup-u250 --param simulate=false "
      "--out {tmp}/syn", "main.py", "has a unit list to assemble"),
    # perfmodel.py
    C("perfmodel-out-json", "perfmodel fit --devices cpu --dataset cora --out {tmp}/m.txt",
      "perfmodel.py", "the model is a JSON file"),
    C("perfmodel-list", "perfmodel fit --devices cpu --dataset cora --out {tmp}/m.json "
      "--ratios 0.1,x", "perfmodel.py", "expected comma-separated"),
    C("perfmodel-threads", "perfmodel fit --devices cpu --dataset cora --out {tmp}/m.json "
      "--threads -1", "perfmodel.py", "--threads {}: use 0"),
    C("perfmodel-datasets", "perfmodel fit --devices cpu --dataset cora,cora "
      "--out {tmp}/m.json", "perfmodel.py", "give one dataset or several distinct"),
    C("perfmodel-width", "perfmodel predict --perf-model {pm} --dataset cora --width 0",
      "perfmodel.py", "a feature width is at least 1"),
    C("perfmodel-csv-write-fails", "perfmodel fit --devices cpu --dataset {ds} "
      "--out {csvfull}/m.json "
      "--ratios 0.5,1.0 --width-list 4 --keeps 1.0 --seeds 2 --quiet", "perfmodel.py",
      "cannot write {}"),
    # sddmm.py
    C("sddmm-heads-zero", "sddmm estimate --graph {g} --width 4 --heads 0 --report {tmp}/s.json",
      "sddmm.py", "--heads {}: use a whole number", "--heads 0"),
    C("sddmm-heads-divide", "sddmm estimate --graph {g} --width 4 --heads 3 "
      "--report {tmp}/s.json", "sddmm.py", "does not divide the width"),
    C("sddmm-not-finite", "sddmm run --graph {g} --q {qnan} --k {q} --out {tmp}/s.npy "
      "--device model", "sddmm.py", "SDDMM operands must be finite"),
    C("sddmm-mask-shape", "sddmm run --graph {g} --q {q} --k {q} --mask {mask_i32} "
      "--out {tmp}/s.npy --device model", "sddmm.py", "(entries x heads)"),
    C("sddmm-mask-dtype", "sddmm run --graph {g} --q {q} --k {q} --mask {emask_i32} "
      "--out {tmp}/s.npy --device model", "sddmm.py", "expected bool or 0/1 uint8"),
    C("sddmm-mask-value", "sddmm run --graph {g} --q {q} --k {q} --mask {emask_u8} "
      "--out {tmp}/s.npy --device model", "sddmm.py", "a uint8 mask holds 0 (skip)",
      "holds 2"),
    C("sddmm-q-rows", "sddmm run --graph {g} --q {h5} --k {q} --out {tmp}/s.npy --device model",
      "sddmm.py", "Q needs one row per graph row"),
    C("sddmm-k-rows", "sddmm run --graph {rect} --q {q} --k {q} --out {tmp}/s.npy "
      "--device model", "sddmm.py", "K needs one row per graph column"),
    C("sddmm-k-width", "sddmm run --graph {g} --q {q} --k {h} --out {tmp}/s.npy --device model",
      "sddmm.py", "Q and K must have the same width"),
    C("sddmm-no-columns", "sddmm run --graph {g} --q {q0} --k {q0} --out {tmp}/s.npy "
      "--device model", "sddmm.py", "have no columns"),
    C("sddmm-width", "sddmm estimate --graph {g} --width 0 --report {tmp}/s.json", "sddmm.py",
      "--width {}: use a whole number"),
    C("sddmm-mask-and-density", "sddmm estimate --graph {g} --width 4 --mask {emask_u8} "
      "--mask-density 0.5 --report {tmp}/s.json", "sddmm.py",
      "give --mask or --mask-density, not both"),
    C("sddmm-density", "sddmm estimate --graph {g} --width 4 --mask-density 1.5 "
      "--report {tmp}/s.json", "sddmm.py", "use a fraction in [0, 1]"),
    # sspmm.py
    C("sspmm-mask-shape", f"sspmm run {G} --features {{h}} --mask {{mask_wide}} "
      "--out {tmp}/z.npy --device model", "sspmm.py", "expected {} like --features"),
    C("sspmm-mask-dtype", f"sspmm run {G} --features {{h}} --mask {{mask_i32}} "
      "--out {tmp}/z.npy --device model", "sspmm.py", "expected bool or uint8"),
    C("sspmm-mask-value", f"sspmm run {G} --features {{h}} --mask {{mask_u8}} "
      "--out {tmp}/z.npy --device model", "sspmm.py", "a uint8 mask holds 0 (skip)", "= 2"),
    C("sspmm-graph-columns", "sspmm run --graph {rect} --features {h} --out {tmp}/z.npy "
      "--device model", "sspmm.py", "columns but --features has"),
    C("sspmm-feature-rows", "sspmm run --graph {gnoshape} --features {h5} --out {tmp}/z.npy "
      "--device model", "sspmm.py", "S-SpMM needs one feature row per node"),
    C("sspmm-estimate-mask-and-density", "sspmm estimate --graph {g} --width 3 --mask {mask_i32} "
      "--mask-density 0.5 --report {tmp}/e.json", "sspmm.py",
      "give --mask or --mask-density, not both"),
    C("sspmm-estimate-rectangular", "sspmm estimate --graph {rect} --width 3 "
      "--report {tmp}/e.json", "sspmm.py", "S-SpMM aggregates a square"),
    C("sspmm-estimate-column", "sspmm estimate --graph {badcol} --width 3 "
      "--report {tmp}/e.json", "sspmm.py", "names column {} but the graph has"),
    C("sspmm-estimate-mask-shape", "sspmm estimate --graph {g} --width 4 --mask {mask_i32} "
      "--report {tmp}/e.json", "sspmm.py", "(graph rows x --width)"),
    # sspmm_area.py
    C("sspmm-area-activity", "sspmm area --activity 1.5", "sspmm_area.py",
      "give the fraction of adder-cycles"),
    # train.py
    C("train-threads", "train --epochs 1 --threads -1 --report {tmp}/t.json", "train.py",
      "--threads {}: use 0", "--threads -1"),
    # --device defaults to model; cpu without --device is the old --backend cpu
    C("train-devices-without-accelerator", "train --epochs 1 --backend cpu --devices "
      "sspmm:lanes=8,sspmm:lanes=16 --report {tmp}/t.json",
      "train.py", "--devices needs --device model or rtl"),
    C("train-distributed-one-worker", "train --epochs 1 --distributed --report {tmp}/t.json",
      "train.py", "--distributed runs one process per worker"),
    C("train-adjust-contradiction", "train --epochs 1 --devices sspmm:lanes=8,sspmm:lanes=16 "
      "--device model --adjust 2 --no-adjust --report {tmp}/t.json", "train.py",
      "contradict each other"),
    C("train-adjust-without-fleet", "train --epochs 1 --no-adjust --report {tmp}/t.json",
      "train.py", "need a mixed fleet"),
    C("train-heads-without-gat", "train --epochs 1 --heads 4 --report {tmp}/t.json",
      "train.py", "attention heads need --model gat"),
    C("train-sddmm-preset-without-gat", "train --epochs 1 --sddmm-preset tiny "
      "--report {tmp}/t.json", "train.py", "attention scores, which need --model gat"),
    # train_gat.py
    C("train-gat-gcn-option", "train --epochs 1 --model gat --device cpu --layer-norm "
      "--report {tmp}/t.json", "train_gat.py", "with --workers, --devices or --distributed",
      "--layer-norm True: not available with --model gat"),
    C("train-gat-runtime-reference", "train --epochs 1 --model gat --device cpu --workers 2 "
      "--reference --report {tmp}/t.json", "train_gat.py",
      "the plain torch reference trains GCN", "--reference with --model gat"),
    C("train-gat-runtime-dropout-at", "train --epochs 1 --model gat --device cpu --workers 2 "
      "--dropout-at input --report {tmp}/t.json", "train_gat.py",
      "a GAT's dropout is PyG's", "--dropout-at input with --model gat"),
    C("train-gat-partition-sddmm", "train --epochs 1 --model gat --device model --param "
      "weighted=true --parallelism partition --sddmm-preset tiny --report {tmp}/t.json",
      "train_gat.py", "each worker's SDDMM is its design's default preset",
      "--sddmm-preset tiny: on the runtimes"),
    C("train-gat-early-stop", "train --epochs 1 --model gat --device cpu --early-stop 5 "
      "--report {tmp}/t.json", "train_gat.py", "(PyG's example trains every epoch)",
      "--early-stop 5: not available"),
    C("pipeline-batches", "pipeline --batches 0 --report {tmp}/p.json", "train.py",
      "use at least 1 batch"),
    C("pipeline-hidden", "pipeline --batches 2 --hidden 0 --report {tmp}/p.json", "train.py",
      "--hidden and --layers must be at least 1"),
    C("pipeline-dense-macs", "pipeline --batches 2 --dense-macs-per-cycle 0 "
      "--report {tmp}/p.json", "train.py", "must be > 0"),
    C("pipeline-mask-density", "pipeline --batches 2 --mask-density 0 --report {tmp}/p.json",
      "train.py", "must be in (0, 1]"),
]

#: sites no fast case reaches, and why
EXEMPT = {
    ("main.py", "beyond the documented waivers"):
        "needs Verilog that verilator lints with warnings; the committed designs lint clean",
}

#: errors the host and sim checks raise for bad command-line values (not counted by the
#: coverage test: their raise sites are outside moagcn/cli)
HOST_CASES = [
    C("train-layers", "train --epochs 1 --layers 0 --report {tmp}/t.json", "", "",
      "--layers 0: use at least 1"),
    C("train-hidden", "train --epochs 1 --hidden 0 --report {tmp}/t.json", "", "",
      "--hidden 0: use at least 1"),
    C("train-dropout", "train --epochs 1 --dropout 1 --report {tmp}/t.json", "", "",
      "--dropout 1.0: must be in [0, 1)"),
    C("train-devices-count", "train --epochs 1 --devices sspmm,cpu --device model --workers 3 "
      "--report {tmp}/t.json", "", "", "give one device per worker"),
    C("train-comm-bits", "train --epochs 1 --comm-bits 8 --report {tmp}/t.json", "", "",
      "needs --parallelism partition"),
    C("sspmm-unknown-preset", f"sspmm run {G} --features {{h}} --out {{tmp}}/z.npy "
      "--device model --preset huge", "", "", "unknown preset 'huge'"),
    C("hyscale-batch", "hyscale train --dataset {ds} --batch-size 100000", "", "",
      "is larger than the"),
    C("bench-hyscale-targets", "bench hyscale --device model --preset tiny --targets 128 "
      "--graph-nodes 2000 --jobs 1 --out {tmp}/hb", "", "",
      "--targets 128: 0 of 200 sampled mini-batches fit the buffers"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The operands and graphs the cases read."""
    d = tmp_path_factory.mktemp("cli-errors")
    f = {"tmp": str(d)}

    def npy(name, arr):
        np.save(d / f"{name}.npy", arr)
        f[name] = str(d / f"{name}.npy")

    def npz(name, indptr, indices, shape=None):
        extra = {} if shape is None else {"shape": np.array(shape)}
        np.savez(d / f"{name}.npz", indptr=np.array(indptr), indices=np.array(indices), **extra)
        f[name] = str(d / f"{name}.npz")

    npy("a", np.ones(4, np.float32))
    npy("b", np.ones(4, np.float32))
    npy("a3", np.ones(3, np.float32))
    npy("i32", np.ones(4, np.int32))
    (d / "text.npy").write_text("not numpy\n")
    f["text"] = str(d / "text.npy")
    npz("g", [0, 2, 3, 4, 6], [1, 2, 0, 3, 0, 1], (4, 4))          # 6 entries
    npz("rect", [0, 1, 2, 3, 4], [0, 1, 2, 4], (4, 5))
    npz("badcol", [0, 1, 2, 3, 4], [0, 1, 2, 7])
    npz("gnoshape", [0, 2, 3, 4, 6], [1, 2, 0, 3, 0, 1])
    npz("negcol", [0, 1, 2, 3, 4], [0, 1, 2, -1])
    npy("h", np.ones((4, 3), np.float32))
    npy("h5", np.ones((5, 4), np.float32))
    npy("w", np.ones((3, 2), np.float32))
    npy("q", np.ones((4, 4), np.float32))
    npy("q0", np.ones((4, 0), np.float32))
    qnan = np.ones((4, 4), np.float32)
    qnan[1, 2] = np.inf
    npy("qnan", qnan)
    npy("mask_wide", np.ones((4, 5), bool))
    npy("mask_i32", np.ones((4, 3), np.int32))
    npy("mask_u8", np.full((4, 3), 2, np.uint8))
    npy("emask_i32", np.ones(6, np.int32))
    npy("emask_u8", np.full(6, 2, np.uint8))
    for suffix in ("json", "png"):                        # writes to these fail (disk full)
        (d / f"full.{suffix}").symlink_to("/dev/full")
        f[f"full_{suffix}"] = str(d / f"full.{suffix}")
    (d / "csvfull").mkdir()                               # the fitted model's table beside it
    (d / "csvfull" / "m.csv").symlink_to("/dev/full")
    f["csvfull"] = str(d / "csvfull")
    (d / "blocked.npy.partial.npy").symlink_to("/dev/full")   # the embeddings' temporary name
    # a small dataset, a checkpoint trained on it and a performance model of the CPU
    from moagcn.host.graphs.data import save_npz
    from moagcn.host.graphs.generators import sbm
    from moagcn.host.nn.checkpoint import save
    from moagcn.host.nn.models import GNN
    ds = sbm(n_nodes=60, n_features=8, n_val=10, n_test=10, seed=0)
    save_npz(ds, d / "ds.npz")
    f["ds"] = str(d / "ds.npz")
    model = GNN("gcn", 8, 4, ds.n_classes, 2)
    save(d / "c.pt", model.state_dict(), {"model": "gcn", "in_features": 8, "hidden": 4,
                                          "n_classes": ds.n_classes, "layers": 2})
    f["ckpt"] = str(d / "c.pt")
    f["pm"] = str(d / "m.json")
    assert main(["perfmodel", "fit", "--devices", "cpu", "--dataset", f["ds"], "--out", f["pm"],
                 "--ratios", "0.5,1.0", "--width-list", "4", "--keeps", "1.0", "--seeds", "2",
                 "--quiet"]) == 0
    return f


@pytest.fixture
def reached(monkeypatch):
    """Where each UserError made during the test was made: ``(file name, line)``."""
    seen = []
    original = UserError.__init__

    def init(self, *args):
        frame = sys._getframe(1)
        seen.append((Path(frame.f_code.co_filename).name, frame.f_lineno,
                     Path(frame.f_code.co_filename).parent.name))
        original(self, *args)

    monkeypatch.setattr(UserError, "__init__", init)
    return seen


def run_case(case, files, capsys):
    argv = [a.format(**files) for a in case.argv]
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert rc == 2, (argv, rc, err)
    assert "Traceback" not in err, err
    # the error is one line, the last; before it only progress lines of the work done
    errors = [x for x in lines if x.startswith("moagcn: error")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    return errors[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_cli_error_is_one_line_and_exit_2(case, files, capsys, reached):
    line = run_case(case, files, capsys)
    for piece in case.line.split("{}"):
        assert piece in line, (piece, line)
    sites = raise_sites()
    hits = [(mod, ln) for mod, ln, parent in reached if parent == "cli"]
    assert hits, f"no UserError was made in moagcn/cli ({reached})"
    mod, ln = hits[-1]
    site = [(first, end, msg) for (m, first), (end, msg) in sites.items()
            if m == mod and first <= ln <= end]
    assert mod == case.module and site and case.site in site[0][2], \
        f"the error came from {mod}:{ln} {site}, not from {case.module}'s '{case.site}'"


@pytest.mark.parametrize("case", HOST_CASES, ids=[c.name for c in HOST_CASES])
def test_host_checks_of_command_line_values_are_one_line(case, files, capsys):
    line = run_case(case, files, capsys)
    assert case.line in line, line


def test_every_raise_site_has_a_case():
    """Each ``raise UserError`` in moagcn/cli matches exactly one case or exemption (by module
    and literal text); each case and exemption matches exactly one site."""
    sites = raise_sites()
    claims = [(c.module, c.site, c.name) for c in CASES] + \
        [(m, s, "exempt") for (m, s) in EXEMPT]
    missing = []
    for (mod, first), (_, msg) in sorted(sites.items()):
        owners = [name for m, s, name in claims if m == mod and s in msg]
        if len(owners) != 1:
            missing.append(f"{mod}:{first} {msg!r}: {owners or 'no case'}")
    assert not missing, "raise sites without exactly one case:\n" + "\n".join(missing)
    for m, s, name in claims:
        n = sum(1 for (mod, _), (_, msg) in sites.items() if mod == m and s in msg)
        assert n == 1, f"case {name} ({m}, {s!r}) matches {n} raise sites"
