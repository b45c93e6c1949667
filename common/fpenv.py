"""The CPU process must keep subnormals: FTZ/DAZ set by any library would silently change every result."""

import numpy as np

_MIN_NORMAL = np.float32(2.0**-126)
_MIN_SUBNORMAL = np.uint32(1).view(np.float32)


def assert_subnormals_kept():
    """Raise RuntimeError if float32 arithmetic flushes subnormal results (FTZ) or inputs (DAZ)."""
    half = np.array([_MIN_NORMAL], np.float32) * np.float32(0.5)
    if half.view(np.uint32)[0] != 0x00400000:
        raise RuntimeError("float32 subnormal results are flushed to zero (FTZ is on in this process)")
    tiny = np.array([_MIN_SUBNORMAL], np.float32)
    if (tiny + tiny).view(np.uint32)[0] != 2:
        raise RuntimeError("float32 subnormal inputs are treated as zero (DAZ is on in this process)")
