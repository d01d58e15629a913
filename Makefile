# The README's two commands: `make run` (set up + main job) and `make test` (set up + tests);
# `make test-all` is everything (CI runs it). The tiers are described in docs/testing.md.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test test-all lint
setup:
	@bash scripts/setup.sh

run: setup
	$(BIN)/microcoder launch configs/tiny-cpu.toml

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Two pytest workers (pytest-xdist): a test module is one unit of work (tests/live one unit), the
# launch- and engine-driving units start first; a tiny launch waits more than it computes, so two
# share the 2 cores well (tests/conftest.py, docs/testing.md). PYTEST_WORKERS=0 runs in-process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder)

# ruff, every fast test and one shared live launch of the tiny config (tests/live).
test: lint
	$(BIN)/python -m pytest -q $(XDIST) -m "not gpu and not slow"

# ruff and every test but the CUDA ones, the multi-minute launches included: ~30-35 min (goal 35;
# bench/RESULTS.md has each measured run).
test-all: lint
	$(BIN)/python -m pytest -q $(XDIST)
