"""MUFU.EX2 and MUFU.RCP as quadratic interpolators: the truncated squarer and the coefficient file.

Each unit maps a 23-bit fraction f to an integer R = (C0 + C1*x + C2*sq(x)) >> RESULT_SHIFT, where the top
``segment_bits`` of f pick the segment's (C0, C1, C2) and x is the rest of f. sq(x) is x^2 from a folded
partial-product matrix that keeps only the bits of weight >= 2^k, shifted right by k. C0 is
``c0_quarters * 2^(RESULT_SHIFT - 2)`` (a multiple of a quarter of R's unit) plus ``c0_constant``, one per
unit. R is the result's significand with its leading one, in units of 2^-24 (RCP: 1 / (1 + f / 2^23), R
up to 2^24 at f = 0) or 2^-23 (EX2: 2^(f / 2^23)). ``python -m oracles.mufu fit`` derives the coefficients
from the measured tables into ``data/mufu-coefficients.json``; this module only reads them.
"""

import functools
import json
from pathlib import Path

import numpy as np

COEFFICIENT_FILE = Path(__file__).resolve().parent / "data" / "mufu-coefficients.json"
FRACTION_BITS = 23
RESULT_SHIFT = 15
QUARTER_SHIFT = RESULT_SHIFT - 2
UNIT_NAMES = ("ex2", "rcp")
# float32 bits of a unit's result = R + RESULT_BASE: RCP's R/2^24 has exponent -1 (R = 2^24, f = 0, gives 1.0
# through the carry into the exponent field); EX2's R/2^23 has exponent 0.
RESULT_BASE = {"rcp": 125 << FRACTION_BITS, "ex2": 126 << FRACTION_BITS}
FORMAT = "mufu-quadratic-1"


def truncated_square(x, k):
    """sq(x) for int64 ``x`` >= 0: the bits of x^2's folded partial-product matrix of weight >= 2^k, >> k.

    The matrix holds x_i at weight 2^(2i) and x_i*x_j (i < j) at 2^(i+j+1); what is dropped is its part
    below 2^k, row by row (row i: x_i times the bits of x above i, at weights 2i+2 and up).
    """
    x = np.asarray(x, np.int64)
    low = (1 << k) - 1
    dropped = np.zeros_like(x)
    for i in range((k + 1) // 2):
        bit = (x >> i) & 1
        dropped += (bit << (2 * i)) + (bit * ((x >> (i + 1)) << (2 * i + 2)) & low)
    return (x * x - dropped) >> k


def _unhex(text, width, signed):
    values = np.array([int(text[i:i + width], 16) for i in range(0, len(text), width)], np.int64)
    if signed:
        values = np.where(values >= 1 << (4 * width - 1), values - (1 << (4 * width)), values)
    return values


def _hex(values, width, signed):
    low, high = (-(1 << (4 * width - 1)), 1 << (4 * width - 1)) if signed else (0, 1 << (4 * width))
    if any(not low <= int(v) < high for v in values):
        raise ValueError(f"a coefficient does not fit {width} hex digits ({'signed' if signed else 'unsigned'})")
    mask = (1 << (4 * width)) - 1
    return "".join(f"{int(v) & mask:0{width}x}" for v in values)


# Hex digits per coefficient in the file; C1 is signed (two's complement), C0 and C2 are not.
FIELDS = {"c0_quarters": (7, False), "c1": (5, True), "c2": (3, False)}


def encode_unit(c0_quarters, c1, c2):
    """The file's fields of one unit's per-segment coefficient lists."""
    return {name: _hex(values, *FIELDS[name]) for name, values in
            (("c0_quarters", c0_quarters), ("c1", c1), ("c2", c2))}


def decode_unit(entry):
    """{'c0': full C0, 'c1', 'c2': int64 per segment} of one unit's file entry, C0 with its constant added."""
    out = {name: _unhex(entry[name], *FIELDS[name]) for name in FIELDS}
    segments = 1 << entry["segment_bits"]
    if any(v.size != segments for v in out.values()):
        raise ValueError(f"a unit's coefficient lists do not have {segments} entries")
    return {"c0": (out.pop("c0_quarters") << QUARTER_SHIFT) + entry["c0_constant"], **out}


def read():
    """The coefficient record as written by ``python -m oracles.mufu fit``."""
    if not COEFFICIENT_FILE.exists():
        raise FileNotFoundError(f"{COEFFICIENT_FILE} is missing: run `python -m oracles.mufu fit`")
    record = json.loads(COEFFICIENT_FILE.read_text())
    if record.get("format") != FORMAT or record.get("result_shift") != RESULT_SHIFT:
        raise ValueError(f"{COEFFICIENT_FILE.name} is not in format {FORMAT}: re-run `python -m oracles.mufu fit`")
    return record


@functools.lru_cache(maxsize=1)
def load():
    """({unit: {'c0', 'c1', 'c2': int64 [segments], 'square': int64 [2^x_bits], 'x_bits'}}, nan bits).

    'square' is sq(x) for every x of the unit: 2^16 (RCP) or 2^17 (EX2) entries, so a lookup replaces the
    squarer's dozens of array passes.
    """
    record = read()
    units = {}
    for name in UNIT_NAMES:
        entry = record["units"][name]
        x_bits = FRACTION_BITS - entry["segment_bits"]
        square = truncated_square(np.arange(1 << x_bits, dtype=np.int64), entry["square_truncation"])
        units[name] = {**decode_unit(entry), "square": square, "x_bits": x_bits}
    return units, int(record["nan"], 16)
