# odebook — run `make help` for the targets.
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
# torch is installed first and pinned, so pip never pulls a multi-GB CUDA build by accident.
# Override for a GPU workstation, e.g. make setup TORCH_SPEC="torch==2.13.0" TORCH_PIP_ARGS="--index-url <your CUDA wheel index>"
TORCH_SPEC  ?= torch==2.13.0
TORCH_PIP_ARGS ?=
PROFILE     ?= cpu
NOTEBOOKS   ?=
ODEBOOK_DATA ?=

.PHONY: help setup run-all lab test sync bench clean-outputs

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-14s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=smoke|cpu|t4 (default cpu)  NOTEBOOKS=\"01_gradient_flow ...\"  ODEBOOK_DATA=<data mirror>"

setup:  ## create .venv (torch pinned first, then odebook[dev]) and register the Jupyter kernel 'odebook'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install -e ".[dev]"
	$(PY) -m ipykernel install --user --name odebook --display-name "Python (odebook)"

run-all:  ## execute the book: make run-all [PROFILE=cpu] [NOTEBOOKS="01_gradient_flow ..."]
	$(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m odebook.runner --profile $(PROFILE) $(NOTEBOOKS)

lab:  ## JupyterLab on notebooks/, with the CPU allocator settings the runner uses (odebook.runtime.ALLOCATOR_ENV)
	env $$($(PY) -c 'from odebook.runtime import ALLOCATOR_ENV as e; print(" ".join(f"{k}={v}" for k, v in e.items()))') \
		$(VENV)/bin/jupyter lab notebooks

test:  ## unit tests, notebook pairing, smoke execution of every notebook
	$(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m pytest

sync:  ## pair notebooks/*.py with notebooks/*.ipynb (jupytext), outputs stripped
	$(VENV)/bin/jupytext --sync notebooks/*.py

bench:  ## CPU benchmarks: 01 step time and MFU; delta rule chunked vs reference; 02 ms/step; 05 KV cache and memory
	$(if $(ODEBOOK_DATA),ODEBOOK_DATA=$(ODEBOOK_DATA)) $(PY) -m odebook.bench

clean-outputs:  ## delete outputs/<PROFILE>
	rm -rf outputs/$(PROFILE)
