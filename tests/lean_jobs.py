"""Jobs back to back on a design's lean Verilator harness, for the tests of both designs."""

from moagcn.core.registry import gateware
from moagcn.sim.rtl.build import generate_verilog
from moagcn.sim.rtl.lean import LeanJob, build_lean, run_lean_jobs


def run_back_to_back(spec, config, jobs, **options):
    """``jobs`` (checked jobs of ``spec``) one after another after one reset: per job its
    output and the harness's :class:`~moagcn.sim.rtl.lean.LeanResult`. A design that stops making
    progress fails instead of hanging."""
    exe = build_lean(generate_verilog(spec.gateware(), config), spec.protocol)
    # the cache keeps the executable, not the generated C++ and its objects
    assert not (exe.parent / "obj").exists()
    packed = [spec.pack(j, config) for j in jobs]
    limit = sum(spec.max_cycles(j, p, config) for j, p in zip(jobs, packed))
    results = run_lean_jobs(exe, spec.protocol, [LeanJob(p.streams, p.scalars) for p in packed],
                            spec.output_words(config), max_cycles=limit, **options)
    return [(spec.unpack(r.beats, p, j, config), r) for j, p, r in zip(jobs, packed, results)]
