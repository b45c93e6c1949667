"""The NumPy bitwise model of the routing kernel: every float operation as the H200 computes it.

Pure functions, float32 (and int32) NumPy arrays in and out. Raises RuntimeError at import if the process
flushes subnormals.
"""

from oracles.fpenv import assert_subnormals_kept
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
