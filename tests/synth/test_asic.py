"""The 28 nm area and power model of the S-SpMM accelerator against hand-worked figures."""

import json

import pytest

from moagcn.cli.main import main
from moagcn.hw.sspmm.config import preset
from moagcn.synth.asic import sspmm_area


def test_paper_preset_by_hand():
    """16,384 adders of 4,184 µm² at 45 nm scaled by (28/45)², 97 MiB of SRAM at 0.127 µm² a
    bit over 60 % array efficiency; power at 500 MHz from 0.9 pJ x 28/45 per add and 20 pJ x
    28/45 per 64 bits read."""
    r = sspmm_area(preset("paper"))
    assert r["adders"] == 16384
    assert r["buffers_mib"] == {"node": 32.0, "output": 32.0, "index": 32.0, "mask": 1.0}
    adder_mm2 = 16384 * 4184 * (28 / 45) ** 2 / 1e6                  # 26.540 mm²
    sram_mm2 = 97 * 8 * 2 ** 20 * 0.127 / 0.6 / 1e6                   # 172.232 mm²
    assert r["adder_mm2"] == pytest.approx(adder_mm2) == pytest.approx(26.540, abs=1e-3)
    assert r["sram_mm2"] == pytest.approx(sram_mm2) == pytest.approx(172.232, abs=1e-3)
    assert r["area_mm2"] == pytest.approx(198.772, abs=1e-3)
    assert r["sram_share"] == pytest.approx(172.232 / 198.772, abs=1e-5)
    add_w = 16384 * 0.9 * 28 / 45 * 1e-12 * 500e6                    # 4.588 W
    bits = 16384 * (32 + 2 * 32 / 32 + 32 / 256 + 1 / 32)             # per cycle
    sram_w = bits * 20 * 28 / 45 / 64 * 1e-12 * 500e6                 # 54.407 W
    assert r["adder_w"] == pytest.approx(add_w) == pytest.approx(4.588, abs=1e-3)
    assert r["sram_w"] == pytest.approx(sram_w) == pytest.approx(54.407, abs=1e-3)
    half = sspmm_area(preset("paper"), activity=0.5)
    assert half["power_w"] == pytest.approx(r["power_w"] / 2)
    assert half["area_mm2"] == r["area_mm2"]
    # the RTL's node and index buffer per slice: 512 x 64 MiB more, less the one counted
    assert r["sram_mib_rtl_copies"] == 97 + 511 * 64


def test_area_command(tmp_path, capsys):
    out = tmp_path / "area.json"
    assert main(["sspmm", "area", "--preset", "paper", "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "283.35" in text and "198.8" in text and "38.96" in text
    assert json.loads(out.read_text())["area_mm2"] == pytest.approx(198.772, abs=1e-3)
    assert main(["sspmm", "area", "--preset", "paper", "--activity", "1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--activity 1.5" in err
