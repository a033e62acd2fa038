# The two commands a newcomer needs: `make book` and `make test`. Both create .venv if missing.
# Other targets: export (chapters -> lib/), format (ruff over the chapters' cells and the code),
# sync (check lib/, notebooks and formatting are in sync),
# execute (CHAPTER=<name>, or all chapters), bench (bench-peers: GPflux and GPyTorch beside us), clean.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHAPTER ?=
# Where the datasets are. The machines that develop this book keep them at ../shared/data;
# elsewhere the loaders download into a per-user cache. Override: make test LIB_DATA_DIR=/path
ifneq ($(wildcard ../shared/data/README.md),)
LIB_DATA_DIR ?= $(abspath ../shared/data)
endif
ifneq ($(LIB_DATA_DIR),)
export LIB_DATA_DIR := $(abspath $(LIB_DATA_DIR))
endif

# The environments install without byte-compiling every module (pip's --no-compile: compiling all
# of jax, scipy, sphinx and the rest took 36 s of a 60-s install of .venv, on one core); Python
# compiles a module when it is first imported and keeps the result, which needs bytecode writing
# on where the caller turned it off.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: book test test-floor floor-background export format sync execute unit nbval render browser bench bench-peers clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(0 if v >= (3, 12) else \
	  "make: Python >= 3.12 is needed (jax >= 0.11), found %d.%d: pass PYTHON=python3.12, or use pyenv with this repository'"'"'s .python-version" % v[:2])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e ".[book,test,dev]"
	touch $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --builder html --warningiserror --keep-going
	@echo "book: open _build/html/index.html"

export: $(STAMP)
	$(PY) tools/export.py

sync: $(STAMP)
	$(PY) tools/export.py --check
	$(PY) tools/sync.py
	$(PY) tools/format.py --check
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .

# One formatter (ruff, pyproject.toml) for the chapters' code cells, hence lib/, and for tools/,
# tests/, benchmarks/: formats the cells in book/*.md and their notebooks (outputs kept), exports.
format: $(STAMP)
	$(PY) tools/format.py
	$(PY) tools/export.py
	$(VENV)/bin/ruff format --quiet .

execute: $(STAMP)
	$(PY) tools/execute.py $(if $(CHAPTER),$(CHAPTER),--all)

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "make: the rendered-book test needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)"; exit 1; fi; }

# Both cores: the unit tests spread over two workers, the chapters one notebook per worker.
# The chapters run outside the checkout, as in Colab (tools/outside.py: the library from its
# wheel in a fresh environment, the notebooks copied to an empty folder): the one nbval run.
# --durations: the slowest tests and chapter cells, in the log of every run (the time budget).
XDIST := -n 2 --dist worksteal --durations=15
NBVAL := -n 2 --dist loadscope --no-loadscope-reorder --durations=25

unit: $(STAMP)
	$(PY) -m pytest tests -m "not render" $(XDIST)

nbval: $(STAMP)
	$(PY) tools/outside.py $(NBVAL)

render: $(STAMP) browser
	$(PY) -m pytest tests -m render

# Every check: library and notebooks in sync, unit tests, the executed chapters (nbval, outside
# the checkout),
# the book built with warnings as errors, the rendered book in headless Chromium, and the
# library's unit tests against the oldest jax/flax/orbax it declares (beside the book's build and
# render, which leave a core idle); then a table of the stages' times.
test: floor-background $(STAMP) browser
	$(PY) tools/stages.py \
	  "sync=$(MAKE) --no-print-directory sync" \
	  "unit=$(PY) -m pytest tests -m 'not render' $(XDIST)" \
	  "nbval=$(PY) tools/outside.py $(NBVAL)" \
	  "&floor=$(MAKE) --no-print-directory test-floor" \
	  "book=$(MAKE) --no-print-directory book" \
	  "render=$(PY) -m pytest tests -m render"

# The library's declared floor (jax, flax, orbax) in its own environment: the unit tests of lib.
FLOOR := .venv-floor

# The floor's environment installs (mostly downloads) in the background from the start of
# `make test`, beside the install of .venv (one pip process, which leaves a core half idle) and the
# first stages; the floor stage waits for it under the lock.
floor-background:
	@( $(MAKE) --no-print-directory $(FLOOR)/.installed > $(FLOOR).log 2>&1 & )

# One install at a time (`make test` starts it in the background, the floor stage waits for it):
# under the lock, a stamp newer than its inputs means another make has just installed it.
$(FLOOR)/.installed: pyproject.toml tests/floor-constraints.txt
	flock $(FLOOR).lock bash -c 'set -e; \
	  if [ $@ -nt pyproject.toml ] && [ $@ -nt tests/floor-constraints.txt ]; then exit 0; fi; \
	  test -x $(FLOOR)/bin/python || $(PYTHON) -m venv $(FLOOR); \
	  $(FLOOR)/bin/python -m pip install --quiet --upgrade pip; \
	  $(FLOOR)/bin/python -m pip install --quiet --no-compile -c tests/floor-constraints.txt -e . \
	    pytest pytest-xdist pyyaml; \
	  touch $@'

# What the floor is for: that the library works with those releases. The tests of lib that are not
# marked slow (the end-to-end runs and repeated trainings, which call the same APIs again), of the
# modules that import them: lib.data imports none (tests/test_packaging.py checks), so its tests
# would run the same code twice.
test-floor: $(FLOOR)/.installed
	$(FLOOR)/bin/python -m pytest tests/test_toolkit.py tests/test_dgp.py tests/test_darn.py tests/test_partition.py \
	  tests/test_ebp.py tests/test_nram.py tests/test_contracts.py -q -m "not slow" $(XDIST)

bench: $(STAMP)
	for f in benchmarks/*_*.py; do $(PY) $$f || exit 1; done  # every script but common.py

# GPflux and GPyTorch for the benchmarks, in their own environment (several GB: torch and tensorflow)
bench-peers: .venv-peers/.installed

.venv-peers/.installed: benchmarks/peers/requirements.txt
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install -q -r benchmarks/peers/requirements.txt
	touch $@

clean:
	rm -rf _build .pytest_cache
