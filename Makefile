# zsl-harness: `make demo` (set up + run the demo + print the site path), `make test` (everything,
# as CI runs it), `make test-fast` (the tests not marked slow: under 2 minutes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast lint typecheck pytest bench bench-methods clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,methods,postgres,ray]'
	touch $(STAMP)

install: $(STAMP)

# `make demo RUNNER=container` first builds the worker image with the shipped packages'
# requirements (offline from a Debian root file system with ROOTFS=DIR; see README "Containers").
RUNNER ?=
ROOTFS ?=
demo: install
ifeq ($(RUNNER),container)
	$(BIN)/zsl image build --package submissions $(if $(ROOTFS),--rootfs $(ROOTFS))
endif
	$(BIN)/zsl demo $(if $(RUNNER),--runner $(RUNNER))

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

pytest: install
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

# Quick feedback while editing: every test but the end-to-end ones marked `slow` (see
# pyproject.toml's markers); `make test` still runs them all.
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) leaderboard/site

bench: install
	$(BIN)/python bench/run.py --out bench/report.json

# The reference methods at real scale alone (issue 15; the 9 x 5 matrix included: 20+ min).
bench-methods: install
	$(BIN)/python bench/run.py --only methods --out bench/methods-report.json
