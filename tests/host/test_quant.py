"""The wire codec of quantised messages (SuperGCN Sec. 6): error within one step, unbiased
stochastic rounding, exact byte counts, packing checked against a pure-Python bit loop."""

import math

import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.parallel.quant import (BITS, Packet, dequantize, from_bytes, pack_codes, quantize,
                               to_bytes, unpack_codes, wire_bytes)

LOW = (8, 4, 2)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def message(rows=13, w=11, seed=0):
    g = gen(seed)
    x = torch.randn(rows, w, generator=g) * torch.rand(rows, 1, generator=g) * 10
    x[3] = 0.25                                  # a constant row
    return x


def row_step(x, bits):
    """The quantisation step of every row, computed here: (max - min) / (2^b - 1)."""
    return (x.double().amax(1) - x.double().amin(1)) / (2 ** bits - 1)


# -- accuracy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", LOW)
def test_error_is_within_one_step(bits):
    x = message()
    y = dequantize(quantize(x, bits, gen(1)))
    assert y.dtype == torch.float32 and y.shape == x.shape
    err = (y.double() - x.double()).abs()
    slack = 1e-6 * x.double().abs().amax(1, keepdim=True)      # float32 rounding of the output
    assert (err <= row_step(x, bits).unsqueeze(1) + slack).all()
    assert torch.equal(y[3], x[3])                              # constant row: exact
    lo, hi = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    assert ((y >= lo - slack) & (y <= hi + slack)).all()        # never outside the row's range


def test_32_bits_is_the_identity_and_16_bits_is_bfloat16():
    x = message()
    x[0, 0], x[0, 1], x[1, 0] = 1e5, -3e-8, 1e30      # beyond fp16's range either way
    assert torch.equal(dequantize(quantize(x, 32)), x)
    y = dequantize(quantize(x, 16))
    assert torch.equal(y, x.to(torch.bfloat16).float())
    assert ((y - x).abs() <= 2 ** -8 * x.abs()).all()  # 8 significant bits, nothing flushed
    assert y[0, 1] != 0 and torch.isfinite(y).all()


@pytest.mark.parametrize("bits", LOW)
def test_stochastic_rounding_is_unbiased(bits):
    """Each draw's error ``e = S (q - t)`` has mean 0 and lies in ``(-S, S)``. Hoeffding: the mean
    of ``N`` independent draws exceeds ``eps`` with probability at most
    ``2 exp(-N eps^2 / (2 S^2))``; ``eps = S sqrt(2 ln(2 K / delta) / N)`` keeps the chance
    that any of ``K`` elements fails below ``delta = 1e-6``. Nearest rounding would show a bias
    of at least ``0.1 S`` on every value here (each sits 0.1 to 0.4 steps from a level)."""
    N, L = 4000, 2 ** bits - 1
    frac = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
    level = torch.arange(24) % L
    inner = (level + frac.repeat(3)) / L            # between levels, never on a midpoint
    row = torch.cat([torch.zeros(1), inner, torch.ones(1)])     # Z = 0, S = 1 / L
    x = row.repeat(N, 1)                           # N independent draws of the same row
    y = dequantize(quantize(x, bits, gen(7)))
    S, K = 1.0 / L, row.numel()
    eps = S * math.sqrt(2 * math.log(2 * K / 1e-6) / N)
    assert eps < 0.1 * S                           # nearest rounding (bias >= 0.1 S) would fail
    bias = (y.double() - x.double()).mean(0)
    assert bias.abs().max() <= eps + 1e-6
    assert (y.std(0)[1:-1] > 0).all()              # genuinely random


def test_seeded_generator_is_deterministic():
    x = message(seed=4)
    for bits in LOW:
        a, b = quantize(x, bits, gen(3)), quantize(x, bits, gen(3))
        assert torch.equal(a.payload, b.payload) and torch.equal(a.params, b.params)
        assert not torch.equal(a.payload, quantize(x, bits, gen(4)).payload)


# -- bytes ---------------------------------------------------------------------------------------


def test_byte_counts_are_exact():
    x = torch.randn(10, 7, generator=torch.Generator().manual_seed(11))
    expected = {32: (10 * 7 * 4, 0), 16: (10 * 7 * 2, 0), 8: (10 * 7, 10 * 2 * 4),
                4: (10 * 4, 10 * 2 * 4), 2: (10 * 2, 10 * 2 * 4)}     # ceil(7/2), ceil(7/4)
    for bits, (data, params) in expected.items():
        p = quantize(x, bits, gen())
        assert (p.data_bytes, p.param_bytes) == (data, params) == wire_bytes(10, 7, bits)
        assert p.payload.dtype == torch.uint8 and p.payload.is_contiguous()
        buf = to_bytes(p)
        assert buf.dtype == torch.uint8 and buf.dim() == 1 and buf.numel() == data + params
        assert p.nbytes == data + params


@pytest.mark.parametrize("bits", BITS)
def test_one_flat_buffer_carries_payload_and_params(bits):
    x = message()
    p = quantize(x, bits, gen())
    buf = to_bytes(p)
    wire = torch.cat([torch.zeros(3, dtype=torch.uint8), buf])[3:]   # an unaligned segment
    q = from_bytes(wire, x.shape, bits)
    assert torch.equal(q.payload, p.payload) and torch.equal(q.params, p.params)
    assert torch.equal(dequantize(q), dequantize(p))
    with pytest.raises(UserError, match="bytes"):
        from_bytes(buf[:-1], x.shape, bits)


def python_pack(codes, bits):
    """Reference packing by a bit loop: code c of a row in byte c // k at bit (c % k) * bits."""
    k = 8 // bits
    out = []
    for row in codes:
        data = [0] * -(-len(row) // k)
        for c, q in enumerate(row):
            data[c // k] |= q << ((c % k) * bits)
        out.append(data)
    return out


@pytest.mark.parametrize("bits", LOW)
def test_packing_matches_a_bit_loop(bits):
    g = gen(5)
    for w in (1, 3, 4, 5, 8, 9, 17):
        codes = torch.randint(0, 2 ** bits, (6, w), generator=g)
        packed = pack_codes(codes, bits)
        assert packed.tolist() == python_pack(codes.tolist(), bits)
        assert torch.equal(unpack_codes(packed, bits, w).long(), codes)


@pytest.mark.parametrize("bits", LOW)
def test_dequantize_matches_a_bit_loop_reading_of_the_payload(bits):
    x = message(rows=5, w=9)
    p = quantize(x, bits, gen(2))
    k, mask = 8 // bits, 2 ** bits - 1
    for r in range(5):
        zero, scale = p.params[r].tolist()
        for c in range(9):
            q = (p.payload[r, c // k].item() >> ((c % k) * bits)) & mask
            assert dequantize(p)[r, c].item() == pytest.approx(q * scale + zero, rel=1e-6,
                                                               abs=1e-6)
    assert zero == x[4].min().item()
    assert scale == pytest.approx((x[4].max() - x[4].min()).item() / mask, rel=1e-6)


def test_selecting_rows_needs_no_repacking():
    x = message()
    p = quantize(x, 2, gen())
    rows = torch.tensor([5, 0, 5, 12])
    s = p.select(rows)
    assert s.shape == (4, x.shape[1]) and s.data_bytes == 4 * 3 and s.param_bytes == 4 * 8
    assert torch.equal(dequantize(s), dequantize(p)[rows])


# -- edge cases ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 0), (3, 1)])
def test_empty_and_thin_messages(bits, shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(12))
    p = quantize(x, bits, gen())
    y = dequantize(p)
    assert y.shape == x.shape and y.dtype == torch.float32
    if shape == (3, 1) or bits == 32:
        assert torch.equal(y, x) or bits == 16       # one value per row is a constant row
    assert to_bytes(p).numel() == sum(wire_bytes(*shape, bits))


@pytest.mark.parametrize("bits", LOW)
def test_constant_rows_round_trip_exactly(bits):
    x = torch.tensor([[1e-30] * 5, [-7.125] * 5, [0.0] * 5, [3.4e38] * 5])
    assert torch.equal(dequantize(quantize(x, bits, gen())), x)


@pytest.mark.parametrize("bad,kind", [(float("nan"), "NaN"), (float("inf"), "inf"),
                                      (float("-inf"), "inf")])
@pytest.mark.parametrize("bits", BITS)
def test_non_finite_input_is_a_user_error(bad, kind, bits):
    x = torch.zeros(4, 6)
    x[2, 5] = bad
    with pytest.raises(UserError, match=f"{kind} at row 2, column 5") as e:
        quantize(x, bits, gen())
    assert "\n" not in str(e.value)


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="choose one of 32, 16, 8, 4, 2"):
        quantize(torch.zeros(2, 2), 3)
    with pytest.raises(UserError, match="2-D float32"):
        quantize(torch.zeros(4), 8)
    with pytest.raises(UserError, match="2-D float32"):
        quantize(torch.zeros(2, 2, dtype=torch.float64), 8)
    with pytest.raises(UserError, match="bytes"):
        from_bytes(torch.zeros(5, dtype=torch.int32), (1, 1), 32)


def test_packet_is_what_the_docstring_says():
    p = quantize(torch.randn(3, 10, generator=torch.Generator().manual_seed(13)), 4, gen())
    assert isinstance(p, Packet) and p.bits == 4 and p.shape == (3, 10)
    assert p.payload.shape == (3, 5) and p.params.shape == (3, 2)
    assert p.params.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("bits", BITS)
def test_on_a_gpu_with_a_cpu_generator(bits):
    x = message().cuda()
    p = quantize(x, bits, gen(9))
    assert p.payload.is_cuda
    q = quantize(x.cpu(), bits, gen(9))
    assert torch.equal(p.payload.cpu(), q.payload)       # same draws, same codes
    assert torch.equal(dequantize(p).cpu(), dequantize(q))
