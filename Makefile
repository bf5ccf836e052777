# The README's commands. `make lab` and `make test` create .venv and install the pinned requirements on first use;
# the install is keyed on the contents of requirements.txt and pyproject.toml, so a second run does not reinstall.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# The interpreter .venv is made from: the first of these that runs. The pins are tested on Python 3.11 (CI, Binder);
# Colab's 3.13 runs the course in the Colab replica; on 3.12 and 3.13 every pin has a binary wheel (docs/index.md:
# "Which Python"). Another version stops here, before anything is installed. `make lab PYTHON=/path/to/python3.11`
# chooses.
PYTHON ?= $(shell for p in python3.11 python3.13 python3.12 python3; do \
	$$p -c 'import sys' >/dev/null 2>&1 && { command -v $$p; break; }; done)
INSTALL_GOALS := install lab lab-pt test test-load exercises badges bench bench-reference lint site translations
ifneq ($(filter $(INSTALL_GOALS),$(or $(MAKECMDGOALS),install)),)
ifeq ($(wildcard $(BIN)/python),)
PYTHON_VERSION := $(if $(PYTHON),$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null))
ifeq ($(PYTHON_VERSION),)
$(error no Python found (tried python3.11, python3.13, python3.12, python3): install Python 3.11, e.g. `pyenv install 3.11` or your system's python3.11 package, or name one with `make lab PYTHON=/path/to/python3.11`)
endif
ifeq ($(filter 3.11 3.12 3.13,$(PYTHON_VERSION)),)
$(error $(PYTHON) is Python $(PYTHON_VERSION); the course needs 3.11 (tested), 3.12 or 3.13: install Python 3.11, e.g. `pyenv install 3.11` or your system's python3.11 package, and run `make lab PYTHON=/path/to/python3.11`)
endif
ifneq ($(PYTHON_VERSION),3.11)
$(info note: making .venv with Python $(PYTHON_VERSION) ($(PYTHON)); the pins are tested on 3.11 and install on $(PYTHON_VERSION) too. Without TORCH=cpu pip takes PyPI's CUDA build of torch (several GB).)
endif
endif
endif
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
HOST ?= 127.0.0.1
PORT ?= 8888
PYTEST_ARGS ?= -n 2 --dist loadgroup --max-worker-restart=0  # both cores (pytest-xdist); a crashed worker ends the run
# (naming its test) instead of leaving loadgroup waiting for the lost tests; `make test PYTEST_ARGS=` runs serially
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# TORCH=cpu: take torch from PyTorch's CPU wheel index (a 192 MB wheel, a 2.8 GiB .venv in all) instead of PyPI, whose
# Linux torch is the CUDA build (several GB of NVIDIA libraries). Only torch comes from that index (--no-deps): its
# dependencies come from PyPI with the other pins. pip tries the index once (--retries 0) and the make stops with one
# line when torch cannot be installed (an unreachable index: pip's log says why). The course machines find the CPU
# wheel on their disk.
TORCH ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
ifneq ($(filter-out cpu,$(TORCH)),)
$(error TORCH=$(TORCH) is not supported: use TORCH=cpu for the CPU build of torch, or leave TORCH unset)
endif

.PHONY: install lab lab-pt test test-load exercises badges bench lint site translations clean replica-early

# The course's JupyterLab settings (no news popup, no update check: binder/overrides.json, which Binder installs the
# same way) in the venv's JupyterLab, whose app settings folder holds the overrides it serves.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_SETTINGS): binder/overrides.json | $(STAMP)
	@mkdir -p $(@D)
	cp binder/overrides.json $@

install: $(STAMP) $(LAB_SETTINGS)

$(STAMP):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH),@$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps --retries 0 --timeout 30 \
		--index-url $(TORCH_CPU_INDEX) "$$(grep '^torch==' requirements.txt)" > $(VENV)/torch-install.log 2>&1 \
		|| { echo "error: torch could not be installed from PyTorch's CPU index $(TORCH_CPU_INDEX) (is it reachable \
		from here? pip's log: $(VENV)/torch-install.log); without TORCH=cpu pip takes PyPI's CUDA build instead" >&2; exit 1; })
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q -e .
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "installed the pinned requirements into $(VENV)"

# JupyterLab prints the URL of its default_url (with the token): the lesson's /lab/tree/ URL opens the lesson, where a
# file argument reaches only a browser JupyterLab opens itself (and `--no-browser` opens none).
lab: $(STAMP) $(LAB_SETTINGS)
	$(BIN)/jupyter lab --ip=$(HOST) --port=$(PORT) --no-browser $(ALLOW_ROOT) \
		--ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/lessons/00_setup.ipynb

# The Brazilian Portuguese edition (pt-BR/) in JupyterLab's own Brazilian Portuguese interface
# (jupyterlab-language-pack-pt-br, pinned in requirements.txt): this launch's JupyterLab settings live in
# build/lab-pt-settings/ and choose the pt_BR locale; `make lab` keeps your own settings and English. Its workspace (the
# tabs JupyterLab reopens, and the kernels it starts for them) lives in build/lab-pt-workspaces/: `make lab-pt` after
# `make lab` opens the Portuguese lesson only, and `make lab` after it finds your English tabs.
LAB_PT_SETTINGS := build/lab-pt-settings
LAB_PT_WORKSPACES := build/lab-pt-workspaces
lab-pt: $(STAMP)
	@mkdir -p $(LAB_PT_SETTINGS)/@jupyterlab/translation-extension $(LAB_PT_SETTINGS)/@jupyterlab/apputils-extension
	@echo '{"locale": "pt_BR"}' > $(LAB_PT_SETTINGS)/@jupyterlab/translation-extension/plugin.jupyterlab-settings
	@echo '{"fetchNews": "false", "checkForUpdates": false}' \
		> $(LAB_PT_SETTINGS)/@jupyterlab/apputils-extension/notification.jupyterlab-settings
	JUPYTERLAB_SETTINGS_DIR="$(CURDIR)/$(LAB_PT_SETTINGS)" JUPYTERLAB_WORKSPACES_DIR="$(CURDIR)/$(LAB_PT_WORKSPACES)" \
		$(BIN)/jupyter lab --ip=$(HOST) --port=$(PORT) --no-browser $(ALLOW_ROOT) --ServerApp.root_dir="$(CURDIR)" \
		--LabApp.default_url=/lab/tree/pt-BR/lessons/00_setup.ipynb

# After changing an English notebook or page, or a catalog: update the catalogs (changed English -> fuzzy entries),
# then write pt-BR/, README.pt-BR.md and the package's compiled messages from them (locale/README.md)
translations: $(STAMP)
	$(BIN)/gradacc translate extract
	$(BIN)/gradacc translate build

# `make test` with the default PYTEST_ARGS runs the Colab replica's tests: its 6 GB environment (tests/colab_replica.py,
# cached in build/test-cache/) starts building before .venv installs, each pip install on a core of its own; the
# tests' own build waits for it on the cache's file lock. Its output: build/test-cache/replica-early.log. It comes
# first among test's prerequisites: make merges the prerequisites of a target's rules with the recipe's rule's own
# first, so a separate `test: replica-early` rule started it only after .venv's install (2026-12-06: the replica was
# ready 327 s after make started, one core idle for the install's 120 s; first: ready after 106-153 s in three
# runs, both cores busy).
REPLICA_EARLY := $(if $(filter file,$(origin PYTEST_ARGS)),replica-early)
replica-early:
	@mkdir -p build/test-cache
	@(nohup $(PYTHON) tests/colab_replica.py > build/test-cache/replica-early.log 2>&1 &)

test: $(REPLICA_EARLY) $(STAMP) $(LAB_SETTINGS)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the notebooks and the multi-process tests while two busy processes keep both cores loaded (issue 11)
test-load: $(STAMP) $(LAB_SETTINGS)
	$(BIN)/python -m pytest $(PYTEST_ARGS) --busy-cores 2 -m "notebook or slow"

exercises: $(STAMP)
	$(BIN)/gradacc exercises

badges: $(STAMP)
	$(BIN)/gradacc badges
	$(BIN)/gradacc exercises

bench: $(STAMP)
	$(BIN)/gradacc bench --json bench.json

bench-reference: $(STAMP)  # the run lesson 03 shows; tests/test_bench.py re-measures its memory columns
	$(BIN)/gradacc bench --json src/gradacc/memory/bench_reference.json

lint: $(STAMP)
	$(BIN)/ruff check .

# the course's website into build/site/ with Jupyter Book 1, offline, from the stored outputs (docs/maintainers.md)
site: $(STAMP)
	$(BIN)/gradacc site

clean:
	rm -rf $(VENV) .pytest_cache build/test-cache build/site build/site-src build/site-src-pt-BR build/site-npm build/lab-pt-settings \
		build/lab-pt-workspaces test-artifacts
