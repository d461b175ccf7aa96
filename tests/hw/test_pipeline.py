import pytest

from moagcn.hw.common.pipeline import place_registers


@pytest.mark.parametrize("stages", [1, 2, 5, 7])
@pytest.mark.parametrize("latency", range(0, 12))
def test_register_placement_sums_to_latency(stages, latency):
    regs = place_registers(stages, latency)
    assert len(regs) == stages
    assert sum(regs) == latency
    if latency:
        assert regs[-1] >= 1, "outputs must come from flops when latency > 0"
    if latency <= stages:
        assert max(regs) <= 1


def test_register_placement_rejects_bad_arguments():
    with pytest.raises(ValueError):
        place_registers(0, 1)
    with pytest.raises(ValueError):
        place_registers(3, -1)
