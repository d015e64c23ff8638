# kfed — every target sets up what it needs itself (virtualenv, dependencies, the Kubernetes toolchain).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kfed-installed
PYTEST_ARGS ?=

.PHONY: help venv lint test test-unit test-integration test-interop test-kueueviz kueueviz kueue toolchain crds demo bench image test-image clean

help:
	@echo "make demo        run 20 Jobs on a local federation (manager + 2 workers) and print a summary"
	@echo "make test        lint + unit + integration/e2e tests (builds the toolchain once, then cached)"
	@echo "make test-unit   pure-logic tests only (no toolchain needed)"
	@echo "make test-interop interop with stock Kueue v0.19.1 both ways (builds Kueue from its Go module once)"
	@echo "make test-kueueviz Kueue v0.19.1's KueueViz backend against kfed-manager (builds it once; KUEUE_GIT=clone)"
	@echo "make lint        ruff, mypy --strict, import-linter"
	@echo "make toolchain   build kube-apiserver/etcd/kwok/helm... from Go modules into the cache"
	@echo "make bench       admission and topology cores in memory, dispatch on a local federation (BENCH=name)"
	@echo "make crds        regenerate charts/*/crds from the pydantic models"
	@echo "make image       build the kfed image (Containerfile) into dist/kfed-VERSION.oci.tar, no Docker needed"
	@echo "make test-image  make image, then run its entrypoints in a chroot of its root filesystem"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy federation manager worker_agent e2e
	$(VENV)/bin/lint-imports

test-unit: $(STAMP)
	$(PY) -m pytest -q -m "not integration and not e2e and not image and not interop and not kueueviz" federation manager worker_agent e2e $(PYTEST_ARGS)

toolchain:
	$(PYTHON) -m e2e.toolchain build

test-integration: $(STAMP) toolchain
	$(PY) -m pytest -q -m "integration or e2e" e2e $(PYTEST_ARGS)

test: lint test-unit test-integration

kueue: $(STAMP)
	$(PY) -m e2e.toolchain.kueue

test-interop: $(STAMP) toolchain kueue
	$(PY) -m pytest -q -m interop e2e $(PYTEST_ARGS)

kueueviz: $(STAMP)
	$(PY) -m e2e.toolchain.kueueviz

test-kueueviz: $(STAMP) toolchain kueueviz
	$(PY) -m pytest -q -m kueueviz e2e $(PYTEST_ARGS)

crds: $(STAMP)
	$(PY) -m federation.api.crdgen charts

demo: $(STAMP) toolchain
	$(PY) -m e2e.demo

bench: $(STAMP) toolchain
	$(PY) -m e2e.bench $(BENCH)

image: $(STAMP)
	$(PY) -m e2e.image build

test-image: image
	$(PY) -m pytest -q -m image e2e $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
