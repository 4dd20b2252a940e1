# One command each (see README):
#   make demo   set up the analyzer and diagnose the bundled real trace
#   make test   set up everything (analyzer, torch for the workloads, pytest) and run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_TRACE ?= fixtures/v100_resnet50_workers0.pt.trace.json.gz

.PHONY: demo test lint bench clean chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the analyzer alone: no torch
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# analyzer + workloads (torch, torchvision) + pytest
$(VENV)/.all: pyproject.toml | $(BIN)/python
	@echo "make: installing into $(VENV): tracedoc, torch and torchvision from PyPI (its CUDA build, about 5.5 GB; the tests run it on the CPU), pytest, ruff, hypothesis, plotly, dask, pyarrow" >&2
	$(BIN)/python -m pip install -q -e '.[dev,workloads]'
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/tracedoc analyze $(DEMO_TRACE) --exit-zero

lint: $(VENV)/.all
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The HTML report test opens the page in a real headless Chromium (Debian's package):
# installed here when missing (as root with apt), else a clear failure, never a skip.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing Debian's chromium with apt-get (about 300 MB) for the HTML report test" >&2; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "make test: the HTML report test needs chromium (sudo apt-get install chromium)" >&2; exit 1; fi; }

# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
test: $(VENV)/.all lint chromium
	@$(BIN)/python -m pytest -q -rs; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# large-trace benchmark against orjson.loads (see benchmarks/RESULTS.md)
bench: $(VENV)/.core
	$(BIN)/python benchmarks/run.py --repeats 10 20 --runs 5

clean:
	rm -rf $(VENV) .pytest_cache
