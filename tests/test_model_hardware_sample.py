"""The NumPy model against the outputs the H200 gave for the stratified sample (recorded, with provenance)."""

import json

import numpy as np
import pytest
import torch

from oracles import numpy_model
from oracles.mufu import sample
from oracles.mufu.__main__ import APPROX_16, APPROX_F32, HALF_STRATA, SAMPLE_FILE, SAMPLED
from oracles.numpy_model import approx

RECORD = json.loads(SAMPLE_FILE.read_text())
# The routing primitives (oracles.numpy_model) and the other approximate float32 ops (oracles.numpy_model.approx),
# each over its strata; the 16-bit ops over all 2^16 inputs.
ARITY = {**SAMPLED, **{name: 1 for name in APPROX_F32}}
CASES = [(name, stratum) for name, arity in ARITY.items()
         for stratum in (sample.UNARY_STRATA if arity == 1 else sample.BINARY_STRATA)]


def _model(name):
    return getattr(approx if name in APPROX_F32 else numpy_model, name)


def _inputs(name, stratum):
    make = (sample.UNARY_STRATA if ARITY[name] == 1 else sample.BINARY_STRATA)[stratum]
    made = make()
    return [made] if ARITY[name] == 1 else list(made)


def _model_outputs(name, inputs):
    with np.errstate(all="ignore"):
        return _model(name)(*(x.view(np.float32) for x in inputs)).view(np.uint32)


def _hex(v):
    return f"0x{int(v):08x}"


def test_sample_was_recorded_on_an_h200_and_is_large_enough():
    prov = RECORD["provenance"]
    assert prov["gpu"] == "NVIDIA H200" and prov["compute_capability"] == "9.0"
    assert RECORD["digest_chunk"] == sample.DIGEST_CHUNK
    for name in ARITY:
        assert sum(s["count"] for s in RECORD["primitives"][name]["strata"].values()) >= 10**6
    for name in APPROX_16:
        assert RECORD["primitives"][name]["strata"]["all"]["count"] == 1 << 16


@pytest.mark.parametrize("name", APPROX_16)
def test_16_bit_models_match_every_recorded_hardware_output(name):
    inputs = HALF_STRATA["all"]()
    got = getattr(approx, name)(inputs).astype(np.uint32)
    digests = sample.chunk_digests(got)
    recorded = RECORD["primitives"][name]["strata"]["all"]["digests"]
    bad = [i for i, (a, b) in enumerate(zip(digests, recorded)) if a != b]
    assert len(digests) == len(recorded) and not bad, f"{name}: chunks {bad} differ from the H200"


@pytest.mark.parametrize("name,stratum", CASES)
def test_model_matches_recorded_hardware(name, stratum):
    inputs = _inputs(name, stratum)
    recorded = RECORD["primitives"][name]["strata"][stratum]
    assert recorded["count"] == inputs[0].size, "the sample generator changed since the recording"
    got = _model_outputs(name, inputs)
    if "outputs" in recorded:
        want = np.frombuffer(bytes.fromhex(recorded["outputs"]), ">u4").astype(np.uint32)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, [
            {"inputs": [_hex(x[i]) for x in inputs], "hardware": _hex(want[i]), "model": _hex(got[i])}
            for i in bad[:10]]
    digests = sample.chunk_digests(got)
    bad_chunks = [i for i, (a, b) in enumerate(zip(digests, recorded["digests"])) if a != b]
    assert len(digests) == len(recorded["digests"])
    assert not bad_chunks, (f"{len(bad_chunks)} chunks of {sample.DIGEST_CHUNK} differ from the H200, first at "
                            f"inputs {[_hex(x[bad_chunks[0] * sample.DIGEST_CHUNK]) for x in inputs]}")


def test_a_single_flipped_output_bit_is_caught():
    inputs = _inputs("sigmoid_f32", "binades")
    got = _model_outputs("sigmoid_f32", inputs)
    got[123_457] ^= 1
    digests = sample.chunk_digests(got)
    recorded = RECORD["primitives"]["sigmoid_f32"]["strata"]["binades"]["digests"]
    assert [i for i, (a, b) in enumerate(zip(digests, recorded)) if a != b] == [123_457 // sample.DIGEST_CHUNK]


@pytest.mark.parametrize("name,stratum", CASES)
def test_the_torch_path_gives_the_numpy_bits(name, stratum):
    """The exhaustive proof runs the model on torch tensors: on the sample, that path equals the NumPy one."""
    inputs = _inputs(name, stratum)
    tensors = [torch.from_numpy(x.view(np.int32)).view(torch.float32) for x in inputs]
    with np.errstate(all="ignore"):
        got = _model(name)(*tensors).view(torch.int32).numpy().view(np.uint32)
    bad = np.flatnonzero(got != _model_outputs(name, inputs))
    assert bad.size == 0, [{"inputs": [_hex(x[i]) for x in inputs], "torch": _hex(got[i])} for i in bad[:10]]


def test_the_numpy_common_path_gives_the_torch_bits_at_its_edges():
    """NumPy's sigmoid_f32 takes a shorter path where t = x * -log2(e) lies in [-126, 126): around every
    integer t from -130 to 130 (those ends, and a negative t with no fraction bits, are where it could
    differ), 64 neighbours each way and the signed zeros, it equals the torch path (the generic model)."""
    log2e = np.float64(np.int32(0x3FB8AA3B).view(np.float32))
    centres = (np.arange(-130, 131) / log2e).astype(np.float32).view(np.int32)
    x = (centres[:, None] + np.arange(-64, 65, dtype=np.int32)).reshape(-1).view(np.float32)
    t = x * -np.float32(log2e)
    assert np.count_nonzero((t < 0) & (t == np.round(t))) > 100 and (t == -126).any() and (t == 126).any()
    got = numpy_model.sigmoid_f32(x).view(np.uint32)
    want = numpy_model.sigmoid_f32(torch.from_numpy(x)).view(torch.int32).numpy().view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [{"x": _hex(x.view(np.uint32)[i]), "numpy": _hex(got[i]), "torch": _hex(want[i])}
                           for i in bad[:10]]
