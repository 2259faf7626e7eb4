# flowmem developer commands. Every target creates its own virtual environment.
# `make run` and `make demo` install only what serving and the demo need (the `server`
# and `runtime` extras); `make test`, `make lint` and `make bench` add the rest. Each
# stage has its own stamp, so `make run` after `make test` installs nothing and
# `make test` after `make run` installs only what is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
USER_STAMP := $(VENV)/.installed-user
DEV_STAMP := $(VENV)/.installed-dev
BUILD_STAMP := $(VENV)/.installed-build
# what a checkout's own runs leave for the next one on this machine, a fresh clone's too
CACHE ?= $(HOME)/.cache/flowmem
MYPY_SEED ?= $(CACHE)/mypy

.PHONY: setup run demo test lint packaging dist bench clean

setup: $(DEV_STAMP)

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --progress-bar on --upgrade pip

$(USER_STAMP): pyproject.toml | $(PY)
	@echo "installing flowmem[server,runtime] into $(VENV) (first run only)"
	$(PY) -m pip install --progress-bar on -e '.[server,runtime]'
	touch $(USER_STAMP)

# The full install includes everything the user stage has, so it satisfies both stamps.
$(DEV_STAMP): pyproject.toml | $(PY)
	@echo "installing flowmem[all,dev,bench] into $(VENV) (first run only)"
	$(PY) -m pip install --progress-bar on -e '.[all,dev,bench]'
	touch $(DEV_STAMP) $(USER_STAMP) $(BUILD_STAMP)

# `make dist` needs only the build frontend (the dev install has it too).
$(BUILD_STAMP): | $(PY)
	$(PY) -m pip install --progress-bar on 'build>=1.2'
	touch $(BUILD_STAMP)

## The README's first command: flowmem's main job, the HTTP memory server, on the
## embedded default (SQLite file ./flowmem.db). The first start prints an admin token.
run: $(USER_STAMP)
	$(VENV)/bin/flowmem serve

## A crashed agent healed: SIGKILL mid tool call, restart, next turn accepted.
demo: $(USER_STAMP)
	$(VENV)/bin/flowmem demo

## lint also fails when src/flowmem/client/sync.py is not what its generator writes from
## aio.py (it prints the diff and the command that fixes it: python scripts/async_to_sync.py).
## mypy runs incrementally: a checkout without a .mypy_cache (a fresh clone, CI's) starts from
## a copy of the last one this machine's user left in $(MYPY_SEED) (mypy rechecks each file whose
## content differs: a cold run is ~35 s of CPU since decision 0207, a seeded one ~3 s), and leaves its own there after.
## A copy, not a shared directory: two mypy runs on one cache directory can break each other.
lint: setup
	$(PY) scripts/async_to_sync.py --check
	$(PY) -m ruff check src tests bench
	@if [ ! -d .mypy_cache ] && [ -d "$(MYPY_SEED)" ]; then cp -R "$(MYPY_SEED)" .mypy_cache; fi
	$(PY) -m mypy
	@mkdir -p "$(dir $(MYPY_SEED))" && rm -rf "$(MYPY_SEED).$$$$" && cp -R .mypy_cache "$(MYPY_SEED).$$$$" \
		&& rm -rf "$(MYPY_SEED)" && mv "$(MYPY_SEED).$$$$" "$(MYPY_SEED)" || rm -rf "$(MYPY_SEED).$$$$"
	$(VENV)/bin/lint-imports

## The packaging check (issue 43, decision 0102): the sdist and the wheel built once, then
## the wheel with each documented extra alone in a fresh venv does what docs/guide.md says.
## Its wheelhouse (a wheel of every dependency, filled from the index only when it lacks one) is
## kept in $(CACHE), outside the checkout, so that a fresh clone needs no index either.
packaging: setup
	$(PY) -m tests.packaging --wheelhouse "$(CACHE)/packaging-wheelhouse"

## The sdist and the wheel (built from the sdist) in dist/: pip install 'dist/flowmem-….whl[server]'.
dist: $(BUILD_STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .

## The README's second command: the whole test suite on every core and one worker more,
## as its tests often wait (decision 0162; pytest-xdist 3.6+;
## --dist worksteal: an idle worker takes tests queued on a busy one, so the longest do not
## end the run on one worker), printing the slowest tests, and beside it lint, types and
## the packaging check (mostly waiting on builds, installs and servers: they take what the
## suite's workers leave), whose output follows the suite's (scripts/make_test.sh).
## The tests run with bytecode caching on even where PYTHONDONTWRITEBYTECODE is set:
## otherwise each worker, and each server, CLI and bench process the tests start, compiles
## flowmem (and each worker assert-rewrites every test module) from source again.
test: setup
	bash scripts/make_test.sh $(PY) $(MAKE)

bench: setup
	$(PY) bench/core.py
	$(PY) bench/store.py
	$(PY) bench/formats.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
