# odebook — run `make help` for the targets.
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
# torch is installed first and pinned (the version the committed reports ran with). From the package index that is
# the build pip picks for the machine: on Linux the CUDA build (several GB of nvidia-* packages), which runs on a CPU
# too. TORCH_BUILD=cpu takes PyTorch's CPU-only wheels instead (needs download.pytorch.org); any other wheel index:
# make setup TORCH_PIP_ARGS="--index-url <your wheel index>".
TORCH_SPEC  ?= torch==2.13.0
TORCH_BUILD ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_PIP_ARGS ?= $(if $(filter cpu,$(TORCH_BUILD)),--index-url $(TORCH_CPU_INDEX))
# gpu-check: triton, for the interpreted check of fla-core's kernels on the CPU (EXTRAS=dev leaves it out)
EXTRAS      ?= dev,gpu-check
PROFILE     ?= cpu
NOTEBOOKS   ?=
ODEBOOK_DATA ?=
# JupyterLab refuses to start as root (containers) unless told to.
LAB_ARGS    ?= $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help setup run-all reports check-reports lab test test-all lint sync bench gpu-checks clean-outputs

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-14s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=smoke|cpu|t4 (default cpu)  NOTEBOOKS=\"01_gradient_flow ...\"  SET=\"steps=40 ...\" (over every profile file)  ODEBOOK_DATA=<data mirror>  FRESH=1  TORCH_BUILD=cpu  QUICK=1 (bench)"

# No kernel is registered for the user: the venv's own Jupyter (make lab, .venv/bin/papermill) runs the notebooks'
# "python3" kernel with the venv's python, so two checkouts never run each other's code.
setup:  ## create .venv (torch pinned first, then odebook[dev,gpu-check]; TORCH_BUILD=cpu: PyTorch's CPU-only wheels) and say which torch build it holds
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install -e ".[$(EXTRAS)]"
	@$(PY) -c 'from odebook.training.runtime import torch_build; print(torch_build())'

# PROFILE, NOTEBOOKS and ODEBOOK_DATA reach the runner as data: their raw text (make functions in them are not
# expanded) is exported as MAKE_* variables (not ODEBOOK_PROFILE, which picks a profile in Lab) and passed as one
# quoted argument each, never pasted into the shell; a name that starts with '-' is a name (refused as unknown). The runner exits 2 when a parameter file, the profile or
# a notebook name is wrong or the notebook is already running (nothing ran), 1 when a notebook failed, 130 when
# interrupted; make itself always exits 2 on an error, so the recipe says which it was (make's "Error N" too).
export MAKE_PROFILE   := $(value PROFILE)
export MAKE_NOTEBOOKS := $(value NOTEBOOKS)
export MAKE_DATA      := $(value ODEBOOK_DATA)
export MAKE_SET       := $(value SET)
unexport PROFILE NOTEBOOKS SET
RUNNER = $(if $(MAKE_DATA),ODEBOOK_DATA="$$MAKE_DATA") "$(PY)" -m odebook.book.runner --profile="$$MAKE_PROFILE"
run-all:  ## execute the book: make run-all [PROFILE=cpu] [NOTEBOOKS="01_gradient_flow ..."] [SET="steps=40 ..."] [FRESH=1: ignore checkpoints]
	@$(RUNNER) $(if $(FRESH),--fresh) --notebooks="$$MAKE_NOTEBOOKS" --set="$$MAKE_SET" || \
	{ s=$$?; case $$s in 2) echo "run-all: invalid parameters, profile or notebook name: nothing ran (exit 2; or already running, as said above)" >&2;; \
	  1) echo "run-all: a notebook failed; see outputs/$$MAKE_PROFILE/index.html (exit 1)" >&2;; esac; exit $$s; }

reports:  ## refresh the committed reference reports: run-all PROFILE=cpu FRESH=1, copy to reports/cpu, its verdict page and README's table
	$(MAKE) run-all PROFILE=cpu FRESH=1
	$(PY) -m odebook.book.reports publish --profile cpu

check-reports:  ## say which committed reports (reports/<PROFILE>) no longer match the code; never fails for it
	"$(PY)" -m odebook.book.reports check --profile="$$MAKE_PROFILE"

# ODEBOOK_DATA is made absolute here, from the folder make was run in: the kernels run in notebooks/.
lab:  ## JupyterLab on notebooks/ ("Run all" uses params/<PROFILE>; ODEBOOK_DATA passed on), the venv's python3 kernel
	env $$($(PY) -c 'from odebook.training.runtime import ALLOCATOR_ENV as e; print(" ".join(f"{k}={v}" for k, v in e.items()))') \
		ODEBOOK_PROFILE=$(PROFILE) $(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(abspath $(ODEBOOK_DATA))) \
		$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks

# The suite on TEST_WORKERS processes (pytest-xdist; a .venv made before it runs them in one), then the tests marked
# `alone` (wall-clock timings, other processes' load) with nothing beside them; pytest's exit 5 (no test selected)
# is no failure there.
TEST_WORKERS ?= 2
PYTEST = $(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m pytest
XDIST = $(shell $(PY) -c 'import xdist' 2>/dev/null && printf -- '-n %s --dist worksteal' $(TEST_WORKERS))
test:  ## the fast suite: unit tests, references, causality, parameters, pairing (no notebook executions); TEST_WORKERS=2
	$(PYTEST) $(XDIST) -m "not slow and not alone"
	$(PYTEST) -m "not slow and alone" || [ $$? = 5 ]

test-all:  ## everything, as CI runs it: the fast suite and the slow tests (smoke book, fresh venvs, DDP); TEST_WORKERS=2
	$(PYTEST) $(XDIST) --durations=25 -m "not alone"
	$(PYTEST) -m alone || [ $$? = 5 ]

lint:  ## ruff check (pyproject's [tool.ruff]: pycodestyle and pyflakes, lines of 120); CI runs it before the tests
	$(PY) -m ruff check .

sync:  ## rewrite each notebook's colab cell, pair notebooks/*.py with *.ipynb (jupytext), strip outputs and counts
	$(PY) -m odebook.book.colab notebooks
	$(VENV)/bin/jupytext --sync notebooks/*.py
	$(VENV)/bin/jupyter nbconvert --log-level=WARN --clear-output --inplace notebooks/*.ipynb

bench:  ## CPU benchmarks: the GEMM rate against the cores (clock, FLOP per cycle); each study's cpu-profile step (efficiency, alone vs beside a busy process); seed-runs per minute, one process vs one-thread workers side by side; matmul (torch, oneDNN); gemm size rules; 01 step (plain vs sliced head, oneDNN vs torch GEMM: memory, ms, MFU); delta rule; 02; 05 KV cache; DDP (QUICK=1: the first three only, a few minutes)
	$(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m benchmarks.bench $(if $(QUICK),--quick)

gpu-checks:  ## every GPU check in one call, smallest first, each under a timeout, into OUT (default gpu-checks/): the CUDA tests, benchmarks.gpu, the t4 notebooks by estimated GPU time (no GPU: tests skip, notebooks on the CPU)
	$(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m benchmarks.gpu_checks --out $(or $(OUT),gpu-checks) --profile t4

clean-outputs:  ## delete outputs/<PROFILE> (PROFILE must be a folder name under params/; not while it runs)
	$(RUNNER) --clean
