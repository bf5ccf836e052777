# The README's commands. `make lab` and `make test` create .venv and install the pinned requirements on first use;
# the install is keyed on the contents of requirements.txt and pyproject.toml, so a second run does not reinstall.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
HOST ?= 127.0.0.1
PORT ?= 8888
PYTEST_ARGS ?= -n 2 --dist loadgroup --max-worker-restart=0  # both cores (pytest-xdist); a crashed worker ends the run
# (naming its test) instead of leaving loadgroup waiting for the lost tests; `make test PYTEST_ARGS=` runs serially
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# TORCH=cpu: take torch from PyTorch's CPU wheel index (a 192 MB wheel, 2.5 GB .venv in all) instead of PyPI, whose
# Linux torch is the CUDA build (several GB of NVIDIA libraries). The course machines need neither: pip finds the CPU
# wheel on their disk.
TORCH ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
ifneq ($(filter-out cpu,$(TORCH)),)
$(error TORCH=$(TORCH) is not supported: use TORCH=cpu for the CPU build of torch, or leave TORCH unset)
endif

.PHONY: install lab test test-load exercises badges bench lint clean

install: $(STAMP)

$(STAMP):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH),$(BIN)/python -m pip install --disable-pip-version-check -q --index-url $(TORCH_CPU_INDEX) \
		"$$(grep '^torch==' requirements.txt)")
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q -e .
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "installed the pinned requirements into $(VENV)"

lab: $(STAMP)
	$(BIN)/jupyter lab --ip=$(HOST) --port=$(PORT) --no-browser $(ALLOW_ROOT) \
		--ServerApp.root_dir="$(CURDIR)" lessons/00_setup.ipynb

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the notebooks and the multi-process tests while two busy processes keep both cores loaded (issue 11)
test-load: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) --busy-cores 2 -m "notebook or slow"

exercises: $(STAMP)
	$(BIN)/gradacc exercises

badges: $(STAMP)
	$(BIN)/gradacc badges
	$(BIN)/gradacc exercises

bench: $(STAMP)
	$(BIN)/gradacc bench --json bench.json

bench-reference: $(STAMP)  # the run lesson 03 shows; tests/test_bench.py re-measures its memory columns
	$(BIN)/gradacc bench --json src/gradacc/bench_reference.json

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache build/test-cache test-artifacts
