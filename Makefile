# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-llm bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/vigil demo

test: $(BIN)/.installed system-deps
	$(BIN)/pytest -q

# Debian packages the tests drive: headless chromium (the HTML report) and docker-compose v1 (validates
# deploy/docker-compose.yml without a Docker engine). Installed only when missing.
.PHONY: system-deps
system-deps:
	@command -v chromium >/dev/null && command -v docker-compose >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium docker-compose; }

clean:
	rm -rf $(VENV) .vigil
