# The two set-up commands of the README: `make demo` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PG_VERSION ?= 15
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck layers pytest venv system-deps postgres docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/inno-notify demo

# Everything the tests need that pip does not bring (Debian packages): Prometheus + promtool for
# the usage tests, Chromium for the tests that render pages and e-mails in a real browser.
system-deps:
	@missing=""; \
	command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

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

# pytest exit code 5 means "no tests collected": for us that is a failure, never a pass.
pytest: venv system-deps postgres
	@$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

test: lint typecheck layers pytest

docs: venv
	$(BIN)/python -m inno_notify.config_docs > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
