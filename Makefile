# zsl-harness: `make demo` (set up + run the demo + print the site path), `make test` (everything,
# as CI runs it: lint, types, the whole suite on PYTEST_WORKERS pytest-xdist workers), `make
# test-fast` (the tests not marked slow, on the same workers), `make docs` (the documentation
# site, built strictly: CI runs it after `make test`).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: install install-features demo test test-fast lint typecheck pytest docs bench bench-methods bench-features clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install --quiet -c constraints.txt -e '.[dev,methods,postgres,ray]'
	touch $(STAMP)

install: $(STAMP)

# The `features` extra (torchvision, text models: `zsl features extract`, `zsl embeddings build`)
# on top: torch 2.14.1 replaces the 2.13.0 CPU wheel (constraints-features.txt). `make test`
# needs it; `make demo` does not. It is a superset of `install`, so it stands in for it (it
# touches both stamps) and a fresh checkout installs torch once, not 2.13.0 and then 2.14.1.
#
# The two constraints files pin every package the venv holds on Linux x86_64, where torch
# 2.14.1 is a CUDA build with 5 GB of libraries and pip unpacks wheels on one core. There the
# pinned wheels go in first in two pip processes side by side (the CUDA libraries in one, the
# rest in the other; --no-deps, each package in exactly one of them), then the editable install,
# which finds every pin already satisfied and checks the dependencies as usual: on 2 cores
# 90 s instead of 2 minutes.
# Elsewhere (no CUDA build, other pins apply) the editable install alone does it all.
FEATURES_STAMP := $(VENV)/.installed-features
$(FEATURES_STAMP): pyproject.toml constraints.txt constraints-features.txt | $(BIN)/python
	grep -v '^torch==' constraints.txt > $(VENV)/constraints-without-torch.txt
	if [ "$$(uname -sm)" = "Linux x86_64" ]; then \
	  grep -h '^[A-Za-z0-9].*==' $(VENV)/constraints-without-torch.txt constraints-features.txt \
	    > $(VENV)/pins.txt; \
	  grep -iE '^(nvidia|cuda)-' $(VENV)/pins.txt > $(VENV)/pins-cuda.txt; \
	  grep -viE '^(nvidia|cuda)-' $(VENV)/pins.txt > $(VENV)/pins-rest.txt; \
	  $(PIP) install --quiet --no-deps -r $(VENV)/pins-cuda.txt & cuda=$$!; \
	  $(PIP) install --quiet --no-deps -r $(VENV)/pins-rest.txt; rest=$$?; \
	  wait $$cuda && test $$rest = 0; \
	fi
	$(PIP) install --quiet -c $(VENV)/constraints-without-torch.txt -c constraints-features.txt -e '.[dev,methods,postgres,ray,features]'
	touch $(STAMP) $(FEATURES_STAMP)

install-features: $(FEATURES_STAMP)

# `make demo RUNNER=container` first builds the worker image with the shipped packages'
# requirements (offline from a Debian root file system with ROOTFS=DIR; see docs/howto/containers.md).
RUNNER ?=
ROOTFS ?=
demo: install
ifeq ($(RUNNER),container)
	$(BIN)/zsl image build --package submissions $(if $(ROOTFS),--rootfs $(ROOTFS))
endif
	$(BIN)/zsl demo $(if $(RUNNER),--runner $(RUNNER))

lint: install-features
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: install-features
	$(BIN)/mypy

# PYTEST_WORKERS pytest-xdist workers (0: in this process); --dist worksteal: a worker that runs
# out of tests takes some of the other's, so neither waits at the end (tests/README.md, Speed).
PYTEST_WORKERS ?= 2
PYTEST_XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist worksteal)

pytest: install-features
	$(BIN)/python -m pytest -q $(PYTEST_XDIST)

test: lint typecheck pytest

# Quick feedback while editing: every test but the end-to-end ones marked `slow` (see
# pyproject.toml's markers), on the same workers.
test-fast: install-features
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_XDIST)

# The documentation site (mkdocs.yml) into build/docs: the generated references must be current
# (docs/generate.py), and --strict fails on any warning: a broken link between pages, a missing
# anchor, a page left out of the nav. Links to the web are not checked (offline).
docs: install
	$(BIN)/python docs/generate.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/docs

clean:
	rm -rf $(VENV) leaderboard/site build/docs

bench: install-features
	$(BIN)/python bench/run.py --out bench/report.json

# The reference methods at real scale alone (issue 15; the 9 x 5 matrix included: 20+ min).
bench-methods: install
	$(BIN)/python bench/run.py --only methods --out bench/methods-report.json

# Feature extraction alone (issue 16): ResNet-101 at 224 px, images/s on this CPU (and a GPU when
# torch sees one).
bench-features: install-features
	$(BIN)/python bench/run.py --only features --out bench/features-report.json
