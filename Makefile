# The README's two commands: `make run` (the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,ray]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	JAX_PLATFORMS=$${JAX_PLATFORMS:-cpu} $(VENV)/bin/envengineer

test: $(STAMP)
	$(VENV)/bin/ruff check .
	JAX_PLATFORMS=cpu $(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	JAX_PLATFORMS=$${JAX_PLATFORMS:-cpu} $(PY) benchmarks/env_throughput.py --json benchmarks/env_throughput.json

clean:
	rm -rf $(VENV) .venv-pogema .pytest_cache .ruff_cache .hypothesis
