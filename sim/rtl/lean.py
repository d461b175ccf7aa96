"""A lean Verilator harness for host-driven jobs: no cocotb, no VPI, Python asleep.

The cocotb runner builds every Verilator model with ``--vpi --public-flat-rw``, which registers
every net of the design for VPI: for the S-SpMM default preset that alone is nine large C++
files and most of the build, and it keeps Verilator from optimising nets away. Host-driven jobs
only need the top-level ports, so this module generates a small C++ ``main`` for a design's
*stream protocol* and builds the Verilog with plain ``verilator --cc --exe``:

1. reset; then fill every load stream (all in parallel, one beat per stream per cycle, honouring
   ``ready``; optional idle cycles);
2. set the scalar inputs, pulse ``start``;
3. take beats from the output stream (optional backpressure) until ``done``;
4. write the counters, the beats, the cycle count and the wall time of steps 1-3.

The design is wrapped in a small top module (:func:`generate_wrapper`) that drives its ``rst``
from a flip-flop. Verilator evaluates all logic that depends on a top-level input in its
input-combinational region on *every* ``eval()``; a direct reset input feeds the next-state logic
of every register with a reset value, so it would put most of the design there and evaluate it
twice per cycle. Behind the flip-flop, reset is ordinary state; the harness holds it one cycle
longer. The wrapper adds no logic to the design itself.

The same RTL passes the cocotb suites; this path is for speed. Models are cached by a hash of
the Verilog, the generated harness and the build options.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moagcn.config import config_hash
from moagcn.core.spec import StreamProtocol
from moagcn.errors import SimulationError, UserError
from moagcn.hw.sspmm.group import LaneAdders
from moagcn.sim.rtl.build import (GeneratedVerilog, cache_dir, locked, tool_version, trace,
                                  verilator_env, verilog_text)

#: Verilator's own options for the harness's model
LEAN_ARGS = ["-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal"]
#: C++ flags of the code that runs every cycle (the model's evaluation, the harness loop and
#: Verilator's runtime library); the model is compiled for this machine's CPU (-march=native):
#: the cache key names the CPU
CXX_FAST = "-O3 -march=native"
#: environment variable replacing ``CXX_FAST``: the test suite sets ``-O1``, which builds
#: faster and runs its small jobs about as fast; the benchmarks keep ``-O3`` (docs/sim.md, "Why
#: these options")
CFLAGS_ENV = "MOAGCN_LEAN_CFLAGS"


def lean_args() -> list[str]:
    """Verilator's arguments for the harness."""
    return list(LEAN_ARGS)


def lean_make_vars() -> dict[str, str]:
    """Make variables of the model's C++ build (Verilator's ``verilated.mk``): ``CXX_FAST`` (or
    ``$MOAGCN_LEAN_CFLAGS``) for the per-cycle code and the runtime library, ``-O0`` for the
    code that runs once (construction and initial values: a third of the generated C++ of a
    large design, which at ``-O1`` took as long to compile as the rest)."""
    fast = os.environ.get(CFLAGS_ENV) or CXX_FAST
    return {"OPT_FAST": fast, "OPT_GLOBAL": fast, "OPT_SLOW": "-O0"}


def _cpu_id() -> str:
    """The host CPU's model and feature flags (binaries built for it may not run elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    keep = [line for line in text.splitlines()
            if line.startswith(("model name", "flags"))][:2]
    return "\n".join(keep)


def _vname(port: str) -> str:
    # Verilator encodes "__" in identifiers as "___05F"
    return port.replace("__", "___05F")


def _setter(port: str, width: int, src: str) -> str:
    """C++ statement assigning words ``src[0..]`` to an input port."""
    name = _vname(port)
    if width <= 32:
        return f"top->{name} = {src}[0];"
    if width <= 64:
        return f"top->{name} = (uint64_t){src}[0] | ((uint64_t){src}[1] << 32);"
    words = -(-width // 32)
    return " ".join(f"top->{name}[{i}] = {src}[{i}];" for i in range(words))


def _getter(port: str, width: int, dst: str) -> str:
    """C++ statement copying an output port into words ``dst[0..]``."""
    name = _vname(port)
    if width <= 32:
        return f"{dst}[0] = (uint32_t)top->{name};"
    if width <= 64:
        return (f"{dst}[0] = (uint32_t)top->{name}; "
                f"{dst}[1] = (uint32_t)(top->{name} >> 32);")
    words = -(-width // 32)
    return " ".join(f"{dst}[{i}] = top->{name}[{i}];" for i in range(words))


WRAPPER = "moagcn_lean_top"


def generate_wrapper(verilog: GeneratedVerilog) -> str:
    """Verilog of the harness's top module: ``verilog.toplevel`` with a registered reset."""
    names = [p.name for p in verilog.ports]
    decls = []
    for p in verilog.ports:
        rng = f" [{p.width - 1}:0]" if p.width > 1 else ""
        decls.append(f"  {'input' if p.direction == 'in' else 'output'}{rng} {p.name};")
    conns = ", ".join(f".{n}({'rst_q' if n == 'rst' else n})" for n in names)
    return (f"// Generated by moagcn.sim.rtl.lean for {verilog.toplevel}; do not edit.\n"
            f"module {WRAPPER}({', '.join(names)});\n" + "\n".join(decls) + "\n"
            "  reg rst_q = 1'b1;\n"
            "  always @(posedge clk) rst_q <= rst;\n"
            f"  {verilog.toplevel} dut({conns});\n"
            "endmodule\n")


def generate_harness(verilog: GeneratedVerilog, proto: StreamProtocol) -> str:
    """C++ source of the harness for ``verilog``'s ports.

    The job file holds one or more jobs. Job 0 is loaded, then each job is started and its
    output taken until ``done``; while it runs, the next job's loads are offered (a design
    that takes them then, into a second buffer half, overlaps them with compute; one that is
    not ready simply gets them after ``done``). The counters and flags are read at each
    ``done``. The next job's scalars are set once the previous job is done, before the rest
    of its loads, or, for a design that samples them at ``start``
    (``StreamProtocol.scalars_at_start``), as soon as the previous job has started. The
    backpressure pattern counts each job's output cycles from its start, the idle pattern each
    job's load cycles from its first, so a job behaves the same after a job as after a reset.
    """
    widths = {p.name: p.width for p in verilog.ports}
    words = {s: -(-widths[f"{s}__payload"] // 32) for s in proto.loads}
    out_words = -(-widths[f"{proto.output}__payload"] // 32)
    lines = []
    for i, s in enumerate(proto.loads):
        lines.append(f"    {{ uint64_t n = rd64(in); J.N[{i}] = n; J.D[{i}].resize(n * {words[s]}); "
                     f"if (n && fread(J.D[{i}].data(), 4, n * {words[s]}, in) != n * {words[s]}) "
                     f"die(\"short job file\"); }}")
    read_streams = "\n".join(lines)
    n_scalars = len(proto.scalars)
    scalar_set = "\n".join(f"  top->{_vname(s)} = J.S[{k}];" for k, s in enumerate(proto.scalars))
    drive = []
    for i, s in enumerate(proto.loads):
        drive.append(f"  if (!idle && J.P[{i}] < J.N[{i}]) {{ const uint32_t *w = "
                     f"&J.D[{i}][J.P[{i}] * {words[s]}]; "
                     f"{_setter(s + '__payload', widths[s + '__payload'], 'w')} "
                     f"top->{_vname(s + '__valid')} = 1; }} else top->{_vname(s + '__valid')} = 0;")
    drive_code = "\n".join(drive)
    sample = "\n".join(
        f"  t[{i}] = top->{_vname(s + '__valid')} && top->{_vname(s + '__ready')};"
        for i, s in enumerate(proto.loads))
    advance = "\n".join(f"  if (t[{i}]) J.P[{i}]++;" for i in range(len(proto.loads)))
    accepting = " || ".join(f"top->{_vname(s + '__ready')}" for s in proto.loads)
    pending = " || ".join(f"J.P[{i}] < J.N[{i}]" for i in range(len(proto.loads)))
    clear = "\n".join(f"  top->{_vname(s + '__valid')} = 0;" for s in proto.loads)
    results = "\n".join(f"    r.push_back((uint64_t)top->{_vname(c)});"
                        for c in (*proto.counters, *proto.flags))
    n_loads = len(proto.loads)
    o = proto.output
    return f"""// Generated by moagcn.sim.rtl.lean for {verilog.toplevel}; do not edit.
#include "Vtop.h"
#include "verilated.h"
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

static void die(const char *msg) {{ fprintf(stderr, "harness: %s\\n", msg); exit(2); }}
static uint64_t rd64(FILE *f) {{ uint64_t v; if (fread(&v, 8, 1, f) != 1) die("short job file"); return v; }}
static void wr64(FILE *f, uint64_t v) {{ fwrite(&v, 8, 1, f); }}

const int NS = {n_loads};
struct Job {{
  std::vector<uint32_t> D[NS];
  uint64_t N[NS], P[NS] = {{0}};
  uint64_t S[{max(n_scalars, 1)}];
}};

// offer job J's next beat on every load stream (none in idle cycles)
static void drive(Vtop *top, Job &J, bool idle) {{
{drive_code}
}}
// after the evaluation: which streams transferred a beat this cycle
static void sample(Vtop *top, bool *t) {{
{sample}
}}
static void advance(Job &J, const bool *t) {{
{advance}
}}
static bool pending(const Job &J) {{ return {pending}; }}
// the design takes loads this cycle (the idle pattern counts only such cycles)
static bool accepting(Vtop *top) {{ return {accepting}; }}
static void clear(Vtop *top) {{
{clear}
}}
static void scalars(Vtop *top, const Job &J) {{
{scalar_set}
}}

int main(int argc, char **argv) {{
  if (argc != 3) die("usage: harness JOB OUT");
  FILE *in = fopen(argv[1], "rb");
  if (!in) die("cannot open job file");
  uint64_t n_jobs = rd64(in);
  if (n_jobs < 1) die("no job");
  std::vector<Job> jobs(n_jobs);
  for (uint64_t j = 0; j < n_jobs; j++) {{
    Job &J = jobs[j];
{read_streams}
    for (int k = 0; k < {n_scalars}; k++) J.S[k] = rd64(in);
  }}
  uint64_t idle_every = rd64(in), stall_every = rd64(in), max_cycles = rd64(in);
  fclose(in);
  VerilatedContext ctx;
  Vtop *top = new Vtop(&ctx);
  uint64_t cycle = 0;
  // one rising edge; the falling edge is folded into the next eval, which also settles the
  // inputs the loop sets before sampling handshakes: two evaluations per cycle, not three
  auto tick = [&]() {{ top->clk = 1; top->eval(); top->clk = 0; cycle++; }};
  // reset reaches the design through the wrapper's flip-flop: two cycles of reset, one cycle
  // to let the flip-flop release it
  scalars(top, jobs[0]);
  top->clk = 0; top->rst = 1; top->eval(); tick(); top->eval(); tick(); top->eval(); tick();
  top->rst = 0; top->eval(); tick(); top->eval();
  cycle = 0;
  bool t[NS];
  uint64_t lc = 0;                         // load cycles counted for the idle pattern
  auto load_rest = [&](Job &J) {{
    while (pending(J)) {{
      bool idle = idle_every && (lc % idle_every) == idle_every - 1;
      drive(top, J, idle);
      top->eval();
      sample(top, t);
      tick(); lc++;
      advance(J, t);
      if (cycle > max_cycles) die("cycle limit exceeded while loading");
    }}
    clear(top);
  }};
  std::vector<uint32_t> beats;
  std::vector<uint64_t> done_at(n_jobs), n_beats(n_jobs);
  std::vector<std::vector<uint64_t>> regs(n_jobs);
  uint32_t w[{out_words}];
  uint64_t k = 0;
  auto t0 = std::chrono::steady_clock::now();
  load_rest(jobs[0]);
  for (uint64_t j = 0; j < n_jobs; j++) {{
    Job *next = j + 1 < n_jobs ? &jobs[j + 1] : nullptr;
    scalars(top, jobs[j]);
    top->{_vname(proto.start)} = 1; top->eval(); tick(); top->{_vname(proto.start)} = 0;
    {"if (next) scalars(top, *next);" if proto.scalars_at_start else ""}
    top->eval();
    k = 0; lc = 0;                         // each job's patterns from its own start
    while (!top->{_vname(proto.done)}) {{
      bool ready = !(stall_every && (k % stall_every) == stall_every - 1);
      top->{_vname(o + '__ready')} = ready;
      bool idle = idle_every && (lc % idle_every) == idle_every - 1;
      if (next) drive(top, *next, idle);
      top->eval();
      if (ready && top->{_vname(o + '__valid')}) {{
        {_getter(o + '__payload', widths[o + '__payload'], 'w')}
        beats.insert(beats.end(), w, w + {out_words});
      }}
      bool acc = false;
      if (next) {{ sample(top, t); acc = accepting(top); }}
      tick(); k++;
      if (next) {{ advance(*next, t); if (pending(*next) && acc) lc++; }}
      if (cycle > max_cycles) die("cycle limit exceeded: the design did not finish");
    }}
    clear(top);
    done_at[j] = cycle;
    n_beats[j] = beats.size() / {out_words};
    std::vector<uint64_t> &r = regs[j];
{results}
    // the next job's scalars from here on (a design may read them while it loads, e.g. a
    // row's beats); the job that ran is done with its own
    if (next) {{ scalars(top, *next); top->eval(); load_rest(*next); }}
  }}
  auto t1 = std::chrono::steady_clock::now();
  double wall = std::chrono::duration<double>(t1 - t0).count();
  FILE *out = fopen(argv[2], "wb");
  if (!out) die("cannot write result");
  wr64(out, cycle);
  fwrite(&wall, 8, 1, out);
  wr64(out, n_jobs);
  for (uint64_t j = 0; j < n_jobs; j++) {{
    wr64(out, done_at[j]);
    for (uint64_t v : regs[j]) wr64(out, v);
    wr64(out, n_beats[j]);
  }}
  if (!beats.empty()) fwrite(beats.data(), 4, beats.size(), out);
  fclose(out);
  top->final();
  delete top;
  return 0;
}}
"""


def build_lean(verilog: GeneratedVerilog, proto: StreamProtocol) -> Path:
    """Build (or fetch from the cache) the harness executable for ``verilog``."""
    if not any(p.name == "rst" and p.direction == "in" for p in verilog.ports):
        raise UserError(f"{verilog.toplevel} has no rst input; the lean harness needs one")
    source = generate_harness(verilog, proto)
    wrapper = generate_wrapper(verilog)
    text = verilog.path.read_text()
    args = lean_args()
    key = config_hash(text, source, wrapper, json.dumps(args), json.dumps(lean_make_vars()),
                      tool_version("verilator"), _cpu_id())
    return _verilator_exe(cache_dir() / "lean" / f"{verilog.toplevel}-{key}",
                          {"harness.cpp": source, "wrapper.v": wrapper},
                          [str(verilog.path), "wrapper.v", "harness.cpp"], args,
                          verilog.toplevel)


def _verilator_exe(build_dir: Path, files: dict[str, str], sources: list[str], args: list[str],
                   what: str) -> Path:
    """Build (or find in the cache) ``build_dir/harness`` from ``sources`` (``files`` written
    into ``build_dir`` first) with plain ``verilator --cc --exe``, ``args`` and
    :func:`lean_make_vars`."""
    exe = build_dir / "harness"
    start, built = time.perf_counter(), False
    with locked(build_dir):
        if not exe.exists():
            built = True
            shutil.rmtree(build_dir, ignore_errors=True)
            build_dir.mkdir(parents=True)
            for name, body in files.items():
                (build_dir / name).write_text(body)
            log = build_dir / "build.log"
            with open(log, "w") as fh:
                ok = verilate_and_make(build_dir, sources, args, exe, fh)
            if not ok or not exe.exists():
                tail = log.read_text()[-3000:]
                raise UserError(f"lean Verilator build of {what} failed; log {log}:\n{tail}")
            # the generated C++ and its objects (100-400 MB for the larger presets) are not
            # needed once the harness is linked: the cache keeps the executable and the log
            shutil.rmtree(build_dir / "obj", ignore_errors=True)
    trace("lean", what, build_dir.name.rsplit("-", 1)[-1], built, time.perf_counter() - start)
    return exe


def verilate_and_make(build_dir: Path, sources: list[str], args: list[str], exe: Path, log,
                      extra_cflags: str = "") -> bool:
    """``verilator --cc --exe`` into ``build_dir/obj``, then its ``make`` with
    :func:`lean_make_vars` (plus ``extra_cflags`` on every file); output to ``log``. Returns
    whether both succeeded.

    Verilator's runtime library (``verilated.cpp`` and the like, the same for every design:
    about 9 CPU-seconds a build) is compiled once per set of flags and kept in the cache
    (``lean/runtime-<hash>``); each build links that copy."""
    obj = build_dir / "obj"
    env = verilator_env()
    cmd = ["verilator", "--cc", "--exe", *args, "--top-module", WRAPPER, "--prefix", "Vtop",
           "-Mdir", str(obj), "-o", str(exe), *sources]
    if extra_cflags:
        cmd += ["-CFLAGS", extra_cflags]
    if subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                      cwd=build_dir).returncode != 0:
        return False
    make_vars = lean_make_vars()
    classes = (obj / "Vtop_classes.mk").read_text()
    runtime = [f"{name}.o" for name in re.findall(r"^\s+(verilated\w*) \\$", classes, re.M)]
    settings = [line for line in classes.splitlines() if line.startswith("VM_")]
    key = config_hash(tool_version("verilator"), json.dumps(make_vars), extra_cflags,
                      json.dumps(settings), json.dumps(runtime), _cpu_id())
    store = cache_dir() / "lean" / f"runtime-{key}"
    with locked(store):
        have = bool(runtime) and all((store / name).exists() for name in runtime)
        if have:
            for name in runtime:           # newer than Vtop.mk: make keeps them
                shutil.copyfile(store / name, obj / name)
    make = ["make", "-C", str(obj), "-f", "Vtop.mk", "-j", str(os.cpu_count() or 2),
            *[f"{k}={v}" for k, v in make_vars.items()]]
    if subprocess.run(make, stdout=log, stderr=subprocess.STDOUT, env=env,
                      cwd=build_dir).returncode != 0:
        return False
    if runtime and not have:
        with locked(store):
            store.mkdir(parents=True, exist_ok=True)
            for name in runtime:
                shutil.copyfile(obj / name, store / name)
    return True


@dataclass
class LeanResult:
    """What the harness reports for one job (``cycles``: from the end of reset to the job's
    ``done``; ``wall_s``: of the whole run)."""

    cycles: int
    wall_s: float
    values: dict[str, int]
    beats: np.ndarray        # (n_beats, words per beat) uint32


@dataclass
class LeanJob:
    """One job for :func:`run_lean_jobs`: a (beats, words) uint32 array per load stream and
    the scalar inputs."""

    streams: dict[str, np.ndarray]
    scalars: dict[str, int]


def run_lean(exe: Path, proto: StreamProtocol, streams: dict[str, np.ndarray],
             scalars: dict[str, int], out_words: int, *, idle_every: int = 0,
             stall_every: int = 0, max_cycles: int = 1 << 40) -> LeanResult:
    """Run one job; ``streams[name]`` is a (beats, words) uint32 array per load stream."""
    return run_lean_jobs(exe, proto, [LeanJob(streams, scalars)], out_words,
                         idle_every=idle_every, stall_every=stall_every,
                         max_cycles=max_cycles)[0]


def run_lean_jobs(exe: Path, proto: StreamProtocol, jobs: list[LeanJob], out_words: int, *,
                  idle_every: int = 0, stall_every: int = 0,
                  max_cycles: int = 1 << 40) -> list[LeanResult]:
    """Run ``jobs`` back to back on one simulated design (one reset, before the first): each
    job's loads are offered while the one before runs. Only for designs whose protocol is
    ``restartable``; ``max_cycles`` bounds the whole run."""
    if len(jobs) > 1 and not proto.restartable:
        raise UserError("this design takes one job per reset; run its jobs one at a time")
    with tempfile.TemporaryDirectory(prefix="moagcn-lean-") as tmp:
        job_file = Path(tmp) / "job.bin"
        res = Path(tmp) / "out.bin"
        with open(job_file, "wb") as fh:
            fh.write(np.uint64(len(jobs)).tobytes())
            for job in jobs:
                for s in proto.loads:
                    arr = np.ascontiguousarray(job.streams[s], dtype=np.uint32)
                    fh.write(np.uint64(arr.shape[0]).tobytes())
                    fh.write(arr.tobytes())
                for s in proto.scalars:
                    fh.write(np.uint64(job.scalars[s]).tobytes())
            for v in (idle_every, stall_every, max_cycles):
                fh.write(np.uint64(v).tobytes())
        proc = subprocess.run([str(exe), str(job_file), str(res)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise SimulationError(f"lean harness {exe} failed: {proc.stderr.strip()}")
        raw = res.read_bytes()
    names = (*proto.counters, *proto.flags)
    head = np.frombuffer(raw, np.uint64, 3, 0)
    wall = float(np.frombuffer(raw, np.float64, 1, 8)[0])
    n_jobs = int(head[2])
    per_job = np.frombuffer(raw, np.uint64, n_jobs * (len(names) + 2), 24).reshape(
        n_jobs, len(names) + 2)
    beats = np.frombuffer(raw, np.uint32, offset=24 + per_job.nbytes).reshape(-1, out_words)
    out, first = [], 0
    for row in per_job:
        last = int(row[-1])
        out.append(LeanResult(int(row[0]), wall, dict(zip(names, map(int, row[1:-1]))),
                              beats[first:last].copy()))
        first = last
    return out


# -- the lane adders alone: what the design's arithmetic costs the simulator --------------------

#: the operand generator's start value (an xorshift32 state; any nonzero value)
ADDER_LOOP_SEED = 0x2545F491


def adder_loop_wrapper(lanes: int, latency: int) -> str:
    """Verilog driving :class:`~moagcn.hw.sspmm.group.LaneAdders` every cycle: an xorshift32
    register ``x`` (``ADDER_LOOP_SEED`` in reset) gives lane ``k`` the operand word ``z = x ^
    (0x9E3779B9 * k)``, made a finite binary32 of exponent 120-135 (``{z[31], 120 + z[3:0],
    z[26:4]}``), and restarts it where ``z[28] & z[29]``, and in every lane during the first
    ``latency + 1`` cycles after reset (so that no sum depends on what the adders held in reset);
    ``acc`` is the XOR of the sums."""
    lanes_v = "\n".join(
        f"  wire [31:0] z{k} = x ^ 32'd{(0x9E3779B9 * k) & 0xFFFFFFFF};\n"
        f"  assign addend[{32 * k + 31}:{32 * k}] = {{z{k}[31], 8'd120 + {{4'd0, z{k}[3:0]}}, "
        f"z{k}[26:4]}};\n"
        f"  assign restart[{k}] = warm[0] | (z{k}[28] & z{k}[29]);" for k in range(lanes))
    acc = " ^ ".join(f"sums[{32 * k + 31}:{32 * k}]" for k in range(lanes))
    return (f"// Generated by moagcn.sim.rtl.lean: {lanes} lane adders driven every cycle.\n"
            f"module {WRAPPER}(clk, rst, acc);\n"
            "  input clk;\n  input rst;\n  output [31:0] acc;\n"
            "  reg rst_q = 1'b1;\n  reg [31:0] x = 32'd0;\n"
            f"  reg [{latency}:0] warm = {latency + 1}'d0;\n"
            f"  always @(posedge clk) warm <= rst_q ? {{{latency + 1}{{1'b1}}}} : warm >> 1;\n"
            f"  wire [{32 * lanes - 1}:0] addend;\n  wire [{lanes - 1}:0] restart;\n"
            f"  wire [{32 * lanes - 1}:0] sums;\n"
            "  always @(posedge clk) rst_q <= rst;\n"
            f"  always @(posedge clk) x <= rst_q ? 32'd{ADDER_LOOP_SEED} : "
            "((x ^ (x << 13)) ^ ((x ^ (x << 13)) >> 17)) ^ "
            "(((x ^ (x << 13)) ^ ((x ^ (x << 13)) >> 17)) << 5);\n"
            + lanes_v + "\n"
            f"  assign acc = {acc};\n"
            "  lane_adders dut(.clk(clk), .rst(rst_q), .valid(1'b1), .restart(restart), "
            ".addend(addend), .sums(sums));\n"
            "endmodule\n")


ADDER_LOOP_MAIN = r"""// Generated by moagcn.sim.rtl.lean: clock the lane adders, time it.
#include "Vtop.h"
#include "verilated.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  const unsigned long long n = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1000000ULL;
  const unsigned long long skip = argc > 2 ? strtoull(argv[2], nullptr, 10) : 0ULL;
  Vtop* top = new Vtop;
  auto tick = [&]() { top->clk = 1; top->eval(); top->clk = 0; top->eval(); };
  top->clk = 0; top->rst = 1; top->eval(); tick(); tick();
  top->rst = 0; tick();                     // the registered reset falls at this edge
  unsigned acc = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned long long i = 0; i < n; i++) { tick(); if (i >= skip) acc ^= top->acc; }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%llu %.9f %u\n", n, s, acc);
  top->final(); delete top;
  return 0;
}
"""


def adder_loop_speed(lanes: int, latency: int, cycles: int = 2_000_000) -> dict:
    """Simulation speed of the design's W lane adders alone (``LaneAdders``, the loop of W
    binary32 adders of latency L whose sums come back as operands, exactly as every
    aggregation group builds it), built with the lean harness's Verilator options and
    clocked ``cycles`` times with a new operand in every lane every cycle. The accelerator
    contains these adders plus everything else, so this bounds its co-simulation speed from
    above on the same machine. Returns ``cycles``, ``wall_s``, ``cycles_per_s`` and
    ``checksum`` (the XOR, over the cycles after the first ``latency``, of the XOR of the
    sums, for a reference to check)."""
    if lanes < 1 or latency < 1:
        raise UserError(f"adder loop: lanes {lanes}, latency {latency}: use at least 1 each")
    text, _ = verilog_text(LaneAdders(lanes, latency), "lane_adders")
    wrapper = adder_loop_wrapper(lanes, latency)
    args = lean_args()
    key = config_hash(text, wrapper, ADDER_LOOP_MAIN, json.dumps(args),
                      json.dumps(lean_make_vars()), tool_version("verilator"), _cpu_id())
    exe = _verilator_exe(cache_dir() / "lean" / f"lane_adders-{key}",
                         {"lane_adders.v": text, "wrapper.v": wrapper, "main.cpp": ADDER_LOOP_MAIN},
                         ["lane_adders.v", "wrapper.v", "main.cpp"], args, "the lane adders")
    run = subprocess.run([str(exe), str(int(cycles)), str(latency)], capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise SimulationError(f"the lane adders' probe {exe} stopped with status "
                              f"{run.returncode}: {run.stderr.strip()[-500:]}")
    out = run.stdout.split()
    n, wall, acc = int(out[0]), float(out[1]), int(out[2])
    return {"lanes": lanes, "latency": latency, "cycles": n, "wall_s": wall,
            "cycles_per_s": n / wall if wall > 0 else float("inf"), "checksum": acc}
