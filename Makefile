# Set-up is idempotent: every target that runs code depends on the virtual environment.
# A machine whose $(PYTHON) already has a CUDA torch (a GPU runner) gets a venv on top of its packages
# (--system-site-packages) and installs only what is missing; elsewhere torch's CPU build comes first, so
# nothing below pulls a multi-GB CUDA build. flashinfer-python goes in without its dependencies: building the
# oracle from its sources does not need them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_CPU := torch==2.13.0
FLASHINFER := flashinfer-python==0.7.2.post1
HYPOTHESIS_PROFILE ?=
PYTEST_ARGS ?=
# A venv on $(PYTHON)'s packages. --system-site-packages alone shows the base interpreter's packages, not those
# of a venv that $(PYTHON) itself runs in (as on the GPU image): a .pth file in the new venv names $(PYTHON)'s.
VENV_ON_SYSTEM = { $(PYTHON) -m venv --system-site-packages $(VENV) \
  || $(PYTHON) -m venv --system-site-packages --without-pip $(VENV); } \
  && $(PYTHON) -c "import site; print(*site.getsitepackages(), sep=chr(10))" \
  > "$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/system-python.pth"

.PHONY: help setup verify test clean bench-model prove-primitives measure-mufu wheel-check

# Every target with a `## what it does` comment after its prerequisites, as the README's Markdown table.
help: ## this table of every target
	@echo '| target | what it does |'
	@echo '|---|---|'
	@awk -F ':.*## ' '/^[a-z][a-z0-9-]*:.*## / { printf "| `make %s` | %s |\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

setup: $(STAMP) ## create .venv and install the package with its pins (every target that runs code does it first)

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  if $(PYTHON) -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	    echo "setup: $(PYTHON) has a CUDA torch: the venv uses its packages"; \
	    $(VENV_ON_SYSTEM); \
	  else $(PYTHON) -m venv $(VENV); fi; fi
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -c "import setuptools" 2>/dev/null || $(PY) -m pip install -q "setuptools>=68"
	$(PY) -m pip install -q --no-build-isolation -e .
	$(PY) -c "import importlib.metadata as m; m.version('flashinfer-python')" 2>/dev/null \
	  || $(PY) -m pip install -q --no-deps $(FLASHINFER)
	touch $(STAMP)

# HYPOTHESIS_PROFILE (ci, dev, gate, gpu, nightly) and PYTEST_ARGS (e.g. "-k corpus", "--hypothesis-seed=N" with a
# non-derandomized profile) reach both. `make test` runs the default tests and the harness's slow self-tests (not
# the other deep ones: properties/tools/depths.py).
test: $(STAMP) ## the default tests and the slow self-tests under HYPOTHESIS_PROFILE (default ci) with PYTEST_ARGS; writes nothing tracked
	$(PY) -m pytest -n auto -p no:cacheprovider --hypothesis-profile=$(or $(HYPOTHESIS_PROFILE),ci) -m "not deep or selftest" $(PYTEST_ARGS)

# reports/index.html (python -m properties.report; REPORT_ARGS e.g. "--out FILE"): written after verify, soak and
# bench whatever they returned ($(call and_report,ARGS) keeps their exit status) but a refusal (exit 2: nothing
# ran, so nothing is written), or alone by `make report`.
and_report = status=$$?; test $$status -eq 2 || $(PY) -m properties.report $(REPORT_ARGS) $(1) || true; exit $$status
.PHONY: report
report: $(STAMP) ## reports/index.html and reports/index-img/ from reports/ and properties/results/
	$(PY) -m properties.report $(REPORT_ARGS)

# VERIFY_IMPL="NAME=MODULE:ATTR NAME=PATH.py:ATTR" adds plug-ins (properties/engine/plugins.py) to the tests.
# `make verify`: the gate (profile "gate" on a GPU, "ci" without; GATE_ARGS e.g. "--workers-per-gpu 8").
# `make verify-deep`: the deep tests alone (the long sweeps, the slow end-to-end self-tests:
# properties/tools/depths.py).
# `make verify-nightly`: the default gate under the deep profile (NIGHTLY_PROFILE, default "gpu": 3,000 examples),
# the deep tests, then the soak (SOAK_ARGS, default 10^9 rows); all three run, and it fails if any does.
GATE_ARGS ?=
NIGHTLY_PROFILE ?= gpu
.PHONY: verify-deep verify-nightly
verify: $(STAMP) ## the gate: every default test this machine can run; reports/verify.json, junit.xml, index.html
	VERIFY_IMPL="$(VERIFY_IMPL)" $(PY) -m properties.tools.gate $(if $(HYPOTHESIS_PROFILE),--profile $(HYPOTHESIS_PROFILE)) $(GATE_ARGS) -- $(PYTEST_ARGS); \
	  $(call and_report)

verify-deep: $(STAMP) ## the deep tests alone (long sweeps, slow self-tests)
	$(PY) -m properties.tools.gate --deep $(if $(HYPOTHESIS_PROFILE),--profile $(HYPOTHESIS_PROFILE)) $(GATE_ARGS) -- $(PYTEST_ARGS); \
	  $(call and_report)

verify-nightly: $(STAMP) flashinfer-oracle ## the gate under NIGHTLY_PROFILE, the deep tests (reports/deep/), the soak
	$(PY) -m properties.tools.gate --profile $(NIGHTLY_PROFILE) $(GATE_ARGS) -- $(PYTEST_ARGS); gate=$$?; \
	  $(PY) -m properties.tools.gate --deep --reports reports/deep $(GATE_ARGS) -- $(PYTEST_ARGS); deep=$$?; \
	  $(PY) -m properties.soak $(SOAK_ARGS); soak=$$?; \
	  $(PY) -m properties.report $(REPORT_ARGS) || true; \
	  test $$gate -eq 0 && test $$deep -eq 0 && test $$soak -eq 0

# CI: the wheel installs every subpackage and data file. Built here, installed into a fresh venv that sees
# this venv's packages (no download), imported from outside the checkout, and used to replay a corpus case.
WHEEL_CASE := corpora/regression/all_equal-000.json
wheel-check: $(STAMP) ## build the wheel into build/wheel-check/, install it in a fresh venv, replay a case
	rm -rf build/wheel-check
	$(PY) -m pip wheel -q --no-deps --no-build-isolation . -w build/wheel-check/dist
	$(PY) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/python -m pip install -q --no-deps --no-index build/wheel-check/dist/*.whl
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
	  > "$$(build/wheel-check/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/project-venv.pth"
	cd build/wheel-check && venv/bin/python -c "import oracles.numpy_model as m, oracles.mufu, \
	  oracles.flashinfer_routing, properties.engine.casefile as c, sys; \
	  assert sys.prefix in m.__file__ and c.SCHEMA_PATH.is_file(), m.__file__; print('wheel: model from', m.__file__)"
	cd build/wheel-check && venv/bin/python -m properties.replay $(CURDIR)/$(WHEEL_CASE)

bench-model: $(STAMP) ## the NumPy model's throughput (printed)
	$(PY) -m oracles.numpy_model.bench --approx

measure-mufu: $(STAMP) ## (GPU) measure the MUFU tables into oracles/mufu/data/
	$(PY) -m oracles.mufu measure

prove-primitives: $(STAMP) ## (GPU) the model against the hardware over every input; oracles/mufu/data/exhaustive-proof.json
	$(PY) -m oracles.mufu prove

clean: ## remove .venv, build/, reports/ and the caches
	rm -rf $(VENV) build .hypothesis .pytest_cache reports
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# FlashInfer's routingIndicesDynBlockKernel (the metadata oracle) and its fused routing from logits (the
# benchmark's peer) built from the installed flashinfer-python sources into build/flashinfer_oracle/
# (needs nvcc, not a GPU). Targets: FLASHINFER_ORACLE_ARCHS="sm_90a sm_100a".
# Without nvcc or the sources it says "not run" and succeeds where a prebuilt library is in place.
.PHONY: flashinfer-oracle
flashinfer-oracle: $(STAMP) ## build FlashInfer's libraries into build/flashinfer_oracle/ (nvcc, no GPU)
	$(PY) -m oracles.flashinfer_routing

# GPU runners without package access. Here: `make gpu-bundle` writes build/gpu-bundle/part1..N (each at most
# GPU_BUNDLE_PART_MB MiB): the wheels the runner image lacks and the prebuilt FlashInfer libraries.
# There: copy every part's files into one folder B, then `make gpu-install BUNDLE=B` (no network: a venv on the
# image's CUDA torch, the wheels installed into it, the library into build/) and `VERIFY_REQUIRE_GPU=1 make verify`.
.PHONY: gpu-bundle gpu-install
GPU_BUNDLE_PART_MB ?= 40
gpu-bundle: $(STAMP) flashinfer-oracle ## build/gpu-bundle/part1..N: wheels and libraries for a runner without package access
	$(PY) -m properties.tools.bundle build --part-mb $(GPU_BUNDLE_PART_MB)

gpu-install: ## BUNDLE=B: install the bundle's parts into .venv on the image's CUDA torch, no network
	@test -n "$(BUNDLE)" || { echo "usage: make gpu-install BUNDLE=<folder holding every part's files>"; exit 2; }
	@test -f "$(BUNDLE)/install.py" || { echo "gpu-install: $(BUNDLE)/install.py missing: copy every part into $(BUNDLE)"; exit 2; }
	test -x $(PY) || { $(VENV_ON_SYSTEM); }
	$(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-install: the venv has no CUDA torch')"
	$(PY) $(BUNDLE)/install.py install $(BUNDLE) --repo $(CURDIR)
	# The checkout on the venv's path (what `pip install -e .` does, without needing setuptools' build here).
	$(PY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], \
	  'musespark-routing-harness.pth').write_text('$(CURDIR)\n')"
	touch $(STAMP)

# Properties and corpora (properties/, corpora/). `make replay CASE=path` replays saved cases (files or
# folders, several allowed): every implementation this machine runs, and every recorded output, against the
# live NumPy model; exit 1 when anything differs. `corpus-generate` draws the regression corpus (FORCE=1
# replaces it); `corpus-record` reruns every implementation on it and records the outputs (needs the GPU).
.PHONY: replay corpus-generate corpus-record
# Exit 0 agree, 1 differ, 2 unreadable, 3 nothing compared, 4 an implementation asked for cannot run here, from
# `python -m properties.replay` (use it directly in scripts: make reports any failure as its own exit 2; its
# last line, "Error 1" to "Error 4", keeps the code).
replay: $(STAMP) ## CASE=file-or-folder: replay saved cases against the live model (prints; writes nothing)
	@test -n "$(CASE)" || { echo "usage: make replay CASE=corpora/failures/<case>.json [more cases or folders]"; exit 2; }
	$(PY) -m properties.replay $(CASE)

corpus-generate: $(STAMP) ## draw corpora/regression/ (FORCE=1 replaces it)
	$(PY) -m properties.corpus generate $(if $(FORCE),--force)

corpus-record: $(STAMP) ## (GPU) record every implementation's outputs into corpora/regression/
	$(PY) -m properties.corpus record

# The kernel against the Triton and FlashInfer routing kernels (FlashInfer's fused routing from logits
# included) and PyTorch eager, b = 1..8, on a GPU:
# CUDA-graph and PDL-chain timings, Nsight Compute where it runs, the harness's throughput. BENCH_ARGS adds
# e.g. `--verify-record FILE` (from `$(PY) -m properties.bench --time-verify --out FILE`). Results go to
# reports/bench.json; BENCH_OUT=properties/results/bench.json refreshes the committed record.
.PHONY: bench
BENCH_OUT ?= reports/bench.json
bench: $(STAMP) flashinfer-oracle ## (GPU) the benchmark; BENCH_OUT (reports/bench.json), reports/index.html
	$(PY) -m properties.bench --out $(BENCH_OUT) $(BENCH_ARGS); $(call and_report,--bench $(BENCH_OUT))

# The kernel's evidence record (properties/mutants/freshness.py: properties/results/evidence.json, the killing cases
# beside it in evidence-cases/), on a GPU: the generated mutants refreshed from the committed record by what the tree
# changed (properties/mutants/refresh.py); commit it with the kernel change. EVIDENCE_ARGS e.g. "--resume FILE" (the
# record to refresh from), "--reviewed NAME", "--seconds 500" (a later make evidence goes on).
# `make mutants-corpus` copies the minimal cases of the last GPU run into the committed corpora/mutants/, when a
# person decides they should replace it.
.PHONY: evidence mutants-corpus
evidence: $(STAMP) ## (GPU) refresh the kernel's evidence record, properties/results/evidence.json (EVIDENCE_ARGS)
	$(PY) -m properties.mutants generated --evidence $(EVIDENCE_ARGS)

# The generated mutants (properties/mutants/generate.py): every operator at every site of the kernel's code, a CPU
# prefilter (PTX and launch digests, the static tier) on all cores, then the tiers that call route; the score in
# reports/mutants-generated.json. GENERATED_ARGS e.g. "--only routing._top_k", "--tier cpu", "--resume FILE".
.PHONY: mutants-generated
mutants-generated: $(STAMP) ## the generated mutants' score (GENERATED_ARGS); reports/mutants-generated.json
	$(PY) -m properties.mutants generated $(GENERATED_ARGS)

mutants-corpus: ## copy reports/mutants/*.json into corpora/mutants/
	@ls reports/mutants/*.json >/dev/null 2>&1 || { echo "mutants-corpus: no minimal cases in reports/mutants/ (run the mutants on a GPU first)"; exit 2; }
	cp reports/mutants/*.json corpora/mutants/

# The soak engine (properties/soak/): drawn edge-case batches, every implementation against the model on the
# device, bit for bit; case files of disagreements to reports/soak-failures/, summary JSON (reports/soak.json).
# SOAK_ARGS e.g. "--rows 1e9", "--resume FILE --rows 3e8 --seconds 420", "--bench", "--fault ties_to_highest_index".
# One rank per GPU: torchrun --standalone --nproc-per-node=gpu -m properties.soak $(SOAK_ARGS)
.PHONY: soak
SOAK_ARGS ?= --rows 1e9
soak: $(STAMP) flashinfer-oracle ## many rows against the model (SOAK_ARGS); reports/soak.json, reports/soak-failures/
	$(PY) -m properties.soak $(SOAK_ARGS); $(call and_report)

# The harness mutant catalog (properties/mutants/harness.py): wrong changes to the harness's own code and
# recorded data, each applied to a copy of the tree and run against the test meant to catch it (2 copies at a
# time, CPU); kill table to reports/harness-mutants.json and .md. HARNESS_MUTANTS_ARGS e.g.
# "--only fpenv_daz_disabled"; "--out properties/results/harness-mutants.json" refreshes the committed table.
# `make mutmut`: the periodic mutmut report (not part of CI).
.PHONY: harness-mutants
harness-mutants: $(STAMP) ## the harness's own mutants; reports/harness-mutants.json and .md
	$(PY) -m properties.mutants.harness_run $(HARNESS_MUTANTS_ARGS)

.PHONY: mutmut
mutmut: $(STAMP) ## install mutmut 3; its survivor report to properties/results/mutmut-report.json
	$(PY) -m pip install -q "mutmut==3.*"
	$(PY) -m properties.mutants.mutmut_report
