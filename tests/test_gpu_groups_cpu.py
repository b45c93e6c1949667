"""make verify on a host of several GPUs: one group of pytest-xdist workers per GPU, sized from the cores."""

import subprocess
import sys

import pytest

from properties.tools import gate
from properties.tools.gpu_groups import device_of, pin_worker, workers, workers_per_gpu


@pytest.mark.parametrize("gpus, cpus, per_gpu", [
    (1, 16, 14),  # one H200 runner of 16 cores: 14 left
    (1, 8, 6), (1, 2, 1), (1, 1, 1),  # small hosts: never fewer than one
    (1, 64, 16), (2, 32, 15), (2, 16, 7), (8, 128, 15), (8, 32, 3), (3, 16, 4),
])
def test_workers_per_gpu_come_from_the_cores_left_shared_over_the_gpus(gpus, cpus, per_gpu):
    assert workers_per_gpu(gpus, cpus) == per_gpu
    assert workers(gpus, cpus) == per_gpu * gpus
    assert workers(gpus, cpus, per_gpu=5) == 5 * gpus


@pytest.mark.parametrize("gpus, cpus", [(2, 16), (3, 16), (4, 64), (8, 128)])
def test_each_gpu_gets_the_same_number_of_workers(gpus, cpus):
    devices = [device_of(f"gw{i}", gpus) for i in range(workers(gpus, cpus))]
    assert sorted(set(devices)) == [str(g) for g in range(gpus)]
    assert {devices.count(str(g)) for g in range(gpus)} == {workers_per_gpu(gpus, cpus)}


def test_a_bad_worker_name_or_gpu_count_is_refused():
    with pytest.raises(ValueError, match="must look like gw0"):
        device_of("worker3", 2)
    with pytest.raises(ValueError, match="gpus must be >= 1"):
        workers_per_gpu(0, 16)


def test_the_parents_visible_devices_are_the_ones_spread_over():
    assert {device_of(f"gw{i}", 2, "5, 7") for i in range(workers(2, 16))} == {"5", "7"}
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
    environ = {"GATE_GPUS": "2", "PYTEST_XDIST_WORKER": "gw3"}
    pin_worker(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_the_root_conftest_pins_a_gate_worker_to_its_gpu():
    script = "import os, sys; import conftest; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    env = {"GATE_GPUS": "2", "PYTEST_XDIST_WORKER": "gw5", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", script], cwd=gate.ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


@pytest.mark.parametrize("options, per_gpu", [([], workers_per_gpu(2, 20)), (["--workers-per-gpu", "3"], 3)])
def test_the_gate_starts_a_worker_group_per_gpu_and_names_the_count(options, per_gpu, monkeypatch, tmp_path):
    seen = {}

    def fake_run_tests(scratch, profile, workers, pytest_args, gpus=0, meanwhile=None):
        seen.update(workers=workers, gpus=gpus)
        meanwhile()
        return 3, None

    monkeypatch.setattr(gate, "cuda_reason", lambda: None)
    monkeypatch.setattr(gate, "gpu_count", lambda: 2)
    monkeypatch.setattr(gate.os, "cpu_count", lambda: 20)
    monkeypatch.setattr(gate, "oracles_not_run", lambda: {})
    monkeypatch.setattr(gate, "check_mufu", lambda gpu_reason: {"ran": True, "failed": False, "why": "held",
                                                                "seconds": 0.0, "certified_on": ["a card"]})
    monkeypatch.setattr(gate, "run_tests", fake_run_tests)
    monkeypatch.setattr(gate, "build_flashinfer", lambda require_gpu: {"ran": True, "failed": False, "why": "",
                                                                       "seconds": 0.0})
    gate.main(["--reports", str(tmp_path / "reports"), "--profile", "ci", *options])
    assert seen == {"workers": 2 * per_gpu, "gpus": 2}
