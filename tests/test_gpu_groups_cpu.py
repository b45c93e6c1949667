"""make verify on a host of several GPUs: one group of pytest-xdist workers per GPU."""

import subprocess
import sys

import pytest

from properties.tools import gate, gpu_groups
from properties.tools.gpu_groups import device_of, pin_worker, workers


def test_each_gpu_gets_one_group_of_workers():
    assert workers(2) == 2 * gpu_groups.WORKERS_PER_GPU
    per = gpu_groups.WORKERS_PER_GPU
    assert [device_of(f"gw{i}", 2) for i in range(workers(2))] == ["0"] * per + ["1"] * per
    assert [device_of(f"gw{i}", 3) for i in range(workers(3))] == ["0"] * per + ["1"] * per + ["2"] * per


def test_the_parents_visible_devices_are_the_ones_spread_over():
    assert {device_of(f"gw{i}", 2, "5, 7") for i in range(workers(2))} == {"5", "7"}
    with pytest.raises(ValueError, match="names 1 devices"):
        device_of("gw0", 2, "3")


@pytest.mark.parametrize("environ", [
    {},  # not under the gate
    {"GATE_GPUS": "1", "PYTEST_XDIST_WORKER": "gw3"},  # one GPU: nothing to spread
    {"GATE_GPUS": "2"},  # the controller, not a worker
])
def test_nothing_changes_outside_a_worker_of_a_multi_gpu_gate(environ):
    before = dict(environ)
    pin_worker(environ)
    assert environ == before


def test_a_worker_of_a_two_gpu_gate_sees_only_its_gpu():
    environ = {"GATE_GPUS": "2", "PYTEST_XDIST_WORKER": f"gw{gpu_groups.WORKERS_PER_GPU}"}
    pin_worker(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_the_root_conftest_pins_a_gate_worker_to_its_gpu():
    script = "import os, sys; import conftest; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    env = {"GATE_GPUS": "2", "PYTEST_XDIST_WORKER": "gw5", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", script], cwd=gate.ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_the_gate_starts_a_worker_group_per_gpu_and_names_the_count(monkeypatch, tmp_path):
    seen = {}

    def fake_run_tests(scratch, profile, workers, pytest_args, gpus=0):
        seen.update(workers=workers, gpus=gpus)
        return 3, None

    monkeypatch.setattr(gate, "cuda_reason", lambda: None)
    monkeypatch.setattr(gate, "gpu_count", lambda: 2)
    monkeypatch.setattr(gate, "oracles_not_run", lambda: {})
    monkeypatch.setattr(gate, "run_tests", fake_run_tests)
    monkeypatch.setattr(gate, "build_flashinfer", lambda require_gpu: {"ran": True, "failed": False, "why": "",
                                                                       "seconds": 0.0})
    gate.main(["--reports", str(tmp_path / "reports"), "--profile", "ci"])
    assert seen == {"workers": workers(2), "gpus": 2}
