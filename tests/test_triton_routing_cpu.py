"""fused_musespark1x_routing refuses every call outside Muse Spark's contract, naming the argument.

These run on CPU tensors: every check except NaN (which needs the device's values) comes before the
device check, so each one is reached here.
"""

import numpy as np
import pytest
import torch

from oracles.triton_routing import fused_musespark1x_routing

B = 3


def logits(b=B):
    return torch.zeros(b, 256, dtype=torch.float32)


def bias():
    return torch.zeros(256, dtype=torch.float32)


def unaligned(shape, dtype):
    """A contiguous tensor starting one element past a 16-byte boundary."""
    n = int(np.prod(shape))
    return torch.zeros(n + 1, dtype=dtype)[1:].view(shape)


def route(**overrides):
    args = {"logits": logits(), "bias": bias()}
    args.update(overrides)
    return fused_musespark1x_routing(**args)


@pytest.mark.parametrize("name, value", [
    ("top_k", 4), ("top_k", 8.0), ("top_k", True),
    ("renormalize", 1), ("renormalize", "yes"),
    ("routed_scaling_factor", float("nan")), ("routed_scaling_factor", float("inf")),
    ("routed_scaling_factor", 3.5e38), ("routed_scaling_factor", 10**400), ("routed_scaling_factor", "2.5"), ("routed_scaling_factor", True),
    ("router_score_division_eps", 1e-6), ("router_score_division_eps", 0.0), ("router_score_division_eps", "1e-15"),
    ("scoring_func", "softmax"),
    ("output_multiplier", 2.0),
])
def test_keywords_outside_muse_spark_call_are_refused(name, value):
    with pytest.raises(ValueError, match=f"^{name} "):
        route(**{name: value})


@pytest.mark.parametrize("name, value", [
    ("top_k", np.int64(8)), ("renormalize", np.bool_(False)), ("routed_scaling_factor", 2),
    ("routed_scaling_factor", np.float32(2.5)), ("routed_scaling_factor", -1.5),
    ("router_score_division_eps", np.float32(1e-15)),
])
def test_equivalent_spellings_pass_the_keyword_checks(name, value):
    # Accepted keywords reach the device check, the first one a CPU tensor fails.
    with pytest.raises(ValueError, match="^logits must be on a CUDA device"):
        route(**{name: value})


@pytest.mark.parametrize("name, value", [
    ("logits", np.zeros((B, 256), np.float32)),
    ("logits", torch.zeros(B, 256, dtype=torch.float64)),
    ("logits", torch.zeros(B, 255)),
    ("logits", torch.zeros(256)),
    ("logits", torch.zeros(256, B).t()),
    ("logits", unaligned((B, 256), torch.float32)),
    ("bias", torch.zeros(256, dtype=torch.bfloat16)),
    ("bias", torch.zeros(1, 256)),
    ("bias", torch.zeros(512)[::2]),
    ("bias", unaligned((256,), torch.float32)),
    ("out_weights", torch.zeros(B, 8, dtype=torch.float64)),
    ("out_weights", torch.zeros(B + 1, 8)),
    ("out_weights", torch.zeros(8, B).t()),
    ("out_weights", unaligned((B, 8), torch.float32)),
    ("out_weights", [0.0] * 8),
    ("out_ids", torch.zeros(B, 8, dtype=torch.int64)),
    ("out_ids", torch.zeros(B, 7, dtype=torch.int32)),
])
def test_tensors_outside_the_contract_are_refused(name, value):
    with pytest.raises(ValueError, match=f"^{name} "):
        route(**{name: value})


def test_outputs_overlapping_inputs_are_refused():
    x = logits()
    with pytest.raises(ValueError, match="^out_weights must not overlap logits"):
        route(logits=x, out_weights=x.view(-1)[: B * 8].view(B, 8))
    ids = torch.zeros(B, 8, dtype=torch.int32)
    with pytest.raises(ValueError, match="^out_ids must not overlap out_weights"):
        route(out_weights=ids.view(torch.float32), out_ids=ids)


def test_cpu_tensors_are_refused_before_anything_is_written():
    out = torch.full((B, 8), 7.0)
    with pytest.raises(ValueError, match="^logits must be on a CUDA device"):
        route(out_weights=out)
    assert bool((out == 7.0).all())
