"""The import graph of moagcn: layers point down, no cycles, systems apart, private names private.

Every ``import`` in the source, at module level and inside functions, is read with ``ast`` (a
function-local import hides a dependency from the interpreter's start-up, not from the
architecture). The rules are the ones docs/architecture.md states:

1. A module imports only its own tier or lower ones (``LAYERS``): base <- core <- hw <- sim /
   synth <- host's shared packages <- host's system packages <- training <- experiments and
   benches <- cli.
2. No import cycle between modules.
3. A system package (one per paper) does not import another system package.
4. A private name (``_x``) is not imported from another package.
5. A function-local import of a moagcn module says why it is local (a comment on its line or the
   line above with "lazy", "heavy" or "optional"): it keeps a heavy or optional dependency (the
   gateware, a simulator, PyTorch Geometric, scikit-learn) out of the importing module's start-up.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: import-name prefix -> source folder
FOLDERS = {"moagcn.hw": "hw", "moagcn.sim": "sim", "moagcn.host": "host", "moagcn.synth": "synth",
           "moagcn": "moagcn"}
#: package prefix -> tier; the longest matching prefix decides (a module may import its tier or lower)
LAYERS = {
    "moagcn": 0, "moagcn.errors": 0, "moagcn.config": 0,
    "moagcn.core": 1,
    "moagcn.hw": 2,
    "moagcn.sim": 3, "moagcn.synth": 3,
    "moagcn.host": 4,
    "moagcn.host.graphs": 4, "moagcn.host.devices": 4, "moagcn.host.nn": 4,
    "moagcn.host.parallel": 4,
    "moagcn.host.mixgcn": 5, "moagcn.host.hyscale": 5, "moagcn.host.supergcn": 5,
    "moagcn.host.vgnn": 5, "moagcn.host.deal": 5,
    "moagcn.host.training": 6,
    "moagcn.host.experiments": 7, "moagcn.host.benches": 7,
    "moagcn.sim.benches": 7,
    "moagcn.cli": 8, "moagcn.__main__": 8, "moagcn.nn": 8, "moagcn.interop": 8,
}
#: one package per paper's system: none imports another
SYSTEMS = ("moagcn.host.mixgcn", "moagcn.host.hyscale", "moagcn.host.supergcn",
           "moagcn.host.vgnn", "moagcn.host.deal")
WHY_LOCAL = re.compile(r"#.*\b(lazy|lazily|heavy|optional)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Import:
    source: str          # the importing module
    target: str          # the imported module (``from pkg import mod`` resolves to ``pkg.mod``)
    names: tuple         # the names taken from it (empty for ``import x``)
    local: bool          # inside a function
    line: int
    path: Path


def modules() -> dict[str, Path]:
    """Every moagcn module, by import name."""
    found = {}
    for prefix, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if prefix == "moagcn" and parts[0] in FOLDERS.values():
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([prefix, *parts])] = path
    return found


def _resolve(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _function_lines(tree) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    lines.add(sub.lineno)
    return lines


def imports_of(name: str, path: Path, known) -> list[Import]:
    """The moagcn imports of one module."""
    tree = ast.parse(path.read_text())
    local_lines = _function_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, known)
                if target and alias.name.startswith("moagcn"):
                    out.append(Import(name, target, (), node.lineno in local_lines,
                                      node.lineno, path))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            if not base.startswith("moagcn"):
                continue
            plain = []
            for alias in node.names:
                if f"{base}.{alias.name}" in known:        # a module taken from its package
                    out.append(Import(name, f"{base}.{alias.name}", (), node.lineno in local_lines,
                                      node.lineno, path))
                else:
                    plain.append(alias.name)
            target = _resolve(base, known)
            if plain and target:
                out.append(Import(name, target, tuple(plain), node.lineno in local_lines,
                                  node.lineno, path))
    return [i for i in out if i.target != name]


@functools.lru_cache(maxsize=1)
def all_imports() -> tuple:
    """Every moagcn import of the source tree (read once per test session)."""
    known = modules()
    return tuple(i for name, path in known.items() for i in imports_of(name, path, known))


def layer(name: str) -> int:
    best = max((p for p in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return LAYERS[best]


def system(name: str) -> str | None:
    return next((s for s in SYSTEMS if name == s or name.startswith(s + ".")), None)


def package_of(name: str, known) -> str:
    path = known[name]
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _where(i: Import) -> str:
    path = i.path.relative_to(ROOT) if i.path.is_relative_to(ROOT) else i.path
    return f"{path}:{i.line}"


def layering_violations(imports) -> list[str]:
    return [f"{_where(i)}: {i.source} (tier {layer(i.source)}) imports {i.target} "
            f"(tier {layer(i.target)})" for i in imports if layer(i.target) > layer(i.source)]


def system_violations(imports) -> list[str]:
    return [f"{_where(i)}: system {system(i.source)} imports system {system(i.target)} "
            f"({i.target}); move what both need below the systems"
            for i in imports if system(i.source) and system(i.target)
            and system(i.source) != system(i.target)]


def private_violations(imports, known) -> list[str]:
    return [f"{_where(i)}: {i.source} imports private {name!r} from {i.target}"
            for i in imports for name in i.names
            if name.startswith("_") and not name.startswith("__")
            and package_of(i.source, known) != package_of(i.target, known)]


def local_violations(imports) -> list[str]:
    bad = []
    for i in imports:
        if not i.local:
            continue
        lines = i.path.read_text().split("\n")
        context = lines[i.line - 1] + "\n" + (lines[i.line - 2] if i.line >= 2 else "")
        if not WHY_LOCAL.search(context):
            bad.append(f"{_where(i)}: {i.source} imports {i.target} inside a function without "
                       "saying why (a comment with 'lazy', 'heavy' or 'optional')")
    return bad


def import_cycles(imports) -> list[list[str]]:
    edges: dict[str, set[str]] = {}
    for i in imports:
        edges.setdefault(i.source, set()).add(i.target)
    return cycles(edges)


def test_imports_point_down_only():
    bad = layering_violations(all_imports())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_cycles():
    found = import_cycles(all_imports())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_systems_do_not_import_each_other():
    bad = system_violations(all_imports())
    assert not bad, "\n".join(bad)


def test_no_private_names_across_packages():
    bad = private_violations(all_imports(), modules())
    assert not bad, "\n".join(bad)


def test_function_local_imports_say_why():
    bad = local_violations(all_imports())
    assert not bad, "\n".join(bad)


# -- the checker itself, on planted violations ------------------------------------------------

def _fake(tmp_path, name, text):
    path = tmp_path / (name.replace(".", "_") + ".py")
    path.write_text(text)
    return path


def test_the_checker_sees_each_violation(tmp_path):
    known = dict(modules())
    a = _fake(tmp_path, "a", "from moagcn.host.vgnn.fleet import weighted_ranges\n"
                             "def f():\n    from moagcn.sim.driver import Driver\n")
    known["moagcn.host.mixgcn.planted"] = a
    b = _fake(tmp_path, "b", "from moagcn.host.mixgcn.planted import x\n"
                             "from moagcn.host.graphs.ops import _private\n")
    known["moagcn.host.vgnn.planted"] = b
    c = _fake(tmp_path, "c", "from moagcn.host.training.fullgraph import train\n")
    known["moagcn.sim.planted"] = c
    imps = [i for n in ("moagcn.host.mixgcn.planted", "moagcn.host.vgnn.planted",
                        "moagcn.sim.planted") for i in imports_of(n, known[n], known)]
    assert any("moagcn.sim.planted" in v for v in layering_violations(imps))
    assert len(system_violations(imps)) == 2          # mixgcn -> vgnn and vgnn -> mixgcn
    assert any("'_private'" in v for v in private_violations(imps, known))
    assert any("moagcn.sim.driver" in v for v in local_violations(imps))
    cyc = import_cycles(imps + [Import("moagcn.host.vgnn.fleet", "moagcn.host.mixgcn.planted",
                                       (), False, 1, a)])
    assert ["moagcn.host.mixgcn.planted", "moagcn.host.vgnn.fleet",
            "moagcn.host.vgnn.planted"] in cyc or any(len(c) >= 2 for c in cyc)


def test_configurations_load_without_the_gateware():
    import subprocess
    import sys
    code = ("import sys, moagcn.core.spec, moagcn.hw.sspmm.config, moagcn.hw.hyscale.config, "
            "moagcn.cli.main; assert 'amaranth' not in sys.modules, 'amaranth'; "
            "assert 'moagcn.host' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_command_line_s_help_loads_without_torch():
    """``moagcn --help`` and ``moagcn perfmodel fit --help`` build every sub-command's parser:
    their defaults come from :mod:`moagcn.core.names`, not from the host modules (torch)."""
    import subprocess
    import sys
    code = ("import sys\nfrom moagcn.cli.main import main\n"
            "for argv in (['--help'], ['perfmodel', 'fit', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "assert 'torch' not in sys.modules, 'torch'")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_the_performance_model_s_regressor_names_are_its_regressors():
    from moagcn.core.names import PERF_REGRESSORS
    from moagcn.host.vgnn.regressors import REGRESSORS
    assert tuple(REGRESSORS) == PERF_REGRESSORS
