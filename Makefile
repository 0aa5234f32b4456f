# The two set-up commands of the README: `make run` and `make test`.
# Everything they need is installed from nothing into .venv (Python packages) and
# .cache/ (the Apache Kafka jars, resolved from Maven Central by the test harness).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test install bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

# Runs the service; without a configured cluster, on a local 3-broker Kafka cluster.
run: install
	$(PY) -m app.localstack $(if $(CONFIG),--config $(CONFIG))

# Unit, API and integration tests (the latter start a real 3-broker KRaft cluster).
test: install
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_evaluate.py
	$(PY) bench/bench_http.py
