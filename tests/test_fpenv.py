"""The start-up check refuses a process that flushes subnormals: FTZ and DAZ each decide on their own.

MXCSR is switched through glibc's ``fegetenv``/``fesetenv`` (x86-64 ``fenv_t``: the 28-byte x87 environment,
then the 32-bit MXCSR), so no C compiler is needed and no test skips on an x86-64 Linux machine.
"""

import subprocess
import sys
import textwrap

import pytest

from common.fpenv import assert_subnormals_kept

MXCSR_FTZ = 0x8000  # bit 15: flush subnormal results to zero
MXCSR_DAZ = 0x0040  # bit 6: treat subnormal inputs as zero

_SET_MXCSR_BITS = """
import ctypes, ctypes.util
libm = ctypes.CDLL(ctypes.util.find_library("m"))
env = (ctypes.c_uint32 * 8)()  # x86-64 fenv_t: 28 bytes of x87 state, then MXCSR at word 7
assert libm.fegetenv(env) == 0
env[7] |= {bits:#x}
assert libm.fesetenv(env) == 0
from common.fpenv import assert_subnormals_kept
try:
    assert_subnormals_kept()
    print("accepted")
except RuntimeError as exc:
    print("refused:", exc)
"""


def _check_with_mxcsr(bits):
    script = textwrap.dedent(_SET_MXCSR_BITS.format(bits=bits))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_this_process_keeps_subnormals():
    assert_subnormals_kept()


def test_a_fresh_process_with_mxcsr_untouched_is_accepted():
    assert _check_with_mxcsr(0) == "accepted"


@pytest.mark.parametrize("bits, named", [(MXCSR_FTZ, "FTZ"), (MXCSR_DAZ, "DAZ")], ids=["ftz_only", "daz_only"])
def test_check_refuses_each_flush_mode_alone(bits, named):
    out = _check_with_mxcsr(bits)
    assert out.startswith("refused:") and named in out, out
