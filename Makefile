# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use and installs georep with what it needs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo storage-demo test lint typecheck format bench clean

# georep with its development tools, and the Pulsar tooling (pulsar_tools/: a package of
# its own, for the tests, the benchmarks and the drill's real-Pulsar modes).
$(STAMP): pyproject.toml pulsar_tools/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./pulsar_tools
	touch $(STAMP)

# Three clusters and their gateways (A<->B, A->C), a produce/consume that shows what
# crossed where, then a clean stop. Data goes to a fresh temporary directory.
demo: $(STAMP)
	$(BIN)/georep --log-level WARNING up --config examples/three-clusters.toml --demo \
		--data "$$(mktemp -d -t georep-demo-XXXXXX)"

# The storage layer alone: bookies killed under writes, recovery, auto-recovery.
storage-demo: $(STAMP)
	$(BIN)/georep demo

# Two workers, a test file per worker at a time (tests/conftest.py says how files group).
PYTEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: typecheck
	$(BIN)/ruff check georep pulsar_tools tests bench
	$(BIN)/ruff format --check georep pulsar_tools tests bench

# mypy, configured in pyproject.toml: strict for georep/ and bench/, a basic check for tests/.
typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format georep pulsar_tools tests bench
	$(BIN)/ruff check --fix georep pulsar_tools tests bench

bench: $(STAMP)
	$(BIN)/python bench/storage.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
