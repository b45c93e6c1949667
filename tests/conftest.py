"""Fixtures shared by the CPU and GPU tests: the gate's switches of the outer run kept from every test, the planted
tie fault caught and saved, the replay command run on the saved file in a fresh process, and FlashInfer's two
libraries built or prebuilt."""

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from oracles.flashinfer_routing import build as flashinfer_build
from properties.engine import casefile
from properties.engine.check import check_case
from properties.engine.implementations import PLANTED_TIE_FAULT
from properties.inputs.strategies import GENERATORS

from helpers import GATE_SWITCHES

_REPLAY_TIMEOUT_S = 600


@pytest.fixture(autouse=True)
def _no_outer_gate_switches(monkeypatch):
    """Every test starts with the gate's switches unset (helpers.GATE_SWITCHES: `VERIFY_REQUIRE_GPU=1 make
    verify` exports them to the suite it runs, and a test running a gate in-process or in a subprocess would
    judge it by the outer run's settings); a test that needs one sets it itself."""
    for name in GATE_SWITCHES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def capture_fault(tmp_path, monkeypatch):
    """``capture(names)``: run the differential property on tie cases over ``names`` and the planted tie fault
    (ties won by the highest index); return the one case file it saved."""
    monkeypatch.setenv(casefile.FAILURES_ENV, str(tmp_path))

    def capture(names):
        @settings(database=None, derandomize=True, max_examples=50, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(GENERATORS["tie_within_lane"])
        def implementations_agree(case):
            check_case(case, "implementations agree", names=[*names, PLANTED_TIE_FAULT])

        with pytest.raises(AssertionError, match=f"{PLANTED_TIE_FAULT} ids vs model"):
            implementations_agree()
        saved = sorted(tmp_path.glob("*.json"))
        assert len(saved) == 1, "only the final, minimal failing example is saved"
        return saved[0]

    return capture


@pytest.fixture
def replay_process():
    """``replay(path, planted, timeout)``: ``python -m properties.replay path`` in a new process from the
    repository root, with the planted tie fault run live (``--impl``) or not, killed after ``timeout`` seconds
    (default 600); returns the CompletedProcess."""
    def replay(path, planted, timeout=_REPLAY_TIMEOUT_S):
        path_before = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(casefile.REPO_ROOT), path_before]))}
        impl = ["--impl", PLANTED_TIE_FAULT] if planted else []
        return subprocess.run([sys.executable, "-m", "properties.replay", str(path), *impl], capture_output=True,
                              text=True, cwd=casefile.REPO_ROOT, env=env, timeout=timeout)

    return replay


def _flashinfer_library(library):
    """``library`` built here (nvcc and FlashInfer's sources present), else its prebuilt file; skipped under the
    name the gate accepts when neither."""
    if flashinfer_build.unavailable() is None:
        return flashinfer_build.build(library=library)
    if not library.path.is_file():
        pytest.skip(f"{flashinfer_build.NOT_RUN}: {flashinfer_build.unavailable()}; no prebuilt {library.path} either")
    return library.path


@pytest.fixture(scope="module")
def dyn_block_library():
    """The path of the oracle's library, libfi_dyn_block.so."""
    return _flashinfer_library(flashinfer_build.DYN_BLOCK)


@pytest.fixture(scope="module")
def fused_peer_library():
    """The path of the benchmark peer's library, libfi_fused_routing.so."""
    return _flashinfer_library(flashinfer_build.FUSED_PEER)
