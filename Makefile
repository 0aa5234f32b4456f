# The two set-up commands of the README: `make run` and `make test`.
# Everything they need is installed from nothing into .venv (Python packages) and
# .cache/ (the Apache Kafka jars, resolved from Maven Central by the test harness).

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

# The shim's JUnit tests and jar, then the unit, API and integration tests (the latter start
# real 3-broker KRaft clusters, one of them with the shim on every broker).
test: install
	mvn -q -B -f shim/pom.xml package
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_evaluate.py
	$(PY) bench/bench_http.py
