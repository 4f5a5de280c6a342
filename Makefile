# The two commands of the README: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test setup setup-dev lint typecheck unit clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

setup-dev: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev,plot,web,redis,memcached,etcd]"

demo: setup
	$(BIN)/ringkit simulate

lint: setup-dev
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: setup-dev
	$(BIN)/mypy

unit: setup-dev
	$(BIN)/python -m pytest -q

test: lint typecheck unit

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
