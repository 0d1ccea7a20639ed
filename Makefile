# gpufleet: the two commands are `make lab` (the main job on the embedded lab)
# and `make test` (everything CI runs). Both install what they need.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Scenarios, slowest last. Each is a few lines over .config/molecule/config.yml.
SCENARIOS ?= gpu_stack cluster
# Debian suites whose test-host images the scenarios use.
SUITES ?= bookworm trixie

.PHONY: help venv testbed lint unit test test-fast molecule bench lab lab-down lab-status clean

help:
	@echo "make lab        bring up the lab cluster and provision it (the main job)"
	@echo "make test       lint + unit tests + every Molecule scenario (what CI runs)"
	@echo "make test-fast  lint + unit tests"
	@echo "make bench      print the benchmarks' figures"
	@echo "make lab-down   destroy the lab"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	@python3 -m venv --help >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q python3-venv; }
	@[ -x $(BIN)/python ] || python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

testbed: venv
	scripts/testbed all $(SUITES)

lint: venv
	yamllint -s .
	ansible-lint
	ruff check .
	ruff format --check .

unit: venv
	@# pytest exits 5 when it collects nothing: not a failure while suites are empty.
	pytest || { rc=$$?; [ $$rc -eq 5 ] && echo "no unit tests collected" || exit $$rc; }

molecule: venv testbed
	@for s in $(SCENARIOS); do echo "== molecule test -s $$s"; t0=$$(date +%s); \
	  molecule test -s $$s || exit 1; echo "== molecule test -s $$s: $$(( $$(date +%s) - t0 )) s"; done

test-fast: lint unit

test: lint unit molecule

bench: venv
	@for b in scripts/bench_*; do [ -x "$$b" ] && { echo "== $$b"; "$$b"; }; done

lab: venv testbed
	scripts/gpufleet lab up
	scripts/gpufleet provision -i inventories/lab

lab-down: venv
	scripts/gpufleet lab down

lab-status: venv
	scripts/gpufleet lab status

clean:
	rm -rf .cache reports
