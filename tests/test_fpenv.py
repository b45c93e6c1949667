"""The start-up check refuses a process that flushes subnormals."""

import shutil
import subprocess
import sys
import textwrap

import pytest

from oracles.fpenv import assert_subnormals_kept

_SET_FTZ_DAZ = r"""
#include <xmmintrin.h>
void set_ftz_daz(void) { _mm_setcsr(_mm_getcsr() | 0x8040); }
"""


def test_this_process_keeps_subnormals():
    assert_subnormals_kept()


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to switch FTZ/DAZ on")
def test_check_fails_once_ftz_and_daz_are_on(tmp_path):
    src, lib = tmp_path / "ftz.c", tmp_path / "libftz.so"
    src.write_text(_SET_FTZ_DAZ)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    script = textwrap.dedent(f"""
        import ctypes
        from oracles.fpenv import assert_subnormals_kept
        ctypes.CDLL({str(lib)!r}).set_ftz_daz()
        try:
            assert_subnormals_kept()
        except RuntimeError as exc:
            print("refused:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.startswith("refused:"), out
