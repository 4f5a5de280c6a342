# The commands of the README: `make demo`, `make check` and `make test`. Each sets up what it
# needs. `make check` is the contributor's loop: ruff, mypy and every test that starts no server,
# browser or package install (pytest -m "not server and not installs", see tests/markers.py: a
# test that starts memcached, redis-server, etcd, nutcracker, HAProxy, nginx or chromium is
# marked `server` by reading its source; one that builds a virtualenv and pip-installs into it
# is marked `installs` by hand); ruff and mypy run beside pytest (make -j), and any of the three
# failing fails the target. `make test` is everything, CI's command: the suite runs on every core
# (pytest-xdist), a test file per worker at a time so that a module's servers start once
# (--dist loadfile).
# `make chaos` is the long fault-injection run (tests/chaos/), by hand: RUNS seeded runs per
# fault kind from seed SEED (FAULTS: comma-separated, default all; CONFIG: one client
# configuration of tests/chaos/run.py, default all in turn; JOBS: runs at once), real servers,
# a few minutes per kind, a table per fault kind at the end. Seed ranges split a run set:
# `make chaos SEED=0 RUNS=10` and `make chaos SEED=10 RUNS=10` are the runs of `RUNS=20`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# Bytecode caches are what "a warm virtualenv" means for the tests: with PYTHONDONTWRITEBYTECODE
# set (many shells and containers set it), every run compiled ringkit and pytest rewrote every
# test module again, in each xdist worker and each subprocess a test starts (collection alone:
# 12.2-12.8 s of CPU without the caches, 6.8 s with them).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo check test setup setup-dev lint typecheck unit fast chaos chaos-live clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

# Installed once per change of pyproject.toml: pip's own check that everything is there took
# 16 s on a loaded 2-core machine, which `make check` would pay on every run.
DEV_STAMP := $(VENV)/.dev-installed

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev,plot,web,redis,memcached,etcd,metrics]"
	touch $@

setup-dev: $(DEV_STAMP)

demo: setup
	$(BIN)/ringkit simulate

lint: setup-dev
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: setup-dev
	$(BIN)/mypy

unit: setup-dev
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# The "check" hypothesis profile: half the examples of a local run, state machines and other
# tests that fix their own count included (tests/hypothesis_profiles.py). Two workers per core:
# a good part of the server-free tests' time is waiting (for subprocesses they start, for the
# timeouts they prove bounded, for a compute pool to spawn), and a second worker per core
# computes meanwhile; --dist worksteal lets an idle worker take tests queued for a busy one, so
# the run does not end waiting on one worker's slow tail.
CHECK_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
fast: setup-dev
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-check} $(BIN)/python -m pytest -q \
		-n $(CHECK_WORKERS) --dist worksteal -m "not server and not installs"

# Each target's output is printed whole when it ends (--output-sync), so the three do not mix.
check: setup-dev
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck fast

test: lint typecheck unit

RUNS ?= 20
FAULTS ?= calm,kill,restart,pause,membership,coordinator_resume,coordinator_rollback
CONFIG ?=
SEED ?= 0
JOBS ?= 1
chaos: setup-dev
	PYTHONPATH=src:. $(BIN)/python -m tests.chaos --runs $(RUNS) --faults $(FAULTS) \
		--seed $(SEED) --jobs $(JOBS) $(if $(CONFIG),--config $(CONFIG))

# `make chaos-live`: the ownership checker of the live ring (tests/chaos_live/), by hand: RUNS
# seeded runs per fault kind and handoff mode from seed SEED, each at most 40 s (25 s of faults
# plus set-up).
LIVE_FAULTS ?= graceful,worker_stop,etcd_stop,leader_kill,bad_records,restore
LIVE_MODES ?= exclusive,default
chaos-live: setup-dev
	PYTHONPATH=src:. $(BIN)/python -m tests.chaos_live --runs $(RUNS) --faults $(LIVE_FAULTS) \
		--modes $(LIVE_MODES) --seed $(SEED)

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
