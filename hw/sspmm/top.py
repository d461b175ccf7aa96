"""The S-SpMM accelerator top level: buffers, scheduler, aggregation groups, output stream."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from amaranth.hdl import Array, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.banks import LoadBanks, banked_depth, job_loads
from moagcn.hw.common.bits import bits_for, popcount, wire
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.loader import BufferLoader
from moagcn.hw.common.ram import Ram, RamReadSignature
from moagcn.hw.sspmm.buffers import FeatureLoader, OutputStream, WordReader
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.crossbar import NodeCrossbar, bank_bits, bank_rows
from moagcn.hw.sspmm.fetch import NeighbourFetcher
from moagcn.hw.sspmm.group import AggregationGroup
from moagcn.hw.sspmm.layouts import chunks, widths
from moagcn.hw.sspmm.protocol import COUNTER_BITS, COUNTERS, idle_latency, index_beat_words
from moagcn.hw.sspmm.scheduler import JobEmitter, JobScheduler, RowDispatcher, owner_layout


class SSpmmAccelerator(wiring.Component):
    """``Z = (A H) ⊙ M`` on binary32 data (MixGCN Eq. 4).

    Use: after reset, set ``n_features`` and fill the buffers through the load streams (row
    pointers, column indices, mask rows, feature rows; any order, each from its start), set
    ``n_rows`` and ``n_cols``, pulse ``start``, then take beats of Z from ``out`` until
    ``done``. Status and counters describe that job until the next start. Jobs follow one
    another without a reset: with ``load_banks`` 2 the next job's loads (and its scalars,
    which the running job sampled at its start) may go in while a job runs, into the other
    half of the buffers; with one bank they wait for ``done``. A job after a job (a stopped
    one included: its queued rows are flushed before its ``done``) runs cycle for cycle as it
    would after a reset.

    Members
    -------
    indptr_in : In(stream.Signature(32 * load_width))
        Row pointers ``indptr[0..n_rows]``, ``load_width`` per beat (last beat zero-padded).
    indices_in : In(stream.Signature(32 * load_width)), with ``weighted`` 64 * load_width
        Column indices, each row sorted ascending (the driver sorts), ``load_width`` per beat.
        With ``weighted``, each beat's ``load_width`` indices are followed by their edge
        values (binary32, words ``load_width .. 2 load_width - 1`` of the beat), which go to
        the edge-value buffer at the indices' addresses.
    mask_in : In(stream.Signature(max_feature_width))
        One output-mask row per beat (bit f: compute feature f).
    feat_in : In(stream.Signature(32 * load_width))
        Feature rows, ``ceil(n_features / load_width)`` beats per row (word 0 lowest).
    out : Out(stream.Signature(32 * lanes))
        Z compressed: per row in order, its computed elements (the unmasked features below
        ``n_features``, in feature order; none for a row without neighbours) in ``ceil(k /
        lanes)`` beats, the last one zero-padded. Masked elements are +0 and never move; the
        host, which has the mask, puts the words back in place.
    n_rows, n_cols, n_features, start : In
        Job size: rows of A and Z, columns of A (the feature rows loaded; a column index must
        be below it), features (all sampled at ``start``; ``n_features`` also sets the
        feature-row beats of the job loading), and the start pulse (taken when not
        ``busy``). A tile of a larger job has only its output rows and the feature rows its
        entries name: no padding rows.
    busy, done : Out(1)
        Computing or streaming out; finished (also after an error).
    err_index, err_indptr : Out(1)
        A column index was >= n_cols; a row pointer decreased or went past the loaded indices.
    cycles_total, cycles_load, cycles_compute, cycles_output : Out(32)
        Cycles from start to done; cycles with a load transfer before the start (until the
        first start, so far); aggregation; output streaming.
    cycles_load_hidden : Out(32)
        Of ``cycles_load``, those while the job before was busy (two load banks).
    stall_no_job, stall_no_context, stall_output : Out(32)
        Aggregation cycles in which a context was free but the scheduler offered no job; in
        which a job was offered but no context was free; output cycles waiting on
        ``out.ready``.
    bubbles : Out(32)
        Turns (summed over the groups) in which a context in the middle of a job had no
        neighbour row in its local buffer yet.
    rows_fetched : Out(32)
        Neighbour feature rows the slices fetched (each multicast to all the contexts of its
        pass).
    rows_read : Out(32)
        Rows read from the node buffer: ``rows_fetched`` with a copy per slice; with
        ``node_banks``, fewer where slices asking for the same row in the same cycle shared
        one read.
    stall_bank : Out(32)
        With ``node_banks``: slice-cycles in which a slice's row request was refused on a
        bank conflict (0 otherwise).
    """

    def __init__(self, config: SSpmmConfig = SSpmmConfig()):
        if not config.simulate:
            raise ValueError("this configuration is for the cycle model only; it cannot be built")
        if config.max_feature_width % config.load_width:
            raise ValueError(f"max_feature_width={config.max_feature_width} must be a multiple "
                             f"of load_width={config.load_width}")
        self.config = config
        w = widths(config)
        F = config.max_feature_width
        members = {
            "indptr_in": In(stream.Signature(32 * config.load_width)),
            "indices_in": In(stream.Signature(32 * index_beat_words(config))),
            "mask_in": In(stream.Signature(F)),
            "feat_in": In(stream.Signature(32 * config.load_width)),
            "out": Out(stream.Signature(32 * config.lanes)),
            "n_rows": In(w["row"] + 1),
            "n_cols": In(w["row"] + 1),
            "n_features": In(range(F + 1)),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "err_index": Out(1),
            "err_indptr": Out(1),
            **counter_members(COUNTERS, COUNTER_BITS),
        }
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        buf = self._buffers(m)
        running = Signal()      # aggregation
        # the cycle after a job stopped on an error: the row side of the engine (scheduler,
        # dispatcher, job emitters, which walk and queue rows on their own) returns to its
        # reset state, so rows the stopped job had queued never reach the next job; ``done``
        # follows. The fetchers and groups need not: the next start's clear drops their state
        flush = Signal()
        beat_port = RamReadSignature(buf.out[0][0].addr_bits, 32 * cfg.lanes)
        m.submodules.output = output = OutputStream(cfg, beat_port, buf.count.read_signature,
                                                    owner_layout(cfg))
        streaming = output.busy
        m.d.comb += self.busy.eq(running | streaming | flush)
        # a job may start whenever none runs: after a reset, or after the last job's done
        start = wire(m, self.start & ~self.busy, name="start_job")
        banks = LoadBanks(m, cfg.load_banks, start, self.busy)

        n_edges_loaded, load_transfer = self._load(m, buf, banks)
        # -- job size, sampled at start (the next job's may be set while this one runs) ---------
        n_rows = Signal.like(self.n_rows)
        n_cols = Signal.like(self.n_cols)
        n_features = Signal.like(self.n_features)
        n_edges = Signal.like(n_edges_loaded, name="n_edges")
        with m.If(start):
            m.d.sync += [n_rows.eq(self.n_rows), n_cols.eq(self.n_cols),
                         n_features.eq(self.n_features), n_edges.eq(n_edges_loaded)]
        engine = self._engine(m, buf, banks, start, flush, running, n_rows, n_cols,
                              n_features, n_edges)

        # -- output stream: each row's computed elements only, compressed ----------------------
        m.d.comb += output.n_rows.eq(n_rows)
        beat_data = [self._read_beat(m, buf, k, output.beats) for k in range(cfg.slices)]
        if buf.owner is None:
            m.d.comb += output.beats.data.eq(beat_data[0])
        elif output.merge:
            # a row may be in pieces on several slices: the output stream reads them all
            owner = buf.owner.read[0]
            m.d.comb += [owner.addr.eq(output.counts.addr), output.owner.eq(owner.data)]
            m.d.comb += [output.banks[k].eq(d) for k, d in enumerate(beat_data)]
        else:
            # every bank reads the same entry; the row's owner (read with its count, held
            # while the row streams) picks the bank
            owner = buf.owner.read[0]
            m.d.comb += [owner.addr.eq(output.counts.addr), output.owner.eq(owner.data),
                         output.beats.data.eq(Array(beat_data)[output.row_owner])]
        wiring.connect(m, output.counts, buf.count.read[0])
        wiring.connect(m, output.out, wiring.flipped(self.out))

        self._sequence(m, start, running, flush, engine, output)
        self._count(m, start, running, streaming, load_transfer, engine, output)
        return m

    def _buffers(self, m: Module) -> "_Buffers":
        """The on-chip buffers."""
        cfg = self.config
        F, P, LW, G = cfg.max_feature_width, cfg.lanes, cfg.load_width, cfg.groups
        R = cfg.fetch_rows
        # row pointers and column indices are stored in rows of one load beat (LW words): one
        # write port, so each buffer is a plain block RAM; a read takes the row, then the word.
        # One read port for the pointers (the scheduler walks the rows, reading one new pointer
        # per row); the fetcher reads R column indices and R neighbour rows per cycle
        # with two load banks the buffers the streams fill are ping-pong pairs: a half per job
        # (the bank bit above the word address)
        depth = partial(banked_depth, cfg.load_banks)
        half = {"indptr": -(-(cfg.max_nodes + 1) // LW), "index": -(-cfg.max_edges // LW)}
        indptr = Ram(32 * LW, depth(half["indptr"]), read_ports=1)
        S = cfg.slices
        # every slice reads its own copy of the column indices and feature rows (written
        # together while loading): each copy keeps one write port and R read ports, as a block
        # RAM has, whatever S. A word is never read in the cycle it is written (the fetcher
        # reads the job's half from the cycle after its start; loads write the other half, or
        # with one bank wait for the job, and their writes are registered, landing by the
        # start cycle: ``_write_all``): built without collisions, no bypass logic lies between
        # the block RAM's read data and the reader's column register (it was the longest path
        # with two slices)
        # (with one slice, one copy beside its fetcher, the buffers keep their bypass and their
        # unregistered writes: ECP5-85k at the default fields measured 100.35 / 91.87 MHz with
        # these changes at seeds 1 / 2, 99.13 / 103.24 without, the seed-2 path elsewhere)
        index = [Ram(32 * LW, depth(half["index"]), read_ports=R, collisions=S == 1)
                 for _ in range(S)]
        # with ``weighted``, the edge values beside them: the same rows of LW words, the same
        # addresses and read ports (one copy per slice), written from the same index beats
        values = [Ram(32 * LW, depth(half["index"]), read_ports=R, collisions=S == 1)
                  for _ in range(S)] if cfg.weighted else None
        mask = Ram(F, depth(cfg.max_nodes), read_ports=1)
        # each row's number of computed elements, written by the scheduler as it fetches the
        # row, read by the output stream (which thus needs neither the mask nor the pointers)
        count = Ram(len(Signal(range(F + 1))), cfg.max_nodes)
        # a word of the feature rows is never read in the cycle it is written (a job reads its
        # half, ``en`` only when the fetcher reads; loads write the other half, or wait for
        # the job with one bank): built without read/write collisions, the block RAM needs no
        # bypass logic between the column index read and the row read
        if cfg.node_banks:
            # one node buffer shared by the slices: row r in bank r mod B, read through the
            # crossbar (one read port per bank)
            node = [Ram(32 * F, depth(bank_rows(cfg)), read_ports=1, granularity=32 * LW,
                        collisions=False) for _ in range(cfg.node_banks)]
        else:
            node = [Ram(32 * F, depth(cfg.max_nodes), read_ports=R, granularity=32 * LW,
                        collisions=False) for _ in range(S)]
        # the output buffer holds each row *compressed*: chunk c = the sums of the row's unmasked
        # features c*W .. c*W + W - 1 (in feature order), written whole by the job of chunk c.
        # An entry is one output beat (P = G*W words, i.e. G chunks): row r takes entries
        # r*beats .. r*beats + beats - 1, so the output stream reads beat by beat and no row is
        # ever held in registers. One bank per slice, and in it one RAM of W words per group:
        # the binder puts the G chunks of a beat on G distinct groups, so group g writes only
        # its own RAM (one write port each: block RAM), and a lane map (one field per chunk of
        # a beat, written at the bind) says which group's RAM holds which chunk. With S > 1 an
        # owner table says which slice's bank holds a row (written by the dispatcher)
        beats = -(-chunks(cfg) // G)
        W, g_bits = cfg.group_lanes, cfg.group_bits
        # The groups write them while a job computes, the output stream reads them (only while
        # streaming) after: never both at one word in one cycle, so no collision logic (its
        # address compare, from the stream's next beat, was a longest path)
        out = [[Ram(32 * W, cfg.max_nodes * beats, collisions=False) for _ in range(G)]
               for _ in range(S)]
        lane_map = [Ram(G * g_bits, cfg.max_nodes * beats, granularity=g_bits, collisions=False)
                    for _ in range(S)] if G > 1 else None
        owner = Ram(owner_layout(cfg).size, cfg.max_nodes) if S > 1 else None
        m.submodules.indptr_buf = indptr
        m.submodules.mask_buf = mask
        m.submodules.count_buf = count
        for k in range(S):
            tag = "" if S == 1 else f"_s{k}"
            m.submodules[f"index_buf{tag}"] = index[k]
            if values is not None:
                m.submodules[f"value_buf{tag}"] = values[k]
            if not cfg.node_banks:
                m.submodules[f"node_buf{tag}"] = node[k]
            for g in range(G):
                m.submodules[f"out_buf{tag}" + (f"_g{g}" if G > 1 else "")] = out[k][g]
            if lane_map is not None:
                m.submodules[f"lane_map{tag}"] = lane_map[k]
        if cfg.node_banks:
            for b, ram in enumerate(node):
                m.submodules[f"node_bank{b}"] = ram
        if owner is not None:
            m.submodules.owner_buf = owner
        return _Buffers(indptr, index, mask, count, node, half, out, lane_map, owner, beats,
                        cfg.group_bits, values)

    def _read_beat(self, m: Module, buf: "_Buffers", k: int, port):
        """Slice ``k``'s output beat at ``port``'s address: its groups' RAMs read together,
        each chunk's words taken from the group that computed it (the lane map, read with the
        words)."""
        G = self.config.groups
        rams = buf.out[k] + ([buf.lane_map[k]] if buf.lane_map is not None else [])
        for ram in rams:
            m.d.comb += [ram.read[0].addr.eq(port.addr), ram.read[0].en.eq(port.en)]
        words = [ram.read[0].data for ram in buf.out[k]]
        if G == 1:
            return words[0]
        fields = buf.lane_map[k].read[0].data
        return Cat(*[Array(words)[fields.word_select(i, self.config.group_bits)]
                     for i in range(G)])

    def _load(self, m: Module, buf: "_Buffers", banks: LoadBanks):
        """Fill each buffer's load half from its load stream, from its start (each start
        begins the next job's loads at word 0).

        Word k of a pointer or index beat goes to entry count + k (the host pads the last beat;
        padding lies past ``indptr[-1]`` and is never read). Returns the number of column
        indices loaded and whether any stream moved a beat this cycle.
        """
        cfg = self.config
        LW = cfg.load_width
        w = widths(cfg)
        streams = (self.indptr_in, self.indices_in, self.mask_in, self.feat_in)
        loaders = {
            "indptr_load": (BufferLoader(32 * LW, bits_for(buf.half["indptr"]), w["row"] + 2,
                                         step=LW, capacity=buf.half["indptr"], overflow="drop"),
                            self.indptr_in, [buf.indptr]),
            "index_load": (BufferLoader(32 * index_beat_words(cfg), bits_for(buf.half["index"]),
                                        w["edge"] + 1, step=LW, capacity=buf.half["index"],
                                        overflow="drop"),
                           self.indices_in, buf.index),
            "mask_load": (BufferLoader(cfg.max_feature_width, w["row"], w["row"] + 1),
                          self.mask_in, [buf.mask]),
        }
        for name, (loader, port, rams) in loaders.items():
            m.submodules[name] = loader
            m.d.comb += [loader.enable.eq(banks.loading), loader.clear.eq(banks.swap)]
            wiring.connect(m, wiring.flipped(port), loader.beats)
            if name == "index_load" and cfg.weighted:
                # a beat's low LW words are its indices, its high LW words their values
                _write_all(m, loader.write, rams, banks, word=slice(0, 32 * LW),
                           registered=cfg.slices > 1)
                _write_all(m, loader.write, buf.values, banks, word=slice(32 * LW, 64 * LW),
                           registered=cfg.slices > 1)
            else:
                # the column indices: read only after a start (``at_start=False``); registered
                # with several slices (see ``_buffers``)
                _write_all(m, loader.write, rams, banks,
                           registered=name == "index_load" and cfg.slices > 1)
        m.submodules.feat_load = feat = FeatureLoader(cfg)
        m.d.comb += [feat.enable.eq(banks.loading), feat.clear.eq(banks.swap),
                     feat.n_features.eq(self.n_features)]
        wiring.connect(m, wiring.flipped(self.feat_in), feat.beats)
        if cfg.node_banks:
            _write_banked(m, feat.write, buf.node, banks, bank_bits(cfg),
                          bits_for(bank_rows(cfg)))
        else:
            _write_all(m, feat.write, buf.node, banks)
        load_transfer = Cat(*[p.valid & banks.loading for p in streams]).any()
        return loaders["index_load"][0].count, load_transfer

    def _engine(self, m: Module, buf: "_Buffers", banks: LoadBanks, start, flush, running,
                n_rows, n_cols, n_features, n_edges) -> "_Engine":
        """The scheduler, the row dispatcher and the slices (job emitter, neighbour fetcher,
        aggregation groups), on the job's half of the buffers."""
        cfg = self.config
        LW, S = cfg.load_width, cfg.slices
        sched = JobScheduler(cfg)
        m.submodules.scheduler = ResetInserter({"sync": flush})(sched)
        m.submodules.ptr_read = ptr_read = WordReader(LW, len(sched.ptr.addr),
                                                      bits_for(buf.half["indptr"]))
        wiring.connect(m, sched.ptr, ptr_read.word)
        banks.connect_reader(m, ptr_read.row, buf.indptr.read[0])
        banks.connect_reader(m, sched.mask, buf.mask.read[0])
        count_write = buf.count.write[0]
        m.d.comb += [count_write.addr.eq(sched.count_row), count_write.data.eq(sched.count),
                     count_write.en.eq(sched.count_en & running),
                     sched.start.eq(start), sched.n_rows.eq(n_rows),
                     sched.n_features.eq(n_features), sched.n_edges.eq(n_edges)]
        # the engine's state is dropped in the cycle after start (from a register, so that the
        # simulators need not re-evaluate it whenever the inputs change); it works from the next
        clear = Signal()
        m.d.sync += clear.eq(start)
        # ``running & ~clear``, as a register of its own (set in :meth:`_sequence`): ``running``
        # drives the write enables and counters as well, and its fan-out into every group's
        # ring and credit counts was a longest path
        work = Signal(name="work")
        if S == 1:
            row_streams, dispatcher = [sched.rows], None
        else:
            dispatcher = RowDispatcher(cfg)
            m.submodules.dispatcher = ResetInserter({"sync": flush})(dispatcher)
            wiring.connect(m, sched.rows, dispatcher.rows)
            m.d.comb += dispatcher.start.eq(start)
            wiring.connect(m, dispatcher.owner, buf.owner.write[0])
            row_streams = list(dispatcher.slice_rows)
        slices = [self._slice(m, k, rows, buf, banks, flush, work, clear, running, n_cols)
                  for k, rows in enumerate(row_streams)]
        crossbar = None
        if cfg.node_banks:
            m.submodules.node_crossbar = crossbar = NodeCrossbar(cfg)
            m.d.comb += crossbar.clear.eq(clear)
            for k, sl in enumerate(slices):
                wiring.connect(m, sl.fetcher.node, crossbar.req[k])
            for b, ram in enumerate(buf.node):
                banks.connect_reader(m, crossbar.bank[b], ram.read[0], at_start=False)
        return _Engine(sched, dispatcher, slices, clear, crossbar, work)

    def _slice(self, m: Module, k: int, rows, buf: "_Buffers", banks: LoadBanks, flush, work,
               clear, running, n_cols) -> "_Slice":
        """Slice ``k``: its job emitter on its row stream, its fetcher on its read ports of
        the index and node buffers, its groups on its write ports of the output buffer."""
        cfg = self.config
        LW, R = cfg.load_width, cfg.fetch_rows
        tag = "" if cfg.slices == 1 else f"_s{k}"
        emitter = JobEmitter(cfg)
        m.submodules[f"emitter{tag}"] = ResetInserter({"sync": flush})(emitter)
        wiring.connect(m, rows, emitter.rows)
        m.submodules[f"fetcher{tag}"] = fetcher = NeighbourFetcher(cfg)
        wiring.connect(m, emitter.jobs, fetcher.jobs)
        m.d.comb += [fetcher.run.eq(work), fetcher.clear.eq(clear), fetcher.n_rows.eq(n_cols)]
        # (the fetcher issues from the cycle after the clear, never in a start cycle: its reads
        # take the job's half from the register)
        for j in range(R):
            index_read = WordReader(LW, len(fetcher.idx[j].addr), bits_for(buf.half["index"]))
            m.submodules[f"index_read{tag}_{j}"] = index_read
            wiring.connect(m, fetcher.idx[j], index_read.word)
            banks.connect_reader(m, index_read.row, buf.index[k].read[j], at_start=False)
            if cfg.weighted:
                # the edge value at the column index's address, on the value buffer's port j
                value_read = WordReader(LW, len(fetcher.val[j].addr),
                                        bits_for(buf.half["index"]))
                m.submodules[f"value_read{tag}_{j}"] = value_read
                wiring.connect(m, fetcher.val[j], value_read.word)
                banks.connect_reader(m, value_read.row, buf.values[k].read[j], at_start=False)
            if not cfg.node_banks:
                banks.connect_reader(m, fetcher.row[j], buf.node[k].read[j], at_start=False)
        groups = [self._group(m, k, g, tag, fetcher, buf, work, clear, running)
                  for g in range(cfg.groups)]
        if buf.lane_map is not None:
            # the lane map: the chunk's field of its beat takes the group it is bound to
            job = fetcher.bind_job
            write = buf.lane_map[k].write[0]
            m.d.sync += [write.addr.eq(buf.entry(job.row, job.chunk)),
                         write.data.eq(fetcher.bind_group.replicate(cfg.groups)),
                         write.en.eq(Mux(fetcher.bind_valid & running,
                                         1 << job.chunk[:cfg.group_bits], 0))]
        return _Slice(emitter, fetcher, groups)

    def _group(self, m: Module, k: int, g: int, tag: str, fetcher: NeighbourFetcher,
               buf: "_Buffers", work, clear, running) -> AggregationGroup:
        """Aggregation group ``g`` of slice ``k``: its contexts' bindings and neighbour rows
        from the slice's fetcher, its chunks into its own RAM of the output buffer."""
        cfg = self.config
        L = cfg.adder_latency
        m.submodules[f"group{tag}_{g}"] = grp = AggregationGroup(cfg)
        contexts = slice(g * L, (g + 1) * L)
        m.d.comb += [grp.bind_valid.eq(fetcher.bind_valid & (fetcher.bind_group == g)),
                     grp.bind_slot.eq(fetcher.bind_slot), grp.bind_job.eq(fetcher.bind_job),
                     grp.reserve.eq(fetcher.reserve[contexts]),
                     fetcher.space[contexts].eq(grp.space),
                     fetcher.released[contexts].eq(grp.released),
                     grp.run.eq(work), grp.clear.eq(clear)]
        for j in range(cfg.fetch_rows):
            wiring.connect(m, fetcher.leaf[g][j], grp.leaf[j])
        # chunk c of row r goes to entry r * beats + c / G of the group's own RAM
        write = buf.out[k][g].write[0]
        m.d.comb += [write.addr.eq(buf.entry(grp.wr_addr, grp.wr_chunk)),
                     write.data.eq(grp.wr_data), write.en.eq(grp.wr_en & running)]
        return grp

    def _sequence(self, m: Module, start, running, flush, engine: "_Engine",
                  output: OutputStream):
        """Aggregate from start until the engine is idle, then stream out; stop at an error,
        and ``flush`` the engine in the next cycle, before ``done``. A start clears ``done``
        and the flags of the job before."""
        sched, slices = engine.scheduler, engine.slices
        # (an index check of the job before, still in flight in the clear cycle, is not this
        # job's)
        err_index = Cat(*[s.fetcher.err_index for s in slices]).any() & ~engine.clear
        error = err_index | sched.err_indptr
        idle = (sched.done & (engine.dispatcher.idle if engine.dispatcher is not None else 1)
                & Cat(*[s.emitter.done for s in slices]).all()
                & ~Cat(*[s.fetcher.busy for s in slices]).any()
                & ~Cat(*[g.busy for s in slices for g in s.groups]).any())
        if idle_latency(self.config):
            # seen a cycle later, from a register (the groups' and fetchers' busy flags through
            # this AND into the output stream's start, which clears its registers, were a
            # longest path): an engine idle while running stays idle, nothing new enters it
            seen = Signal(name="engine_idle")
            m.d.sync += seen.eq(idle & running & ~start)
            idle = seen
        # ``work`` is ``running & ~clear`` one cycle ahead: running next cycle, and no start now
        m.d.sync += engine.work.eq(~start & running & ~error & ~idle)
        with m.If(start):
            m.d.sync += [running.eq(1), self.done.eq(0), self.err_index.eq(0),
                         self.err_indptr.eq(0)]
            with m.If(self.n_rows == 0):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(running):
            with m.If(error):
                # a bad job stops here: flags set, nothing streamed, never a hang
                m.d.sync += [running.eq(0), flush.eq(1)]
            with m.Elif(idle):
                m.d.sync += running.eq(0)
        with m.If(flush):
            m.d.sync += [flush.eq(0), self.done.eq(1)]
        m.d.comb += output.start.eq(running & ~error & idle)
        with m.If(output.done):
            m.d.sync += self.done.eq(1)
        with m.If(running & err_index):
            m.d.sync += self.err_index.eq(1)
        with m.If(running & sched.err_indptr):
            m.d.sync += self.err_indptr.eq(1)

    def _count(self, m: Module, start, running, streaming, load_transfer, engine: "_Engine",
               output: OutputStream):
        """The status counters of the job that started last (events of all slices summed).
        They start over in the cycle after the start (no event happens in the start cycle
        itself), from a register, so the start pulse, which comes from an input, does not fan
        out to every counter bit."""
        restart = Signal(name="counters_restart")
        m.d.sync += restart.eq(start)
        slices = engine.slices
        sched_done = engine.scheduler.done
        if engine.dispatcher is not None:
            sched_done = sched_done & engine.dispatcher.idle
        # a slice's context was free and no job came although rows were still to come to it
        no_job = [s.fetcher.no_job & ~(sched_done & s.emitter.done) for s in slices]
        events = [c for c in COUNTERS if not c.startswith("cycles_load")]
        xbar = engine.crossbar
        if xbar is None:
            # every slice reads its own copy: each row fetched is a row read, never refused
            events = [c for c in events if c not in ("rows_read", "stall_bank")]
            m.d.comb += [self.rows_read.eq(self.rows_fetched), self.stall_bank.eq(0)]
        # the rows issued, counted a cycle later: the pass table's picks through their
        # population count into the counter's adder were a longest path (the last issue of a
        # job comes many cycles before its end, so the job's count is the same)
        fetched = Signal(range(self.config.fetch_rows * len(slices) + 1), name="rows_fetched_now")
        m.d.sync += fetched.eq(sum(s.fetcher.issued for s in slices))
        count_events(m, counters_of(self, events), {
            "cycles_total": running | streaming,
            "cycles_compute": running,
            "cycles_output": streaming,
            "stall_no_job": popcount(m, Cat(*no_job)),
            "stall_output": output.stall,
            "stall_no_context": popcount(m, Cat(*[s.fetcher.no_context for s in slices])),
            "bubbles": popcount(m, Cat(*[g.bubble for s in slices for g in s.groups])),
            "rows_fetched": fetched,
            **({} if xbar is None else {"rows_read": xbar.reads, "stall_bank": xbar.refused}),
        }, restart=restart)
        # the load cycles before the job's start, and those of them beside the job before
        job_loads(m, start, self.busy, load_transfer, self.cycles_load, self.cycles_load_hidden)


def _write_banked(m: Module, port, rams, banks: LoadBanks, bits: int, addr_bits: int) -> None:
    """Drive the banks of the shared node buffer from one writer ``port``: row r goes to bank
    ``r mod len(rams)`` at ``r div len(rams)``, in the half the streams fill."""
    # the row within its bank, as wide as the crossbar's bank address (at least one bit, so
    # that the load half's bit lands where the reads put it, even with one row per bank)
    within = Signal(addr_bits, name="node_load_row")
    m.d.comb += within.eq(port.addr >> bits)
    for b, ram in enumerate(rams):
        w = ram.write[0]
        hit = (port.addr[:bits] == b) if bits else 1
        m.d.comb += [w.addr.eq(banks.load_addr(within)), w.data.eq(port.data),
                     w.en.eq(Mux(hit, port.en, 0))]


def _write_all(m: Module, port, rams, banks: LoadBanks, word: slice | None = None,
               registered: bool = False) -> None:
    """Drive the first write port of every RAM in ``rams`` from one writer ``port``, in the
    half the streams fill (``word``: only those bits of its data, e.g. a beat's values).

    ``registered``: the write reaches the RAMs a cycle after its beat was taken (address,
    half, data and enable from registers), for buffers whose readers never read in a start
    cycle: a beat is never taken in the start cycle, so the last one before a start is
    written by the start cycle, and read no earlier than the cycle after. The enable then
    comes from a register, not through ``start`` from ``busy`` and the output stream (with
    two slices that path crossed the die to both slices' copies)."""
    data = port.data if word is None else port.data[word]
    addr, en = banks.load_addr(port.addr), port.en
    if registered:
        addr_r = Signal(len(addr), name="load_write_addr_r")
        data_r = Signal(len(data), name="load_write_data_r")
        en_r = Signal(len(en), name="load_write_en_r")
        m.d.sync += [addr_r.eq(addr), data_r.eq(data), en_r.eq(en)]
        addr, data, en = addr_r, data_r, en_r
    for ram in rams:
        w = ram.write[0]
        m.d.comb += [w.addr.eq(addr), w.data.eq(data), w.en.eq(en)]


@dataclass
class _Buffers:
    """The accelerator's RAMs (see :meth:`SSpmmAccelerator._buffers`)."""

    indptr: Ram     # row pointers, load_width per row
    index: list     # column indices, load_width per row: one copy per slice
    mask: Ram       # output-mask rows
    count: Ram      # computed elements per row
    node: list      # feature rows: one copy per slice, or the banks of a shared one
    half: dict      # rows of one load half of the row-pointer and index buffers
    out: list       # compressed output rows, ``beats`` entries each: per slice, per group
    lane_map: list | None   # per slice (G > 1): the group holding each chunk of each entry
    owner: Ram | None   # the slice whose bank holds each row (S > 1)
    beats: int
    group_bits: int
    values: list | None = None  # edge values beside the indices (weighted): one copy per slice

    def entry(self, row, chunk):
        """The output entry (beat) that holds chunk ``chunk`` of row ``row``."""
        return row * self.beats + (chunk >> self.group_bits)


@dataclass
class _Slice:
    """One slice's compute blocks (see :meth:`SSpmmAccelerator._slice`)."""

    emitter: JobEmitter
    fetcher: NeighbourFetcher
    groups: list


@dataclass
class _Engine:
    """The compute blocks (see :meth:`SSpmmAccelerator._engine`)."""

    scheduler: JobScheduler
    dispatcher: RowDispatcher | None
    slices: list
    clear: Signal       # the cycle after start: the fetchers and groups drop their state
    crossbar: NodeCrossbar | None   # the shared node buffer's reads (node_banks > 0)
    work: Signal        # running and not the clear cycle: the fetchers and groups work
