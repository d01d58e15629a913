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

# ruff, every fast test and one shared live launch of the tiny config (tests/live): ~9.5 min.
test: lint
	$(BIN)/python -m pytest -q -m "not gpu and not slow"

# ruff and every test but the CUDA ones, the multi-minute launches included: ~40 min (goal 35).
test-all: lint
	$(BIN)/python -m pytest -q
