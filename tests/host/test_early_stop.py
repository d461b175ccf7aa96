"""Early stopping on the validation loss (Kipf & Welling's window): the rule on hand values,
where a run stops, that stopping never changes the epochs it keeps, and the bad window."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.graphs.generators import sbm
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import should_stop, train, train_reference


def hist(*losses):
    return [SimpleNamespace(val_loss=v) for v in losses]


def test_rule_on_hand_values():
    # window 3: from the 5th epoch on, stop when the last loss is above the mean of the 3 before
    assert not should_stop(hist(5, 4, 3, 9), 3)               # 4 epochs: too early
    assert should_stop(hist(5, 4, 3, 2, 1.9, 2.5), 3)         # 2.5 > (3 + 2 + 1.9) / 3 = 2.3
    assert not should_stop(hist(5, 4, 3, 2, 1.9, 2.2), 3)     # 2.2 < 2.3
    assert not should_stop(hist(5, 4, 4, 2, 3, 3), 3)         # 3 = (4 + 2 + 3) / 3: not above
    assert should_stop(hist(1, 1, 1, 2), 2)                   # 2 > (1 + 1) / 2, 4th epoch
    assert not should_stop(hist(1, 1, 9), 2)                  # 3rd epoch: too early
    assert not should_stop(hist(5, 4, 3, 2, 1.9, 99), 0)      # 0: never


@pytest.fixture(scope="module")
def data():
    return sbm(n_nodes=240, n_features=32, n_val=50, n_test=110, seed=11)


def first_stop(losses, window):
    """The epoch (0-based) at which the rule first holds, by a plain loop; None if never."""
    for e in range(window + 1, len(losses)):
        if losses[e] > np.mean(losses[e - window:e]):
            return e
    return None


def test_run_stops_where_the_rule_first_holds_and_keeps_its_epochs(data):
    # a high learning rate makes the validation loss turn up early
    full = train(data, TrainConfig(epochs=40, device="model", lr=0.2, early_stop=0))
    curve = [r.val_loss for r in full.history]
    stop = first_stop(curve, 3)
    assert stop is not None and stop < 39, curve
    short = train(data, TrainConfig(epochs=40, device="model", lr=0.2, early_stop=3))
    assert len(short.history) == stop + 1
    assert short.stopped_early and short.report()["epochs_run"] == stop + 1
    assert short.train_loss == full.train_loss[:stop + 1]
    # the reference stops by the same rule on its own curve
    ref = train_reference(data, TrainConfig(epochs=40, lr=0.2, early_stop=3))
    ref_curve = [r.val_loss for r in ref.history]
    assert len(ref.history) == first_stop(ref_curve, 3) + 1


def test_validation_loss_is_the_cross_entropy_of_the_validation_nodes(data):
    """The reported validation loss against one computed here from the trained weights."""
    cfg = TrainConfig(epochs=3, device="cpu", lr=0.05, dropout=0.0)
    r = train(data, cfg)
    from moagcn.host.nn.models import GNN  # the same model class, rebuilt from weights
    model = GNN(cfg.model, data.n_features, cfg.hidden, data.n_classes, cfg.layers)
    model.load_state_dict(r.model_state)
    # GCN from the formula: D^-1/2 (A + I) D^-1/2, dense, built here
    n = data.n_nodes
    A = np.zeros((n, n))
    g = data.graph
    for v in range(n):
        for u in g.indices[g.indptr[v]:g.indptr[v + 1]]:
            A[v, u] = 1.0
    A += np.eye(n)
    d = A.sum(axis=1)
    S = torch.from_numpy(A / np.sqrt(np.outer(d, d)))
    X = data.features / np.maximum(data.features.sum(axis=1, keepdims=True), 1e-12)
    H = torch.from_numpy(X).double()
    Ws = [(model.state_dict()[k].double(), model.state_dict()[k.replace("weight", "bias")].double())
          for k in model.state_dict() if k.endswith("weight")]
    for i, (W, b) in enumerate(Ws):
        H = S @ (H @ (W.T if W.shape[1] == H.shape[1] else W)) + b
        if i < len(Ws) - 1:
            H = torch.relu(H)
    va = torch.from_numpy(np.nonzero(data.val_mask)[0])
    want = float(F.cross_entropy(H[va], torch.from_numpy(data.labels)[va]))
    assert r.history[-1].val_loss == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("window", [-1, 2.5])
def test_bad_window_is_named(window):
    with pytest.raises(UserError, match="--early-stop"):
        TrainConfig(early_stop=window).validate()
