"""The one driver: any accelerator spec on its model or on its RTL in any simulator.

``Driver(spec, config, device, simulator).run(job)`` checks the job once, splits it once into
parts that fit the buffers (:meth:`~moagcn.core.spec.AcceleratorSpec.split`), and then

- ``device="model"``: the spec's bit-exact golden model gives the output (on the whole job:
  tiling never changes a result) and its cycle model the cycles of every part;
- ``device="rtl"``: every part is packed into stream beats, run on the simulated top level,
  checked for error flags and unpacked; the hardware's own counters give the cycles.

Simulators: ``verilator`` runs the lean harness (:mod:`moagcn.sim.rtl.lean`: no cocotb, Python
asleep while the design runs) unless a waveform, a mid-job reset or ``per_cycle`` asks for the
per-cycle cocotb testbench; ``icarus`` (cocotb) and ``pysim`` (Amaranth) run that testbench
(:func:`moagcn.sim.rtl.stream_tb.stream_job`) too. On a design that restarts without a reset
(``StreamProtocol.restartable``) the parts of a job, and the jobs of :meth:`Driver.run_many`,
run back to back after one reset (``run_lean_jobs`` or ``stream_jobs``), and where it has
ping-pong load buffers each part's loads overlap the part before, in the RTL and in the model
(:func:`~moagcn.core.spec.overlap_loads`). The result's :class:`~moagcn.core.counters.Counters`
is the same type on every path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.names import SIMULATORS
from moagcn.core.spec import AcceleratorSpec, Packed, back_to_back
from moagcn.errors import SimulationError, UserError
from moagcn.sim.rtl.stream_tb import int_words, stream_job, stream_jobs

#: what a driver computes on
DRIVER_DEVICES = ("model", "rtl")


@dataclass
class Result:
    """The output of one job, its counters, and (RTL) the hardware registers as read."""

    output: np.ndarray
    counters: Counters
    device: str
    simulator: str | None = None
    #: the top level's counters and flags, summed over the parts (empty on the model)
    raw: dict = field(default_factory=dict)

    @property
    def tiles(self) -> int:
        """Accelerator jobs the job ran as (1 when it fits the buffers)."""
        return self.counters.tiles


class _Prepared(NamedTuple):
    """A checked job as the driver runs it (:meth:`Driver._prepare`)."""

    job: Any
    run_job: Any
    merge: Any
    parts: list
    counters: Counters


def _part_waves(waves, k: int, parts: int):
    """The waveform file of part ``k``: ``FILE.tileK.SUFFIX`` when there are several."""
    if waves is None or parts == 1:
        return waves
    path = Path(waves)
    return path.with_name(f"{path.stem}.tile{k}{path.suffix}")


class Driver:
    """Run jobs of one spec and configuration on one device (and simulator)."""

    def __init__(self, spec: AcceleratorSpec, config: Any, device: str = "rtl",
                 simulator: str = "verilator"):
        if device not in DRIVER_DEVICES:
            raise UserError(f"device {device!r} cannot run an accelerator job; choose one of "
                            f"{', '.join(DRIVER_DEVICES)}")
        if device == "rtl":
            if simulator not in SIMULATORS:
                raise UserError(f"unknown simulator {simulator!r}; choose one of "
                                f"{', '.join(SIMULATORS)}")
            if not spec.simulable(config):
                raise UserError(f"this {spec.name} configuration is for the cycle model only "
                                "(too large to simulate); use --device model, another preset, "
                                f"or `moagcn {spec.name} estimate` for the cycles alone")
        self.spec = spec
        self.config = config
        self.device = device
        self.simulator = simulator if device == "rtl" else None

    def run(self, job, *, checked: bool = False, idle_every: int = 0, stall_every: int = 0,
            waves=None, reset_after: int | None = None, per_cycle: bool = False,
            progress: bool = False, _label: str = "") -> Result:
        """Run ``job`` (a job of the spec) and return its output and counters.

        ``idle_every`` / ``stall_every``: idle load cycles and output backpressure (RTL);
        ``reset_after``: reset the design that many cycles after start and run the job again;
        ``waves``: a VCD file (one per part, ``FILE.tileK.vcd``, when the job is split; one per
        job, ``FILE.pass1.vcd`` and ``FILE.pass2.vcd``, each per part as before, when the spec
        runs it as two);
        ``per_cycle``: run Verilator through cocotb instead of the lean harness;
        ``progress``: a progress bar over the parts when there are several (each job's named,
        ``pass 1 of 2`` and ``pass 2 of 2``, when the spec runs it as two).
        """
        spec, cfg = self.spec, self.config
        t0 = time.perf_counter()
        if not checked:
            job = spec.check(job, cfg)
        two = spec.passes(job, cfg)
        if two is not None:
            kw = dict(idle_every=idle_every, stall_every=stall_every,
                      reset_after=reset_after, per_cycle=per_cycle, progress=progress)
            waves1, waves2 = (None, None) if waves is None else \
                [Path(waves).with_name(f"{Path(waves).stem}.pass{k}{Path(waves).suffix}")
                 for k in (1, 2)]
            first = self.run(two[0], checked=True, waves=waves1, _label=", pass 1 of 2", **kw)
            second = self.run(two[1](first.output), checked=True, waves=waves2,
                              _label=", pass 2 of 2", **kw)
            counters = self._two_pass_counters(job, first.counters, second.counters)
            counters.wall_s = time.perf_counter() - t0
            raw = {k: first.raw.get(k, 0) + second.raw.get(k, 0)
                   for k in {*first.raw, *second.raw}}
            return Result(second.output, counters, self.device, self.simulator, raw)
        job, run_job, merge, parts, counters = self._prepare(job)
        raw: dict = {}
        if progress and _label and len(parts) == 1 and self.device != "model":
            print(f"{spec.name} on {self.simulator}{_label}: 1 tile", flush=True)
        if self.device == "model":
            out = spec.golden(job, cfg)
            counters.add(self._part_model(parts, run_job)[0])
        elif self._back_to_back(len(parts), waves, reset_after, per_cycle):
            out = spec.empty_output(run_job)
            for part, result in zip(parts, self._simulate_sequence(
                    [p.job for p in parts], idle_every, stall_every, progress, per_cycle,
                    _label)):
                self._collect(out, counters, raw, part, result)
        else:
            out = spec.empty_output(run_job)
            steps = enumerate(parts)
            if progress and len(parts) > 1:
                from tqdm import tqdm
                steps = tqdm(steps, total=len(parts), unit="tile",
                             desc=f"{spec.name} on {self.simulator}{_label}")
            for k, part in steps:
                self._collect(out, counters, raw, part, self._simulate(
                    part.job, idle_every=idle_every, stall_every=stall_every,
                    waves=_part_waves(waves, k, len(parts)), reset_after=reset_after,
                    per_cycle=per_cycle))
        if merge is not None and self.device != "model":
            out = merge(out)        # a long row's pieces added on the host
        counters.wall_s = time.perf_counter() - t0
        return Result(out, counters, self.device, self.simulator, raw)

    def estimate(self, job, *, checked: bool = False) -> Counters:
        """The cycle model's counters of ``job`` (split into parts like :meth:`run`), without
        computing the output."""
        if not checked:
            job = self.spec.check(job, self.config)
        two = self.spec.passes(job, self.config)
        if two is not None:     # the second job's shape does not depend on the first's values
            first = self.estimate(two[0], checked=True)
            out = self.spec.empty_output(two[0])
            return self._two_pass_counters(job, first,
                                           self.estimate(two[1](out), checked=True))
        _, run_job, _, parts, counters = self._prepare(job)
        return counters.add(self._part_model(parts, run_job)[0])

    def _two_pass_counters(self, job, first: Counters, second: Counters) -> Counters:
        """One job's counters from its two passes' (:meth:`AcceleratorSpec.passes`): their
        cycles, bytes and tiles added, the work the job's own."""
        total = Counters.total([first, second])
        work = self.spec.work(job, self.config)
        total.work_adds, total.spmm_adds = work.work_adds, work.spmm_adds
        total.elements, total.unmasked, total.calls = work.elements, work.unmasked, 1
        return total

    def run_many(self, jobs, *, checked: bool = False, idle_every: int = 0,
                 stall_every: int = 0) -> list[Result]:
        """Run independent ``jobs`` one after another, as the accelerator takes them from a
        queue: where the design has ping-pong load buffers, each job's loads overlap the job
        before (its first part the previous job's last), in the model and on the RTL (the lean
        harness runs every part of every job back to back, one reset). Otherwise the same as
        :meth:`run` on each job, and so is a batch holding a job the spec runs as two
        (:meth:`AcceleratorSpec.passes`): its jobs run one by one, no loads overlapped between
        them. One :class:`Result` per job."""
        spec, cfg = self.spec, self.config
        t0 = time.perf_counter()
        if not checked:
            jobs = [spec.check(job, cfg) for job in jobs]
        if any(spec.passes(job, cfg) is not None for job in jobs):
            return [self.run(job, checked=True, idle_every=idle_every, stall_every=stall_every)
                    for job in jobs]
        prepared = [self._prepare(job) for job in jobs]
        results = []
        if self.device == "model":
            previous = None
            for job, run_job, _, parts, counters in prepared:
                out = spec.golden(job, cfg)
                model, previous = self._part_model(parts, run_job, previous)
                counters.add(model)
                results.append(Result(out, counters, self.device, self.simulator, {}))
        elif self._back_to_back(sum(len(p.parts) for p in prepared), None, None, False):
            flat = [(k, part) for k, p in enumerate(prepared) for part in p.parts]
            runs = self._simulate_sequence([part.job for _, part in flat], idle_every,
                                           stall_every, False, False)
            outs = [spec.empty_output(p.run_job) for p in prepared]
            raws: list[dict] = [{} for _ in prepared]
            for (k, part), result in zip(flat, runs):
                self._collect(outs[k], prepared[k].counters, raws[k], part, result)
            outs = [out if p.merge is None else p.merge(out) for out, p in zip(outs, prepared)]
            results = [Result(out, p.counters, self.device, self.simulator, raw)
                       for out, p, raw in zip(outs, prepared, raws)]
        else:
            return [self.run(p.job, checked=True, idle_every=idle_every, stall_every=stall_every)
                    for p in prepared]
        wall = (time.perf_counter() - t0) / max(len(results), 1)
        for r in results:
            r.counters.wall_s = wall
        return results

    def _part_model(self, parts, job, previous: Counters | None = None
                    ) -> tuple[Counters, Counters | None]:
        """The cycle model of the parts as the RTL runs them: one after another, each part's
        loads overlapped with the part before (``previous``: the last part of the job before,
        if any) where the design has ping-pong load buffers. Returns the parts' sum and the
        last part's counters."""
        spec, cfg = self.spec, self.config
        return back_to_back(spec.parts_cycles(parts, job, cfg), spec.loads_overlap(cfg),
                            previous)

    def _back_to_back(self, n_parts: int, waves, reset_after, per_cycle) -> bool:
        """Whether the parts run as one sequence after one reset (several parts, a design that
        restarts without a reset, no mid-job reset and no waveform per part): on the lean
        harness, or with ``per_cycle`` or another simulator on the testbench's
        :func:`~moagcn.sim.rtl.stream_tb.stream_jobs`."""
        return (n_parts > 1 and self.spec.protocol.restartable and waves is None
                and reset_after is None)

    def _prepare(self, job) -> "_Prepared":
        """A checked job's :class:`_Prepared`: the job the accelerator runs for it and the
        function from that job's output to the job's (:meth:`AcceleratorSpec.expand`), its
        parts, and its counters before any cycles (the job's work)."""
        spec, cfg = self.spec, self.config
        run_job, merge = spec.expand(job, cfg)
        parts = spec.split(run_job, cfg)
        counters = spec.work(job, cfg)
        counters.calls, counters.tiles = 1, len(parts)
        counters.lanes, counters.clock_mhz = spec.lanes(cfg), spec.clock_mhz(cfg)
        return _Prepared(job, run_job, merge, parts, counters)

    def _simulate_sequence(self, jobs, idle_every, stall_every, progress, per_cycle=False,
                           label: str = ""):
        """Parts back to back, one reset before the first (the next part's loads offered
        while one runs): on the lean harness (Verilator), else on the testbench's
        ``stream_jobs``. [(output, counters, raw registers)] per part."""
        # lazy: keeps the gateware (amaranth) out of this module's import
        from moagcn.sim.rtl.build import generate_verilog
        spec, cfg = self.spec, self.config
        proto = spec.protocol
        design = spec.gateware()
        packed = [spec.pack(job, cfg) for job in jobs]
        words = spec.output_words(cfg)
        if progress:
            print(f"{spec.name} on {self.simulator}{label}: {len(jobs)} tiles back to back",
                  flush=True)
        max_cycles = sum(spec.max_cycles(job, p, cfg) for job, p in zip(jobs, packed))
        if self.simulator == "verilator" and not per_cycle:
            # lazy: keeps the gateware (amaranth) out of this module's import
            from moagcn.sim.rtl.lean import LeanJob, build_lean, run_lean_jobs
            exe = build_lean(generate_verilog(design, cfg), proto)
            lean = run_lean_jobs(exe, proto, [LeanJob(p.streams, p.scalars) for p in packed],
                                 words, idle_every=idle_every, stall_every=stall_every,
                                 max_cycles=max_cycles)
            runs = [(r.values, r.beats, r.cycles) for r in lean]
            wall = lean[-1].wall_s
        else:
            # lazy: keeps the gateware (amaranth) out of this module's import
            from moagcn.sim.rtl.backends import run
            res = run(design, cfg, stream_jobs, self.simulator, max_cycles=max_cycles,
                      proto=proto, jobs=[(p.streams, p.scalars) for p in packed],
                      idle_every=idle_every, stall_every=stall_every)
            runs = [(r, int_words(r["beats"], words), r["done_cycle"]) for r in res.value]
            wall = res.wall_s
        total = max(runs[-1][2], 1)
        out, before = [], 0
        for job, p, (values, beats, done_at) in zip(jobs, packed, runs):
            raw = {k: int(values[k]) for k in (*proto.counters, *proto.flags) if k in values}
            self._check_flags(raw)
            counters = spec.hardware_counters(raw, job, cfg)
            # the simulator's cycles from the previous part's done to this one's; the wall
            # time of the whole sequence shared out by cycles
            counters.sim_cycles = done_at - before
            counters.sim_wall_s = wall * counters.sim_cycles / total
            before = done_at
            out.append((spec.unpack(beats, p, job, cfg), counters, raw))
        return out

    def _collect(self, out, counters: Counters, raw: dict, part, result) -> None:
        """One simulated part into its job: its output placed, its counters and registers
        added."""
        part_out, part_counters, part_raw = result
        self.spec.place(out, part, part_out)
        counters.add(part_counters)
        for key, value in part_raw.items():
            raw[key] = raw.get(key, 0) + value

    def _check_flags(self, raw: dict) -> None:
        flags = {f: raw.get(f, 0) for f in self.spec.protocol.flags}
        if any(flags.values()):
            # the host validated the job, so a flag means the hardware and the host disagree
            raise SimulationError(f"the {self.spec.name} accelerator stopped with an error flag "
                                  f"on a validated job: {flags}")

    def _simulate(self, job, *, idle_every, stall_every, waves, reset_after, per_cycle):
        """One part on the RTL: (output, counters, raw registers)."""
        # lazy: keeps the gateware (amaranth) out of this module's import
        from moagcn.sim.rtl.build import generate_verilog
        spec, cfg = self.spec, self.config
        proto = spec.protocol
        packed: Packed = spec.pack(job, cfg)
        design = spec.gateware()
        max_cycles = spec.max_cycles(job, packed, cfg)
        words = spec.output_words(cfg)
        lean = (self.simulator == "verilator" and waves is None and reset_after is None
                and not per_cycle)
        if lean:
            # lazy: keeps the gateware (amaranth) out of this module's import
            from moagcn.sim.rtl.lean import build_lean, run_lean
            exe = build_lean(generate_verilog(design, cfg), proto)
            res = run_lean(exe, proto, packed.streams, packed.scalars, words,
                           idle_every=idle_every, stall_every=stall_every,
                           max_cycles=max_cycles)
            raw, beats, sim_cycles, sim_s = dict(res.values), res.beats, res.cycles, res.wall_s
        else:
            # lazy: keeps the gateware (amaranth) out of this module's import
            from moagcn.sim.rtl.backends import run
            res = run(design, cfg, stream_job, self.simulator, waves=waves,
                      max_cycles=max_cycles, proto=proto, streams=packed.streams,
                      scalars=packed.scalars, idle_every=idle_every, stall_every=stall_every,
                      reset_after=reset_after)
            raw = dict(res.value)
            beats = int_words(raw.pop("beats"), words)
            sim_cycles, sim_s = res.cycles, res.wall_s
        # the registers the design reports (the testbench may return more, e.g. its view
        # before a reset): these are what parts sum
        raw = {k: int(raw[k]) for k in (*proto.counters, *proto.flags) if k in raw}
        self._check_flags(raw)
        out = spec.unpack(beats, packed, job, cfg)
        counters = spec.hardware_counters(raw, job, cfg)
        counters.sim_cycles = int(sim_cycles)
        counters.sim_wall_s = float(sim_s)
        return out, counters, raw
