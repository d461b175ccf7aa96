"""Two accelerator devices as one sparse device for attention: :class:`AttentionDevice`.

A GAT layer needs two per-entry products (:mod:`moagcn.host.nn.attention`): the weighted
aggregation ``Σ_u α_vu h_u`` and its transpose (``spmm_weighted``), which the weighted S-SpMM
runs (``sspmm`` with ``weighted=true``), and the SDDMM ``<Q_v, K_u>`` (the scores, the gradient
of the attention weights), which the ``sddmm`` design runs. No one accelerator has both, so
``AttentionDevice(aggregate, scores)`` routes ``spmm_weighted`` (and a binary ``sspmm``) to the
first and ``sddmm`` to the second; each keeps its own counters (:attr:`parts`), and
:attr:`counters` is their sum (cycles of the two designs added: they run in turn, each at its
own clock; :meth:`accelerator_s` is the time at those clocks).

**The pairing rule** (:func:`attention_device`): the aggregating half is the user's choice
(``--device model|rtl --design sspmm --preset P --param weighted=true ...``); the SDDMM half is
the same device kind and simulator with the ``sddmm`` design's preset ``sddmm_preset``, by
default ``tiny`` when ``P`` is ``tiny`` and ``default`` otherwise
(:func:`default_sddmm_preset`; ``moagcn train --sddmm-preset``).
"""

from __future__ import annotations

from typing import Any, Sequence

from moagcn.core.counters import Counters
from moagcn.core.device import SparseDevice
from moagcn.errors import UserError

from moagcn.host.devices.select import AcceleratorChoice

#: the design that computes the SDDMM beside the weighted S-SpMM
SCORES_DESIGN = "sddmm"


def default_sddmm_preset(choice: AcceleratorChoice) -> str:
    """The SDDMM's preset for an aggregating ``choice``: ``tiny`` beside a tiny S-SpMM (the
    small, quickly simulated configurations go together), else the SDDMM's ``default``."""
    return "tiny" if choice.preset == "tiny" else "default"


class AttentionDevice(SparseDevice):
    """``spmm_weighted`` and ``sspmm`` on ``aggregate``, ``sddmm`` on ``scores``.

    The two devices are of one kind (``model`` or ``rtl``); the name is
    ``model:sspmm+sddmm``. :attr:`parts` maps each design's name to its device;
    :attr:`counters` is the sum of theirs (recomputed on every read), :meth:`reset` zeroes
    both.
    """

    def __init__(self, aggregate: SparseDevice, scores: SparseDevice):
        # no SparseDevice.__init__: the counters are the two devices', summed on demand
        self.aggregate, self.scores = aggregate, scores
        self.kind = aggregate.kind
        self.entry_ops = frozenset(({"weighted"} & aggregate.entry_ops)
                                   | ({"sddmm"} & scores.entry_ops))
        self.entry_op_params = dict(aggregate.entry_op_params)
        self.lanes, self.clock_mhz = aggregate.lanes, aggregate.clock_mhz

    @staticmethod
    def _design(dev: SparseDevice) -> str:
        spec = getattr(dev, "spec", None)
        return spec.name if spec is not None else dev.name

    @property
    def name(self) -> str:
        return f"{self.kind}:{self._design(self.aggregate)}+{self._design(self.scores)}"

    @property
    def parts(self) -> dict[str, SparseDevice]:
        """Design name -> its device (``{"sspmm": ..., "sddmm": ...}``)."""
        return {self._design(self.aggregate): self.aggregate,
                self._design(self.scores): self.scores}

    @property
    def counters(self) -> Counters:
        """The two devices' counters added (cycles, work, bytes, calls); ``extra`` adds
        ``accelerator_s`` (:meth:`accelerator_s`: the cycles are of two clocks)."""
        c = Counters.total([self.aggregate.counters, self.scores.counters])
        c.extra["accelerator_s"] = self.accelerator_s()
        return c

    def accelerator_s(self) -> float:
        """Seconds of accelerator time: each device's cycles at its own clock, added."""
        return sum(d.counters.cycles_total / (d.clock_mhz * 1e6)
                   for d in (self.aggregate, self.scores) if d.clock_mhz)

    def reset(self) -> None:
        self.aggregate.reset()
        self.scores.reset()

    # -- routing -------------------------------------------------------------------------------

    def sspmm(self, csr, H, M=None):
        return self.aggregate.sspmm(csr, H, M)

    def _compute(self, csr, H, M):      # every sspmm goes to the aggregating device
        return self.aggregate._compute(csr, H, M)

    def spmm_weighted(self, csr, values, X, what: str = "edge weights", mask=None):
        return self.aggregate.spmm_weighted(csr, values, X, what, mask)

    def sddmm(self, csr, Q, K, what: str = "GAT attention", mask=None):
        return self.scores.sddmm(csr, Q, K, what, mask)


def require_weighted(choice: AcceleratorChoice, flag: str) -> None:
    """Refuse in one line, before any device is built, an accelerator ``choice`` that cannot
    aggregate with per-edge attention weights (a binary S-SpMM, another design); ``flag``
    names the option that chose it (``--device rtl``, ``--devices sspmm:lanes=8``). The cpu
    passes."""
    if choice.device == "cpu":
        return
    spec = choice.spec
    if "weighted" not in spec.entry_ops(choice.config()):
        param = spec.entry_op_params.get("weighted")
        fix = (f"add --param {param} (in a --devices spec, :{param}: the weighted S-SpMM; the "
               "scores run on the sddmm design)" if param else
               "use --design sspmm --param weighted=true (the weighted S-SpMM)")
        raise UserError(f"{flag}: GAT aggregates with per-edge attention weights, and this "
                        f"{choice.design} accelerator multiplies by a binary adjacency; {fix}, "
                        "or train with --device cpu")


def attention_device(choice: AcceleratorChoice, sddmm_preset: str | None = None,
                     aggregate: SparseDevice | None = None) -> AttentionDevice:
    """The pair for ``choice`` (a ``model`` / ``rtl`` choice of the weighted S-SpMM, else
    refused by :func:`require_weighted`): the SDDMM of the same kind and simulator, preset
    ``sddmm_preset`` (None: the rule of :func:`default_sddmm_preset`). ``aggregate``: the
    device already made for ``choice`` (None: make it)."""
    require_weighted(choice, f"--device {choice.device} --design {choice.design}")
    return AttentionDevice(aggregate if aggregate is not None else choice.make(),
                           scores_choice(choice, sddmm_preset).make())


def scores_choice(choice: AcceleratorChoice, sddmm_preset: str | None = None
                  ) -> AcceleratorChoice:
    """The SDDMM beside the aggregating accelerator ``choice``: the ``sddmm`` design of the
    same kind and simulator, preset ``sddmm_preset`` (None: :func:`default_sddmm_preset`);
    the CPU scores on itself."""
    if choice.is_cpu:
        return choice
    return AcceleratorChoice(choice.device, SCORES_DESIGN,
                             sddmm_preset or default_sddmm_preset(choice),
                             simulator=choice.simulator)


def entry_devices(devices: Sequence[AcceleratorChoice], device_kind: str,
                  sddmm_preset: str | None = None) -> list[tuple[str, Any]]:
    """``(key, device)`` running the per-entry products for each of ``devices``: an
    accelerator (a weighted S-SpMM, else refused in one line) paired with its SDDMM
    (:func:`attention_device`), the CPU itself."""
    out = []
    for d in devices:
        if d.is_cpu:
            out.append((d.key, d.make()))
            continue
        require_weighted(d, f"--devices {d.text or d.key} (with --ops weighted,sddmm)")
        out.append((d.key, attention_device(d.on(device_kind), sddmm_preset)))
    return out


def scores_id(dev) -> tuple | None:
    """What identifies the SDDMM of a pair (its design and configuration; None: not a pair):
    the SDDMM's time does not depend on the aggregating half."""
    scores = getattr(dev, "scores", None)
    if scores is None:
        return None
    return (scores.kind, scores.name, repr(getattr(scores, "config", None)))
