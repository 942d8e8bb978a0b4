# neardup-spark developer commands. `make` alone lists them.
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= data/demo
DEMO_OUT ?= out/demo
DEMO_DOCS ?= 5000

.PHONY: help setup demo test lint format bench bench-nightly cluster-test eval-extract clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv with the package, the `neardup` script and dev tools

demo: $(STAMP)  ## generate a 5,000-document corpus and dedupe it in local mode
	$(BIN)/neardup generate $(DEMO_DIR) --docs $(DEMO_DOCS) --seed 1 --overwrite
	$(BIN)/neardup dedupe $(DEMO_DIR)/corpus $(DEMO_OUT) --overwrite

test: $(STAMP)  ## run the test suite (real Spark in local mode)
	$(BIN)/python -m pytest -q

bench: $(STAMP)  ## benchmark vs the hashing floor, Spark MLlib, datasketch (10k/30k/100k docs), then the nightly case (~17 min on 2 cores; builds the JVM class archive first)
	$(BIN)/neardup bench

NIGHTLY_SIZES ?= 100000,300000
bench-nightly: $(STAMP)  ## only bench's nightly case: 10k new docs against indexes of 100k and 300k vs a full rerun, then 30 nights on 300k (NIGHTLY_SIZES=100000,300000,1000000 adds 1M)
	$(BIN)/neardup bench --nightly-only --nightly-sizes $(NIGHTLY_SIZES)

cluster-test: $(STAMP)  ## standalone master+worker on 127.0.0.1, spark-submit the zipped job, compare with local mode (also part of make test)
	$(BIN)/python -m pytest -q -m slow tests/runtime/test_standalone_cluster.py

eval-extract: $(STAMP)  ## main-content extraction F1 and WARC reader speed on ../shared/data
	$(BIN)/neardup eval-extract

lint: $(STAMP)  ## ruff, mypy and the architecture contracts (import-linter)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy neardup_spark
	$(BIN)/lint-imports

format: $(STAMP)  ## apply ruff's formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:  ## remove the venv, demo data and outputs
	rm -rf $(VENV) data out .pytest_cache .mypy_cache .ruff_cache
