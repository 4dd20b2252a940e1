# One command each (see README):
#   make demo   set up the analyzer and diagnose the bundled real trace
#   make test   set up everything (analyzer, torch for the workloads, pytest) and run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_TRACE ?= fixtures/v100_resnet50_workers0.pt.trace.json.gz

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the analyzer alone: no torch
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# analyzer + workloads (torch, torchvision) + pytest
$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,workloads]'
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/tracedoc analyze $(DEMO_TRACE) --exit-zero

lint: $(VENV)/.all
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
test: $(VENV)/.all lint
	@$(BIN)/python -m pytest -q -rs; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# large-trace benchmark against orjson.loads (see benchmarks/RESULTS.md)
bench: $(VENV)/.core
	$(BIN)/python benchmarks/run.py --repeats 10 20 --runs 5

clean:
	rm -rf $(VENV) .pytest_cache
