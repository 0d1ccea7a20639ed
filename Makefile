# gpufleet: the two commands are `make lab` (the main job on the embedded lab)
# and `make test` (everything CI runs). Both install what they need.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Scenarios (run side by side by scripts/molecule_all). Each is a few lines over
# .config/molecule/config.yml.
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
	@t0=$$(date +%s); $(BIN)/pip install -q --disable-pip-version-check -r requirements.txt; \
	  echo "== venv: pip install took $$(( $$(date +%s) - t0 )) s"
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
	@# -n auto: one worker per core (pytest-xdist).
	pytest -n auto || { rc=$$?; [ $$rc -eq 5 ] && echo "no unit tests collected" || exit $$rc; }

molecule: venv testbed
	scripts/molecule_all $(SCENARIOS)

test-fast: lint unit

# The test images are built while lint and the unit tests run (network and
# dpkg against Python): the two overlap, then the scenarios run side by side.
test: venv
	@mkdir -p .cache; t0=$$(date +%s); \
	  ( if scripts/testbed all $(SUITES) >.cache/testbed.log 2>&1; then r=0; else r=$$?; fi; \
	    echo "testbed: took $$(( $$(date +%s) - t0 )) s" >>.cache/testbed.log; exit $$r ) & tb=$$!; \
	  rc=0; $(MAKE) --no-print-directory test-fast || rc=$$?; echo "== lint + unit tests took $$(( $$(date +%s) - t0 )) s"; \
	  trc=0; wait $$tb || trc=$$?; echo "== scripts/testbed all $(SUITES) (exit $$trc)"; cat .cache/testbed.log; \
	  [ $$rc -eq 0 ] && [ $$trc -eq 0 ]
	$(MAKE) --no-print-directory molecule

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
