"""IEEE-754 binary32 arithmetic: pipelined adder, multiplier and multiply-add."""

from moagcn.hw.arith.adder import ADDER_STAGES, Fp32AddConfig, Fp32Adder
from moagcn.hw.arith.muladd import Fp32MulAdd, Fp32MulAddConfig
from moagcn.hw.arith.multiplier import MULTIPLIER_STAGES, Fp32Multiplier, Fp32MulConfig
from moagcn.hw.arith.unit import PipelinedBinaryUnit, UnitConfig

__all__ = [
    "ADDER_STAGES", "MULTIPLIER_STAGES",
    "Fp32AddConfig", "Fp32Adder", "Fp32MulConfig", "Fp32Multiplier",
    "Fp32MulAdd", "Fp32MulAddConfig", "PipelinedBinaryUnit", "UnitConfig",
]
