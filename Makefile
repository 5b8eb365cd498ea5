PYTHON ?= python3

.PHONY: install test lint bench

install:
	$(PYTHON) -m pip install -q -e '.[test]'

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy

# The test command: lint and types, then the whole suite.
test: lint
	$(PYTHON) -m pytest -q

bench:
	$(PYTHON) benchmarks/bench_snapshot_read.py
