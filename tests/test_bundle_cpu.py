"""The offline GPU bundle: parts within the size limit, pieces joined and checked, installed with no network."""

import json
import subprocess
import sys

import pytest

from properties.tools import bundle


@pytest.fixture
def fake_wheels(tmp_path, monkeypatch):
    """Three wheels of 5, 2 and 1 MiB of distinct bytes in place of the real download."""
    source = tmp_path / "download"
    source.mkdir()
    for name, size in (("big-1-cp312.whl", 5 << 20), ("mid-1-cp312.whl", 2 << 20), ("small-1-py3.whl", 1 << 20)):
        (source / name).write_bytes(bytes(i % 251 for i in range(size)))
    monkeypatch.setattr(bundle, "_download", lambda dest: sorted(source.glob("*.whl")))
    repo = tmp_path / "repo"
    for rel in bundle.ORACLE_FILES:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(rel.encode() * 1000)
    monkeypatch.setattr(bundle, "REPO", repo)
    return source


def _stage(parts, stage):
    stage.mkdir()
    for part in parts:
        for f in part.iterdir():
            (stage / f.name).write_bytes(f.read_bytes())


def test_parts_respect_the_limit_and_install_restores_every_byte(fake_wheels, tmp_path, monkeypatch):
    parts = bundle.build(tmp_path / "bundle", part_mb=2)
    assert all(sum(f.stat().st_size for f in p.iterdir()) <= 2 << 20 for p in parts)
    assert (parts[-1] / "install.py").is_file() and (parts[-1] / bundle.MANIFEST).is_file()
    stage, target = tmp_path / "stage", tmp_path / "runner"
    _stage(parts, stage)
    installed = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: installed.extend(cmd))
    bundle.install(stage, tmp_path / "site", target)
    assert "--no-index" in installed
    for wheel in fake_wheels.glob("*.whl"):
        assert (stage / wheel.name).read_bytes() == wheel.read_bytes()
    for rel in bundle.ORACLE_FILES:
        assert (target / rel).read_bytes() == rel.encode() * 1000


def test_a_corrupted_piece_is_refused(fake_wheels, tmp_path):
    parts = bundle.build(tmp_path / "bundle", part_mb=2)
    stage = tmp_path / "stage"
    _stage(parts, stage)
    manifest = json.loads((stage / bundle.MANIFEST).read_text())
    piece = manifest["wheels"]["big-1-cp312.whl"]["pieces"][1]
    data = bytearray((stage / piece).read_bytes())
    data[7] ^= 1
    (stage / piece).write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="big-1-cp312.whl: sha256 mismatch"):
        bundle.install(stage, tmp_path / "site", tmp_path / "runner")


def test_installer_command_line_takes_stage_and_site(fake_wheels, tmp_path, monkeypatch):
    parts = bundle.build(tmp_path / "bundle", part_mb=2)
    stage = tmp_path / "stage"
    _stage(parts, stage)
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: None)
    assert bundle.main(["install", str(stage), str(tmp_path / "site"), "--repo", str(tmp_path / "runner")]) == 0
    assert (tmp_path / "runner" / bundle.ORACLE_FILES[0]).is_file()


def test_without_a_site_the_wheels_go_into_the_running_environment(fake_wheels, tmp_path, monkeypatch):
    """`make gpu-install` runs install.py with the venv's python: pip installs into that venv (so the DSL's
    .pth file is honoured), not into a --target folder."""
    parts = bundle.build(tmp_path / "bundle", part_mb=2)
    stage = tmp_path / "stage"
    _stage(parts, stage)
    installed = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: installed.extend(cmd))
    assert bundle.main(["install", str(stage), "--repo", str(tmp_path / "runner")]) == 0
    assert "--no-index" in installed and "--target" not in installed
    assert installed[:3] == [bundle.sys.executable, "-m", "pip"]


def test_the_bundle_carries_every_flashinfer_library_with_its_stamp():
    """bundle.py (standard library only: it is the installer too) names the libraries; they are build.py's."""
    from oracles.flashinfer_routing import build as flashinfer_build
    expected = [str(p.relative_to(flashinfer_build.REPO_ROOT)) for lib in flashinfer_build.LIBRARIES
                for p in (lib.path, lib.stamp)]
    assert list(bundle.ORACLE_FILES) == expected
    assert "build/flashinfer_oracle/libfi_fused_routing.so" in bundle.ORACLE_FILES


def test_the_installer_alone_refuses_a_bad_argument_in_one_line(fake_wheels, tmp_path):
    """install.py runs from a bundle folder without the repository (-S: no site-packages, so no installed
    harness either): its one-line argument errors come from the copy of common/args.py beside it."""
    parts = bundle.build(tmp_path / "bundle", part_mb=2)
    stage = tmp_path / "stage"
    _stage(parts, stage)
    missing = tmp_path / "no-such-stage"
    done = subprocess.run([sys.executable, "-S", str(stage / "install.py"), "install", str(missing)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"bundle install: error: argument stage: no such folder: {missing}"]
