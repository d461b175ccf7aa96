"""Dense layers on HyScale's systolic array, forward and backward: ``AcceleratorDevice.linear``
(identity-aggregation jobs, inner dimension and output columns in chunks) and the autograd
function that runs an ``nn.Linear``'s three products there."""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.nn.autograd import linears_on_device
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.sim.arith.golden import as_bits

pytestmark = pytest.mark.xdist_group("verilator-hyscale")

# tiny: 16 features per job and 64 destinations per tile, so these shapes are cut every way
SHAPES = [(20, 13, 7), (70, 37, 20)]


def device(kind="model"):
    return AcceleratorChoice(kind, "hyscale", "tiny").make()


def operands(n, k, f, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, k)).astype(np.float32),
            rng.standard_normal((k, f)).astype(np.float32),
            rng.standard_normal(f).astype(np.float32))


@pytest.mark.parametrize("n,k,f", SHAPES)
def test_linear_on_the_model_is_the_product(n, k, f):
    """Against float64 numpy: every element within a few float32 roundings of its terms."""
    X, W, b = operands(n, k, f)
    dev = device()
    Y = dev.linear(X, W, b)
    ref = X.astype(np.float64) @ W.astype(np.float64) + b
    scale = np.abs(X).astype(np.float64) @ np.abs(W) + np.abs(b)
    assert np.all(np.abs(Y - ref) <= (k + 2) * 2.0 ** -24 * scale)
    assert dev.counters.extra["dense_macs"] == n * k * f
    assert dev.counters.cycles_total > 0


def test_the_rtl_computes_the_models_bits_in_every_product():
    """Forward x Wᵀ, backward g W and gᵀ x of an nn.Linear (37 -> 20 over 70 rows: three
    inner chunks, two column chunks, two row tiles) on the Verilator RTL and on the bit-exact
    model: the same bits and the same cycles (the kernel cycle model is exact)."""
    X, W, _ = operands(70, 37, 20, seed=3)
    G = np.random.default_rng(4).standard_normal((70, 20)).astype(np.float32)
    rtl, model = device("rtl"), device("model")
    for a, c in ((X, W), (G, np.ascontiguousarray(W.T)), (np.ascontiguousarray(G.T), X)):
        assert np.array_equal(as_bits(rtl.linear(a, c)), as_bits(model.linear(a, c)))
    assert rtl.counters.cycles_total == model.counters.cycles_total > 0
    assert rtl.counters.extra["dense_macs"] == model.counters.extra["dense_macs"]
    # the chunks queue on the accelerator: each one's loads overlap the one before, on the
    # RTL (one harness run, ping-pong buffers) and in the model alike
    hidden = rtl.counters.extra["cycles_load_hidden"]
    assert hidden == model.counters.extra["cycles_load_hidden"] > 0


@pytest.mark.parametrize("n,k,f", SHAPES)
def test_an_nn_linear_trains_on_the_device(n, k, f):
    """Loss and all three gradients through linears_on_device against plain torch in float64."""
    X, W, b = operands(n, k, f, seed=1)
    lin = torch.nn.Linear(k, f)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(W.T))
        lin.bias.copy_(torch.from_numpy(b))
    ref = torch.nn.Linear(k, f).double()
    ref.load_state_dict({key: v.double() for key, v in lin.state_dict().items()})
    dev = device()
    assert linears_on_device(lin, dev) == 1
    x = torch.from_numpy(X).requires_grad_()
    x64 = torch.from_numpy(X).double().requires_grad_()
    target = torch.from_numpy(np.random.default_rng(2).standard_normal((n, f)))
    ((torch.relu(lin(x)) - target.float()) ** 2).sum().backward()
    ((torch.relu(ref(x64)) - target) ** 2).sum().backward()
    for got, want in ((x.grad, x64.grad), (lin.weight.grad, ref.weight.grad),
                      (lin.bias.grad, ref.bias.grad)):
        assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
    # forward plus the two backward products, every MAC on the device
    assert dev.counters.extra["dense_macs"] == 3 * n * k * f


def test_a_design_without_a_dense_datapath_says_so():
    with pytest.raises(UserError, match="no dense datapath"):
        AcceleratorChoice("model", "sspmm", "tiny").make().linear(np.ones((2, 2), np.float32),
                                                                    np.ones((2, 2), np.float32))
