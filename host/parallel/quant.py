"""Wire codec for quantised messages between workers (SuperGCN Sec. 2.4 and 6).

A message is a ``rows x w`` float32 tensor (features forward, gradients backward).
:func:`quantize` turns it into a :class:`Packet` of bytes, :func:`dequantize` turns it back.

``bits = 32``
    Identity: the payload is the float32 bytes.
``bits = 16``
    bfloat16, rounded to nearest even. bf16 keeps float32's 8-bit exponent, so a message of any
    finite magnitude arrives finite and non-zero gradients do not flush to zero; fp16 would be
    more precise (11 against 8 significant bits) but overflows above 65504 and loses small
    gradients below 6e-5 without the loss scaling the runtime does not do. The same codec carries
    both directions, and only forward activations pass a LayerNorm.
``bits = 8, 4, 2``
    Per row ``Z = min(h)`` (zero point) and ``S = (max(h) - min(h)) / (2^b - 1)`` (scale), the
    paper's formulas; code ``q = floor((h - Z) / S + u)`` with ``u ~ U[0, 1)`` (stochastic
    rounding: ``E[q] = (h - Z) / S``, so ``E[dequantize] = h``) and ``h' = q S + Z``. A constant
    row has ``S = 0``, code 0 and arrives exact. The parameters are two float32 per row: the
    paper stores zero point and scale "as FP32 values" (Sec. 6.2.1, Eqn 5). The arithmetic runs
    in float64 on the float32 parameters the receiver sees, so the rounding is unbiased with
    respect to what is dequantised, and ``max - min`` cannot overflow.

Packing: ``k = 8 / b`` codes per byte, code ``c`` of a row in byte ``c // k`` at bits
``(c % k) b .. (c % k) b + b - 1`` (the first code in the low bits); every row starts on a byte
and its last byte is padded with zero codes, so a row is ``ceil(w / k)`` bytes and rows can be
selected from a packet (:meth:`Packet.select`) without repacking.

Bytes on the wire (Table 5 counts them separately): ``data_bytes`` = ``rows * ceil(w b / 8)``
(``rows * 4w`` at 32 bits, ``rows * 2w`` at 16); ``param_bytes`` = ``rows * 8`` at 8/4/2 bits,
0 otherwise. :func:`to_bytes` concatenates payload then parameters into one flat uint8 tensor
(e.g. a segment of ``torch.distributed.all_to_all_single``); :func:`from_bytes` reads it back
given the shape and width, which the receiver knows from the plan.

Non-finite input (NaN or inf) is a :class:`~moagcn.errors.UserError` at every width: a min/max
range with inf has no scale, and a diverged run should stop with a clear line.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moagcn.errors import UserError

BITS = (32, 16, 8, 4, 2)
#: per-row parameters of the integer widths: zero point and scale, float32 (SuperGCN Eqn 5)
PARAMS_PER_ROW = 2
PARAM_DTYPE = torch.float32


@dataclass(frozen=True)
class Packet:
    """A quantised ``rows x w`` message.

    Members
    -------
    payload : torch.Tensor
        uint8, ``rows x row_bytes``, contiguous: the data (codes, bf16 or fp32 bytes).
    params : torch.Tensor
        float32, ``rows x 2`` (zero point, scale) at 8/4/2 bits; ``rows x 0`` otherwise.
    shape : tuple of int
        ``(rows, w)`` of the message.
    bits : int
        32, 16, 8, 4 or 2.
    """

    payload: torch.Tensor
    params: torch.Tensor
    shape: tuple
    bits: int

    @property
    def data_bytes(self) -> int:
        """Bytes of data on the wire."""
        return int(self.payload.numel())

    @property
    def param_bytes(self) -> int:
        """Bytes of quantisation parameters on the wire."""
        return int(self.params.numel() * self.params.element_size())

    @property
    def nbytes(self) -> int:
        """``data_bytes + param_bytes``."""
        return self.data_bytes + self.param_bytes

    def select(self, rows) -> "Packet":
        """The packet of the message's rows ``rows`` (an index tensor or list), no repacking."""
        rows = torch.as_tensor(rows, dtype=torch.long, device=self.payload.device)
        return Packet(self.payload[rows].contiguous(), self.params[rows].contiguous(),
                      (int(rows.numel()), self.shape[1]), self.bits)


def wire_bytes(rows: int, width: int, bits: int) -> tuple[int, int]:
    """``(data_bytes, param_bytes)`` of a ``rows x width`` message at ``bits``."""
    _check_bits(bits)
    params = rows * PARAMS_PER_ROW * 4 if bits <= 8 else 0
    return rows * row_bytes(width, bits), params


def row_bytes(width: int, bits: int) -> int:
    """Payload bytes of one row of ``width`` values: ``ceil(width * bits / 8)``."""
    return -(-width * bits // 8)


def quantize(x: torch.Tensor, bits: int, generator: torch.Generator | None = None) -> Packet:
    """Encode a ``rows x w`` float32 message at ``bits`` (stochastic rounding below 16).

    Parameters
    ----------
    x : torch.Tensor
        2-D float32, finite, on any device.
    bits : int
        32, 16, 8, 4 or 2.
    generator : torch.Generator, optional
        Source of the rounding draws (8/4/2 bits); seeded, the packet is reproducible. It may
        live on another device than ``x``.

    Returns
    -------
    Packet

    Raises
    ------
    UserError
        For a bad width, a tensor that is not 2-D float32, or NaN/inf values.
    """
    _check_bits(bits)
    _check_input(x)
    rows, w = x.shape
    if bits == 32:
        payload = x.contiguous().view(torch.uint8).reshape(rows, 4 * w).clone()
        return Packet(payload, _no_params(x), (rows, w), 32)
    if bits == 16:
        half = x.to(torch.bfloat16)
        if not torch.isfinite(half).all():
            raise UserError("quantize: a float32 value exceeds bfloat16's range (3.39e38); "
                            "scale the message down or send it at 32 bits")
        payload = half.contiguous().view(torch.uint8).reshape(rows, 2 * w)
        return Packet(payload.contiguous(), _no_params(x), (rows, w), 16)
    zero, scale = _row_params(x, bits)
    codes = _stochastic_codes(x, zero, scale, bits, generator)
    params = torch.stack([zero, scale], dim=1).contiguous()
    return Packet(pack_codes(codes, bits), params, (rows, w), bits)


def dequantize(packet: Packet) -> torch.Tensor:
    """The ``rows x w`` float32 message a :class:`Packet` carries (approximately, below 32)."""
    rows, w = packet.shape
    if packet.bits == 32:
        return packet.payload.reshape(-1).clone().view(torch.float32).reshape(rows, w)
    if packet.bits == 16:
        return packet.payload.reshape(-1).clone().view(torch.bfloat16).reshape(rows, w).float()
    codes = unpack_codes(packet.payload, packet.bits, w)
    p = packet.params.to(torch.float64)
    out = codes.to(torch.float64) * p[:, 1:2] + p[:, 0:1]
    return out.to(torch.float32)


def to_bytes(packet: Packet) -> torch.Tensor:
    """One flat contiguous uint8 tensor: the payload, then the parameters' float32 bytes."""
    params = packet.params.contiguous().view(torch.uint8).reshape(-1)
    return torch.cat([packet.payload.reshape(-1), params]).contiguous()


def from_bytes(buf: torch.Tensor, shape, bits: int) -> Packet:
    """The :class:`Packet` of a ``shape`` message at ``bits`` from :func:`to_bytes`' buffer.

    Raises
    ------
    UserError
        If ``buf`` is not a 1-D uint8 tensor of exactly the expected length.
    """
    _check_bits(bits)
    rows, w = (int(s) for s in shape)
    data, params = wire_bytes(rows, w, bits)
    if buf.dtype != torch.uint8 or buf.dim() != 1 or buf.numel() != data + params:
        raise UserError(f"from_bytes: got a {tuple(buf.shape)} {buf.dtype} buffer; a {rows} x "
                        f"{w} message at {bits} bits is {data + params} uint8 bytes "
                        f"({data} data + {params} params); pass the buffer to_bytes made")
    # copies: a segment of a receive buffer may start at any byte, a float view needs alignment
    payload = buf[:data].clone().reshape(rows, row_bytes(w, bits))
    n_params = PARAMS_PER_ROW if bits <= 8 else 0
    p = buf[data:].clone().view(PARAM_DTYPE).reshape(rows, n_params)
    return Packet(payload, p, (rows, w), bits)


# -- codes ---------------------------------------------------------------------------------------

def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack ``rows x w`` integer codes in ``[0, 2^bits)`` into ``rows x ceil(w bits / 8)``
    uint8, ``8 / bits`` codes per byte, the first in the low bits, last byte zero-padded."""
    rows, w = codes.shape
    k = 8 // bits
    nb = row_bytes(w, bits)
    padded = torch.zeros(rows, nb * k, dtype=torch.uint8, device=codes.device)
    padded[:, :w] = codes.to(torch.uint8)
    shifts = torch.arange(k, dtype=torch.uint8, device=codes.device) * bits
    packed = (padded.reshape(rows, nb, k) << shifts).sum(dim=2, dtype=torch.int32)
    return packed.to(torch.uint8).contiguous()


def unpack_codes(payload: torch.Tensor, bits: int, width: int) -> torch.Tensor:
    """The ``rows x width`` uint8 codes of a payload made by :func:`pack_codes`."""
    rows, nb = payload.shape
    k = 8 // bits
    shifts = torch.arange(k, dtype=torch.uint8, device=payload.device) * bits
    mask = (1 << bits) - 1
    codes = (payload.unsqueeze(2) >> shifts) & mask
    return codes.reshape(rows, nb * k)[:, :width]


# -- helpers -------------------------------------------------------------------------------------

def _row_params(x: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row float32 zero point ``min`` and scale ``(max - min) / (2^bits - 1)``."""
    rows, w = x.shape
    if w == 0:
        z = torch.zeros(rows, dtype=torch.float32, device=x.device)
        return z, z.clone()
    lo = x.amin(dim=1)
    hi = x.amax(dim=1)
    scale = ((hi.double() - lo.double()) / ((1 << bits) - 1)).to(torch.float32)
    return lo.contiguous(), scale


def _stochastic_codes(x, zero, scale, bits, generator) -> torch.Tensor:
    """``floor((x - Z) / S + u)``, ``u ~ U[0, 1)``, clamped to ``[0, 2^bits - 1]``; 0 where
    ``S = 0``."""
    dev = generator.device if generator is not None else x.device
    u = torch.rand(x.shape, generator=generator, device=dev, dtype=torch.float64).to(x.device)
    s = scale.double().unsqueeze(1)
    t = (x.double() - zero.double().unsqueeze(1)) / torch.where(s > 0, s, torch.ones_like(s))
    q = torch.floor(t + u).clamp_(0, (1 << bits) - 1)
    return torch.where(s > 0, q, torch.zeros_like(q)).to(torch.uint8)


def _no_params(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[0], 0, dtype=PARAM_DTYPE, device=x.device)


def _check_bits(bits) -> None:
    if isinstance(bits, bool) or bits not in BITS:
        raise UserError(f"communication bits {bits!r} is not supported; choose one of "
                        f"{', '.join(map(str, BITS))}")


def _check_input(x) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.float32:
        what = (f"a {x.dim()}-D {x.dtype} tensor" if isinstance(x, torch.Tensor)
                else f"a {type(x).__name__}")
        raise UserError(f"quantize: got {what}; the codec takes a 2-D float32 rows x width "
                        "tensor (reshape, or cast with .float())")
    bad = ~torch.isfinite(x)
    if x.numel() and bad.any():
        r, c = (int(v) for v in bad.nonzero()[0])
        kind = "NaN" if torch.isnan(x[r, c]) else "inf"
        raise UserError(f"quantize: the message has {int(bad.sum())} non-finite values (first: "
                        f"{kind} at row {r}, column {c}); fix the diverging layer (lower the "
                        "learning rate) before sending it")
