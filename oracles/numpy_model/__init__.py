"""The NumPy bitwise model of the routing kernel: every float operation as the H200 computes it.

Pure functions, float32 (and int32) NumPy arrays in and out, or torch tensors of one device in and out.
Bad input raises ValueError naming the argument (TypeError for a wrong number of arguments). ``route`` takes
any b >= 1 rows; ``routing_metadata`` takes the kernel's 1 <= b <= 8. Raises RuntimeError at import if the process flushes subnormals.
"""

from common.fpenv import assert_subnormals_kept
from oracles.numpy_model.primitives import (
    add_rn,
    div_full_f32,
    ex2_approx_f32,
    ex2_approx_ftz_f32,
    mul_rn,
    rcp_approx_ftz_f32,
    sigmoid_f32,
)
from oracles.numpy_model.routing import route, routing_metadata

assert_subnormals_kept()

__all__ = [
    "add_rn",
    "mul_rn",
    "ex2_approx_ftz_f32",
    "ex2_approx_f32",
    "rcp_approx_ftz_f32",
    "div_full_f32",
    "sigmoid_f32",
    "route",
    "routing_metadata",
]
