PYTHON ?= python3

.PHONY: install test lint bench demo

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

# `make demo`: a live table, a writer and the daemon at work for two minutes (`hoodied demo`; more of its
# options in DEMO_ARGS, e.g. DEMO_ARGS="--duration 300 --port 0"). On a fresh Debian machine it installs what
# is missing with apt (as root, or through sudo): Java for Spark, and the venv module when $(PYTHON) may not
# take packages (Debian's own python3 is "externally managed", PEP 668): then the package goes into
# $(DEMO_VENV) instead.
DEMO_VENV ?= .venv
demo:
	@set -e; \
	py="$(PYTHON)"; missing=""; \
	command -v java >/dev/null 2>&1 || missing="openjdk-17-jre-headless"; \
	if ! $(PYTHON) -c 'import os, sys, sysconfig; sys.exit(sys.prefix == sys.base_prefix and \
			os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then \
		py="$(DEMO_VENV)/bin/python"; \
		echo "make demo: $(PYTHON) is externally managed (PEP 668): installing into $(DEMO_VENV)"; \
		[ -x "$$py" ] || $(PYTHON) -c 'import ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	fi; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		echo "make demo: installing$$missing with apt"; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi; \
	[ "$$py" = "$(PYTHON)" ] || [ -x "$$py" ] || $(PYTHON) -m venv "$(DEMO_VENV)"; \
	$$py -m pip install -q -e .; \
	$$py -m hoodied.cli demo $(DEMO_ARGS)
