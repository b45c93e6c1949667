"""What the exhaustive proof (``python -m oracles.mufu prove``, and certify-card's) sweeps, and what a proof is
tied to: the sweeps with their input counts and the model sources whose sha256 a proof records. No torch, so
that the readers of proofs (recheck, certification) need no GPU.
"""

from oracles.mufu import tables

PROOF_FILE = tables.DATA_DIR / "exhaustive-proof.json"
UNARY_PROVED = ("ex2_approx_ftz_f32", "ex2_approx_f32", "rcp_approx_ftz_f32", "sigmoid_f32")
DIV_RECIPROCAL, DIV_PAIRS = "div_full_f32(1.0, y)", "div_full_f32(x, y) exponent pairs"
PAIR_DRAWS = 1 << 14  # per (exponent a, exponent b): 65,536 x 16,384 = 1,073,741,824 pairs
# The primitives' sweeps and their inputs: every input, the pairs PAIR_DRAWS of each pair of exponents.
PROOF_INPUTS = {**{name: 1 << 32 for name in UNARY_PROVED + (DIV_RECIPROCAL,)}, DIV_PAIRS: 256 * 256 * PAIR_DRAWS}
# The other approximate instructions modelled exactly (oracles.numpy_model.approx), each proved over all its
# inputs: float32 ones over 2^32, 16-bit ones over 2^16.
APPROX_F32 = ("rcp_approx_f32", "rsqrt_approx_ftz_f32", "rsqrt_approx_f32", "sqrt_approx_ftz_f32", "sqrt_approx_f32",
              "lg2_approx_ftz_f32", "lg2_approx_f32", "sin_approx_ftz_f32", "sin_approx_f32", "cos_approx_ftz_f32",
              "cos_approx_f32", "tanh_approx_f32")
APPROX_16 = ("ex2_approx_f16", "ex2_approx_ftz_bf16", "tanh_approx_f16", "tanh_approx_bf16")
MODEL_SOURCES = ("oracles/numpy_model/primitives.py", "oracles/numpy_model/_xp.py", "oracles/mufu/interpolator.py",
                 "oracles/mufu/data/mufu-coefficients.json")
APPROX_SOURCES = ("oracles/numpy_model/approx.py", "oracles/numpy_model/primitives.py", "oracles/numpy_model/_xp.py",
                  "oracles/mufu/interpolator.py", "oracles/mufu/segments.py",
                  "oracles/mufu/data/mufu-coefficients.json", "oracles/mufu/data/mufu-survey-coefficients.json")


def model_source_sha256(sources=MODEL_SOURCES):
    """sha256 over a model's sources and coefficients, so a proof is tied to the model it proved."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return tables.sha256(b"".join((root / name).read_bytes() for name in sources))
