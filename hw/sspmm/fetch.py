"""Neighbour fetcher: the node-wise selection of the hybrid index module.

One module: its blocks (the context binder, the pass table, the row readers and the fetcher
that joins them) share the pass and issue signatures defined here and are used only together,
by :class:`NeighbourFetcher`.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import (above_onehot, lowest_onehot, lowest_set, onehot_select,
                                   popcount, second_onehot)
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.crossbar import NodeRequestSignature
from moagcn.hw.sspmm.layouts import RowLinkSignature, job_layout, sel_layout, widths
from moagcn.hw.sspmm.protocol import issue_to_root  # noqa: F401 (the cycle model shares it)
from moagcn.hw.sspmm.tree import DistributionTree


class PassFormSignature(wiring.Signature):
    """What the :class:`ContextBinder` tells the :class:`PassTable` each cycle, as the binder
    sees it.

    Members
    -------
    open : Out(1)
        The job taken this cycle opens a new pass, led by its context ``ctx``.
    ctx : Out(range(contexts))
        The context the job taken this cycle is bound to.
    member : Out(contexts)
        That context as a one-hot mask (zero when no job is taken).
    ptr, deg : Out(edge bits)
        The taken job's neighbour list (its row's).
    row_last : Out(1)
        The taken job is its row's last.
    forming : Out(1)
        A pass is open for more members (in a group it does not use yet).
    leader : Out(range(contexts))
        The context leading the forming pass (its slot in the pass table).
    close : Out(1)
        The forming pass takes no more members after this cycle.
    """

    def __init__(self, config: SSpmmConfig):
        N, edge = config.contexts, widths(config)["edge"]
        super().__init__({
            "open": Out(1), "ctx": Out(range(N)), "member": Out(N),
            "ptr": Out(edge), "deg": Out(edge), "row_last": Out(1),
            "forming": Out(1), "leader": Out(range(N)), "close": Out(1),
        })


class IssueSignature(wiring.Signature):
    """One neighbour of a pass issued on a root link, as the :class:`PassTable` sends it.

    Members
    -------
    valid : Out(1)
        A neighbour is issued this cycle.
    ptr : Out(edge bits)
        Where its column index is (driven whether or not ``valid``).
    dest : Out(contexts)
        The pass's member contexts.
    first, last : Out(1)
        The pass's first and last neighbour.
    """

    def __init__(self, config: SSpmmConfig):
        N, edge = config.contexts, widths(config)["edge"]
        super().__init__({"valid": Out(1), "ptr": Out(edge), "dest": Out(N),
                          "first": Out(1), "last": Out(1)})


class ContextBinder(wiring.Component):
    """Bind the offered job to a free context and group consecutive jobs of a row into passes.

    A pass has at most one member per group: the binder picks a free context in a group the
    forming pass does not use yet, preferring the group after the last one used. While the
    row's next job waits for such a context, the pass waits too (splitting the row would read
    its neighbours again); it closes when it has a member in every group, at its row's last
    job, or when the next cycle offers no job of its row. A context is bound until
    ``released``.

    The row's chunks ``c`` of one output beat (``c // G`` equal) also go to distinct groups,
    so that each group alone writes its word lanes of a beat (the output buffer is one
    single-write-port RAM per group, see ``SSpmmAccelerator._buffers``). A pass of G jobs
    starts at a multiple of G, so this only matters after a pass closed early: the next pass
    then avoids the groups its beat's earlier chunks used (there is always one left: a job's
    pass and beat hold at most G - 1 other chunks between them).

    Members
    -------
    jobs : In(stream.Signature(job_layout))
        The job emitter's offer; ``ready`` is ``take``.
    run, clear : In(1)
        Work; drop every binding and the forming pass.
    released : In(contexts)
        These contexts' jobs had their last entry written this cycle.
    take : Out(1)
        The offer is taken this cycle.
    group, slot : Out
        Where it goes: context ``slot`` of group ``group``.
    form : Out(PassFormSignature(config))
        The pass the taken job opens or joins.
    no_context, no_job : Out(1)
        A job was offered but no context was free; a context was free but no job offered.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        G, L, N = config.groups, config.adder_latency, config.contexts
        super().__init__({
            "jobs": In(stream.Signature(job_layout(config))),
            "run": In(1), "clear": In(1), "released": In(N),
            "take": Out(1), "group": Out(range(G)), "slot": Out(range(L)),
            "form": Out(PassFormSignature(config)),
            "no_context": Out(1), "no_job": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = widths(cfg)
        G, N = cfg.groups, cfg.contexts
        bound = Signal(N)         # contexts whose job is still being fetched
        forming = Signal()
        form_e = Signal(range(N))
        form_row = Signal(w["row"])
        next_group = Signal(range(G))
        used = Signal(G)          # groups with a member in the forming pass
        beat = Signal(G)          # groups holding the row's chunks of the offered job's beat

        free = ~bound
        job, offered = self.jobs.payload, self.jobs.valid
        new_beat = job.chunk[:cfg.group_bits] == 0 if G > 1 else 1
        beat_used = Mux(new_beat, 0, beat)
        candidates, g_sel, slot, ctx = self._choose_context(
            m, free, Mux(forming, used, 0) | beat_used, next_group)
        same_row = job.row == form_row
        # while the row's next job waits for a context in a group the pass does not use yet,
        # the pass waits too (other passes go on and free contexts): splitting the row would
        # read its neighbours again
        take = self.run & offered & candidates.any() & (~forming | same_row)
        full = (used | (1 << g_sel)[:G]) == (1 << G) - 1
        close = forming & ((take & (job.row_last | full)) | ~self.run | ~offered | ~same_row)
        onehot = Signal(N)
        m.d.comb += onehot.eq(Mux(take, 1 << ctx, 0))
        lead = take & ~forming                      # the job opens a new pass, led by ``ctx``
        m.d.comb += [self.take.eq(take), self.jobs.ready.eq(take),
                     self.group.eq(g_sel), self.slot.eq(slot),
                     self.no_context.eq(self.run & offered & ~take),
                     self.no_job.eq(self.run & ~offered & free.any()),
                     self.form.open.eq(lead), self.form.ctx.eq(ctx),
                     self.form.member.eq(onehot), self.form.ptr.eq(job.ptr),
                     self.form.deg.eq(job.deg), self.form.row_last.eq(job.row_last),
                     self.form.forming.eq(forming), self.form.leader.eq(form_e),
                     self.form.close.eq(close)]

        with m.If(take):
            m.d.sync += [next_group.eq(Mux(g_sel == G - 1, 0, g_sel + 1)),
                         used.eq(used | (1 << g_sel)[:G]),
                         beat.eq(beat_used | (1 << g_sel)[:G])]
            with m.If(lead):
                m.d.sync += [forming.eq(~(job.row_last | (G == 1))), form_e.eq(ctx),
                             form_row.eq(job.row), used.eq((1 << g_sel)[:G])]
        with m.If(close):
            m.d.sync += forming.eq(0)
        with m.If(self.clear):
            # every job starts as after a reset
            m.d.sync += [bound.eq(0), forming.eq(0), next_group.eq(0)]
        with m.Else():
            m.d.sync += bound.eq((bound | onehot) & ~self.released)
        return m

    def _choose_context(self, m: Module, free, taken, next_group):
        """A free context in a group outside ``taken`` (the forming pass's groups and those
        of the job's beat), preferring the group after the last one used; returns (the groups
        that qualify, the group, the slot in it, the context)."""
        G, L, N = self.config.groups, self.config.adder_latency, self.config.contexts
        has = Cat(*[free[g * L:(g + 1) * L].any() for g in range(G)])
        candidates = Signal(G)
        m.d.comb += candidates.eq(has & ~taken)
        g_sel = Signal(range(G))
        if G > 1:
            m.d.comb += g_sel.eq(Mux(candidates.bit_select(next_group, 1), next_group,
                                     lowest_set(m, candidates, name="group")))
        slot = lowest_set(m, Array([free[g * L:(g + 1) * L] for g in range(G)])[g_sel],
                          name="slot")
        ctx = Signal(range(N))
        m.d.comb += ctx.eq(g_sel * L + slot)
        return candidates, g_sel, slot, ctx


class PassTable(wiring.Component):
    """The open passes, one slot per context (used by the pass that context leads), and the
    round-robin choice of up to R = ``fetch_rows`` of them to issue each cycle.

    A pass is ready once closed and while every member context has room in its local buffer
    (``space``). Issuing a pass reads its next neighbour; its last neighbour frees the slot.

    Members
    -------
    form : In(PassFormSignature(config))
        Passes opening, gaining members and closing.
    run, clear : In(1)
        Issue; drop every pass.
    space : In(contexts)
        The context can take one more reserved entry.
    issue : Out(IssueSignature(config)).array(R)
        The neighbour issued on each root link.
    reserve : Out(contexts)
        An entry was issued this cycle for these contexts.
    issued : Out(range(R + 1))
        Neighbours issued this cycle.
    busy : Out(1)
        A pass has neighbours left to issue.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        #: one group: a pass has exactly one member, the context that leads it (its slot), so
        #: no member masks are kept and a slot's room is its context's own
        self.single_group = config.groups == 1
        N, R = config.contexts, config.fetch_rows
        super().__init__({
            "form": In(PassFormSignature(config)),
            "run": In(1), "clear": In(1), "space": In(N),
            "issue": Out(IssueSignature(config)).array(R),
            "reserve": Out(N), "issued": Out(range(R + 1)), "busy": Out(1),
        })
        # the table: one slot per context
        edge = widths(config)["edge"]
        self.p_valid = Signal(N, name="p_valid")        # open: neighbours left to issue
        self.p_ready = Signal(N, name="p_ready")        # closed: no more members join
        self.p_first = Signal(N, name="p_first")        # the next issue is the pass's first
        self.p_ptr = [Signal(edge, name=f"pass_ptr_{e}") for e in range(N)]
        self.p_left = [Signal(edge, name=f"pass_left_{e}") for e in range(N)]
        self.p_mask = [Signal(N, name=f"pass_members_{e}") for e in range(N)]

    def elaborate(self, platform):
        m = Module()
        picks = self._pick(m)
        self._issue(m, picks)
        self._update(m, picks)
        m.d.comb += self.busy.eq(self.p_valid.any())
        return m

    def _pick(self, m: Module):
        """Up to R ready passes whose members all have room, round robin from the one after
        the last pass served; returns (issue, one-hot slot) per root link (the slot is zero
        when nothing is issued).

        The round robin is a one-hot arbiter: ``after`` (a register) marks the slots after the
        last pass served, and a link takes the lowest eligible slot among those, or else the
        lowest eligible slot. The same choice as rotating the eligible slots by a pointer and
        taking the lowest, without the rotation and the pointer's modular add, which were the
        longest path with the slots' pointers multiplexed by the index they gave.
        """
        N, R = self.config.contexts, self.config.fetch_rows
        p_valid, p_ready, p_mask = self.p_valid, self.p_ready, self.p_mask
        eligible = Signal(N)
        if self.single_group:
            # one group: a pass has one member, the context that leads it (its slot), so its
            # room is that context's own bit (the members' AND-OR was most of the credit loop,
            # the contexts' counts through the pick into the counts again)
            m.d.comb += eligible.eq(p_valid & p_ready & self.space)
        else:
            m.d.comb += eligible.eq(Cat(*[p_valid[e] & p_ready[e] & ~(p_mask[e] & ~self.space).any()
                                          for e in range(N)]))
        after = Signal(N, name="rr_after")        # slots after the last pass served
        picks = []            # (issue, one-hot slot) per root link
        remaining = Signal(N, name="pick_eligible_0")
        m.d.comb += remaining.eq(Mux(self.run, eligible, 0))
        last = Const(0, N)
        for j in range(R):
            ahead = Signal(N, name=f"pick_after_{j}")
            m.d.comb += ahead.eq(remaining & after)
            onehot = Signal(N, name=f"issue_onehot_{j}")
            go = Signal(name=f"issue_{j}")
            if j == 1:
                # the second in round-robin order, found beside the first rather than behind
                # it (the slots after the last served, then the others, each in slot order):
                # the second of those after, else the lowest of the others when one is after,
                # else the second of the others (with a pick behind the other, the credit loop
                # from the contexts' counts through both picks into the counts again was the
                # longest path with two root links)
                behind = Signal(N, name="pick_before_1")
                m.d.comb += behind.eq(remaining & ~after)
                second_ahead = second_onehot(m, ahead, name="pick_second_after_1")
                one_ahead = ahead.any() & ~second_ahead.any()
                m.d.comb += [
                    onehot.eq(Mux(second_ahead.any(), second_ahead,
                                  Mux(one_ahead, lowest_onehot(m, behind, name="pick_low_1"),
                                      second_onehot(m, behind, name="pick_second_1")))),
                    go.eq(onehot.any())]          # (zero when fewer than two are eligible)
            else:
                # the lowest set bit of the slots after the last served, else of all, both
                # found side by side
                m.d.comb += [onehot.eq(Mux(ahead.any(),
                                           lowest_onehot(m, ahead, name=f"pick_low_after_{j}"),
                                           lowest_onehot(m, remaining, name=f"pick_low_{j}"))),
                             go.eq(remaining.any())]
            picks.append((go, onehot))
            last = Mux(go, onehot, last)
            if j + 1 < R:
                rest = Signal(N, name=f"pick_eligible_{j + 1}")
                # links from the third on take the lowest of the slots left by all before
                m.d.comb += rest.eq(remaining if j == 0 else
                                    remaining & ~onehot & ~picks[0][1] if j == 1 else
                                    remaining & ~onehot)
                remaining = rest
        # the next search starts after the last pass served: the slots above its one-hot bit
        # (none after the last slot: the search then starts from the lowest); every job
        # starts as after a reset
        with m.If(self.clear):
            m.d.sync += after.eq(0)
        with m.Elif(picks[0][0]):
            m.d.sync += after.eq(above_onehot(m, last, name="rr_above"))
        m.d.comb += self.issued.eq(popcount(m, Cat(*[go for go, _ in picks])))
        return picks

    def _issue(self, m: Module, picks):
        """Each pick's pass on its root link (the picked slot's registers through a one-hot
        AND-OR), and the entries it reserves."""
        N = self.config.contexts
        left_one = Cat(*[self.p_left[e] == 1 for e in range(N)])
        reserve = 0
        for issue, (go, onehot) in zip(self.issue, picks):
            ptr = onehot_select(onehot, self.p_ptr)
            # with one group the pass's only member is its slot
            dest = onehot if self.single_group else onehot_select(onehot, self.p_mask)
            m.d.comb += [issue.valid.eq(go), issue.ptr.eq(ptr), issue.dest.eq(dest),
                         issue.first.eq((self.p_first & onehot).any()),
                         issue.last.eq((left_one & onehot).any())]
            reserve = reserve | dest
        m.d.comb += self.reserve.eq(reserve)

    def _update(self, m: Module, picks):
        """The table's registers: an issue moves its pass on, a binding opens or joins one.

        Per slot the priority is clear, issue, open, join; the one-bit fields are written as
        whole vectors (per-slot conditional bits were most of the simulator's time here)."""
        N = self.config.contexts
        single_group = self.single_group
        form = self.form
        issued = Signal(N, name="pass_issued")
        m.d.comb += issued.eq(Cat(*[Cat(*[onehot[e] for _, onehot in picks]).any()
                                    for e in range(N)]))
        done = Signal(N, name="pass_done")          # issued its last neighbour
        m.d.comb += done.eq(issued & Cat(*[self.p_left[e] == 1 for e in range(N)]))
        opening = Signal(N, name="pass_opening")
        m.d.comb += opening.eq(Mux(form.open, form.member, 0) & ~issued)
        joining = Signal(N, name="pass_joining")
        m.d.comb += joining.eq(Mux(form.forming, (Const(1, N) << form.leader)[:N], 0)
                               & ~issued & ~opening)
        ready_open = Mux(form.row_last | single_group, opening, 0)
        with m.If(self.clear):
            m.d.sync += [self.p_valid.eq(0), self.p_ready.eq(0)]
        with m.Else():
            m.d.sync += [self.p_valid.eq((self.p_valid & ~done) | opening),
                         self.p_ready.eq((self.p_ready & ~opening) | ready_open
                                         | Mux(form.close, joining, 0)),
                         self.p_first.eq((self.p_first & ~issued) | opening)]
            for e in range(N):
                with m.If(issued[e]):
                    m.d.sync += [self.p_ptr[e].eq(self.p_ptr[e] + 1),
                                 self.p_left[e].eq(self.p_left[e] - 1)]
                with m.Elif(opening[e]):
                    m.d.sync += [self.p_ptr[e].eq(form.ptr), self.p_left[e].eq(form.deg)]
                    if not single_group:
                        m.d.sync += self.p_mask[e].eq(form.member)
                # with one group no pass is joined and a pass's member is its own slot: the
                # member masks are kept only with several groups
                if not single_group:
                    with m.Elif(joining[e]):
                        m.d.sync += self.p_mask[e].eq(self.p_mask[e] | form.member)


class RowReader(wiring.Component):
    """One root link's read pipeline: an issued neighbour's column index, then its feature
    row, which enters the distribution tree (:func:`~moagcn.hw.sspmm.protocol.issue_to_root`
    cycles after the issue: one more with ``registered_index``).

    Members
    -------
    issue : In(IssueSignature(config))
        The neighbour issued on this link.
    clear : In(1)
        Drop the reads in flight.
    n_rows : In
        Rows of the job: a column index at or beyond it is an error.
    idx : Out(RamReadSignature(edge bits, 32))
        Column-index read (1-cycle latency).
    row : Out(RamReadSignature(row bits, 32 * F))
        Feature-row read (1-cycle latency); ``en`` only when a row is read.
    sels : In(ArrayLayout(sel_layout(config), contexts))
        Each context's bound job's lane features (registers of the fetcher).
    root : Out(RowLinkSignature(config, groups))
        The row and its packet, into the tree: with, per group, the destination context
        (``slot``) and its lane features (``sel``), looked up while the row is read.
    err : Out(1)
        The column index read two cycles ago was out of range.
    busy : Out(1)
        A read is in flight.
    val : Out(RamReadSignature(edge bits, 32)), with ``weighted``
        Edge-value read (1-cycle latency), at the column index's address in the same cycle;
        the value follows the index through its registers into the packet (``value``).
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        F, N = config.max_feature_width, config.contexts
        super().__init__({
            "issue": In(IssueSignature(config)),
            "clear": In(1), "n_rows": In(w["row"] + 1),
            "sels": In(data.ArrayLayout(sel_layout(config), N)),
            "idx": Out(RamReadSignature(w["edge"], 32)),
            "row": Out(RamReadSignature(w["row"], 32 * F)),
            "root": Out(RowLinkSignature(config, config.groups)),
            "err": Out(1), "busy": Out(1),
            **({"val": Out(RamReadSignature(w["edge"], 32))} if config.weighted else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        N = cfg.contexts
        # -- the issue, registered: choosing a pass (its members' room, round robin) and
        # addressing a block RAM in one cycle was the longest path ---------------------------
        v0 = Signal(name="s0_valid")
        ptr0 = Signal.like(self.issue.ptr, name="s0_ptr")
        mask0 = Signal(N, name="s0_dest")
        first0 = Signal(name="s0_first")
        last0 = Signal(name="s0_last")
        m.d.sync += [v0.eq(self.issue.valid & ~self.clear), ptr0.eq(self.issue.ptr),
                     mask0.eq(self.issue.dest), first0.eq(self.issue.first),
                     last0.eq(self.issue.last)]
        # -- stage 0: read the column index (with several slices only for an issued neighbour:
        # their index buffers are built without read/write collisions, and loads write them
        # while no job reads) -----------------------------------------------------------------
        m.d.comb += self.idx.addr.eq(ptr0)
        if cfg.slices > 1:
            m.d.comb += self.idx.en.eq(v0)
        v1 = Signal(name="s1_valid")
        mask1 = Signal(N, name="s1_dest")
        first1 = Signal(name="s1_first")
        last1 = Signal(name="s1_last")
        m.d.sync += [v1.eq(v0 & ~self.clear), mask1.eq(mask0),
                     first1.eq(first0), last1.eq(last0)]
        # -- stage 1: the column index arrives; with ``registered_index`` it is registered
        # first (the index buffer's read, 5.8 ns of clock-to-out on ECP5, straight into the
        # node buffer's address was the longest path) --------------------------------------
        col = self.idx.data
        v_read = v1             # the index read in flight
        if cfg.registered_index:
            col_r = Signal.like(col, name="s1r_col")
            v1r = Signal(name="s1r_valid")
            mask1r = Signal(N, name="s1r_dest")
            first1r = Signal(name="s1r_first")
            last1r = Signal(name="s1r_last")
            m.d.sync += [col_r.eq(col), v1r.eq(v1 & ~self.clear), mask1r.eq(mask1),
                         first1r.eq(first1), last1r.eq(last1)]
            col, v1, mask1, first1, last1 = col_r, v1r, mask1r, first1r, last1r
        # read the neighbour's row
        m.d.comb += [self.row.addr.eq(col), self.row.en.eq(v1)]
        if cfg.weighted:
            # the edge value, read beside the column index, follows it register for register
            # and enters the tree with the row
            m.d.comb += self.val.addr.eq(ptr0)
            if cfg.slices > 1:
                m.d.comb += self.val.en.eq(v0)
            value = self.val.data
            if cfg.registered_index:
                value_r = Signal(32, name="s1r_value")
                m.d.sync += value_r.eq(value)
                value = value_r
            value2 = Signal(32, name="s2_value")
            m.d.sync += value2.eq(value)
            m.d.comb += self.root.packet.value.eq(value2)
        v2 = Signal(name="s2_valid")
        mask2 = Signal(N, name="s2_dest")
        first2 = Signal(name="s2_first")
        last2 = Signal(name="s2_last")
        m.d.sync += [v2.eq(v1 & ~self.clear), mask2.eq(mask1), first2.eq(first1),
                     last2.eq(last1)]
        # the range check runs on the registered index while the row is read, and its flag is
        # registered (from the index buffer's late read data through its word and bank
        # multiplexers, a compare in the same cycle was the longest path): a bad index's row
        # still enters the tree, but the flag stops the job before anything is streamed out,
        # and the next start clears every pass, context and sum
        if cfg.registered_index:
            col2 = col          # already a register
            err_valid = v1
        else:
            col2 = Signal.like(col, name="s2_col")
            m.d.sync += col2.eq(col)
            err_valid = v2
        err = Signal(name="s3_err")
        m.d.sync += err.eq(err_valid & (col2 >= self.n_rows) & ~self.clear)
        m.d.comb += self.err.eq(err)
        # meanwhile, each group's destination context and its lane features (a context keeps
        # them from its bind, a cycle before its first neighbour can be issued, to its release,
        # after its last neighbour has arrived)
        root = self.root.packet
        slot2, sel2 = _destinations(m, cfg, self.sels, mask1, root, "s1")
        # -- stage 2: the row arrives and enters the tree --------------------------------------
        m.d.comb += [root.valid.eq(v2), root.first.eq(first2), root.last.eq(last2),
                     root.dest.eq(mask2), root.slot.eq(slot2), root.sel.eq(sel2),
                     self.root.words.eq(self.row.data),
                     self.busy.eq(v0 | v_read | v1 | v2 | err)]
        return m


def _destinations(m: Module, config: SSpmmConfig, sels, dest, root, stage: str):
    """Per group, the context among ``dest`` (at most one per group) and its lane features
    from ``sels``, registered for the packet ``root`` (a context keeps them from its bind, a
    cycle before its first neighbour can be issued, to its release, after its last neighbour
    has arrived); ``stage`` names the lookups. Returns the registers (slot, sel)."""
    N, G, L = config.contexts, config.groups, config.adder_latency
    by_context = Array(sels[n] for n in range(N))
    slot_r = Signal.like(root.slot, name="s2_slot")
    sel_r = Signal.like(root.sel, name="s2_sel")
    for g in range(G):
        slot = lowest_set(m, dest[g * L:(g + 1) * L], name=f"{stage}_slot_{g}")
        m.d.sync += [slot_r[g].eq(slot), sel_r[g].eq(by_context[g * L + slot])]
    return slot_r, sel_r


class QueuedRowReader(wiring.Component):
    """The root link's read pipeline on the shared, banked node buffer (``node_banks`` > 0).

    As :class:`RowReader`, but the feature row is asked of the
    :class:`~moagcn.hw.sspmm.crossbar.NodeCrossbar`, which may refuse it on a bank conflict:
    the issue is registered, its column index read, and the index joins a queue of
    ``QUEUE`` requests; the head asks the crossbar for its row until granted, and the row
    enters the tree the cycle after the grant (``ISSUE_TO_ROOT_SHARED`` cycles after the issue
    without a conflict). Rows leave in the order they were issued, so every context takes its
    neighbours in order. ``ready`` (from a register) lets the pass table issue only while the
    issues in flight fit the queue.

    Members
    -------
    issue : In(IssueSignature(config))
        The neighbour issued on this link (only while ``ready``).
    ready : Out(1)
        An issue this cycle has room.
    clear, n_rows, sels, idx, root, err, busy
        As :class:`RowReader`.
    node : Out(NodeRequestSignature(config))
        The request to the crossbar.
    """

    #: requests in flight (issued, not yet granted) a link holds: the issue register, the index
    #: read and the head make 3 when every request is granted at once, one more lets the link
    #: issue every cycle
    QUEUE = 4

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        N = config.contexts
        super().__init__({
            "issue": In(IssueSignature(config)), "ready": Out(1),
            "clear": In(1), "n_rows": In(w["row"] + 1),
            "sels": In(data.ArrayLayout(sel_layout(config), N)),
            "idx": Out(RamReadSignature(w["edge"], 32)),
            "node": Out(NodeRequestSignature(config)),
            "root": Out(RowLinkSignature(config, config.groups)),
            "err": Out(1), "busy": Out(1),
            **({"val": Out(RamReadSignature(w["edge"], 32))} if config.weighted else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        N, Q = cfg.contexts, self.QUEUE
        row_bits = widths(cfg)["row"]
        # the whole column index is kept: its range check must see the bits above a row id;
        # with ``weighted`` the entry's edge value waits in the queue beside it
        entry = data.StructLayout({"col": len(self.idx.data), "dest": N, "first": 1, "last": 1,
                                   **({"value": 32} if cfg.weighted else {})})
        # -- the issue, registered; then the column index read (as RowReader) ------------------
        v0 = Signal(name="s0_valid")
        ptr0 = Signal.like(self.issue.ptr, name="s0_ptr")
        e0 = Signal(entry, name="s0_entry")
        m.d.sync += [v0.eq(self.issue.valid & ~self.clear), ptr0.eq(self.issue.ptr),
                     e0.dest.eq(self.issue.dest), e0.first.eq(self.issue.first),
                     e0.last.eq(self.issue.last)]
        m.d.comb += self.idx.addr.eq(ptr0)
        if cfg.slices > 1:
            m.d.comb += self.idx.en.eq(v0)
        v1 = Signal(name="s1_valid")
        e1 = Signal(entry, name="s1_entry")
        m.d.sync += [v1.eq(v0 & ~self.clear), e1.eq(e0)]
        push = Signal(name="queue_push")
        pushed = Signal(entry, name="queue_in")
        m.d.comb += [push.eq(v1 & ~self.clear), pushed.eq(e1), pushed.col.eq(self.idx.data)]
        if cfg.weighted:
            m.d.comb += [self.val.addr.eq(ptr0), pushed.value.eq(self.val.data)]
            if cfg.slices > 1:
                m.d.comb += self.val.en.eq(v0)
        # -- the queue: a shift register, its head in entry 0 -----------------------------------
        q = [Signal(entry, name=f"queue_{i}") for i in range(Q)]
        count = Signal(range(Q + 1), name="queue_count")
        head_valid = count != 0
        grant = self.node.grant & head_valid
        m.d.comb += [self.node.valid.eq(head_valid), self.node.row.eq(q[0].col[:row_bits])]
        with m.If(self.clear):
            m.d.sync += count.eq(0)
        with m.Else():
            m.d.sync += count.eq(count + push - grant)
        for i in range(Q):
            # after a pop entry i takes entry i + 1; a push lands behind the entries kept
            kept = Mux(grant, count - 1, count)
            nxt = q[i + 1] if i + 1 < Q else q[i]
            with m.If(push & (kept == i)):
                m.d.sync += q[i].eq(pushed)
            with m.Elif(grant):
                m.d.sync += q[i].eq(nxt)
        # -- credits: issues in flight (the issue register, the index read, the queue) ---------
        inflight = Signal(range(Q + 1), name="inflight")
        with m.If(self.clear):
            m.d.sync += inflight.eq(0)
        with m.Else():
            m.d.sync += inflight.eq(inflight + (self.issue.valid & self.ready) - grant)
        m.d.comb += self.ready.eq(inflight < Q)
        # -- the grant: the row arrives next cycle; meanwhile each group's destination context
        # and its lane features, and the index's range check --------------------------------
        head = q[0]
        v2 = Signal(name="s2_valid")
        e2 = Signal(entry, name="s2_entry")
        m.d.sync += [v2.eq(grant & ~self.clear), e2.eq(head)]
        err = Signal(name="s2_err")
        m.d.sync += err.eq(grant & (head.col >= self.n_rows) & ~self.clear)
        m.d.comb += self.err.eq(err)
        root = self.root.packet
        slot2, sel2 = _destinations(m, cfg, self.sels, head.dest, root, "head")
        m.d.comb += [root.valid.eq(v2), root.first.eq(e2.first), root.last.eq(e2.last),
                     root.dest.eq(e2.dest), root.slot.eq(slot2), root.sel.eq(sel2),
                     self.root.words.eq(self.node.data),
                     self.busy.eq(v0 | v1 | head_valid | v2 | err)]
        if cfg.weighted:
            m.d.comb += root.value.eq(e2.value)
        return m


class NeighbourFetcher(wiring.Component):
    """Bind jobs to contexts, read their neighbours' rows once, multicast them down the tree.

    *Binding.* The scheduler offers one job per cycle. The fetcher binds it to a free job
    context (``L = adder_latency`` per group; the groups are tried in turn so that work
    spreads) and tells that group (``bind_*``). Consecutive jobs of one row (its feature
    chunks) form one *pass* of at most one job per group: they share the row's neighbour list,
    so every neighbour row read serves the whole pass. A pass closes when it has a member in
    every group or at its row's last job; while the row's next job waits for a free context in
    a group the pass does not use yet, the pass waits too (other passes keep fetching and
    free contexts). The chunks of one output beat go to distinct groups (see
    :class:`ContextBinder`). A context is free again once its job's last neighbour has been
    written into its local buffer.

    *Fetching.* A pass is ready when every member context has room in its local buffer
    (``space``). Each cycle up to R = ``fetch_rows`` ready passes, chosen round robin, read
    their next column index and then that neighbour's feature row, and the row goes down the
    :class:`DistributionTree` with the pass's members as destinations, marked ``first`` /
    ``last`` for the pass's first and last neighbour. ``reserve`` tells the contexts that an
    entry is on its way. A column index ``>= n_rows`` raises ``err_index`` (a one-cycle
    pulse, two cycles after the index is read).

    The blocks: a :class:`ContextBinder` (binding and pass forming), a :class:`PassTable`
    (open passes and the round-robin issue), one :class:`RowReader` per root link (index and
    row reads) and the :class:`DistributionTree`.

    Members
    -------
    jobs : In(stream.Signature(job_layout))
        The job emitter's offer (``ready``: bound this cycle).
    run, clear : In(1)
        Work (the accelerator is computing); drop every pass, binding and packet (start).
    n_rows : In
        Feature rows of the job (columns of A), for the column-index check.
    bind_valid, bind_group, bind_slot, bind_job : Out
        Context ``bind_slot`` of group ``bind_group`` takes ``bind_job``.
    reserve : Out(contexts)
        An entry was issued this cycle for these contexts.
    space : In(contexts)
        The context can take one more reserved entry.
    released : In(contexts)
        The context's last entry of its job was written this cycle.
    idx : Out(RamReadSignature(edge bits, 32)).array(R)
        Column-index read port of each root link (1-cycle latency).
    val : Out(RamReadSignature(edge bits, 32)).array(R), with ``weighted``
        Edge-value read port of each root link, read at the column index's address.
    row : Out(RamReadSignature(row bits, 32 * F)).array(R)
        Feature-row read port of each root link (1-cycle latency); ``en``: a row is read (the
        data holds its value otherwise). Without ``node_banks`` only.
    node : Out(NodeRequestSignature(config))
        With ``node_banks`` (and R = 1): the row requests to the shared node buffer's
        crossbar, in place of ``row`` (see :class:`QueuedRowReader`).
    leaf : Out(RowLinkSignature(config, 1)).array(groups, R)
        The tree's packets for group g on root link j, ``leaf[g][j]``, and their rows (see
        :class:`DistributionTree`).
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
        super().__init__({
            "jobs": In(stream.Signature(job_layout(config))),
            "run": In(1), "clear": In(1), "n_rows": In(w["row"] + 1),
            "bind_valid": Out(1), "bind_group": Out(range(G)), "bind_slot": Out(range(L)),
            "bind_job": Out(job_layout(config)),
            "reserve": Out(N), "space": In(N), "released": In(N),
            "err_index": Out(1), "busy": Out(1), "issued": Out(range(R + 1)),
            "no_context": Out(1), "no_job": Out(1),
            "idx": Out(RamReadSignature(w["edge"], 32)).array(R),
            **({"val": Out(RamReadSignature(w["edge"], 32)).array(R)} if config.weighted
               else {}),
            **({"node": Out(NodeRequestSignature(config))} if config.node_banks else
               {"row": Out(RamReadSignature(w["row"], 32 * F)).array(R)}),
            "leaf": Out(RowLinkSignature(config, 1)).array(G, R),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.binder = binder = ContextBinder(cfg)
        m.submodules.passes = passes = PassTable(cfg)
        m.submodules.tree = tree = DistributionTree(cfg)

        # -- binding: the offer goes to a free context, and into a pass -----------------------
        wiring.connect(m, wiring.flipped(self.jobs), binder.jobs)
        m.d.comb += [binder.run.eq(self.run), binder.clear.eq(self.clear),
                     binder.released.eq(self.released), self.bind_valid.eq(binder.take),
                     self.bind_group.eq(binder.group), self.bind_slot.eq(binder.slot),
                     self.bind_job.eq(self.jobs.payload),
                     self.no_context.eq(binder.no_context), self.no_job.eq(binder.no_job)]
        wiring.connect(m, binder.form, passes.form)
        # each context's lane features, from its bind to its next (the readers look them up)
        sels = Signal(data.ArrayLayout(sel_layout(cfg), cfg.contexts), name="ctx_sel")
        for n in range(cfg.contexts):
            with m.If(binder.take & (binder.form.ctx == n)):
                m.d.sync += sels[n].eq(self.jobs.payload.sel)

        # -- issue: ready passes read their next neighbour, one per root link ------------------
        issue_ok = self.run
        m.d.comb += [passes.clear.eq(self.clear),
                     passes.space.eq(self.space),
                     self.reserve.eq(passes.reserve), self.issued.eq(passes.issued)]
        readers = []
        for j in range(cfg.fetch_rows):
            reader = QueuedRowReader(cfg) if cfg.node_banks else RowReader(cfg)
            m.submodules[f"reader_{j}"] = reader
            readers.append(reader)
            m.d.comb += [reader.clear.eq(self.clear), reader.n_rows.eq(self.n_rows),
                         reader.sels.eq(sels)]
            wiring.connect(m, passes.issue[j], reader.issue)
            wiring.connect(m, reader.idx, wiring.flipped(self.idx[j]))
            if cfg.weighted:
                wiring.connect(m, reader.val, wiring.flipped(self.val[j]))
            if cfg.node_banks:
                # the shared node buffer: issue only while the reader's queue has room
                wiring.connect(m, reader.node, wiring.flipped(self.node))
            else:
                wiring.connect(m, reader.row, wiring.flipped(self.row[j]))
            wiring.connect(m, reader.root, tree.root[j])

        m.d.comb += passes.run.eq(issue_ok & readers[0].ready if cfg.node_banks else issue_ok)

        # -- multicast: the tree's leaves are the fetcher's ---------------------------------------
        m.d.comb += tree.clear.eq(self.clear)
        for g in range(cfg.groups):
            for j in range(cfg.fetch_rows):
                wiring.connect(m, tree.leaf[g][j], wiring.flipped(self.leaf[g][j]))

        m.d.comb += [self.err_index.eq(Cat(*[r.err for r in readers]).any()),
                     self.busy.eq(binder.form.forming | passes.busy
                                  | Cat(*[r.busy for r in readers]).any() | tree.busy)]
        return m
