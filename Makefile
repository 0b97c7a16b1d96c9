# schedsite — the two commands: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ADDR ?= 127.0.0.1:8000
PYTEST_ARGS ?=

.PHONY: run test install install-test lint format demo-reset clean screenshots

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test
	@bash scripts/install_browser.sh

## make run: install, migrate, seed a demo lab, serve UI + scheduler + simulated runners.
run: install
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py seed_demo
	DEBUG=1 $(PY) manage.py rundemo --addr $(ADDR)

## make test: install test needs and run every test (PostgreSQL when one answers).
test: install-test
	@url="$$($(PY) scripts/test_database_url.py)"; \
	if [ -n "$$url" ]; then \
	  echo "== tests on PostgreSQL ($${url%%@*}@…)"; export DATABASE_URL="$$url"; \
	else \
	  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; \
	  echo "!! No PostgreSQL reachable: running on SQLite; PostgreSQL-only tests are SKIPPED !!"; \
	  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; \
	fi; \
	$(PY) -m pytest -n 2 $(PYTEST_ARGS)

## make screenshots: run the browser tests saving into build/screenshots/, then copy the ones
## the docs show into docs/screenshots/ (scripts/refresh_screenshots.py). Tests alone save
## into pytest's temporary folders.
screenshots: install-test
	@url="$$($(PY) scripts/test_database_url.py)"; \
	if [ -n "$$url" ]; then export DATABASE_URL="$$url"; fi; \
	$(PY) scripts/refresh_screenshots.py $(PYTEST_ARGS)

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

demo-reset:
	rm -f db.sqlite3 db.sqlite3-wal db.sqlite3-shm

clean: demo-reset
	rm -rf $(VENV) build .pytest_cache staticfiles
