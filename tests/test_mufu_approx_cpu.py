"""The other approximate ops' models (oracles.numpy_model.approx) against the H200's survey record.

The survey (``python -m oracles.mufu survey``, one GPU call) kept whole binades of outputs; the committed
record (oracles/mufu/data/mufu-survey.json) holds each one's sha256, per-binade output classes over all
2^32 inputs, and every 16-bit output (mufu-survey-half.bin).
"""

import hashlib
import json

import numpy as np
import pytest
import torch

from oracles.mufu import recheck, segments, survey
from oracles.numpy_model import approx

DATA = segments.COEFFICIENT_FILE.parent
SURVEY = json.loads((DATA / "mufu-survey.json").read_text())
HALVES = survey.read_halves(SURVEY)
F32_OPS = ("rcp_approx_f32", "rsqrt_approx_ftz_f32", "rsqrt_approx_f32", "sqrt_approx_ftz_f32", "sqrt_approx_f32",
           "lg2_approx_ftz_f32", "lg2_approx_f32", "sin_approx_f32", "cos_approx_f32", "tanh_approx_f32")
HALF_OPS = ("ex2_approx_f16", "ex2_approx_ftz_bf16", "tanh_approx_f16", "tanh_approx_bf16")
BINADE = 1 << 23
# Every surveyed binade of RSQ and SQRT; of LG2's 69 and SIN's and COS's 27 each (all of them matched when
# fitted) a few: those fitted from, the ends and some between, to keep the CPU tier fast. Of TANH's 254: the 11
# it is fitted from (119-129), the binades beside them (x itself below, 1.0 above) and the ends.
SOME = {"lg2_approx_ftz_f32": (1, 2, 64, 100, 120, 125, 126, 127, 128, 129, 157, 254),
        "sin_approx_f32": (1, 124, 127, 130), "cos_approx_f32": (1, 124, 127, 130),
        "tanh_approx_f32": (1, 60, 117, 118, *range(119, 130), 130, 131, 200, 254)}
WHOLE = [c for c in SURVEY["chunks"] if c["op"] in F32_OPS and c["exponent"] in SOME.get(c["op"], (c["exponent"],))]
# Binades whose outputs the special-value rules decide: zeros and subnormals, infinities and NaNs, both signs;
# for rcp.approx.f32 also the binade whose results are subnormal (its x 0.25 branch).
CLASS_BINADES = {name: (0, 255, 256, 511) for name in F32_OPS} | {"rcp_approx_f32": (0, 254, 256, 510)}


def _binade(sign, exponent, count=BINADE):
    return ((sign << 31) | (exponent << 23) | np.arange(count, dtype=np.uint32)).astype(np.uint32)


def _classes(y):
    e, f = (y >> 23) & 0xFF, y & 0x7FFFFF
    cls = np.where(e == 255, np.where(f == 0, 3, 4), np.where(e == 0, np.where(f == 0, 2, 1), 0)) + 5 * (y >> 31)
    return np.bincount(cls.astype(np.int64), minlength=10).tolist()


def test_the_survey_was_taken_on_an_h200_and_the_coefficients_were_fitted_to_it():
    assert SURVEY["provenance"]["gpu"] == "NVIDIA H200" and SURVEY["provenance"]["compute_capability"] == "9.0"
    record = json.loads(segments.COEFFICIENT_FILE.read_text())
    assert record["survey_provenance"] == SURVEY["provenance"]
    assert {c["op"] for c in WHOLE} == set(F32_OPS) - {"rcp_approx_f32"}
    assert all(any(c["op"] == op and c["exponent"] == e for c in WHOLE) for op, es in SOME.items() for e in es)


@pytest.mark.parametrize("chunk", WHOLE, ids=lambda c: f"{c['op']}-{c['sign']}-{c['exponent']}")
def test_the_model_gives_every_output_of_a_surveyed_binade(chunk):
    x = _binade(chunk["sign"], chunk["exponent"], chunk["count"])
    got = getattr(approx, chunk["op"])(x.view(np.float32)).view(np.uint32)
    assert hashlib.sha256(got.tobytes()).hexdigest() == chunk["sha256"]


def test_rsq_and_sqrt_follow_from_their_base_binades_in_every_normal_binade():
    """The model builds every binade from [1, 4) by an exponent shift; the H200 did so in all 254."""
    for op in ("rsqrt_approx_ftz_f32", "sqrt_approx_ftz_f32"):
        counts = SURVEY["separability"][op]
        assert counts[1:255] == [BINADE] * 254 and counts[0] == counts[255] == 0, op


@pytest.mark.parametrize("name", F32_OPS)
def test_output_classes_of_the_special_binades_match_the_h200(name):
    for b in CLASS_BINADES[name]:
        x = _binade(b >> 8, b & 0xFF)
        assert _classes(getattr(approx, name)(x.view(np.float32)).view(np.uint32)) == SURVEY["classes"][name][b], b


@pytest.mark.parametrize("name", HALF_OPS)
def test_the_16_bit_models_give_every_h200_output(name):
    inputs, want = HALVES["inputs"], HALVES[name]
    got = getattr(approx, name)(inputs)
    on_torch = getattr(approx, name)(torch.from_numpy(inputs.view(np.int16))).numpy().view(np.uint16)
    assert inputs.size == 1 << 16 and np.unique(inputs).size == 1 << 16
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(inputs[i]), hex(want[i]), hex(got[i])) for i in bad[:8]]
    assert np.array_equal(on_torch, got)


@pytest.mark.parametrize("name", F32_OPS)
def test_the_torch_form_gives_the_numpy_bits(name):
    """NumPy takes a shorter path on blocks of positive normals; on random patterns of every class (and a
    block of positive normals only) the torch form, which the GPU proof runs, gives the same bits."""
    rng = np.random.default_rng(30)
    x = np.concatenate([rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint32),
                        rng.integers(1 << 23, 0x7F800000, 1 << 17, dtype=np.uint32)])
    fn = getattr(approx, name)
    got = fn(x.view(np.float32)).view(np.uint32)
    want = fn(torch.from_numpy(x.view(np.int32)).view(torch.float32)).view(torch.int32).numpy().view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(x[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="x must be float32"):
        approx.rsqrt_approx_f32(np.ones(3, np.float64))
    with pytest.raises(ValueError, match="h must be uint16"):
        approx.ex2_approx_f16(np.ones(3, np.float16))


@pytest.mark.parametrize("unit,segment", [("rsq", 1), ("sqrt", 100), ("tanh", 20)])
def test_the_fitter_recovers_a_units_coefficients_from_its_own_outputs(unit, segment):
    """`fit-survey` needs the survey's 30 MB (not committed); on a segment the model itself generates, its
    search finds exactly one (C1, C2), the stored one, and a C0 interval starting at the stored C0."""
    coefficients = segments.load()[unit]
    x = np.arange(1 << coefficients["x_bits"], dtype=np.int64)
    c0, c1, c2 = (int(coefficients[k][segment]) for k in ("c0", "c1", "c2"))
    table = (c0 + c1 * x + c2 * coefficients["square"]) >> coefficients["result_shift"]
    fits = segments.fit_segment(table, table + 1, coefficients["square"], coefficients["result_shift"])
    assert [(a, b) for a, b, _, _ in fits] == [(c1, c2)] and fits[0][2] <= c0 < fits[0][3]
    table[len(table) // 2] += 1  # one entry off: no pair fits any more
    assert segments.fit_segment(table, table + 1, coefficients["square"], coefficients["result_shift"]) == []


H200 = {"gpu": "NVIDIA H200", "compute_capability": "9.0"}


def _proof(mismatches=0, sha="s", inputs=1 << 32):
    return {"provenance": dict(H200), "approximate_ops": {"model_source_sha256": sha, "results": {
        "rsqrt_approx_f32": {"inputs": inputs, "mismatches": mismatches}}}}


def test_an_approximate_op_is_trusted_only_where_its_proof_holds():
    trust = recheck.approx_trust(_proof(), H200, "s")
    assert trust["rsqrt_approx_f32"][0] and not trust["sqrt_approx_f32"][0]
    assert "no exhaustive proof recorded" in trust["sqrt_approx_f32"][1]
    for record, device, sha, why in ((_proof(mismatches=1), H200, "s", "1 mismatches"),
                                     (_proof(inputs=1 << 31), H200, "s", "2,147,483,648 inputs"),
                                     (_proof(), H200, "t", "changed since its proof"),
                                     (_proof(), {"gpu": "NVIDIA B200", "compute_capability": "10.0"}, "s",
                                      "this GPU is NVIDIA B200")):
        trusted, line = recheck.approx_trust(record, device, sha)["rsqrt_approx_f32"]
        assert not trusted and why in line, line



def test_numpys_sine_table_is_the_interpolator_the_torch_form_runs():
    """sin and cos on NumPy gather S from a table the coefficients make once; torch runs the interpolator
    (what the GPU proof checks): equal at all 2^23 indices."""
    index = np.arange(1 << 23, dtype=np.int32)
    on_torch = approx._sine_of(torch.from_numpy(index)).numpy()
    assert np.array_equal(approx._every_sine(), on_torch)


def test_numpys_tanh_table_is_the_interpolator_the_torch_form_runs():
    """tanh on NumPy gathers from every index's output, computed once; torch runs the interpolator (what the
    GPU proof checks): equal at all 51 x 2^17 indices."""
    table = approx._every_tanh()
    on_torch = approx._tanh_of(torch.from_numpy(np.arange(table.size, dtype=np.int32))).numpy()
    assert table.size == 51 << 17 and np.array_equal(table, on_torch)


def test_tanh_is_odd_like_the_h200():
    """The survey saw f(-x) = -f(x) bit for bit in every binade but NaN's; the model on random patterns of
    every other class."""
    odd = SURVEY["symmetry"]["tanh_approx_f32"]["odd"]
    assert odd[:255] == [BINADE] * 255
    x = np.random.default_rng(30).integers(0, 0x7F800001, 1 << 20, dtype=np.uint32)
    plus = approx.tanh_approx_f32(x.view(np.float32)).view(np.uint32)
    minus = approx.tanh_approx_f32((x | 0x80000000).view(np.float32)).view(np.uint32)
    assert np.array_equal(minus, plus | 0x80000000)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_the_ftz_forms_of_sin_and_cos_are_the_plain_ones(name):
    """One SASS for both (data/sass-sequences.json), and the survey saw no input where they differ."""
    assert getattr(approx, f"{name}_approx_ftz_f32") is getattr(approx, f"{name}_approx_f32")
    assert not any(SURVEY["ftz_pairs"][f"{name}_approx_ftz_f32 vs {name}_approx_f32"])
    sass = json.loads((DATA / "sass-sequences.json").read_text())["sass"]
    assert sass[f"{name}.approx.ftz.f32"] == sass[f"{name}.approx.f32"]


def test_the_committed_proof_covers_every_modelled_op_on_all_its_inputs_on_the_h200():
    """Issue 30's record: every op of oracles.numpy_model.approx swept over all 2^32 (2^16) inputs on an H200
    with 0 mismatches, each in under a minute, for the model sources as committed."""
    from oracles.mufu.__main__ import APPROX_16, APPROX_F32, PROOF_FILE

    record = json.loads(PROOF_FILE.read_text())
    assert {k: record["provenance"][k] for k in H200} == H200
    results = record["approximate_ops"]["results"]
    assert sorted(results) == sorted(APPROX_F32 + APPROX_16)
    for op, result in results.items():
        assert result["inputs"] == (1 << 16 if op in APPROX_16 else 1 << 32) and result["mismatches"] == 0, op
        assert result["seconds"] < 60, op
    assert all(trusted for trusted, _ in recheck.approx_trust(record, H200).values())
