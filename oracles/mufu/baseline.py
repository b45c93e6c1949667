"""Deterministic float32 baselines the measured MUFU tables are stored against.

The stored tables are small integer corrections (hardware bits minus baseline bits), so the baselines must
give the same bits on every machine: they use only IEEE float64 add, multiply and divide in NumPy (never
libm, whose last bits differ between platforms) and constants rounded by Python's ``decimal``.
"""

import decimal
import functools

import numpy as np

FRACTION_BITS = 23
TABLE_SIZE = 1 << FRACTION_BITS
_HIGH_BITS = 8
_LOW_BITS = FRACTION_BITS - _HIGH_BITS


@functools.lru_cache(maxsize=None)
def _powers_of_two(sign):
    """float64 2^(sign * i / 256) for i in 0..255, correctly rounded."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        two = decimal.Decimal(2)
        return np.array([float(two ** (decimal.Decimal(sign * i) / (1 << _HIGH_BITS)))
                         for i in range(1 << _HIGH_BITS)], np.float64)


def _ln2_scaled():
    """float64 ln(2) / 2^23, correctly rounded."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        return float(decimal.Decimal(2).ln() / (1 << FRACTION_BITS))


def exp2_fraction(sign):
    """float32 of 2^(sign * f / 2^23) for every f in [0, 2^23), sign +1 or -1 (within 1 ulp of exact)."""
    f = np.arange(TABLE_SIZE, dtype=np.int64)
    high = _powers_of_two(sign)[f >> _LOW_BITS]
    x = (f & ((1 << _LOW_BITS) - 1)).astype(np.float64) * (sign * _ln2_scaled())
    # exp(x) for |x| < 2.8e-3: the degree-5 Taylor polynomial errs below 1e-18.
    poly = 1.0 / 120.0
    for c in (1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        poly = poly * x + c
    return (high * poly).astype(np.float32)


def reciprocal_significand():
    """float32 of 1 / (1 + m / 2^23) for every m in [0, 2^23), IEEE-divided in float64."""
    m = np.arange(TABLE_SIZE, dtype=np.float64)
    return (1.0 / (1.0 + m / TABLE_SIZE)).astype(np.float32)


BASELINES = {
    "ex2_pos": lambda: exp2_fraction(+1),
    "ex2_neg": lambda: exp2_fraction(-1),
    "rcp": reciprocal_significand,
}
