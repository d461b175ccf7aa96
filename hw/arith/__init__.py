"""IEEE-754 binary32 arithmetic: pipelined adder, multiplier and multiply-add."""

from .adder import ADDER_STAGES, Fp32AddConfig, Fp32Adder
from .muladd import Fp32MulAdd, Fp32MulAddConfig
from .multiplier import MULTIPLIER_STAGES, Fp32Multiplier, Fp32MulConfig
from .unit import PipelinedBinaryUnit, UnitConfig

__all__ = [
    "ADDER_STAGES", "MULTIPLIER_STAGES",
    "Fp32AddConfig", "Fp32Adder", "Fp32MulConfig", "Fp32Multiplier",
    "Fp32MulAdd", "Fp32MulAddConfig", "PipelinedBinaryUnit", "UnitConfig",
]
