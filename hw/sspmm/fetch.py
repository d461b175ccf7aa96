"""Neighbour fetcher: the node-wise selection of the hybrid index module."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..common.bits import lowest_set, popcount
from .config import SSpmmConfig
from .layouts import job_layout, packet_layout, row_words_shape, widths
from .protocol import ISSUE_TO_ROOT  # noqa: F401 (the cycle model shares it)
from .tree import DistributionTree


class NeighbourFetcher(wiring.Component):
    """Bind jobs to contexts, read their neighbours' rows once, multicast them down the tree.

    *Binding.* The scheduler offers one job per cycle. The fetcher binds it to a free job
    context (``L = adder_latency`` per group; the groups are tried in turn so that work
    spreads) and tells that group (``bind_*``). Consecutive jobs of one row (its feature
    chunks) form one *pass* of at most one job per group: they share the row's neighbour list,
    so every neighbour row read serves the whole pass. A pass closes when it has a member in
    every group or at its row's last job; while the row's next job waits for a free context in
    a group the pass does not use yet, the pass waits too (other passes keep fetching and
    free contexts). A context is free again once its job's last neighbour has been written
    into its local buffer.

    *Fetching.* A pass is ready when every member context has room in its local buffer
    (``space``). Each cycle up to R = ``fetch_rows`` ready passes, chosen round robin, read
    their next column index and then that neighbour's feature row, and the row goes down the
    :class:`DistributionTree` with the pass's members as destinations, marked ``first`` /
    ``last`` for the pass's first and last neighbour. ``reserve`` tells the contexts that an
    entry is on its way. A column index ``>= n_rows`` raises ``err_index`` (one-cycle pulse).

    Members
    -------
    job, job_valid : In; job_taken : Out(1)
        The scheduler's offer and the handshake.
    run, clear : In(1)
        Work (the accelerator is computing); drop every pass, binding and packet (start).
    n_rows : In
        Rows of the job, for the column-index check.
    bind_valid, bind_group, bind_slot, bind_job : Out
        Context ``bind_slot`` of group ``bind_group`` takes ``bind_job``.
    reserve : Out(contexts)
        An entry was issued this cycle for these contexts.
    space : In(contexts)
        The context can take one more reserved entry.
    released : In(contexts)
        The context's last entry of its job was written this cycle.
    idx_addr_j, idx_data_j, row_addr_j, row_data_j : memory read ports (1-cycle latency)
    row_en_j : Out(1)
        A row is read on port j (the data port holds its value otherwise).
    leaf_g_j, leaf_words_g_j : Out
        The tree's packets for group g and their rows (see :class:`DistributionTree`).
    err_index, busy : Out(1)
    issued : Out(range(R + 1))
        Rows read from the node buffer this cycle.
    no_context, no_job : Out(1)
        A job was offered but no context was free; a context was free but no job offered.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        G, L, R, N = config.groups, config.adder_latency, config.fetch_rows, config.contexts
        F = config.max_feature_width
        members = {
            "job": In(job_layout(config)), "job_valid": In(1), "job_taken": Out(1),
            "run": In(1), "clear": In(1), "n_rows": In(w["row"] + 1),
            "bind_valid": Out(1), "bind_group": Out(range(G)), "bind_slot": Out(range(L)),
            "bind_job": Out(job_layout(config)),
            "reserve": Out(N), "space": In(N), "released": In(N),
            "err_index": Out(1), "busy": Out(1), "issued": Out(range(R + 1)),
            "no_context": Out(1), "no_job": Out(1),
        }
        for j in range(R):
            members[f"idx_addr_{j}"] = Out(w["edge"])
            members[f"idx_data_{j}"] = In(32)
            members[f"row_addr_{j}"] = Out(w["row"])
            members[f"row_en_{j}"] = Out(1)
            members[f"row_data_{j}"] = In(32 * F)
        for g in range(G):
            for j in range(R):
                members[f"leaf_{g}_{j}"] = Out(packet_layout(config, L))
                members[f"leaf_words_{g}_{j}"] = Out(row_words_shape(config))
        super().__init__(members)

    def port(self, name: str, j: int):
        return getattr(self, f"{name}_{j}")

    def leaf(self, g: int, j: int):
        return getattr(self, f"leaf_{g}_{j}")

    def leaf_words(self, g: int, j: int):
        return getattr(self, f"leaf_words_{g}_{j}")

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = widths(cfg)
        G, L, R, N = cfg.groups, cfg.adder_latency, cfg.fetch_rows, cfg.contexts
        m.submodules.tree = tree = DistributionTree(cfg)
        for g in range(G):
            for j in range(R):
                m.d.comb += [self.leaf(g, j).eq(tree.leaf(g, j)),
                             self.leaf_words(g, j).eq(tree.leaf_words(g, j))]
        m.d.comb += tree.clear.eq(self.clear)

        # -- pass table: one slot per context, used by the pass that context leads ------------
        p_valid = Signal(N)       # open: neighbours left to fetch
        p_ready = Signal(N)       # closed: no more members join
        p_first = Signal(N)       # the next fetch is the pass's first
        p_ptr = [Signal(w["edge"], name=f"pass_ptr_{e}") for e in range(N)]
        p_left = [Signal(w["edge"], name=f"pass_left_{e}") for e in range(N)]
        p_mask = [Signal(N, name=f"pass_members_{e}") for e in range(N)]
        bound = Signal(N)         # contexts whose job is still being fetched
        forming = Signal()
        form_e = Signal(range(N))
        form_row = Signal(w["row"])
        next_group = Signal(range(G))

        # -- binding: a pass has at most one member per group; pick a free context in a group
        # the pass does not use yet, preferring the group after the last one used -----------
        free = ~bound
        used = Signal(G)          # groups with a member in the forming pass
        has = Cat(*[free[g * L:(g + 1) * L].any() for g in range(G)])
        candidates = Signal(G)
        m.d.comb += candidates.eq(has & Mux(forming, ~used, (1 << G) - 1))
        g_sel = Signal(range(G))
        if G > 1:
            m.d.comb += g_sel.eq(Mux(candidates.bit_select(next_group, 1), next_group,
                                     lowest_set(m, candidates, name="group")))
        slot = lowest_set(m, Array([free[g * L:(g + 1) * L] for g in range(G)])[g_sel],
                          name="slot")
        ctx = Signal(range(N))
        m.d.comb += ctx.eq(g_sel * L + slot)
        same_row = self.job.row == form_row
        # while the row's next job waits for a context in a group the pass does not use yet,
        # the pass waits too (other passes go on and free contexts): splitting the row would
        # read its neighbours again
        take = self.run & self.job_valid & candidates.any() & (~forming | same_row)
        full = (used | (1 << g_sel)[:G]) == (1 << G) - 1
        close = forming & ((take & (self.job.row_last | full)) | ~self.run | ~self.job_valid
                           | ~same_row)
        m.d.comb += [self.job_taken.eq(take),
                     self.bind_valid.eq(take), self.bind_group.eq(g_sel),
                     self.bind_slot.eq(slot), self.bind_job.eq(self.job),
                     self.no_context.eq(self.run & self.job_valid & ~take),
                     self.no_job.eq(self.run & ~self.job_valid & free.any())]
        onehot = Signal(N)
        m.d.comb += onehot.eq(Mux(take, 1 << ctx, 0))
        lead = take & ~forming                      # the job opens a new pass, led by ``ctx``
        with m.If(take):
            m.d.sync += [next_group.eq(Mux(g_sel == G - 1, 0, g_sel + 1)),
                         used.eq(used | (1 << g_sel)[:G])]
            with m.If(lead):
                m.d.sync += [forming.eq(~(self.job.row_last | (G == 1))), form_e.eq(ctx),
                             form_row.eq(self.job.row), used.eq((1 << g_sel)[:G])]
        with m.If(close):
            m.d.sync += forming.eq(0)

        # -- fetch: up to R ready passes whose members all have room, round robin --------------
        eligible = Signal(N)
        m.d.comb += eligible.eq(Cat(*[p_valid[e] & p_ready[e] & ~(p_mask[e] & ~self.space).any()
                                      for e in range(N)]))
        rr = Signal(range(N))
        rotated = Signal(N)
        m.d.comb += rotated.eq((Cat(eligible, eligible) >> rr)[:N])
        picks = []            # (issue, slot) per root link
        remaining = rotated
        for j in range(R):
            off = lowest_set(m, remaining, name=f"pick_{j}")
            go = Signal(name=f"issue_{j}")
            e = Signal(range(N), name=f"issue_slot_{j}")
            m.d.comb += [go.eq(self.run & remaining.any()),
                         e.eq(Mux(rr + off >= N, rr + off - N, rr + off))]
            picks.append((go, e))
            remaining = remaining & ~(1 << off)[:N]
        # the next search starts after the last pass served
        last_e = picks[0][1]
        for go, e in picks[1:]:
            last_e = Mux(go, e, last_e)
        with m.If(picks[0][0]):
            m.d.sync += rr.eq(Mux(last_e == N - 1, 0, last_e + 1))
        m.d.comb += self.issued.eq(popcount(m, Cat(*[go for go, _ in picks])))

        ptrs, lefts, masks = Array(p_ptr), Array(p_left), Array(p_mask)
        reserve = 0
        stage1 = []
        for j, (go, e) in enumerate(picks):
            m.d.comb += self.port("idx_addr", j).eq(ptrs[e])
            reserve = reserve | Mux(go, masks[e], 0)
            v1 = Signal(name=f"s1_valid_{j}")
            mask1 = Signal(N, name=f"s1_dest_{j}")
            first1 = Signal(name=f"s1_first_{j}")
            last1 = Signal(name=f"s1_last_{j}")
            m.d.sync += [v1.eq(go & ~self.clear), mask1.eq(masks[e]),
                         first1.eq(p_first.bit_select(e, 1)), last1.eq(lefts[e] == 1)]
            stage1.append((v1, mask1, first1, last1))
        m.d.comb += self.reserve.eq(reserve)

        # -- the pass table's registers --------------------------------------------------------
        for e in range(N):
            issued_e = 0
            for go, pe in picks:
                issued_e = issued_e | (go & (pe == e))
            with m.If(self.clear):
                m.d.sync += [p_valid[e].eq(0), p_ready[e].eq(0)]
            with m.Elif(issued_e):
                m.d.sync += [p_ptr[e].eq(p_ptr[e] + 1), p_left[e].eq(p_left[e] - 1),
                             p_first[e].eq(0)]
                with m.If(p_left[e] == 1):
                    m.d.sync += p_valid[e].eq(0)
            with m.Elif(lead & (ctx == e)):
                m.d.sync += [p_valid[e].eq(1), p_ready[e].eq(self.job.row_last | (G == 1)),
                             p_first[e].eq(1), p_ptr[e].eq(self.job.ptr),
                             p_left[e].eq(self.job.deg), p_mask[e].eq(onehot)]
            with m.Elif(forming & (form_e == e)):
                m.d.sync += p_mask[e].eq(p_mask[e] | onehot)
                with m.If(close):
                    m.d.sync += p_ready[e].eq(1)
        with m.If(self.clear):
            m.d.sync += [bound.eq(0), forming.eq(0)]
        with m.Else():
            m.d.sync += bound.eq((bound | onehot) & ~self.released)

        # -- stage 1: the column index arrives; read the neighbour's row ----------------------
        err = 0
        valids = []
        for j, (v1, mask1, first1, last1) in enumerate(stage1):
            col = self.port("idx_data", j)
            bad = v1 & (col >= self.n_rows)
            err = err | bad
            m.d.comb += [self.port("row_addr", j).eq(col), self.port("row_en", j).eq(v1)]
            v2 = Signal(name=f"s2_valid_{j}")
            mask2 = Signal(N, name=f"s2_dest_{j}")
            first2 = Signal(name=f"s2_first_{j}")
            last2 = Signal(name=f"s2_last_{j}")
            m.d.sync += [v2.eq(v1 & ~bad & ~self.clear), mask2.eq(mask1), first2.eq(first1),
                         last2.eq(last1)]
            # -- stage 2: the row arrives and enters the tree ---------------------------------
            root = tree.root(j)
            m.d.comb += [root.valid.eq(v2), root.first.eq(first2), root.last.eq(last2),
                         root.dest.eq(mask2), tree.root_words(j).eq(self.port("row_data", j))]
            valids += [v1, v2]
        m.d.comb += [self.err_index.eq(err),
                     self.busy.eq(forming | p_valid.any() | Cat(*valids).any() | tree.busy)]
        return m
