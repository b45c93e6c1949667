# Set-up is idempotent: every target that runs code depends on the virtual environment.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_CPU := torch==2.13.0

.PHONY: setup verify test clean bench-model prove-primitives measure-mufu

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the local CPU build, so nothing below pulls a multi-GB CUDA build.
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e .
	$(PY) -m pip install -q --no-deps flashinfer-python==0.7.2.post1
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -n auto -p no:cacheprovider --hypothesis-profile=ci

verify: $(STAMP) flashinfer-oracle
	$(PY) -m properties.tools.gate

bench-model: $(STAMP)
	$(PY) -m oracles.numpy_model.bench

measure-mufu: $(STAMP)
	$(PY) -m oracles.mufu measure

prove-primitives: $(STAMP)
	$(PY) -m oracles.mufu prove

clean:
	rm -rf $(VENV) build .hypothesis .pytest_cache reports
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# FlashInfer's routingIndicesDynBlockKernel built from the installed flashinfer-python sources into
# build/flashinfer_oracle/ (needs nvcc, not a GPU). Targets: FLASHINFER_ORACLE_ARCHS="sm_90a sm_100a".
.PHONY: flashinfer-oracle
flashinfer-oracle: $(STAMP)
	$(PY) -m oracles.flashinfer_routing

# Everything a GPU runner without package access needs, in parts of at most GPU_BUNDLE_PART_MB MiB:
# copy every part into one folder S there, then `python3 S/install.py install S SITE --repo REPO`.
.PHONY: gpu-bundle
GPU_BUNDLE_PART_MB ?= 40
gpu-bundle: $(STAMP) flashinfer-oracle
	$(PY) -m properties.tools.bundle build --part-mb $(GPU_BUNDLE_PART_MB)

# Properties and corpora (properties/, corpora/). `make replay CASE=path` replays saved cases (files or
# folders, several allowed): every implementation this machine runs, and every recorded output, against the
# live NumPy model; exit 1 when anything differs. `corpus-generate` draws the regression corpus (FORCE=1
# replaces it); `corpus-record` reruns every implementation on it and records the outputs (needs the GPU).
.PHONY: replay corpus-generate corpus-record
replay: $(STAMP)
	@test -n "$(CASE)" || { echo "usage: make replay CASE=corpora/failures/<case>.json [more cases or folders]"; exit 2; }
	$(PY) -m properties.replay $(CASE)

corpus-generate: $(STAMP)
	$(PY) -m properties.corpus generate $(if $(FORCE),--force)

corpus-record: $(STAMP)
	$(PY) -m properties.corpus record

# The kernel against the Triton and FlashInfer routing kernels and PyTorch eager, b = 1..8, on a GPU:
# CUDA-graph and PDL-chain timings, Nsight Compute where it runs, the harness's throughput. BENCH_ARGS adds
# e.g. `--verify-record FILE` (from `$(PY) -m properties.bench --time-verify --out FILE`).
.PHONY: bench
BENCH_OUT ?= properties/results/bench-h200.json
bench: $(STAMP) flashinfer-oracle
	$(PY) -m properties.bench --out $(BENCH_OUT) $(BENCH_ARGS)

# The mutant catalog (properties/mutants/catalog.py): edited copies of the kernel that the checks of `make verify` must
# kill. CPU: the static tier on the codegen mutants; GPU: both tiers on every mutant, minimal cases saved to
# corpora/mutants/, kill table in reports/mutants.json. MUTANTS_ARGS e.g. "--tier cpu --all" or "--only div_rn".
.PHONY: mutants
mutants: $(STAMP)
	$(PY) -m properties.mutants $(MUTANTS_ARGS)

# The soak engine (properties/soak/): drawn edge-case batches, every implementation against the model on the
# device, bit for bit; case files of disagreements to corpora/failures/, summary JSON (reports/soak.json).
# SOAK_ARGS e.g. "--rows 1e9", "--resume FILE --rows 3e8 --seconds 420", "--bench", "--fault ties_to_highest_index".
# One rank per GPU: torchrun --standalone --nproc-per-node=gpu -m properties.soak $(SOAK_ARGS)
.PHONY: soak
SOAK_ARGS ?= --rows 1e9
soak: $(STAMP) flashinfer-oracle
	$(PY) -m properties.soak $(SOAK_ARGS)

# The harness mutant catalog (properties/mutants/harness.py): wrong changes to the harness's own code and
# recorded data, each applied to a copy of the tree and run against the test meant to catch it (2 copies at a
# time, CPU); kill table to properties/results/harness-mutants.json and .md. HARNESS_MUTANTS_ARGS e.g.
# "--only fpenv_daz_disabled". `make mutmut`: the periodic mutmut report (not part of CI).
.PHONY: harness-mutants
harness-mutants: $(STAMP)
	$(PY) -m properties.mutants.harness_run $(HARNESS_MUTANTS_ARGS)

.PHONY: mutmut
mutmut: $(STAMP)
	$(PY) -m pip install -q "mutmut==3.*"
	$(PY) -m properties.mutants.mutmut_report
