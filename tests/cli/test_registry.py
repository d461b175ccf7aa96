"""One registry, one name, one configuration path, one choice syntax."""

import pytest

from moagcn.cli.main import main
from moagcn.core.registry import accelerator_names, design_names, get_design
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice, parse_devices


def test_every_design_is_listed_once_and_the_accelerators_have_specs():
    assert design_names()[:5] == ["fp32-add", "fp32-mul", "fp32-muladd", "sspmm", "hyscale"]
    assert {"sspmm", "hyscale"} <= set(accelerator_names())
    for name in accelerator_names():
        assert get_spec(name).name == name
    with pytest.raises(UserError, match="not an accelerator"):
        get_design("fp32-add").accelerator()
    with pytest.raises(UserError, match="unknown design 'hyscal'; available designs: "):
        get_design("hyscal")


def test_one_configuration_path():
    d = get_design("sspmm")
    assert d.configure() == get_spec("sspmm").config() == d.preset_table["default"]
    assert d.configure("tiny", {"lanes": "8"}).lanes == 8
    with pytest.raises(UserError, match="no presets"):
        get_design("fp32-add").configure("tiny")


def test_hw_generate_hyscale_and_its_earlier_names(tmp_path, capsys):
    assert main(["hw", "generate", "hyscale", "--preset", "tiny", "--out", str(tmp_path)]) == 0
    assert "module hyscale_layer" in (tmp_path / "hyscale-layer.v").read_text()
    assert main(["hw", "generate", "hyscale-system", "--preset", "tiny", "--out",
                 str(tmp_path)]) == 0
    assert "module hyscale_system" in (tmp_path / "hyscale-system.v").read_text()
    err = capsys.readouterr().err
    assert "design 'hyscale-system' is now called 'hyscale'" in err


def test_the_choice_syntax_design_preset_params():
    a = AcceleratorChoice.parse("sspmm:multi:lanes=4")
    b = AcceleratorChoice.parse("sspmm:preset=multi:lanes=4")
    assert a == b and a.preset == "multi" and a.param("lanes") == "4"
    assert a.key == "sspmm:preset=multi:lanes=4"
    assert AcceleratorChoice.parse("sspmm:default") == AcceleratorChoice.parse("sspmm")
    cpu, acc = parse_devices("cpu:format=bf16,sspmm:tiny", device="rtl")
    assert cpu.is_cpu and cpu.param("format") == "bf16" and acc.device == "rtl"
    assert AcceleratorChoice.from_describe(acc.describe()) == acc
    with pytest.raises(UserError, match="'lanes' is not a preset of sspmm"):
        AcceleratorChoice.parse("sspmm:lanes")
