"""The interpolators' coefficients, derived exactly from the measured MUFU tables (``python -m oracles.mufu fit``).

For each segment, a least-squares quadratic only proposes (C1, C2); the derivation itself is integer: for
every integer pair in a window around the proposal, every entry y of the segment bounds C0 to
[y*2^s - C1*x - C2*sq(x), (y+1)*2^s - C1*x - C2*sq(x)), s = RESULT_SHIFT; the pair fits when those bounds
meet. Exactly one pair per segment must fit, and one constant c0_constant (mod a quarter unit) must lie in
every segment's C0 interval. The EX2 table for t < 0 is checked to follow from the t >= 0 one: for f >= 1,
2^-(f / 2^23) is the EX2 interpolator at the one's complement of f (its 23 bits inverted) with the exponent one
lower, and f = 0 gives 1.0.

What the H200's tables admit (UNITS): RCP 128 segments (7 bits, x of 16 bits, squarer kept from 2^17), EX2 64
(6 bits, x of 17 bits, squarer from 2^19); in every segment exactly one integer (C1, C2) fits all its entries
and C0's interval is 1 to 8 units of 2^-15 wide. The alternatives fail, found while fitting: a squarer truncated
at k - 2, k - 1, k + 1 or k + 2 fits no segment of either unit; an unfolded partial-product matrix fits none of
the segments tried (first, second, last); one segment bit fewer fits 1 of 64 RCP and 0 of 32 EX2 segments. The
coefficients are not a rounding of the real minimax quadratic: they come from the tables.
"""

import json

import numpy as np

from oracles.mufu import interpolator as ip
from oracles.mufu import tables

# The structure confirmed on the H200's tables (the docstring: what the tables admit).
UNITS = {"ex2": {"table": "ex2_pos", "segment_bits": 6, "square_truncation": 19},
         "rcp": {"table": "rcp", "segment_bits": 7, "square_truncation": 17}}
C1_WINDOW, C2_WINDOW = 8, 4  # integers searched either side of the least-squares proposal
_PROBE_STRIDE = 61  # entries tried first, so most non-fitting pairs are rejected on 1/61 of the segment
_QUARTER = 1 << ip.QUARTER_SHIFT
_FRACTION = (1 << ip.FRACTION_BITS) - 1
_ONE = 127 << ip.FRACTION_BITS
MAX_FILE_BYTES = 4096


def _c0_bounds(y, x, sq, c1, c2):
    t = c1 * x + c2 * sq
    return int(((y << ip.RESULT_SHIFT) - t).max()), int((((y + 1) << ip.RESULT_SHIFT) - t).min())


def _fit_segment(y, sq):
    """(c1, c2, c0_low, c0_high): the one integer pair that reproduces ``y`` and its C0 interval [low, high)."""
    x = np.arange(y.size, dtype=np.int64)
    design = np.stack([np.ones(y.size), x, sq], axis=1).astype(np.float64)
    proposal = np.linalg.lstsq(design, y + 0.5, rcond=None)[0] * (1 << ip.RESULT_SHIFT)
    c1_0, c2_0 = int(round(proposal[1])), int(round(proposal[2]))
    probe = np.r_[0:y.size:_PROBE_STRIDE, y.size - 1]
    fits = []
    for c2 in range(c2_0 - C2_WINDOW, c2_0 + C2_WINDOW + 1):
        for c1 in range(c1_0 - C1_WINDOW, c1_0 + C1_WINDOW + 1):
            low, high = _c0_bounds(y[probe], x[probe], sq[probe], c1, c2)
            if low < high:
                low, high = _c0_bounds(y, x, sq, c1, c2)
                if low < high:
                    fits.append((c1, c2, low, high))
    return fits


def _fit_unit(name, significand, segment_bits, square_truncation):
    x_bits = ip.FRACTION_BITS - segment_bits
    sq = ip.truncated_square(np.arange(1 << x_bits, dtype=np.int64), square_truncation)
    segments = significand.reshape(1 << segment_bits, 1 << x_bits)
    fits = [_fit_segment(y, sq) for y in segments]
    wrong = {s: len(f) for s, f in enumerate(fits) if len(f) != 1}
    if wrong:
        raise ValueError(f"{name}: segments without exactly one fitting (C1, C2) {{segment: pairs}}: {wrong}")
    residues = set(range(_QUARTER))
    for (_, _, low, high) in (f[0] for f in fits):
        residues &= {a % _QUARTER for a in range(low, min(high, low + _QUARTER))}
    if not residues:
        raise ValueError(f"{name}: no C0 constant modulo a quarter unit is common to every segment")
    constant = min(residues)
    c0 = [low + (constant - low) % _QUARTER for (_, _, low, _) in (f[0] for f in fits)]
    entry = {"segment_bits": segment_bits, "square_truncation": square_truncation, "c0_constant": constant,
             **ip.encode_unit([(a - constant) >> ip.QUARTER_SHIFT for a in c0],
                              [f[0][0] for f in fits], [f[0][1] for f in fits])}
    widths = [f[0][3] - f[0][2] for f in fits]
    return entry, {"entries": int(significand.size), "segments": len(fits), "c0_interval_widths": [
        min(widths), max(widths)]}


def negative_ex2_mismatches(positive, negative):
    """Entries f of the t < 0 EX2 table other than: f = 0 gives 1.0, else ex2_pos[~f] one binade lower."""
    f = np.arange(positive.size, dtype=np.int64)
    expected = np.where(f == 0, _ONE, positive.astype(np.int64)[~f & _FRACTION] - (1 << ip.FRACTION_BITS))
    return int((expected != negative.astype(np.int64)).sum())


def derive():
    """The coefficient record (JSON-ready) and a summary of the evidence, from the stored measured tables."""
    measured, specials = tables.load()
    mismatched = negative_ex2_mismatches(measured["ex2_pos"], measured["ex2_neg"])
    if mismatched:
        raise ValueError(f"ex2_neg: {mismatched} entries do not follow from ex2_pos by the one's complement")
    units, evidence = {}, {"ex2_neg entries following from ex2_pos": measured["ex2_neg"].size}
    for name, spec in UNITS.items():
        significand = measured[spec["table"]].astype(np.int64) - ip.RESULT_BASE[name]
        units[name], evidence[name] = _fit_unit(name, significand, spec["segment_bits"], spec["square_truncation"])
    record = {"format": ip.FORMAT, "tables_sha256": tables.read_provenance()["data_sha256"],
              "nan": f"0x{specials['nan']:08x}", "result_shift": ip.RESULT_SHIFT, "units": units}
    return record, evidence


def serialise(record):
    """The file's bytes for a record: the same record always gives the same bytes."""
    data = (json.dumps(record, indent=1) + "\n").encode()
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"coefficient file would be {len(data)} bytes, over {MAX_FILE_BYTES}")
    return data


def main(check):
    """Derive and write the coefficients, or with ``check`` derive them and compare with the file; exit code."""
    record, evidence = derive()
    data = serialise(record)
    print(json.dumps(evidence, indent=1))
    if check:
        same = ip.COEFFICIENT_FILE.exists() and ip.COEFFICIENT_FILE.read_bytes() == data
        print(f"re-derived coefficients {'equal' if same else 'DIFFER from'} {ip.COEFFICIENT_FILE} byte for byte")
        return 0 if same else 1
    ip.COEFFICIENT_FILE.write_bytes(data)
    print(f"wrote {ip.COEFFICIENT_FILE} ({len(data)} bytes)")
    return 0
