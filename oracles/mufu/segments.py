"""Segmented quadratic interpolators fitted from the survey (``python -m oracles.mufu fit-survey DIR``).

Same family as MUFU.EX2 and MUFU.RCP (oracles.mufu.interpolator): an index i of ``index_bits`` bits; its top
bits pick a segment's (C0, C1, C2), the low ``x_bits`` give x, and R = (C0 + C1*x + C2*sq(x)) >> shift with
sq the truncated squarer (interpolator.truncated_square) at ``square_truncation``. Per unit the file holds the
format of i and R and one (C0, C1, C2) per segment, C0 the least value of its exact interval. A unit's
measurements bound each R to an interval [low, high) (one value for RSQ and SQRT, whose outputs show R
whole; a range for LG2, whose outputs show its V only to their float precision).
"""

import functools
import json
import re
from pathlib import Path

import numpy as np

from oracles.mufu.interpolator import truncated_square

COEFFICIENT_FILE = Path(__file__).resolve().parent / "data" / "mufu-survey-coefficients.json"
FORMAT = "mufu-segmented-quadratic-1"
C1_WINDOW, C2_WINDOW = 24, 6
_PROBE_STRIDE = 61


def _bounds(low, high, x, sq, c1, c2, shift):
    t = c1 * x + c2 * sq
    return int(((low << shift) - t).max()), int(((high << shift) - t).min())


def fit_segment(low, high, sq, shift):
    """[(c1, c2, c0_low, c0_high)]: every integer pair near the least-squares one whose R lies in
    [low, high) at every x of the segment, with the interval of C0 values that do so."""
    x = np.arange(low.size, dtype=np.int64)
    design = np.stack([np.ones(low.size), x / low.size, sq / low.size**2], axis=1)
    proposal = np.linalg.lstsq(design, (low + high) / 2, rcond=None)[0] * (1 << shift)
    c1_0, c2_0 = int(round(proposal[1] / low.size)), int(round(proposal[2] / low.size**2))
    probe = np.r_[0:low.size:_PROBE_STRIDE, low.size - 1]
    fits = []
    for c2 in range(c2_0 - C2_WINDOW, c2_0 + C2_WINDOW + 1):
        for c1 in range(c1_0 - C1_WINDOW, c1_0 + C1_WINDOW + 1):
            a, b = _bounds(low[probe], high[probe], x[probe], sq[probe], c1, c2, shift)
            if a < b:
                a, b = _bounds(low, high, x, sq, c1, c2, shift)
                if a < b:
                    fits.append((c1, c2, a, b))
    return fits


def fit_unit(name, low, high, x_bits, square_truncation, shift):
    """{c0, c1, c2: [per segment]} with every R in [low, high) (int64 per index), or ValueError naming the
    segments without exactly one fitting (C1, C2)."""
    sq = truncated_square(np.arange(1 << x_bits, dtype=np.int64), square_truncation)
    fits = [fit_segment(a, b, sq, shift) for a, b in zip(low.reshape(-1, 1 << x_bits), high.reshape(-1, 1 << x_bits))]
    wrong = {s: len(f) for s, f in enumerate(fits) if len(f) != 1}
    if wrong:
        raise ValueError(f"{name}: segments without exactly one fitting (C1, C2) {{segment: pairs}}: {wrong}")
    return {"c0": [f[0][2] for f in fits], "c1": [f[0][0] for f in fits], "c2": [f[0][1] for f in fits]}


# The structure found on the H200's survey. RSQ, SQRT: the index is (exponent parity, 23-bit fraction) of an
# input in [1, 4); R is the result's significand with its leading one in units of 2^-24 (RSQ: (0.5, 1]) or
# 2^-23 (SQRT: [1, 2)), its bits R + result_base. RSQ at index 0 (x = 1) gives 1.0 exactly, one above the
# interpolator, which the model special-cases. LG2: the index is the 23-bit fraction of m in [1, 2), R is
# V(m) = log2(m) in fixed point with 36 fraction bits; lg2(m 2^e) is e + V rounded toward zero for e >= 0,
# and minus the one's complement of e * 2^36 + V (its magnitude less one unit) rounded toward zero for e < 0;
# x = 1 gives +0 (special-cased). Only the binades [1, 2) and [0.5, 1) bound V; the rule gives the others.
UNITS = {
    "rsq": {"op": "rsqrt_approx_ftz_f32", "index_bits": 24, "result_base": 125 << 23, "x_bits": 17,
            "square_truncation": 19, "result_shift": 17, "exact_at_zero": 1 << 24},
    "sqrt": {"op": "sqrt_approx_ftz_f32", "index_bits": 24, "result_base": 126 << 23, "x_bits": 17,
             "square_truncation": 19, "result_shift": 17, "exact_at_zero": None},
    "lg2": {"op": "lg2_approx_ftz_f32", "index_bits": 23, "fraction_bits": 36, "x_bits": 17,
            "square_truncation": 19, "result_shift": 2},
    "sin": {"op": "sin_approx_f32", "index_bits": 23, "fraction_bits": 37, "phase_bits": 25, "x_bits": 17,
            "square_truncation": 19, "result_shift": 2},
    "tanh": {"op": "tanh_approx_f32", "first_exponent": 119, "quantum_bits": [17, 17, 17, 18, 18, 19, 19, 19, 20, 21, 20],
             "fraction_bits": 24, "x_bits": 17, "square_truncation": 19, "result_shift": 17},
}
# SIN, COS: t = x * 0x3E22F983 (1 / (2 pi)) by an FMUL.RZ; the phase p = floor(|t| 2^25) mod 2^25 (quarter
# turns in its top 2 bits); sin is S(f) in quarters 0 and 2 and S(~f) (the 23 bits of f inverted) in 1 and 3,
# negated in quarters 2 and 3 and for t < 0; cos is sin at p + 2^23, never negated for t < 0. S(f) = sin(2 pi f
# / 2^25) is V with 37 fraction bits rounded toward zero, V the unit's interpolator.
INV_2PI_BITS = 0x3E22F983
# TANH: on |x| in [2^(first_exponent - 127), 8), binade e keeps the top quantum_bits[e - first_exponent] of its
# fraction (x truncated: 2^17 to 2^21 quanta per binade); the binades' quanta, one after the other, are the
# index, 2^17 to a segment (51 segments). R is tanh(|x|) in units of 2^-(fraction_bits + max(0, 127 - e)) (half
# the input's unit in the last place below 1), and the output is R toward zero to float32. Below the first
# binade the output is x itself, from 8 on 1.0; odd in x.
BASE_EXPONENTS = (127, 128)
LG2_EXPONENTS = (127, 126)


def _chunks(directory):
    from oracles.mufu import survey

    index = json.loads((Path(directory) / "survey.json").read_text())
    by_key = {(c["op"], c["sign"], c["exponent"]): c for c in index["chunks"] if "file" in c}
    return (lambda op, e: survey.read_chunk(directory, by_key[(op, 0, e)])), index["provenance"]


def measured_table(directory, unit):
    """(int64 R over the 2^24 indices of RSQ or SQRT, the survey's provenance) from the survey in ``directory``."""
    spec = UNITS[unit]
    chunk, provenance = _chunks(directory)
    parts = [chunk(spec["op"], e) for e in BASE_EXPONENTS]
    return np.concatenate(parts).astype(np.int64) - spec["result_base"], provenance


def _ulp_above(a):
    """float64 spacing above |a| for float32 ``a``."""
    a = np.abs(a)
    return (a.view(np.int32) + 1).view(np.float32).astype(np.float64) - a.astype(np.float64)


def lg2_intervals(directory):
    """(low, high): int64 bounds [low, high) of V at every fraction from the survey's [1, 2) (its output is V
    toward zero) and [0.5, 1) (its output's magnitude is 2^36 - V - 1 toward zero) binades; index 0 from [0.5, 1)
    alone (x = 1 is special-cased)."""
    chunk, provenance = _chunks(directory)
    one = 2.0 ** UNITS["lg2"]["fraction_bits"]
    upper, lower = (chunk("lg2_approx_ftz_f32", e).view(np.float32) for e in LG2_EXPONENTS)
    low0 = np.ceil(upper.astype(np.float64) * one)
    high0 = np.ceil((upper.astype(np.float64) + _ulp_above(upper)) * one)
    magnitude = np.abs(lower.astype(np.float64))
    low1 = one - np.ceil((magnitude + _ulp_above(lower)) * one)
    high1 = one - np.ceil(magnitude * one)
    low, high = np.maximum(low0, low1), np.minimum(high0, high1)
    low[0], high[0] = low1[0], high1[0]
    if not (low < high).all():
        raise ValueError(f"lg2: the two binades contradict the rule at {np.flatnonzero(low >= high)[:8].tolist()}")
    return low.astype(np.int64), high.astype(np.int64), provenance


def _fmul_rz(x, c_bits):
    """float32 x * c rounded toward zero (the exact product in float64, stepped toward zero where it rounded up)."""
    p = x.astype(np.float64) * np.float64(np.uint32(c_bits).view(np.float32))
    r = p.astype(np.float32)
    return (r.view(np.int32) - (np.abs(r.astype(np.float64)) > np.abs(p)).astype(np.int32)).view(np.float32)


def sin_intervals(directory):
    """(low, high, provenance): bounds [low, high) of S's V at every 23-bit f, from every surveyed binade of
    sin and cos through the phase rules above; ValueError where two outputs disagree or an f was not seen."""
    from oracles.mufu import survey

    spec = UNITS["sin"]
    index = json.loads((Path(directory) / "survey.json").read_text())
    quarter, mask = 1 << spec["index_bits"], (1 << spec["index_bits"]) - 1
    seen = np.full(quarter, -1, np.int64)
    for c in index["chunks"]:
        if c["op"] not in ("sin_approx_f32", "cos_approx_f32") or "file" not in c:
            continue
        y = survey.read_chunk(directory, c).astype(np.int64)
        x = ((c["sign"] << 31) | (c["exponent"] << 23) | np.arange(c["count"], dtype=np.uint32)).view(np.float32)
        t = np.abs(_fmul_rz(x, INV_2PI_BITS)).astype(np.float64)
        phase = np.floor(t * 2.0 ** spec["phase_bits"]).astype(np.int64) + (quarter if c["op"] == "cos_approx_f32" else 0)
        q, f = (phase >> spec["index_bits"]) & 3, phase & mask
        f = np.where(q & 1, mask - f, f)
        y = np.where(q >= 2, y ^ 0x80000000, y)
        clash = (seen[f] >= 0) & (seen[f] != y)
        if clash.any():
            raise ValueError(f"sin: outputs disagree at S({int(f[clash][0])}) ({c['op']} binade {c['exponent']})")
        seen[f] = y
    if (seen < 0).any():
        raise ValueError(f"sin: {int((seen < 0).sum())} values of S were not seen in the survey")
    h = seen.astype(np.uint32).view(np.float32)
    one = 2.0 ** spec["fraction_bits"]
    low = np.ceil(h.astype(np.float64) * one).astype(np.int64)
    high = np.ceil((h.astype(np.float64) + _ulp_above(h)) * one).astype(np.int64)
    return low, high, index["provenance"]


def tanh_layout(spec):
    """(shift, offset: int32 [256] per biased exponent e, result_fraction_bits: int32 per segment) of TANH's
    index: a magnitude's bits a in a modelled binade have index (a >> shift[e]) - offset[e]; other exponents
    index 0 (its output unused)."""
    first, quanta = spec["first_exponent"], np.asarray(spec["quantum_bits"], np.int64)
    exponents = first + np.arange(quanta.size)
    shift, offset = np.full(256, 31), np.zeros(256, np.int64)
    base = np.concatenate([[0], np.cumsum(1 << quanta)[:-1]])
    shift[exponents] = 23 - quanta
    offset[exponents] = ((exponents << 23) >> shift[exponents]) - base
    per_binade = spec["fraction_bits"] + np.maximum(0, 127 - exponents)
    per_segment = np.repeat(per_binade, 1 << (quanta - spec["x_bits"]))
    return shift.astype(np.int32), offset.astype(np.int32), per_segment.astype(np.int32)


def tanh_intervals(directory):
    """(low, high, provenance): bounds [low, high) of TANH's R at every index (tanh_layout) from the survey's
    binades: R in [y, y + ulp(y)) in R's units; ValueError where the outputs of one quantum differ."""
    spec = UNITS["tanh"]
    chunk, provenance = _chunks(directory)
    shift, _, result_fraction_bits = tanh_layout(spec)
    parts = []
    for e in range(spec["first_exponent"], spec["first_exponent"] + len(spec["quantum_bits"])):
        y = chunk(spec["op"], e).reshape(-1, 1 << int(shift[e]))
        if (y != y[:, :1]).any():
            raise ValueError(f"tanh: outputs differ within a quantum of binade {e}")
        parts.append(y[:, 0].view(np.float32))
    h = np.concatenate(parts)
    one = np.exp2(np.repeat(result_fraction_bits, 1 << spec["x_bits"]).astype(np.float64))
    low = (h.astype(np.float64) * one).astype(np.int64)
    high = ((h.astype(np.float64) + _ulp_above(h)) * one).astype(np.int64)
    return low, high, provenance


def derive(directory):
    """The coefficient record (JSON-ready) fitted from the survey in ``directory``."""
    units, provenance = {}, None
    for name, spec in UNITS.items():
        if name == "lg2":
            low, high, provenance = lg2_intervals(directory)
        elif name == "sin":
            low, high, provenance = sin_intervals(directory)
        elif name == "tanh":
            low, high, provenance = tanh_intervals(directory)
        else:
            table, provenance = measured_table(directory, name)
            if spec["exact_at_zero"] is not None:
                if table[0] != spec["exact_at_zero"]:
                    raise ValueError(f"{name}: index 0 gives {table[0]}, not the exact {spec['exact_at_zero']}")
                table = table.copy()
                table[0] = table[1] + 1  # a stand-in: the interpolator's own value at 0 is never seen
            low, high = table, table + 1
        units[name] = dict(spec) | fit_unit(name, low, high, spec["x_bits"], spec["square_truncation"],
                                            spec["result_shift"])
    return {"format": FORMAT, "survey_provenance": provenance, "units": units}


def serialise(record):
    """The file's bytes: one line per coefficient list, the same record always the same bytes."""
    text = json.dumps(record, indent=1)
    text = re.sub(r"\[\s+([-\d,\s]+?)\s+\]", lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text)
    return (text + "\n").encode()


def main(directory, check):
    """Fit and write the coefficients from the survey in ``directory``, or with ``check`` compare; exit code."""
    data = serialise(derive(directory))
    if check:
        same = COEFFICIENT_FILE.exists() and COEFFICIENT_FILE.read_bytes() == data
        print(f"re-fitted coefficients {'equal' if same else 'DIFFER from'} {COEFFICIENT_FILE} byte for byte")
        return 0 if same else 1
    COEFFICIENT_FILE.write_bytes(data)
    print(f"wrote {COEFFICIENT_FILE} ({len(data)} bytes)")
    return 0


@functools.lru_cache(maxsize=1)
def load():
    """{unit: {'c0', 'c1', 'c2': int64 [segments], 'square': int64 [2^x_bits], and the unit's format}}; TANH's
    also 'index_shift', 'index_offset' and 'result_fraction_bits' (tanh_layout)."""
    if not COEFFICIENT_FILE.exists():
        raise FileNotFoundError(f"{COEFFICIENT_FILE} is missing: run `python -m oracles.mufu fit-survey DIR`")
    record = json.loads(COEFFICIENT_FILE.read_text())
    if record.get("format") != FORMAT:
        raise ValueError(f"{COEFFICIENT_FILE.name} is not in format {FORMAT}")
    units = {}
    for name, entry in record["units"].items():
        unit = {k: np.asarray(entry[k], np.int64) for k in ("c0", "c1", "c2")}
        unit["square"] = truncated_square(np.arange(1 << entry["x_bits"], dtype=np.int64),
                                          entry["square_truncation"])
        if name == "tanh":
            unit["index_shift"], unit["index_offset"], unit["result_fraction_bits"] = tanh_layout(entry)
        units[name] = {**entry, **unit}
    return units
