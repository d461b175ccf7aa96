"""GAT training with its sparse products on the accelerators (``moagcn train --model gat
--device model|rtl --param weighted=true``): the weighted aggregation and its transpose on the
weighted S-SpMM, the SDDMMs on the ``sddmm`` design (one :class:`AttentionDevice`).

- ``model`` against a dense torch GAT written from the formula (an ``n x n x heads`` score
  tensor, a masked dense softmax, a dense product; torch autograd for the gradients: no code
  of moagcn's layer, attention functions or devices), the same initial weights and dropout
  draws;
- ``model`` against ``cpu`` within fp32 tolerance; each design's cycles counted; the gradient
  SDDMM skipping the pairs attention dropout dropped (its mask);
- the SDDMM device operation with several head groups and a mask against a loop;
- ``rtl`` against ``model`` on the tiny presets, bit for bit (losses, accuracies, the SDDMM's
  cycles);
- the refusals (a binary S-SpMM, another design, a bad SDDMM preset): one line, exit status
  2, no traceback.
"""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from moagcn.cli.main import main
from moagcn.core.graph import CSRGraph
from moagcn.errors import UserError
from moagcn.host.devices.pair import AttentionDevice, attention_device
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.data import save_npz
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.pyg import to_edge_index
from moagcn.host.training.gat import GATConfig, build, train_gat

WEIGHTED = {"weighted": "true"}


@pytest.fixture(scope="module")
def data():
    return sbm(n_nodes=90, n_features=20, n_classes=4, train_per_class=8, n_val=20, n_test=30,
               seed=4)


@pytest.fixture(scope="module")
def small(gat_small):
    """Small enough for a quick Verilator run on the tiny presets (still many parts)."""
    return gat_small


def accel(**kw):
    return GATConfig(device="model", params=dict(WEIGHTED), **kw)


# -- the reference: a dense GAT from the formula ----------------------------------------------

def dense_layer(x, W, a_src, a_dst, b, heads, concat, p, training, src, dst):
    """One GAT layer, dense: ``e[v, u] = LeakyReLU(<h_v, a_dst> + <h_u, a_src>)`` on the edges
    ``u -> v`` (self loops included), ``α = softmax_u(e)`` (``-inf`` off the edges), attention
    dropout drawn over the edges in ``(src, dst)`` order, ``out_v = Σ_u α_vu h_u``."""
    n = x.shape[0]
    h = (x @ W.T).view(n, heads, -1)
    s = (h * a_dst).sum(-1)
    t = (h * a_src).sum(-1)
    e = F.leaky_relu(s[:, None, :] + t[None, :, :], 0.2)           # n x n x heads
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[dst, src] = True
    alpha = torch.softmax(e.masked_fill(~adj[..., None], float("-inf")), dim=1)
    if training and p > 0:
        dropped = F.dropout(alpha[dst, src], p=p, training=True)     # edges x heads
        alpha = torch.zeros_like(alpha).index_put((dst, src), dropped)
    out = torch.einsum("vuh,uhc->vhc", alpha, h)
    out = out.reshape(n, -1) if concat else out.mean(dim=1)
    return out + b


def reference_losses(data, cfg: GATConfig):
    """The losses of ``train_gat(data, cfg)`` computed by :func:`dense_layer`: the initial
    weights are drawn as ``train_gat`` draws them, then every dropout in the same order and
    shapes, so the same masks."""
    x = torch.from_numpy(row_normalize(data.features))
    ei = to_edge_index(data.graph)
    src, dst = ei[0].numpy(), ei[1].numpy()
    keep = src != dst
    n = data.n_nodes
    src = torch.from_numpy(np.concatenate([src[keep], np.arange(n)]))
    dst = torch.from_numpy(np.concatenate([dst[keep], np.arange(n)]))
    assert len(set(zip(src.tolist(), dst.tolist()))) == src.numel()     # no repeated edge
    torch.manual_seed(cfg.seed)
    init = build("moagcn", data.n_features, data.n_classes,
                 GATConfig(heads=cfg.heads, hidden=cfg.hidden, dropout=cfg.dropout))
    P = {k: v.detach().clone().requires_grad_(True) for k, v in init.named_parameters()}
    opt = torch.optim.Adam(list(P.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
    y = torch.from_numpy(data.labels)
    tr = torch.from_numpy(data.train_mask)
    losses = []
    for _ in range(cfg.epochs):
        opt.zero_grad()
        h = F.dropout(x, p=cfg.dropout, training=True)
        h = F.elu(dense_layer(h, P["conv1.lin.weight"], P["conv1.att_src"], P["conv1.att_dst"],
                              P["conv1.bias"], cfg.heads, True, cfg.dropout, True, src, dst))
        h = F.dropout(h, p=cfg.dropout, training=True)
        out = dense_layer(h, P["conv2.lin.weight"], P["conv2.att_src"], P["conv2.att_dst"],
                          P["conv2.bias"], 1, False, cfg.dropout, True, src, dst)
        loss = F.cross_entropy(out[tr], y[tr])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_model_device_follows_a_dense_gat_written_from_the_formula(data):
    cfg = accel(heads=3, hidden=4, epochs=6, seed=1)
    ours = train_gat(data, cfg)
    ref = reference_losses(data, cfg)
    np.testing.assert_allclose(ours.loss, ref, rtol=1e-4)
    # both designs ran in every training step
    assert all(c["sspmm"]["cycles_total"] > 0 and c["sddmm"]["cycles_total"] > 0
               for c in ours.counters)


def test_model_equals_cpu_within_fp32_and_counts_each_design(data):
    kw = dict(heads=2, hidden=8, epochs=4, seed=3)
    model = train_gat(data, accel(**kw))
    cpu = train_gat(data, GATConfig(**kw))
    np.testing.assert_allclose(model.loss, cpu.loss, rtol=1e-5)
    assert not cpu.counters
    rep = model.report()["sim_cycles"]
    assert set(rep["per_epoch"]) == {"sspmm", "sddmm"}
    assert rep["per_epoch_total"] == rep["per_epoch"]["sspmm"] + rep["per_epoch"]["sddmm"]
    assert len(rep["curve"]["sddmm"]) == 4
    last = rep["devices"]
    assert rep["accelerator_s_per_epoch"] == pytest.approx(
        last["sspmm"]["cycles_total"] / 200e6 + last["sddmm"]["cycles_total"] / 100e6)


def test_the_gradient_sddmm_skips_the_dropped_attention_weights(data):
    """Per layer the forward scores are ``nnz x heads`` pairs of width 2; the gradient of the
    attention weights is computed only on the pairs dropout kept (about 1 - p of them)."""
    kw = dict(heads=2, hidden=4, epochs=1, seed=0)
    full = train_gat(data, accel(dropout=0.0, **kw)).counters[0]["sddmm"]
    dropped = train_gat(data, accel(dropout=0.6, **kw)).counters[0]["sddmm"]
    nnz = data.graph.nnz - int((data.graph.row_ids() == data.graph.indices).sum()) \
        + data.n_nodes
    forward = nnz * (2 + 1)                          # heads of layer 1 and layer 2
    assert full["unmasked"] == 2 * forward           # forward scores + every gradient pair
    kept = (dropped["unmasked"] - forward) / forward
    assert 0.3 < kept < 0.5, kept
    assert dropped["cycles_total"] < full["cycles_total"]


def test_sddmm_on_the_device_in_head_groups_with_a_mask():
    """Eight heads of 8 columns on the tiny SDDMM (4 lanes, 4 chunks, 4 heads per job: two
    heads a job), masked, against a loop; the pair's counters are the two devices' summed."""
    rng = np.random.default_rng(0)
    n = 30
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 6, n))]).astype(np.int64)
    indices = rng.integers(0, n, indptr[-1]).astype(np.int64)
    csr = CSRGraph(indptr, indices, n)
    Q = torch.from_numpy(rng.standard_normal((n, 8, 8)).astype(np.float32))
    K = torch.from_numpy(rng.standard_normal((n, 8, 8)).astype(np.float32))
    mask = torch.from_numpy(rng.random((csr.nnz, 8)) < 0.7)
    dev = attention_device(AcceleratorChoice("model", "sspmm", "tiny", WEIGHTED))
    assert isinstance(dev, AttentionDevice) and dev.name == "model:sspmm+sddmm"
    assert dev.scores.config.max_heads == 4          # the tiny SDDMM beside the tiny S-SpMM
    S = dev.sddmm(csr, Q, K, mask=mask).numpy()
    rows = csr.row_ids()
    Qd, Kd, Md = Q.numpy().astype(np.float64), K.numpy().astype(np.float64), mask.numpy()
    for k in range(csr.nnz):
        for h in range(8):
            want = float(np.dot(Qd[rows[k], h], Kd[indices[k], h])) if Md[k, h] else 0.0
            assert S[k, h] == pytest.approx(want, rel=1e-5, abs=1e-5)
    c = dev.parts["sddmm"].counters
    assert c.unmasked == int(mask.sum()) and c.work_adds == 8 * int(mask.sum())
    assert c.calls == 1 and c.tiles > 4               # four head groups, each in parts
    assert dev.counters.cycles_total == c.cycles_total
    assert dev.parts["sspmm"].counters.cycles_total == 0


def test_rtl_equals_model_bit_for_bit_on_the_tiny_presets(small):
    # 3 heads of 8 columns: the tiny SDDMM takes two heads a job (two groups)
    kw = dict(heads=3, hidden=8, epochs=3, seed=2, preset="tiny")
    model = train_gat(small, accel(**kw))
    rtl = train_gat(small, GATConfig(device="rtl", params=dict(WEIGHTED), **kw))
    assert rtl.loss == model.loss
    assert rtl.test_acc == model.test_acc and rtl.val_acc == model.val_acc
    for r, m in zip(rtl.counters, model.counters):
        assert r["sddmm"]["cycles_total"] == m["sddmm"]["cycles_total"]     # the model is exact
        assert r["sddmm"]["tiles"] == m["sddmm"]["tiles"] > 1
        assert r["sspmm"]["cycles_total"] > 0 and r["sspmm"]["work_adds"] == \
            m["sspmm"]["work_adds"]


# -- the command line --------------------------------------------------------------------------

@pytest.fixture
def path(small, tmp_path):
    p = str(tmp_path / "d.npz")
    save_npz(small, p)
    return p


def test_cli_trains_gat_on_the_accelerator_pair(path, tmp_path, capsys):
    report = str(tmp_path / "r.json")
    assert main(["train", "--dataset", path, "--model", "gat", "--heads", "2", "--epochs", "2",
                 "--device", "model", "--preset", "tiny", "--param", "weighted=true",
                 "--report", report]) == 0
    out, err = capsys.readouterr()
    assert "device model: sspmm:preset=tiny:weighted=" in out and "+ sddmm:tiny," in out
    assert "accelerator cycles per training step (last epoch): sspmm " in out
    assert "cycles sspmm " in err and " + sddmm " in err
    rep = json.load(open(report))
    assert set(rep["sim_cycles"]["per_epoch"]) == {"sspmm", "sddmm"}
    assert rep["sim_cycles"]["devices"]["sddmm"]["lanes"] == 4


@pytest.mark.parametrize("extra,match", [
    (["--device", "model"], r"^moagcn: error: --device model: GAT aggregates with per-edge "
                            r"attention weights.*add --param weighted=true"),
    (["--device", "rtl", "--preset", "tiny"], r"--device rtl: .*add --param weighted=true"),
    (["--device", "model", "--design", "hyscale"],
     r"--design hyscale: .*use --design sspmm --param weighted=true"),
    (["--device", "model", "--param", "weighted=true", "--sddmm-preset", "huge"],
     r"--sddmm-preset huge: unknown preset 'huge'; choose one of tiny, small, default"),
    (["--device", "cpu", "--sddmm-preset", "tiny"], r"--sddmm-preset tiny: the cpu device"),
])
def test_cli_refuses_in_one_line(path, extra, match, capsys):
    assert main(["train", "--dataset", path, "--model", "gat", "--epochs", "1"] + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert __import__("re").search(match, err), err


def test_config_refuses_before_anything_runs(small):
    with pytest.raises(UserError, match="add --param weighted=true"):
        train_gat(small, GATConfig(device="model", epochs=1))
