# neardup-spark developer commands. `make` alone lists them.
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= data/demo
DEMO_OUT ?= out/demo
DEMO_DOCS ?= 5000
# make setup: the package with every extra, at the versions of constraints.txt
EXTRAS := spark,ingest,report,bench,dev
# make test-compat: the newest Spark of each supported line, each in its own venv, on the oldest
# and the newest Python the project supports (falling back to $(PYTHON) when one is missing; a
# pyenv shim of a version not selected prints nothing and is passed over)
COMPAT_DIR := build/compat
COMPAT_SUITE := tests/kernels tests/compat tests/io
COMPAT_SPARK_spark35 := pyspark>=3.5,<3.6
COMPAT_SPARK_spark4 := pyspark>=4,<5
COMPAT_PYTHON_spark35 ?= $(firstword $(shell python3.10 -c 'import sys; print(sys.executable)' 2>/dev/null) $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3.10) $(PYTHON))
COMPAT_PYTHON_spark4 ?= $(firstword $(shell python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null) $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(PYTHON))

.PHONY: help setup demo test test-extended test-all test-compat wheel wheel-check docs lock lint format bench bench-nightly bench-scale bench-decontaminate cluster-test eval-extract eval-boilerplate eval-removals eval-containment clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# The packages of the extras in $(EXTRAS) other than spark, read from pyproject.toml.
EXTRA_DEPS = $(shell $(PYTHON) -c 'import shlex, tomllib; extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print(" ".join(shlex.quote(d) for name in "$(EXTRAS)".split(",") if name != "spark" for d in extras[name]))')
$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[spark]'
	@# The other extras' packages, the kernels and the JVM class archive side by side (pip is
	@# single-threaded, the archive's sample run compiles the kernels it needs too, numba writes
	@# its cache atomically; none of them needs the others' packages): a clean clone's setup
	@# 115, 124 s -> 85, 68 s here (pip freeze identical).
	$(BIN)/pip install --quiet -c constraints.txt $(EXTRA_DEPS) & extras=$$!; \
	  $(BIN)/neardup jvm-archive & archive=$$!; $(BIN)/neardup warmup; warmed=$$?; \
	  wait $$archive && wait $$extras && exit $$warmed
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv: the package with all extras and dev tools, pinned by constraints.txt; compile the kernels and build the JVM class archive

demo: $(STAMP)  ## generate a 5,000-document corpus and dedupe it in local mode
	$(BIN)/neardup generate $(DEMO_DIR) --docs $(DEMO_DOCS) --seed 1 --overwrite
	$(BIN)/neardup dedupe $(DEMO_DIR)/corpus $(DEMO_OUT) --overwrite

# tests/compat is make test-compat's suite (run by CI right after this one, on the pinned Spark too).
# Two pytest-xdist workers, each with its own SparkSession; a module's tests (tests/nightly's
# as one) stay in one worker, the groups that start JVMs first (tests/conftest.py). TEST_WORKERS=0
# runs the suite in one process. The 25 slowest tests are listed at the end. Three workers were
# measured (2026-12-06, 2 cores): 628 and 695 s against 686 s with two, the CPU idle 1% of the
# time (1,242 and 1,371 CPU-seconds): the suite is CPU-bound, and a third session JVM no gain.
TEST_WORKERS ?= 2
# compileall: the project's bytecode, which no process writes when PYTHONDONTWRITEBYTECODE is set
# (as on this machine): each of the suite's ~100 processes otherwise compiles its sources (0.15 s).
# Tests marked `extended` (a further path, size or case of a parity test that make test runs
# once) are make test-extended's, which CI runs after make test: make test is meant to stay near
# 10 minutes on 2 cores (813 s of tests from a clean clone, 2026-12-08: above it; make
# test-extended 269 s), every behaviour and every twin's parity in it once. make test-all runs both.
PYTEST_SUITE = $(BIN)/python -m pytest -q --ignore=tests/compat -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25
test: $(STAMP)  ## run the test suite (real Spark in local mode)
	$(BIN)/python -m compileall -q neardup_spark jobs tests > /dev/null
	$(PYTEST_SUITE) -m "not extended"

test-extended: $(STAMP)  ## the further variants of make test's parity tests (more paths, sizes, cases; CI runs them)
	$(BIN)/python -m compileall -q neardup_spark jobs tests > /dev/null
	$(PYTEST_SUITE) -m extended

test-all: $(STAMP)  ## make test and make test-extended in one run
	$(BIN)/python -m compileall -q neardup_spark jobs tests > /dev/null
	$(PYTEST_SUITE)

# A venv per Spark line: the newest release of the line from PyPI, the project's core dependencies
# (pyproject.toml's) and the test runner; nothing else pinned. test-compat installs the project
# itself into each, as users do: its wheel, built once.
CORE_DEPS = $(shell $(PYTHON) -c 'import shlex, tomllib; print(" ".join(shlex.quote(d) for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
$(COMPAT_DIR)/%/.installed: pyproject.toml
	rm -rf $(COMPAT_DIR)/$*
	$(COMPAT_PYTHON_$*) -m venv $(COMPAT_DIR)/$*
	$(COMPAT_DIR)/$*/bin/pip install --quiet --upgrade pip
	$(COMPAT_DIR)/$*/bin/pip install --quiet '$(COMPAT_SPARK_$*)' $(CORE_DEPS) pytest pytest-timeout hypothesis
	@touch $@

# The Spark Connect client: pyspark-client (no JVM, no py4j) and the package's core dependencies, on the Python
# of the Spark 4 venv (a Connect server's Python workers must run the client's Python version).
CONNECT_CLIENT := $(COMPAT_DIR)/connect-client
$(CONNECT_CLIENT)/.installed: pyproject.toml
	rm -rf $(CONNECT_CLIENT)
	$(COMPAT_PYTHON_spark4) -m venv $(CONNECT_CLIENT)
	$(CONNECT_CLIENT)/bin/pip install --quiet --upgrade pip
	$(CONNECT_CLIENT)/bin/pip install --quiet 'pyspark-client>=4,<5' $(CORE_DEPS)
	@touch $@

# Side by side: the three venvs' installs (pip, mostly waiting on disk and network), then the two
# Spark lines' suites (each keeps ~1.6 of 2 cores busy alone), their output printed in turn.
COMPAT_VENVS := $(COMPAT_DIR)/spark35/.installed $(COMPAT_DIR)/spark4/.installed $(CONNECT_CLIENT)/.installed
COMPAT_LINES := spark35 spark4
test-compat: $(STAMP)  ## the compact suite on the newest Spark 3.5.x and 4.x (own venvs), clusters equal to the pinned Spark's; the Connect row (a pyspark-client venv without Java against a Connect server); then wheel-check (~4.5 min once its venvs exist)
	@$(MAKE) --no-print-directory -j3 $(COMPAT_VENVS)
	NEARDUP_COMPAT_OUT=$(COMPAT_DIR)/pinned $(BIN)/python -m pytest -q -p no:cacheprovider tests/compat
	@$(MAKE) --no-print-directory wheel
	@# The wheel just built, as a user installs it, in each venv (their own dependencies stay).
	@for env in $(COMPAT_LINES) connect-client; do \
	  $(COMPAT_DIR)/$$env/bin/pip install --quiet --no-deps --force-reinstall $(WHEEL_DIR)/*.whl || exit 1; \
	done
	@# No JVM class archive in these venvs: the suite would build one in the background (~40
	@# CPU-seconds each, beside both suites) for the few JVMs it starts.
	@for env in $(COMPAT_LINES); do \
	  ( NEARDUP_COMPAT_OUT=$(COMPAT_DIR)/$$env NEARDUP_COMPAT_REFERENCE=$(COMPAT_DIR)/pinned/clusters.json \
	    NEARDUP_SPARK_JVM_ARCHIVE=off \
	    $(COMPAT_DIR)/$$env/bin/python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning $(COMPAT_SUITE) \
	    > $(COMPAT_DIR)/$$env.log 2>&1; echo $$? > $(COMPAT_DIR)/$$env.exit ) & \
	done; wait; status=0; \
	for env in $(COMPAT_LINES); do \
	  echo "== $$env: $$($(COMPAT_DIR)/$$env/bin/python -c 'import sys, pyspark; print("pyspark", pyspark.__version__, "python", sys.version.split()[0])')"; \
	  cat $(COMPAT_DIR)/$$env.log; test "$$(cat $(COMPAT_DIR)/$$env.exit)" = 0 || status=1; \
	done; exit $$status
	@echo "== connect: server $$($(COMPAT_DIR)/spark4/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__)'), client $$($(CONNECT_CLIENT)/bin/python -c 'import sys, pyspark; print("pyspark-client", pyspark.__version__, "python", sys.version.split()[0])')"
	NEARDUP_CONNECT_CLIENT=$(abspath $(CONNECT_CLIENT))/bin $(COMPAT_DIR)/spark4/bin/python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/compat/test_connect_client.py
	@$(MAKE) --no-print-directory wheel-check WHEEL_BUILT=1

# The wheel users install: built, checked by twine, then installed without its dependencies into
# the Spark 4 compat venv (which holds the core dependencies only: no extras) and run from there.
WHEEL_DIR := build/wheel
WHEEL_RUN := build/wheel-run
wheel: $(STAMP)  ## build the wheel users install into build/wheel/
	rm -rf $(WHEEL_DIR)
	$(BIN)/python -m build --wheel --outdir $(WHEEL_DIR) . >/dev/null

# WHEEL_BUILT=1: the wheel test-compat built and installed a moment ago, not built again.
wheel-check: $(STAMP) $(COMPAT_DIR)/spark4/.installed  ## build the wheel, twine check it, run neardup --version, generate and dedupe from it without extras
	rm -rf $(WHEEL_RUN)
	$(if $(WHEEL_BUILT),,$(MAKE) --no-print-directory wheel)
	$(BIN)/twine check --strict $(WHEEL_DIR)/*.whl
	$(if $(WHEEL_BUILT),,$(COMPAT_DIR)/spark4/bin/pip install --quiet --no-deps --force-reinstall $(WHEEL_DIR)/*.whl)
	test "$$($(COMPAT_DIR)/spark4/bin/neardup --version)" = "neardup-spark $$($(BIN)/python -c 'import neardup_spark; print(neardup_spark.__version__)')"
	$(COMPAT_DIR)/spark4/bin/neardup generate $(WHEEL_RUN)/data --docs 300 --seed 1
	$(COMPAT_DIR)/spark4/bin/neardup dedupe $(WHEEL_RUN)/data/corpus $(WHEEL_RUN)/out
	test -f $(WHEEL_RUN)/out/_SUCCESS

docs: $(STAMP)  ## the documentation site: regenerate docs/reference/ from the code, then mkdocs build --strict into site/
	$(BIN)/python -m neardup_spark.cli.docs_reference docs/reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lock:  ## rewrite constraints.txt with the newest versions inside pyproject.toml's ranges
	rm -rf build/lock && $(PYTHON) -m venv build/lock
	build/lock/bin/pip install --quiet --upgrade pip
	build/lock/bin/pip install --quiet '.[$(EXTRAS)]'
	{ sed -n '/^#/p' constraints.txt; build/lock/bin/pip freeze --exclude neardup-spark | grep -v '^#'; } > constraints.new
	mv constraints.new constraints.txt

bench: $(STAMP)  ## benchmark vs the hashing floor, Spark MLlib, datasketch, rensa (10k/30k/100k docs), then the nightly case (~17 min on 2 cores; builds the JVM class archive first)
	$(BIN)/neardup bench

NIGHTLY_SIZES ?= 100000,300000
bench-nightly: $(STAMP)  ## only bench's nightly case: 10k new docs against indexes of 100k and 300k vs a full rerun, then 30 nights on 300k (NIGHTLY_SIZES=100000,300000,1000000 adds 1M)
	$(BIN)/neardup bench --nightly-only --nightly-sizes $(NIGHTLY_SIZES)

SCALE_DOCS ?= 1000000,10000000
bench-scale: $(STAMP)  ## 1M and 10M documents: time, memory, disk, shuffle, growth; at 1M also distributed components, 64 partitions, a 2-worker cluster, a resumed run (~2 h on 2 cores, ~60 GB of disk)
	$(BIN)/neardup bench --docs $(SCALE_DOCS) --rows neardup-minhash,neardup-distributed-cc,neardup-64-partitions,neardup-standalone,neardup-resume --no-nightly --scale-metrics --timeout 7200 --workdir out/bench-scale

# DECON_DOCS=100000 for a quicker run; the corpus is the main bench's (out/bench/corpora), reused.
DECON_DOCS ?= 1000000
bench-decontaminate: $(STAMP)  ## decontaminate (20,000 reference items) vs a dedupe's per-document pass on 1M generated docs; prints the ratio (target <= 1.5x)
	$(BIN)/python -m neardup_spark.bench.decontaminate --docs $(DECON_DOCS)

cluster-test: $(STAMP)  ## standalone master + 2 workers on 127.0.0.1, spark-submit the zipped job, compare with local mode (also part of make test-extended, which CI runs)
	$(BIN)/python -m pytest -q -m slow tests/runtime/test_standalone_cluster.py

eval-extract: $(STAMP)  ## main-content extraction F1 and WARC reader speed on ../shared/data
	$(BIN)/neardup eval-extract

eval-removals: $(STAMP)  ## chains of revised real articles (../shared/data) among 3,000 generated documents: each cluster rule's removals scored by exact Jaccard
	$(BIN)/python -m neardup_spark.quality.revisions ../shared/data out/eval-removals

eval-containment: $(STAMP)  ## growing versions and quoted paragraphs of real articles (../shared/data) among 3,000 generated documents: containment's recall, precision and removals scored exactly, against a Jaccard run
	$(BIN)/python -m neardup_spark.quality.containment_eval ../shared/data out/eval-containment

EVAL_BP := out/eval-boilerplate
eval-boilerplate: $(STAMP)  ## boilerplate settings on generated template pages and the WARC samples of ../shared/data
	$(BIN)/neardup ingest ../shared/data/warc $(EVAL_BP)/text --extract text --overwrite
	$(BIN)/neardup ingest ../shared/data/warc $(EVAL_BP)/main --extract main --overwrite
	$(BIN)/neardup eval-boilerplate --real $(EVAL_BP)/text $(EVAL_BP)/main

lint: $(STAMP)  ## ruff, mypy and the architecture contracts (import-linter)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy neardup_spark
	$(BIN)/lint-imports

format: $(STAMP)  ## apply ruff's formatting and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:  ## remove the venv, demo data, outputs and the built site
	rm -rf $(VENV) build dist site data out .pytest_cache .mypy_cache .ruff_cache
