# flowmem developer commands. Every target creates its own virtual environment.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,dev,bench]'
	touch $(STAMP)

## The README's first command: flowmem's main job, the HTTP memory server, on the
## embedded default (SQLite file ./flowmem.db). The first start prints an admin token.
run: setup
	$(VENV)/bin/flowmem serve

## A crashed agent healed: SIGKILL mid tool call, restart, next turn accepted.
demo: setup
	$(VENV)/bin/flowmem demo

lint: setup
	$(PY) -m ruff check src tests bench
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

## The README's second command: lint, types and the whole test suite.
test: lint
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/core.py
	$(PY) bench/store.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
