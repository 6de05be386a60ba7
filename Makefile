# ccswitch: `make demo` runs the demo experiment, `make test` runs every test.
# Both install what they need first (`make setup`, idempotent, as root).

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
VENV := .venv
PY := $(VENV)/bin/python
CARGO_FLAGS := --release --workspace --locked

.PHONY: setup build demo test test-rust test-python bench bench-compare clean

setup:
	bash scripts/setup.sh

# setup already builds and installs the Python package (maturin develop).
build: setup
	cargo build $(CARGO_FLAGS)

demo: build
	$(VENV)/bin/ccswitch run experiments/demo.toml

test: test-rust test-python

test-rust: build
	cargo test $(CARGO_FLAGS) -- --test-threads=1

test-python: build
	$(PY) -m pytest -v tests/python

bench: build
	$(VENV)/bin/ccswitch bench overhead
	$(VENV)/bin/ccswitch bench authoring

# `make bench` on BASE (a worktree in /tmp, built once and kept) and on this tree, whole runs
# of each alternated for ROUNDS rounds, each run holding LOCK; prints before, after, after/before.
BASE ?= 3ad5e6a
ROUNDS ?= 3
LOCK ?= /tmp/ccswitch-experiment.lock
bench-compare: build
	$(VENV)/bin/ccswitch bench both --baseline $(BASE) --compare-rounds $(ROUNDS) --lock $(LOCK)

clean:
	cargo clean
	rm -rf results
