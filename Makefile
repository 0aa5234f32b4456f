# The two set-up commands of the README: `make run` and `make test`.
# Everything they need is installed from nothing into .venv (Python packages) and
# .cache/ (the Apache Kafka jars, resolved from Maven Central by the test harness; the clients
# openapi-generator makes and the TypeScript compiler from npm, by their test).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test install bench shim

shim:
	mvn -q -B -f shim/pom.xml package

$(VENV)/.installed: pyproject.toml devtools/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' -e ./devtools
	touch $@

install: $(VENV)/.installed

# Runs the service; without a configured cluster, on a local 3-broker Kafka cluster.
run: install
	$(PY) -m devtools.localstack $(if $(CONFIG),--config $(CONFIG))

# Fastest first, so a typo fails in seconds: the shim's JUnit tests (results printed) and jar,
# then the unit and API tests, the report tests (local Spark), and the integration tests (real
# KRaft clusters on loopback, the shim in every broker of some). pytest runs the folders in the
# order given.
test: install
	mvn -B -ntp -f shim/pom.xml package
	$(PY) -m pytest tests/unit tests/report tests/integration $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_evaluate.py
	$(PY) bench/bench_http.py
