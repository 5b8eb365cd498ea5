# The README's two commands, `make demo` and `make test`, each install everything they need first, through
# the one install path .ci/install (a venv when $(PYTHON) is externally managed, Debian packages through
# apt-get with sudo when missing). `make install` installs what the tests need and runs nothing.
PYTHON ?= python3
VENV ?= .venv
export PYTHON VENV

# The interpreter hoodied is installed into: $(PYTHON), or $(VENV)/bin/python (see .ci/install). Passed to
# $(shell) by hand: GNU Make before 4.4 does not export variables to it, so `make demo PYTHON=...` installed
# into that Python and then ran another.
PY = $(shell PYTHON='$(PYTHON)' VENV='$(VENV)' .ci/install --which)
# Extra pytest arguments, e.g. PYTEST_ARGS="-k compaction" or PYTEST_ARGS="tests/core/log".
PYTEST_ARGS ?=
# pytest-xdist processes the suite runs on, a test file each at a time (1: one process, no xdist). Two halve
# the suite's time on two cores (most of it waits on Spark, ZooKeeper and child processes). The longest files
# are handed out first (tests/conftest.py: LONGEST_FILES), in that order (--no-loadscope-reorder).
TEST_WORKERS ?= 2

.PHONY: install install-demo test lint bench chaos demo

install:
	.ci/install --test

install-demo:
	.ci/install

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# The test command: lint and types, then the whole suite (pytest-benchmark, when installed, is left out: it
# refuses to time under xdist).
test: lint
	$(PY) -m pytest -q -p no:benchmark $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(PYTEST_ARGS)

# Every benchmark (benchmarks/run_all.py: each in its own process, then one table of their targets; about
# 45 minutes on two cores), e.g. BENCH_ARGS="--quick" or BENCH_ARGS="--only compaction,clustering".
BENCH_ARGS ?=
bench: install
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

# The chaos campaign (tests/support/chaos): TRIALS trials from seed SEED, tables on local disk and on S3, each
# 60 s of faults beside a writer, three replicas and the second executors of issue 32 (an alias daemon, a
# daemon on another ZooKeeper base path, an operator's one-offs and cancels, SIGSTOPped replicas); prints the
# counts, keeps failed trials' folders (CHAOS_ARGS="--actors none": the replicas and the writer alone).
TRIALS ?= 100
SEED ?= 1
chaos: install
	cd tests && $(PY) -m support.chaos --trials $(TRIALS) --seed $(SEED) --stores local,s3 $(CHAOS_ARGS)

# `make demo`: a live table, a writer and the daemon at work for two minutes (`hoodied demo`; more of its
# options in DEMO_ARGS, e.g. DEMO_ARGS="--duration 300 --port 0").
demo: install-demo
	$(PY) -m hoodied.cli demo $(DEMO_ARGS)
