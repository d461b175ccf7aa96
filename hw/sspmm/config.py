"""Configuration of the S-SpMM accelerator.

One frozen dataclass parameterises the gateware, the golden model, the cycle model, the driver
and the synthesis run. Presets: ``tiny`` (fast tests), ``default`` (P = 16) and ``paper``
(MixGCN Sec. 4.1; used by the cycle model only, far too large to simulate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from moagcn.config import lookup_preset

LANE_CHOICES = (2, 4, 8, 16, 32)
#: the most slices a configuration that can be built may have
MAX_SLICES = 64
#: how the host driver orders a job's rows (see ``SSpmmConfig.row_order``)
ROW_ORDERS = ("long_first", "given")
#: ``long_first``: a row is long above this many times the mean degree of the job's non-empty
#: rows
LONG_ROW_FACTOR = 4


@dataclass(frozen=True)
class SSpmmConfig:
    """Parameters of the S-SpMM accelerator.

    Parameters
    ----------
    slices : int
        S, the number of slices: each has its own job emitter, neighbour fetcher, distribution
        tree and aggregation groups (``lanes`` adders), and rows are dispatched to the slice
        with the least work assigned so far. 1..64 can be built; the cycle model takes any S.
    lanes : int
        P, the number of binary32 adders of one slice (2, 4, 8, 16 or 32); the accelerator has
        S x P (:attr:`adders`).
    groups : int
        Independent feature groups the lanes are split into (1, 2 or 4). Each group works on its
        own (row, feature-chunk) jobs with ``lanes // groups`` lanes, so a row whose unmasked
        feature count is not a multiple of the lanes leaves fewer lanes idle.
    max_feature_width : int
        F_max, the widest feature slice a job may have (wider slices are tiled by the driver).
    max_nodes : int
        Rows of the node feature buffer, the mask buffer and the output buffer; also the
        largest node count of one job.
    max_edges : int
        Column indices the adjacency index buffer holds.
    adder_latency : int
        Pipeline latency of the binary32 adders (also the number of interleaved accumulation
        contexts per group, so that every adder takes an operand pair every cycle).
    load_width : int
        32-bit words per beat on the load streams (the buffer fill bandwidth).
    fetch_rows : int
        R, neighbour feature rows the fetcher reads from the node buffer per cycle (its read
        ports), and rows every link of the distribution tree carries per cycle.
    tree_radix : int
        Fan-out of each switch of the distribution tree (2 or 4); its leaves are the groups.
    local_depth : int
        Entries (one neighbour's W selected features each) of every job context's local
        buffer; a power of two >= 2, so the fetch of the next neighbours overlaps the
        reduction of the current one.
    clock_mhz : float
        Clock used to turn cycles into time in reports.
    walk_rows : int
        Rows the scheduler walks per cycle. The RTL walks one; more is a model-only assumption
        for configurations far larger than can be built (hundreds of slices need rows faster
        than one per cycle).
    split_degree : int
        0: a row is one sum, however long (bit for bit the golden model's order). > 0 (needs
        ``slices`` > 1): a row of ``deg`` > D neighbours is cut into pieces of ``max(D,
        ceil(deg / slices))`` (the last one the rest: at most ``slices`` pieces), which the
        dispatcher sends to consecutive slices (so a hub's work and latency spread over the
        slices); the output stream adds the pieces' sums in order. The golden model follows
        the same order (:func:`moagcn.sim.sspmm.golden.sspmm` with ``pieces = slices``).
    load_banks : int
        1 or 2. With 2 (the default) the row-pointer, index, mask and node buffers are
        ping-pong pairs: the next job's loads fill one half while a job reads the other, so a
        tiled job's loads overlap the tile before it. With 1 the next loads wait for ``done``.
    node_banks : int
        0 (the default): every slice reads its own copy of the node buffer (S copies, written
        together while loading; no slice ever waits for another). B > 0, a power of two: one
        node buffer shared by the slices, in B banks (feature row r in bank ``r mod B``), read
        through a crossbar (:class:`~moagcn.hw.sspmm.crossbar.NodeCrossbar`): each cycle every
        bank reads one row, chosen round robin among the slices that ask for a row in it, and
        every slice that asks for that same row gets it from the one read (multicast); a slice
        refused on a conflict asks again the next cycle. One copy instead of S, for conflict
        stalls. Needs ``fetch_rows`` = 1 (each slice reads its rows in order).
    hbm_gb_per_s : float
        Bandwidth of an HBM that feeds the buffers, double-buffered against compute, for
        graphs larger than the buffers (see :mod:`moagcn.sim.sspmm.memory`); 0 (every
        configuration that can be built): the host fills the buffers through the load
        streams, as the RTL does (overlapped with the job before with ``load_banks`` 2).
    index_register : bool
        True (the default): each column index read is registered before it addresses the node
        buffer (the index buffer's read, straight into the node buffer's address, was the
        longest path on ECP5; docs/sspmm.md has the synthesis runs), at a
        cycle more from a neighbour's issue to its row (``issue_to_root``). Only from
        ``adder_latency`` 4 on (:attr:`registered_index`): a ring of 2 or 3 contexts turns
        faster than a row read comes back, so the extra cycle shows on every short job
        (docs/sspmm.md, "Why index_register is on").
    row_order : str
        The order in which the host driver gives a job's rows to the accelerator (a
        scheduling choice of the host, not of the RTL; the output is the same bits in the
        graph's order either way). ``long_first`` (the default): the rows with more than
        ``LONG_ROW_FACTOR`` (4) times the mean degree of the job's non-empty rows first,
        longest first, then the others in the graph's order. A row's job takes at least ``deg
        x adder_latency`` cycles in one context however idle the rest of the engine is, so a
        hub row near the end of the graph's order runs on alone after every other row has finished (a held-out graph with
        a 673-neighbour row at 2,975 of 3,000 rows: utilisation 0.878 against 0.908 on the
        benchmark's graph); first, it overlaps the rest. Rows of ordinary length keep the
        graph's order, so long and short rows stay mixed (sorting every row by degree leaves
        the shortest rows to the end, where binding one job per cycle limits them). ``given``:
        the graph's order. Applied per tile, by the driver and by the cycle model alike.
    weighted : bool
        False (the default): A is binary, each lane adds (``Z = (A H) ⊙ M``). True: one
        binary32 value per stored entry of A (``Z = (A_w H) ⊙ M``): the values load beside
        the column indices (the index stream's beats carry ``load_width`` indices and their
        ``load_width`` values) into an edge-value buffer beside the index buffer, travel with
        each column index to the lanes, and each lane multiplies before it adds, ``acc =
        round(round(w * h) + acc)`` (a :class:`~moagcn.hw.arith.Fp32Multiplier` of
        ``MUL_LATENCY`` stages in front of each adder; the ring of contexts is the adders'
        alone, so the contexts stay ``adder_latency`` per group). Off, the generated Verilog
        is the unweighted design's, byte for byte.
    simulate : bool
        False for configurations that only the cycle model may use.
    """

    slices: int = 1
    lanes: int = 16
    groups: int = 4
    max_feature_width: int = 64
    max_nodes: int = 4096
    max_edges: int = 65536
    adder_latency: int = 7
    load_width: int = 4
    fetch_rows: int = 2
    tree_radix: int = 2
    local_depth: int = 4
    clock_mhz: float = 200.0
    walk_rows: int = 1
    split_degree: int = 0
    load_banks: int = 2
    node_banks: int = 0
    hbm_gb_per_s: float = 0.0
    index_register: bool = True
    row_order: str = "long_first"
    weighted: bool = False
    simulate: bool = True

    #: fields the gateware does not read (``moagcn.config.gateware_view``)
    HOST_FIELDS: ClassVar[tuple[str, ...]] = ("clock_mhz", "row_order")

    def __post_init__(self):
        if not isinstance(self.slices, int) or self.slices < 1:
            raise ValueError(f"slices={self.slices} must be a positive integer (1..{MAX_SLICES} "
                             "to simulate; any number for the cycle model)")
        if self.simulate and self.slices > MAX_SLICES:
            raise ValueError(f"slices={self.slices} is too many to simulate (at most "
                             f"{MAX_SLICES}); use simulate=False and `moagcn sspmm estimate`")
        if self.lanes not in LANE_CHOICES:
            raise ValueError(f"lanes={self.lanes} is not supported; choose one of "
                             f"{', '.join(map(str, LANE_CHOICES))}")
        if self.groups not in (1, 2, 4) or self.lanes % self.groups or self.lanes < self.groups:
            raise ValueError(f"groups={self.groups} must be 1, 2 or 4 and divide "
                             f"lanes={self.lanes}")
        if self.max_feature_width < 1:
            raise ValueError(f"max_feature_width={self.max_feature_width} must be >= 1")
        if self.max_nodes < 2 or self.max_edges < 1:
            raise ValueError("max_nodes must be >= 2 and max_edges >= 1")
        if not 2 <= self.adder_latency <= 32:
            raise ValueError(f"adder_latency={self.adder_latency} must be in 2..32")
        if self.load_width < 1 or self.load_width & (self.load_width - 1):
            raise ValueError(f"load_width={self.load_width} must be a power of two")
        if not 1 <= self.fetch_rows <= 4:
            raise ValueError(f"fetch_rows={self.fetch_rows} must be in 1..4")
        if self.tree_radix not in (2, 4):
            raise ValueError(f"tree_radix={self.tree_radix} must be 2 or 4")
        if self.local_depth < 2 or self.local_depth & (self.local_depth - 1):
            raise ValueError(f"local_depth={self.local_depth} must be a power of two >= 2")
        if not self.clock_mhz > 0:
            raise ValueError(f"clock_mhz={self.clock_mhz} must be > 0")
        if self.walk_rows < 1:
            raise ValueError(f"walk_rows={self.walk_rows} must be >= 1")
        if self.walk_rows > 1 and self.simulate:
            raise ValueError(f"walk_rows={self.walk_rows}: the RTL's scheduler walks one row per "
                             "cycle; more is for the cycle model only (simulate=False)")
        if self.split_degree < 0:
            raise ValueError(f"split_degree={self.split_degree} must be >= 0 (0: never split)")
        if self.split_degree and self.slices == 1:
            raise ValueError(f"split_degree={self.split_degree} needs slices >= 2: a row's "
                             "pieces go to distinct slices (use split_degree=0 with one slice)")
        if self.load_banks not in (1, 2):
            raise ValueError(f"load_banks={self.load_banks} must be 1 or 2 (2: the next job "
                             "loads while one runs)")
        if self.node_banks < 0 or self.node_banks & (self.node_banks - 1):
            raise ValueError(f"node_banks={self.node_banks} must be 0 (a node buffer per "
                             "slice) or a power of two (banks of one shared node buffer)")
        if self.node_banks > self.max_nodes:
            raise ValueError(f"node_banks={self.node_banks} is more than max_nodes="
                             f"{self.max_nodes} rows; use at most max_nodes banks")
        if self.node_banks and self.fetch_rows != 1:
            raise ValueError(f"node_banks={self.node_banks} needs fetch_rows=1 (not "
                             f"{self.fetch_rows}): a slice of the shared node buffer reads one "
                             "row a cycle, in order")
        if self.row_order not in ROW_ORDERS:
            raise ValueError(f"row_order={self.row_order!r} must be one of "
                             f"{', '.join(ROW_ORDERS)}")
        if self.hbm_gb_per_s < 0:
            raise ValueError(f"hbm_gb_per_s={self.hbm_gb_per_s} must be >= 0 (0: no HBM)")
        if not isinstance(self.weighted, bool):
            raise ValueError(f"weighted={self.weighted!r} must be true or false")
        if self.hbm_gb_per_s > 0 and self.simulate:
            raise ValueError(f"hbm_gb_per_s={self.hbm_gb_per_s}: the RTL has no HBM interface; "
                             "an HBM configuration is for the cycle model only (simulate=False)")

    @property
    def adders(self) -> int:
        """Binary32 adders of the whole accelerator: S x P."""
        return self.slices * self.lanes

    @property
    def group_lanes(self) -> int:
        """W, lanes per group: the width of one job's feature chunk."""
        return self.lanes // self.groups

    @property
    def group_bits(self) -> int:
        """log2 G: the bits that pick a group, or a chunk's place in its output beat."""
        return self.groups.bit_length() - 1

    @property
    def registered_index(self) -> bool:
        """The column index is registered between its read and the row read (see
        ``index_register``)."""
        return self.index_register and self.adder_latency >= 4

    @property
    def contexts(self) -> int:
        """Job contexts of the whole engine: ``adder_latency`` per group."""
        return self.groups * self.adder_latency


PRESETS = {
    "tiny": SSpmmConfig(lanes=4, groups=2, max_feature_width=16, max_nodes=256, max_edges=4096,
                        adder_latency=3, load_width=2, fetch_rows=1),
    "default": SSpmmConfig(),
    # four slices of P = 8: the smallest multi-slice accelerator worth simulating
    "multi": SSpmmConfig(slices=4, lanes=8, groups=2, fetch_rows=1),
    # MixGCN Sec. 4.1: 16,384 adders at 500 MHz (512 slices of P = 32); 32 MB node, output and
    # index buffers, 4 MB mask buffer, 1024 GB/s HBM (= 512 words per 500 MHz cycle). The paper
    # does not describe its scheduler; 512 slices need rows faster than one per cycle, so this
    # preset assumes one that walks 8, and splits hub rows into pieces of 256 neighbours (a
    # 20,000-neighbour row would otherwise take 140,000 cycles in one context); docs/sspmm.md
    # gives the figures without either. Each slice reads its own copy of the node buffer
    # (``node_banks`` 0), a third assumption: the paper's one 32 MB buffer shared by the 512
    # slices through a crossbar of 2,048 / 8,192 banks costs 10 % / 2 % (docs/sspmm.md, Shared
    # node buffer).
    "paper": SSpmmConfig(slices=512, lanes=32, groups=1, fetch_rows=1, max_feature_width=256,
                         max_nodes=(32 << 20) // (4 * 256), max_edges=(32 << 20) // 4,
                         adder_latency=7, load_width=512, clock_mhz=500.0, walk_rows=8,
                         split_degree=256, hbm_gb_per_s=1024.0, simulate=False),
}

#: adders of the paper's configuration
PAPER_ADDERS = 16384
assert PRESETS["paper"].adders == PAPER_ADDERS


def preset(name: str, **overrides):
    """A preset with optional field overrides; unknown names list the presets."""
    return lookup_preset(PRESETS, name, "S-SpMM", **overrides)
