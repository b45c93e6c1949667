"""Segmented quadratic interpolators fitted from the survey (``python -m oracles.mufu fit-survey DIR``).

Same family as MUFU.EX2 and MUFU.RCP (oracles.mufu.interpolator): an index i of ``index_bits`` bits; its top
bits pick a segment's (C0, C1, C2), the low ``x_bits`` give x, and R = (C0 + C1*x + C2*sq(x)) >> shift with
sq the truncated squarer (interpolator.truncated_square) at ``square_truncation``. Per unit the file holds the
format of i and R and one (C0, C1, C2) per segment, C0 the least value of its exact interval.
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


def _bounds(y, x, sq, c1, c2, shift):
    t = c1 * x + c2 * sq
    return int(((y << shift) - t).max()), int((((y + 1) << shift) - t).min())


def fit_segment(y, sq, shift):
    """[(c1, c2, c0_low, c0_high)]: every integer pair near the least-squares one that reproduces ``y``."""
    x = np.arange(y.size, dtype=np.int64)
    design = np.stack([np.ones(y.size), x / y.size, sq / y.size**2], axis=1)
    proposal = np.linalg.lstsq(design, y + 0.5, rcond=None)[0] * (1 << shift)
    c1_0, c2_0 = int(round(proposal[1] / y.size)), int(round(proposal[2] / y.size**2))
    probe = np.r_[0:y.size:_PROBE_STRIDE, y.size - 1]
    fits = []
    for c2 in range(c2_0 - C2_WINDOW, c2_0 + C2_WINDOW + 1):
        for c1 in range(c1_0 - C1_WINDOW, c1_0 + C1_WINDOW + 1):
            low, high = _bounds(y[probe], x[probe], sq[probe], c1, c2, shift)
            if low < high:
                low, high = _bounds(y, x, sq, c1, c2, shift)
                if low < high:
                    fits.append((c1, c2, low, high))
    return fits


def fit_unit(name, table, x_bits, square_truncation, shift):
    """{c0, c1, c2: [per segment]} reproducing ``table`` (int64 R per index), or ValueError naming the
    segments without exactly one fitting (C1, C2)."""
    sq = truncated_square(np.arange(1 << x_bits, dtype=np.int64), square_truncation)
    fits = [fit_segment(y, sq, shift) for y in table.reshape(-1, 1 << x_bits)]
    wrong = {s: len(f) for s, f in enumerate(fits) if len(f) != 1}
    if wrong:
        raise ValueError(f"{name}: segments without exactly one fitting (C1, C2) {{segment: pairs}}: {wrong}")
    return {"c0": [f[0][2] for f in fits], "c1": [f[0][0] for f in fits], "c2": [f[0][1] for f in fits]}


# The structure found on the H200's survey: the index is (exponent parity, 23-bit fraction) of an input in
# [1, 4); R is the result's significand with its leading one in units of 2^-24 (RSQ: (0.5, 1]) or 2^-23
# (SQRT: [1, 2)), its bits R + result_base. RSQ at index 0 (x = 1) gives 1.0 exactly, one above the
# interpolator, which the model special-cases.
UNITS = {
    "rsq": {"op": "rsqrt_approx_ftz_f32", "result_base": 125 << 23, "x_bits": 17, "square_truncation": 19,
            "result_shift": 17, "exact_at_zero": 1 << 24},
    "sqrt": {"op": "sqrt_approx_ftz_f32", "result_base": 126 << 23, "x_bits": 17, "square_truncation": 19,
             "result_shift": 17, "exact_at_zero": None},
}
INDEX_BITS = 24
BASE_EXPONENTS = (127, 128)


def measured_table(directory, unit):
    """int64 R over the 2^24 indices of ``unit`` from the survey in ``directory`` (oracles.mufu.survey)."""
    from oracles.mufu import survey

    spec = UNITS[unit]
    index = json.loads((Path(directory) / "survey.json").read_text())
    by_key = {(c["op"], c["sign"], c["exponent"]): c for c in index["chunks"] if "file" in c}
    parts = [survey.read_chunk(directory, by_key[(spec["op"], 0, e)]) for e in BASE_EXPONENTS]
    return np.concatenate(parts).astype(np.int64) - spec["result_base"], index["provenance"]


def derive(directory):
    """The coefficient record (JSON-ready) fitted from the survey in ``directory``."""
    units, provenance = {}, None
    for name, spec in UNITS.items():
        table, provenance = measured_table(directory, name)
        if spec["exact_at_zero"] is not None:
            if table[0] != spec["exact_at_zero"]:
                raise ValueError(f"{name}: index 0 gives {table[0]}, not the exact {spec['exact_at_zero']}")
            table = table.copy()
            table[0] = table[1] + 1  # a stand-in: the interpolator's own value at 0 is never seen
        fitted = fit_unit(name, table, spec["x_bits"], spec["square_truncation"], spec["result_shift"])
        units[name] = {key: spec[key] for key in ("op", "result_base", "x_bits", "square_truncation",
                                                  "result_shift", "exact_at_zero")} | fitted
    return {"format": FORMAT, "index_bits": INDEX_BITS, "survey_provenance": provenance, "units": units}


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
    """{unit: {'c0', 'c1', 'c2': int64 [segments], 'square': int64 [2^x_bits], and the unit's format}}."""
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
        units[name] = {**entry, **unit}
    return units
