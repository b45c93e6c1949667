"""Bad input to the model's public functions and to the command lines gets one line naming the argument:
ValueError (TypeError for a wrong number of arguments) in the API, exit 2 from a CLI, never a traceback."""

import os
import subprocess
import sys

import numpy as np
import pytest

import oracles.numpy_model as model
from oracles.flashinfer_routing import build as flashinfer_build
from common.provenance import REPO_ROOT

CLI_TIMEOUT_S = 120
_X = np.zeros((1, 256), np.float32)
_BIAS = np.zeros(256, np.float32)
_IDS = np.arange(8, dtype=np.int32)[None]


@pytest.mark.parametrize("call, error, message", [
    (lambda: model.route(_X, _BIAS, 1.0, renormalize="no"), ValueError, "renormalize must be a bool, got 'no'"),
    (lambda: model.route(_X, _BIAS, 1.0, renormalize=1), ValueError, "renormalize must be a bool"),
    (lambda: model.route(np.zeros((0, 256), np.float32), _BIAS, 1.0), ValueError, r"logits must have shape"),
    (lambda: model.route(_X, _BIAS, "1"), ValueError, "scale must be a real number"),
    (lambda: model.sigmoid_f32(_X, _X), TypeError, r"sigmoid_f32 takes 1 argument\(s\) \(x\), got 2"),
    (lambda: model.add_rn(_X), TypeError, r"add_rn takes 2 argument\(s\)"),
    (lambda: model.routing_metadata(np.zeros((9, 8), np.int32), 0, 256, 8), ValueError, "1 <= b <= 8"),
    (lambda: model.routing_metadata(_IDS, 0, 256, True), ValueError, "tile_n must be an int"),
])
def test_model_refuses_bad_input_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_route_takes_any_number_of_rows_and_a_numpy_bool():
    ids, weights = model.route(np.zeros((9, 256), np.float32), _BIAS, 1.0, np.bool_(False))
    assert ids.shape == weights.shape == (9, 8) and (weights.view(np.uint32) == 0x3F000000).all()


def _cli(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=CLI_TIMEOUT_S, env=env)


@pytest.mark.parametrize("args, message", [
    ([], "the following arguments are required: command"),
    (["generated", "--only", "nosuch"], "--only: no generated mutant named nosuch"),
    (["generated", "--jobs", "0"], "--jobs: must be an integer in 1..64"),
    (["replay", "no/such/case.json"], "paths: no such file: no/such/case.json"),
])
def test_mutants_cli_misuse_is_one_line_and_exit_2(args, message):
    result = _cli("-m", "properties.mutants", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_mutants_cli_needs_cuda_for_the_gpu_tier_and_replay_has_help():
    """CUDA hidden from the subprocesses (CUDA_VISIBLE_DEVICES=""), so the misuse is checked on a GPU host too."""
    assert "replay" in _cli("-m", "properties.mutants", "replay", "--help").stdout
    no_cuda = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    reason = _cli("-c", "from common.provenance import cuda_reason; print(cuda_reason())", env=no_cuda)
    reason = reason.stdout.strip()
    assert reason not in ("", "None"), "CUDA still usable with CUDA_VISIBLE_DEVICES=\"\""
    for args in (["generated", "--tier", "gpu"], ["replay"]):
        result = _cli("-m", "properties.mutants", *args, env=no_cuda)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and reason in result.stderr


def test_bundle_installer_refuses_a_stage_without_its_manifest(tmp_path):
    result = _cli("-m", "properties.tools.bundle", "install", str(tmp_path))
    assert result.returncode == 2 and result.stderr.strip() == (
        f"install: {tmp_path / 'MANIFEST.json'} missing: copy every part's files into {tmp_path}")


def test_flashinfer_build_without_nvcc_says_not_run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(flashinfer_build.shutil, "which", lambda name: None)
    monkeypatch.setattr(flashinfer_build, "LIBRARY", tmp_path / "lib.so")
    assert flashinfer_build.main([]) == 1
    assert capsys.readouterr().err.startswith(f"{flashinfer_build.NOT_RUN}: nvcc not on PATH; no prebuilt")
    (tmp_path / "lib.so").write_bytes(b"")
    assert flashinfer_build.main([]) == 0
    assert capsys.readouterr().out.startswith(f"{flashinfer_build.NOT_RUN}: nvcc not on PATH; the prebuilt")
