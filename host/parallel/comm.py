"""Communication between workers: :class:`Communicator`, the one layer every runtime uses.

Three kinds of traffic, each written once for both communicators:

- collectives: a differentiable ``all_to_all`` (the backward pass sends gradients back the way
  the features came; MoP and partition parallelism), ``all_reduce_grads``, ``sum``, ``gather``;
- rounds of point-to-point messages (:meth:`Communicator.start` / :meth:`Communicator.exchange`:
  every process posts its sends and receives of one round; DEAL's GEMM and SpMM);
- tagged messages between concurrent tasks (:meth:`Communicator.post` /
  :meth:`Communicator.fetch`, after the collective :meth:`Communicator.open_p2p`; the fine-grain
  pipeline's blocks).

Two communicators:

- :class:`LocalComm` runs all ``m`` workers in this process (blocks change hands, bytes counted);
- :class:`moagcn.host.parallel.launch.DistComm` runs one worker per torch.distributed process.

Messages can be quantised on the wire (:mod:`moagcn.host.parallel.quant`, SuperGCN Sec. 2.4);
:class:`CommCounters` counts data and quantisation parameters apart, as SuperGCN's Table 5 does.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.nn.autograd import PhaseTimer
from moagcn.host.parallel.quant import BITS, dequantize, quantize

#: message widths on the wire (bits per value)
COMM_BITS = (32, 16, 8, 4, 2)
FLOAT_BYTES = 4


# -- communication -------------------------------------------------------------------------------

@dataclass
class CommCounters:
    """Bytes that crossed worker boundaries (a worker's own block is not counted)."""

    bytes_forward: int = 0
    bytes_backward: int = 0
    exchanges: int = 0
    #: of the bytes above, the quantiser's per-row parameters (zero point and scale)
    param_bytes_forward: int = 0
    param_bytes_backward: int = 0

    @property
    def bytes_total(self) -> int:
        return self.bytes_forward + self.bytes_backward

    def as_dict(self) -> dict:
        d = asdict(self)
        d["bytes_total"] = self.bytes_total
        return d


class Exchange:
    """One round of point-to-point messages in flight (:meth:`Communicator.start`);
    :meth:`wait` returns ``{(src, dst): tensor}`` for the local receivers and then calls
    ``on_done`` with it once (e.g. to count what arrived)."""

    def __init__(self, received: dict, works=(), on_done=None):
        self._received, self._works, self._on_done = received, list(works), on_done

    def wait(self) -> dict:
        for w in self._works:
            w.wait()
        self._works = []
        if self._on_done is not None:
            self._on_done(self._received)
            self._on_done = None
        return self._received


class Communicator(ABC):
    """Collective and point-to-point operations between the ``world`` workers; this process
    runs ``local``."""

    def __init__(self, world: int, local: list[int], timer: PhaseTimer | None = None):
        self.world = world
        self.local = local
        self.counters = CommCounters()
        self.timer = timer
        self.bits = 32
        self.wire_seed = 0
        self._wire_calls = 0    # all-to-alls so far (never reset): seeds the rounding draws

    def set_wire(self, bits: int = 32, seed: int = 0) -> None:
        """Quantise every block that crosses a worker boundary to ``bits`` (32: fp32 as is;
        16: bf16; 8/4/2: per-row zero point and scale, stochastic rounding; see
        :mod:`moagcn.host.parallel.quant`), in both directions. ``seed`` fixes the rounding draws: the
        draw of block ``i -> j`` of the ``k``-th all-to-all depends on ``(seed, k, i, j)``
        only, so every process of a distributed run draws what the in-process run draws."""
        if bits not in BITS:
            raise UserError(f"--comm-bits {bits}: choose one of {', '.join(map(str, BITS))}")
        self.bits, self.wire_seed = int(bits), int(seed)

    def _generator(self, call: int, src: int, dst: int, backward: bool) -> torch.Generator:
        state = np.random.SeedSequence([self.wire_seed, call, src, dst, int(backward)])
        return torch.Generator().manual_seed(int(state.generate_state(1, np.uint64)[0] >> 1))

    def _wire(self, x: torch.Tensor, call: int, src: int, dst: int, backward: bool
              ) -> torch.Tensor:
        """``x`` as the receiver sees it after the wire (quantised and back), counted."""
        if self.bits == 32:
            data, params, y = x.numel() * x.element_size(), 0, x.view_as(x)
        else:
            packet = quantize(x.detach().float().cpu(), self.bits,
                              self._generator(call, src, dst, backward))
            data, params = packet.data_bytes, packet.param_bytes
            y = dequantize(packet).to(x.device)
        self._count(data, params, backward)
        return y

    def _count(self, data: int, params: int, backward: bool) -> None:
        """Count bytes that crossed a worker boundary (``params``: the quantiser's part)."""
        c = self.counters
        if backward:
            c.bytes_backward += data + params
            c.param_bytes_backward += params
        else:
            c.bytes_forward += data + params
            c.param_bytes_forward += params

    @abstractmethod
    def all_to_all(self, send: dict[int, list[torch.Tensor]],
                   recv_shapes: dict[int, list[tuple[int, int]]]) -> dict[int, list[torch.Tensor]]:
        """Differentiable all-to-all: ``send[i][j]`` goes from worker i to j.

        Returns ``recv`` with ``recv[j][i] = send[i][j]`` for every local worker ``j``;
        ``recv_shapes[j][i]`` is the shape worker ``j`` expects from ``i``.
        """

    def all_reduce_grads(self, params) -> None:
        """Sum the gradients of replicated parameters over the workers (no-op in process)."""

    def sum(self, values):
        """Sum a number or numpy array over the processes (identity in one process)."""
        return values

    def gather(self, obj) -> list:
        """The ``obj`` of every process, in process order (``[obj]`` in one process)."""
        return [obj]

    # -- rounds of point-to-point messages -------------------------------------------------------

    @abstractmethod
    def start(self, sends: dict, expect: dict, on_done=None) -> Exchange:
        """Post one round: ``sends[(src, dst)]`` (``src`` local) and the receives
        ``expect[(src, dst)] = (shape, dtype)`` (``dst`` local). Every process calls it the same
        number of times in the same order (the round number tags the messages); a message
        from a worker to itself is handed over."""

    def exchange(self, sends: dict, expect: dict, on_done=None) -> dict:
        """:meth:`start` and wait."""
        return self.start(sends, expect, on_done).wait()

    # -- tagged messages between concurrent tasks ------------------------------------------------

    def open_p2p(self) -> None:
        """Prepare :meth:`post` / :meth:`fetch` (collective: every process calls it once, at the
        same point)."""

    def post(self, x: torch.Tensor, dst: int, tag: int):
        """Send ``x`` (float32, CPU) to the process of worker ``dst`` without waiting; returns
        a handle to wait on before ``x`` may change. Workers of this process exchange blocks
        without it."""
        raise UserError(f"{type(self).__name__} holds every worker: blocks change hands in "
                        "this process, not through post")

    def fetch(self, shape, src: int, tag: int) -> torch.Tensor:
        """Receive the float32 block of ``shape`` that worker ``src``'s process posted with
        ``tag`` (blocking)."""
        raise UserError(f"{type(self).__name__} holds every worker: blocks change hands in "
                        "this process, not through fetch")

    def _time(self, seconds: float) -> None:
        if self.timer is not None:
            self.timer.add("communicate", seconds)


class _Transfer(torch.autograd.Function):
    """Block ``src -> dst`` through the wire (the identity at 32 bits, else quantised), counted
    as sent (forward); its gradient goes back through the wire the other way (backward)."""

    @staticmethod
    def forward(ctx, x, comm, call, src, dst):
        ctx.comm, ctx.call, ctx.src, ctx.dst = comm, call, src, dst
        return comm._wire(x, call, src, dst, backward=False)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm._wire(g, ctx.call, ctx.dst, ctx.src, backward=True), None, None, None, \
            None


class LocalComm(Communicator):
    """All ``world`` workers in this process: blocks change hands without copies."""

    def __init__(self, world: int, timer: PhaseTimer | None = None):
        super().__init__(world, list(range(world)), timer)

    def all_to_all(self, send, recv_shapes):
        t0 = time.perf_counter()
        m = self.world
        recv = {j: [None] * m for j in range(m)}
        for i in range(m):
            for j in range(m):
                block = send[i][j]
                if tuple(block.shape) != tuple(recv_shapes[j][i]):
                    raise RuntimeError(f"all_to_all: block {i}->{j} has shape "
                                       f"{tuple(block.shape)}, expected {recv_shapes[j][i]}")
                recv[j][i] = _Transfer.apply(block, self, self._wire_calls, i, j) \
                    if i != j else block
        self.counters.exchanges += 1
        self._wire_calls += 1
        self._time(time.perf_counter() - t0)
        return recv

    def start(self, sends, expect, on_done=None):
        got = {}
        for key, (shape, dtype) in expect.items():
            x = sends.get(key)
            if x is None:
                raise RuntimeError(f"exchange: worker {key[1]} expects a message from "
                                   f"{key[0]} that was not sent")
            if tuple(x.shape) != tuple(shape) or x.dtype != dtype:
                raise RuntimeError(f"exchange: message {key} is {tuple(x.shape)} "
                                   f"{x.dtype}; the receiver expects {tuple(shape)} {dtype}")
            got[key] = x
        extra = set(sends) - set(expect)
        if extra:
            raise RuntimeError(f"exchange: messages {sorted(extra)[:3]} have no receiver")
        return Exchange(got, (), on_done)
