# vf's entry points: `make demo` (the venv and kubectl, then compile an example), `make test`
# (the full gate, what CI runs) and `make test-fast` (the inner loop: the tests marked
# neither slow, container nor install; see README's "Tests"). `make setup` is the full
# set-up the tests need: the demo's, plus helm, checkov and the container tools.
# `make regen` remakes every derived file and `make check-regen` fails on a stale one
# (the gate runs its quick half; its tests hold the vectors and goldens).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: setup demo test test-fast check bench clean regen check-regen

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup scripts/fetch-tools scripts/fetch-checkov
	PYTHON=$(PYTHON) bash scripts/setup
	touch $(DEMO_STAMP) $(STAMP)

$(DEMO_STAMP): pyproject.toml scripts/setup
	PYTHON=$(PYTHON) bash scripts/setup --demo
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/vf compile examples/batch_pipeline/graph.py --out deploy/batch_pipeline
	$(BIN)/vf compile examples/realtime_cameras/graph.py --out deploy/realtime_cameras
	$(BIN)/vf explain examples/batch_pipeline/graph.py
	PATH="$(CURDIR)/$(BIN):$$PATH" kubectl kustomize deploy/batch_pipeline/overlays/dev > /dev/null \
		&& echo "overlay dev builds with kubectl kustomize"

test: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check

FAST := not slow and not container and not install

test-fast: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -m "$(FAST)" --durations=10

# every derived file (error catalogue, configuration reference, components list, protobuf
# module, wire vectors, goldens) made anew from its source; check-regen changes nothing
regen: setup
	bash scripts/regen

check-regen: setup
	bash scripts/regen --check
	$(BIN)/pytest -q tests/test_golden.py tests/runtime/wire/test_wire.py

bench: setup
	$(BIN)/python bench/compile.py $(if $(wildcard /dev/shm),--tmp /dev/shm)
	$(BIN)/python bench/gpu.py
	$(BIN)/python bench/runtime.py

clean:
	rm -rf $(VENV) deploy .mypy_cache .ruff_cache .pytest_cache
