"""The import graph of the packages points down only: base <- core <- hw <- sim <- host <- cli.

Every ``import`` in the source (module level and inside functions) is read with ``ast``; an
import of a higher layer from a lower one is a failure, so ``sim`` never imports ``host`` and
nothing below the CLI imports it.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: package folder -> (import name, layer); a module may import its own layer or lower ones
LAYERS = {"core": 1, "hw": 2, "sim": 3, "synth": 4, "host": 4, "cli": 5, "base": 0}
FOLDERS = {"moagcn/core": "core", "hw": "hw", "sim": "sim", "synth": "synth", "host": "host"}
BASE = {"moagcn.errors", "moagcn.config", "moagcn"}


def layer_of_module(name: str) -> str | None:
    if not name.startswith("moagcn"):
        return None
    parts = name.split(".")
    if len(parts) == 1 or name in BASE:
        return "base"
    if parts[1] in ("core", "hw", "sim", "synth", "host"):
        return parts[1]
    return "cli"       # moagcn.cli.main, moagcn.cli_* and moagcn.__main__


def source_files():
    for folder, layer in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            yield path, layer
    for path in (ROOT / "moagcn").glob("*.py"):
        name = "moagcn." + path.stem
        yield path, "base" if name in BASE or path.stem == "__init__" else "cli"


def imports(path: Path, package: str):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:           # relative: resolve against the module's package
                base = package.split(".")[:-node.level]
                yield ".".join(base + ([node.module] if node.module else []))
            elif node.module:
                yield node.module


def package_name(path: Path, layer: str) -> str:
    prefix = {"core": "moagcn.core", "hw": "moagcn.hw", "sim": "moagcn.sim",
              "synth": "moagcn.synth", "host": "moagcn.host"}.get(layer, "moagcn")
    folder = {"core": ROOT / "moagcn/core", "hw": ROOT / "hw", "sim": ROOT / "sim",
              "synth": ROOT / "synth", "host": ROOT / "host"}.get(layer, ROOT / "moagcn")
    rel = path.parent.relative_to(folder).parts
    return ".".join([prefix, *rel, "x"])     # "x": the module itself, for relative imports


def test_imports_point_down_only():
    bad = []
    for path, layer in source_files():
        for target in imports(path, package_name(path, layer)):
            other = layer_of_module(target)
            if other is None:
                continue
            if LAYERS[other] > LAYERS[layer] or (layer != other and LAYERS[other] ==
                                                  LAYERS[layer]):
                bad.append(f"{path.relative_to(ROOT)} ({layer}) imports {target} ({other})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_check_sees_a_violation(tmp_path):
    # the checker itself: a sim module importing host is reported
    fake = tmp_path / "m.py"
    fake.write_text("from moagcn.host.devices.select import make_device\n")
    targets = list(imports(fake, "moagcn.sim.x"))
    assert [layer_of_module(t) for t in targets] == ["host"]
    assert LAYERS["host"] > LAYERS["sim"]


def test_configurations_load_without_the_gateware():
    import subprocess
    import sys
    code = ("import sys, moagcn.core.spec, moagcn.hw.sspmm.config, moagcn.hw.hyscale.config, "
            "moagcn.cli.main; assert 'amaranth' not in sys.modules, 'amaranth'; "
            "assert 'moagcn.host' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
