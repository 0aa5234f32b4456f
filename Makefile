# The two set-up commands of the README: `make run` and `make test`.
# Everything they need is installed from nothing into .venv (Python packages) and
# .cache/ (the Apache Kafka jars, resolved from Maven Central by the test harness; the clients
# openapi-generator makes and the TypeScript compiler from npm, by their test).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-tools go-tools install bench shim

shim:
	mvn -q -B -f shim/pom.xml package

# Every package at the version in constraints.txt, the versions CI runs (docs/architecture.md).
$(VENV)/.installed: pyproject.toml devtools/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]' -e ./devtools
	touch $@

install: $(VENV)/.installed

# Runs the service; without a configured cluster, on a local 3-broker Kafka cluster.
run: install
	$(PY) -m devtools.localstack $(if $(CONFIG),--config $(CONFIG))

# The parts of the test command, timed by .ci/parts.py, which prints the time of each at the
# end (also when one fails; then the parts after it do not run and the exit status is non-zero).
# A part given with + runs at the same time as the one before it, one given with > right after
# it (the Strimzi check reads the shim's jar). Fastest first, so a typo fails in seconds: ruff
# (lint and format) and mypy on app/ and spark/ (settings in pyproject.toml), then the unit and
# API tests alongside the shim's JUnit tests (results printed) and jar, then the Strimzi model
# check, and alongside them the report tests in two processes, each with its local Spark (a
# Spark session over the tests' small histories keeps about 1.2 cores busy: the report tests
# took 8:13 in two processes, 11:05 in one); then the integration tests (real
# KRaft clusters on loopback, the shim in every broker of some) in INTEGRATION_WORKERS
# processes, each test module in one of them with its own clusters, with the machine to
# themselves (their timing bounds are real-time claims).
INTEGRATION_WORKERS ?= 3
CI_REPORTS := .cache/ci

test:
	@mkdir -p $(CI_REPORTS)
	@$(PYTHON) .ci/parts.py --modules $(CI_REPORTS)/report.xml --modules $(CI_REPORTS)/integration.xml \
		'install=$(MAKE) --no-print-directory install' \
		'tools=$(MAKE) --no-print-directory test-tools' \
		'checks=$(PY) -m ruff check app spark && $(PY) -m ruff format --check app spark && $(PY) -m mypy' \
		'unit=$(PY) -m pytest tests/unit $(PYTEST_ARGS)' \
		'+shim JUnit=mvn -B -ntp -f shim/pom.xml package' \
		'>Strimzi check=mvn -B -ntp -f deploy/strimzi/check/pom.xml $(if $(CHECK_JDK),-Dcheck.jdk=$(CHECK_JDK)) test' \
		'+report=$(PY) -m pytest tests/report -n 2 --dist loadfile --junitxml=$(CI_REPORTS)/report.xml $(PYTEST_ARGS)' \
		'integration=$(PY) -m pytest tests/integration -n $(INTEGRATION_WORKERS) --dist loadgroup --junitxml=$(CI_REPORTS)/integration.xml $(PYTEST_ARGS)'

# Programs some tests drive, from Debian's packages where missing (needs root and apt-get):
# Chromium renders the report page and /docs; Node.js and npm run the TypeScript client
# generated from the OpenAPI document, Go builds the Go one (it needs no module beyond the
# standard library); promtool and Prometheus check the alert rules and the
# dashboard's queries (installed without the node exporter Prometheus recommends).
TEST_TOOLS := chromium:chromium node:nodejs npm:npm go:golang-go
TEST_TOOLS_BARE := promtool:prometheus prometheus:prometheus

missing = $$(for tool in $(1); do command -v $${tool%%:*} >/dev/null || echo $${tool\#*:}; done | sort -u)

test-tools: go-tools
	@packages="$(call missing,$(TEST_TOOLS))"; bare="$(call missing,$(TEST_TOOLS_BARE))"; \
	if [ -n "$$packages$$bare" ]; then \
		echo "installing Debian packages for the tests:" $$packages $$bare; \
		apt-get update -qq; \
		if [ -n "$$packages" ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$packages >/dev/null; fi; \
		if [ -n "$$bare" ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$bare >/dev/null; fi; \
	fi

bench: install
	$(PY) bench/bench_evaluate.py
	$(PY) bench/bench_http.py

# Go programs some tests run, built from the Go module proxy into .cache/tools/bin (once; the
# module cache keeps the sources): kustomize renders deploy/kubernetes/, and compose-config
# reads docker-compose.yml with Compose's own loader (devtools/composeconfig).
KUSTOMIZE_VERSION := v5.8.0
TOOLS_BIN := $(CURDIR)/.cache/tools/bin

go-tools: $(TOOLS_BIN)/kustomize-$(KUSTOMIZE_VERSION) $(TOOLS_BIN)/compose-config

$(TOOLS_BIN)/kustomize-$(KUSTOMIZE_VERSION):
	GOBIN=$(TOOLS_BIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	touch $@

$(TOOLS_BIN)/compose-config: devtools/composeconfig/main.go devtools/composeconfig/go.mod devtools/composeconfig/go.sum
	cd devtools/composeconfig && go build -o $@ .
