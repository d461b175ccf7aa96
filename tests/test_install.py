"""A non-editable install holds every package: packages are found (setup.py), never listed.

The wheel is built from the source tree as ``pip install .`` builds it, and must contain every
folder of moagcn/, hw/, sim/, host/ and synth/ that holds an ``__init__.py`` (a new
``hw/<design>/`` included) and the bundled datasets. The full fresh-venv install is
``test_fresh_venv_runs_the_commands`` (slow).
"""

import fcntl
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"moagcn": "moagcn", "hw": "moagcn/hw", "sim": "moagcn/sim", "host": "moagcn/host",
           "synth": "moagcn/synth"}


def source_packages() -> set[str]:
    found = set()
    for folder, prefix in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if folder == "moagcn" and rel.parts and rel.parts[0] in FOLDERS:
                continue
            found.add(str(Path(prefix) / rel))
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # one build at a time: each test worker builds its own wheel, and two builds in the tree's
    # one build/ folder at once fail (seen: "File exists" and "No such file" under
    # build/bdist.*), so the builds take turns on a lock file
    with open(tmp_path_factory.getbasetemp().parent / "moagcn-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "-w", str(out), str(ROOT)], check=True)
    return zipfile.ZipFile(next(out.glob("moagcn-*.whl")))


def test_the_wheel_holds_every_package(wheel):
    inits = {str(Path(n).parent) for n in wheel.namelist() if n.endswith("/__init__.py")}
    missing = source_packages() - inits
    assert not missing, f"packages missing from the wheel: {sorted(missing)}"
    assert {"moagcn/host/hyscale", "moagcn/sim/sspmm", "moagcn/hw/sspmm"} <= inits
    assert "moagcn/data/cora.npz" in wheel.namelist()


def test_the_check_sees_a_missing_package(wheel, tmp_path, monkeypatch):
    # a package the wheel cannot have: the check must name it
    (tmp_path / "hw" / "newdesign").mkdir(parents=True)
    (tmp_path / "hw" / "newdesign" / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert source_packages() == {"moagcn/hw/newdesign"}
    inits = {str(Path(n).parent) for n in wheel.namelist() if n.endswith("/__init__.py")}
    assert source_packages() - inits == {"moagcn/hw/newdesign"}


@pytest.mark.slow
def test_fresh_venv_runs_the_commands(tmp_path):
    """``pip install .`` (not editable) into a new venv, then ``moagcn hw generate sspmm`` and
    ``moagcn sspmm run`` on the RTL from the installed package."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(ROOT)], check=True)
    moagcn = str(venv / "bin" / "moagcn")
    work = tmp_path / "run"
    work.mkdir()
    subprocess.run([moagcn, "hw", "generate", "sspmm", "--preset", "tiny", "--out", "gen"],
                   check=True, cwd=work)
    assert (work / "gen" / "sspmm.v").exists()
    code = ("import numpy as np, scipy.sparse as sp; rng = np.random.default_rng(0); "
            "A = sp.random(60, 60, density=0.08, random_state=1, format='csr'); "
            "np.savez('g.npz', indptr=A.indptr, indices=A.indices, shape=np.array(A.shape)); "
            "np.save('h.npy', rng.standard_normal((60, 12)).astype(np.float32))")
    subprocess.run([str(py), "-c", code], check=True, cwd=work)
    subprocess.run([moagcn, "sspmm", "run", "--graph", "g.npz", "--features", "h.npy",
                    "--out", "z.npy", "--preset", "tiny", "--device", "rtl"], check=True,
                   cwd=work)
    assert (work / "z.npy").exists()
