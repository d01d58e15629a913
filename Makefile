# The README's two commands: `make run` (set up + main job) and `make test` (set up + tests).
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test lint
setup:
	@bash scripts/setup.sh

run: setup
	$(BIN)/microcoder launch configs/tiny-cpu.toml

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest -q
