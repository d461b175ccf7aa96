"""Field widths, word layouts and the signatures of the links between the HyScale kernels'
blocks: one definition for every block that drives or reads a link.

The host-visible words (:data:`EDGE_WORD_LAYOUT`, :data:`SOURCE_WORD_LAYOUT`) are built from
the field tables of :mod:`.protocol`, which the host's packing reads too. Links that carry a
record and can refuse it are ``amaranth.lib.stream`` streams (valid / ready / payload); links
that never wait (a pipeline's output, a one-cycle report) are the :class:`ConfigSignature`
subclasses below: a ``valid`` bit and the record's fields beside it.
"""

from __future__ import annotations

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import bits_for, log2
from moagcn.hw.common.ram import RamWriteSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.protocol import EDGE_WORD, SOURCE_WORD

#: the edge list's 64-bit word (``edge_in``; fields in :data:`.protocol.EDGE_WORD`)
EDGE_WORD_LAYOUT = data.StructLayout(dict(EDGE_WORD))
#: the source list's 32-bit word (``src_in``; fields in :data:`.protocol.SOURCE_WORD`)
SOURCE_WORD_LAYOUT = data.StructLayout(dict(SOURCE_WORD))


def check_config(config, user: str) -> None:
    """Refuse a ``config`` that cannot size gateware, naming ``user`` (the block or link that
    was given it)."""
    if not isinstance(config, HyScaleConfig):
        raise TypeError(f"{user} is sized by a HyScaleConfig, not {config!r}; pass "
                        f"moagcn.hw.hyscale.preset(name) or a HyScaleConfig(...)")
    if not config.simulate:
        raise ValueError(f"{user}: this configuration (simulate=False) is for the performance "
                         f"model only and has no gateware; use a preset that can be built "
                         f"('tiny', 'default')")


class Widths:
    """Field widths shared by the kernels of one configuration.

    Parameters
    ----------
    cfg : HyScaleConfig

    Members
    -------
    words, word_bits : int
        Words per external-memory beat, and the bits of a word's index within a beat.
    feat, beat : int
        Bits of an element's index within a row; of a beat's index within a row.
    slot, bank : int
        Bits of a feature-ring slot; of a bank (G-PE) index (0 with one bank).
    dst, src, edge : int
        Bits of a destination, of a source entry, of an edge index.
    bank_row, bank_addr : int
        Bits of a row within one bank; of (row, element) within one bank, element in the low
        bits.
    """

    def __init__(self, cfg: HyScaleConfig):
        check_config(cfg, "Widths")
        self.words = cfg.mem_words_per_cycle
        self.word_bits = log2(self.words)
        self.feat = log2(cfg.max_feature_width)
        self.beat = log2(cfg.beats_per_row)
        self.slot = log2(cfg.feature_slots)
        self.bank = log2(cfg.spes)
        self.dst = bits_for(cfg.max_destinations)
        self.src = bits_for(cfg.max_sources)
        self.edge = bits_for(cfg.max_edges)
        self.bank_row = bits_for(cfg.max_destinations // cfg.spes)
        self.bank_addr = self.feat + self.bank_row


def ring_depth(cfg: HyScaleConfig) -> int:
    """Words of each S-PE's copy of the feature ring: ``feature_slots`` rows of
    ``beats_per_row`` beats."""
    return cfg.feature_slots * cfg.beats_per_row


def ring_write_signature(cfg: HyScaleConfig) -> RamWriteSignature:
    """The duplicator's broadcast write into the S-PEs' copies of the feature ring."""
    return RamWriteSignature(bits_for(ring_depth(cfg)), 32 * cfg.mem_words_per_cycle)


def edge_entry_layout(cfg: HyScaleConfig) -> data.StructLayout:
    """A dispatched edge waiting in a PE queue: the ring slot of its source's row, its
    destination, its weight, and whether it is the first (and, pipelined, the last) edge into
    its destination."""
    w = Widths(cfg)
    fields = {"slot": w.slot or 1, "dst": w.dst, "weight": 32, "first": 1}
    if cfg.pipelined:
        fields["last"] = 1
    return data.StructLayout(fields)


class ConfigSignature(wiring.Signature):
    """A link between blocks of the HyScale kernels whose widths follow a configuration.

    The constructor refuses anything but a :class:`HyScaleConfig` that can be built (see
    :func:`check_config`), then takes the members from the subclass's :meth:`members_for`;
    two signatures are equal when they are of one class and one configuration.

    Parameters
    ----------
    config : HyScaleConfig
    """

    def __init__(self, config: HyScaleConfig):
        check_config(config, type(self).__name__)
        self._config = config
        super().__init__(self.members_for(config))

    def members_for(self, config: HyScaleConfig) -> dict:
        """The members for ``config`` (a checked configuration)."""
        raise NotImplementedError

    @property
    def config(self) -> HyScaleConfig:
        """The configuration the members are sized by."""
        return self._config

    def __eq__(self, other):
        return type(other) is type(self) and other.config == self.config

    def __hash__(self):
        return hash((type(self), self._config))

    def __repr__(self):
        return f"{type(self).__name__}({self._config!r})"


class RingFillSignature(ConfigSignature):
    """A row complete in its ring slot, as the feature duplicator reports it.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
        The last beat of a source row was written this cycle: its slot is ready.
    slot : Out(slot bits)
        The slot.
    count : Out(16)
        The source's out-edge count (edges that will read the slot).
    """

    def members_for(self, config):
        return {"valid": Out(1), "slot": Out(Widths(config).slot or 1), "count": Out(16)}


class RingSlotSignature(ConfigSignature):
    """The feature duplicator's link to the ring's slot table, as the duplicator sees it.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    room : In(1)
        A slot is free.
    claim : Out(1)
        A row takes the next slot this cycle (its last beat is read); only with ``room``.
    fill : Out(RingFillSignature(config))
        A row is complete in its slot (a cycle after its last beat is read).
    """

    def members_for(self, config):
        return {"room": In(1), "claim": Out(1), "fill": Out(RingFillSignature(config))}


class ProductSignature(ConfigSignature):
    """The products an S-PE streams into its G-PE, one element per cycle, as the S-PE sends
    them. There is no ``ready``: the G-PE takes one product every cycle.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
    addr : Out(bank address bits)
        The destination element in the G-PE's bank: (row within the bank, element).
    first : Out(1)
        The product is of the first edge into its destination: it starts from ``+0``.
    done : Out(1)
        With ``pipelined`` only: the product is its destination row's last (the last element
        of the last edge into it).
    data : Out(32)
        The binary32 product.
    """

    def members_for(self, config):
        return {"valid": Out(1), "addr": Out(Widths(config).bank_addr), "first": Out(1),
                **({"done": Out(1)} if config.pipelined else {}),
                "data": Out(32)}


class RowDoneSignature(ConfigSignature):
    """A G-PE's report that a destination row's last sum was written (``pipelined``).

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
        The row's last sum is written this cycle.
    row : Out(bank row bits)
        The row within the bank (destination ``row * spes + bank``).
    """

    def members_for(self, config):
        return {"valid": Out(1), "row": Out(max(Widths(config).bank_row, 1))}


class RowReadSignature(ConfigSignature):
    """A read of one element of an aggregated row, as the update kernel issues it.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    row : Out(destination bits)
        The destination row.
    idx : Out(element bits)
        The element within the row.
    data : In(32)
        The element, two cycles after the address (the G-PE banks' block RAM outputs are
        registered).
    """

    def members_for(self, config):
        w = Widths(config)
        return {"row": Out(w.dst), "idx": Out(w.feat), "data": In(32)}


class WeightLoadSignature(ConfigSignature):
    """The weight load into the update kernel's MACs, as the layer sends it. There is no
    ``ready``: the MACs take one beat every cycle.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
        ``data`` is a beat: one word per MAC (word ``c`` for MAC ``c``), stored at the MACs'
        next weight address.
    data : Out(32 * macs)
    restart : Out(1)
        The next beat is the first of load bank ``bank``.
    bank : Out(1)
    """

    def members_for(self, config):
        return {"valid": Out(1), "data": Out(32 * config.macs), "restart": Out(1),
                "bank": Out(1)}
