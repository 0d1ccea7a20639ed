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
SCENARIOS ?= gpu_stack cluster rocky
# The test-host images the scenarios use (Debian suites and the Ubuntu and Rocky doubles over them).
SUITES ?= bookworm trixie ubuntu2204-double ubuntu2404-double rocky9-double

.PHONY: help venv lock test-latest testbed lint unit test test-fast molecule bench lab lab-down lab-status clean

help:
	@echo "make lab        bring up the lab cluster and provision it (the main job)"
	@echo "make test       lint + unit tests + every Molecule scenario (what CI runs)"
	@echo "make test-fast  lint + unit tests"
	@echo "make lock       re-resolve requirements/py3.X.txt from requirements.in"
	@echo "make test-latest  unit tests on the newest releases requirements.in allows (not in CI)"
	@echo "make bench      print the benchmarks' figures (BENCH_SCALE=\"2 4\": also the lab at those sizes)"
	@echo "make lab-down   destroy the lab"

venv: $(VENV)/.installed

# The venv holds exactly the lock for its Python (requirements/py3.X.txt, generated from
# requirements.in by `make lock`), installed with hashes required; then the project's own package
# (pyproject.toml: the CLI, .venv/bin/gpufleet), editable, and collections/ on the venv's path.
# scripts/venv says how. PYTHON=python3.12 make venv takes another Python that has a lock.
$(VENV)/.installed: $(wildcard requirements/py3.*.txt) pyproject.toml scripts/venv
	scripts/venv $(VENV)
	@touch $@

# Re-resolve the lock files from requirements.in (LOCK_ARGS="--upgrade" for the newest releases,
# LOCK_ARGS=3.13 for one Python). Needs network access to PyPI and each Python locked.
LOCK_ARGS ?=
lock:
	scripts/lock $(LOCK_ARGS)

# The unit tests on the newest releases requirements.in allows, in a throwaway copy and venv
# (.cache/latest). Not part of make test: it finds upstream breakage on purpose.
test-latest:
	scripts/test_latest

testbed: venv
	scripts/testbed all $(SUITES)

lint: venv
	yamllint -s .
	@# ansible.cfg names no inventory: the syntax check resolves the scenarios' host patterns
	@# (groups['gpu_lab'], ...) against the lab's groups, as the scenarios' own inventories have them.
	ANSIBLE_INVENTORY=$(CURDIR)/inventories/lab ansible-lint
	ruff check .
	ruff format --check .

unit: venv
	@# pytest exits 5 when it collects nothing: not a failure while suites are empty.
	@# -n auto: one worker per core (pytest-xdist).
	pytest -n auto || { rc=$$?; [ $$rc -eq 5 ] && echo "no unit tests collected" || exit $$rc; }

molecule: venv testbed
	scripts/molecule_all $(SCENARIOS)

test-fast: lint unit

# The scenarios start as soon as the test images exist (built, or found with the recipe they
# were built from); lint and the unit tests run alongside them, on the cores the scenarios leave
# idle while they wait on their hosts. The lint and unit output is kept in .cache/test-fast.log
# and printed once the scenarios are done, so the unit tests' summary closes the output.
test: venv
	@mkdir -p .cache; t0=$$(date +%s); \
	  ( rc=0; $(MAKE) --no-print-directory test-fast >.cache/test-fast.log 2>&1 || rc=$$?; \
	    echo "== lint + unit tests: exit $$rc after $$(( $$(date +%s) - t0 )) s" >>.cache/test-fast.log; exit $$rc ) & tf=$$!; \
	  trc=0; scripts/testbed all $(SUITES) || trc=$$?; echo "== testbed: exit $$trc after $$(( $$(date +%s) - t0 )) s"; \
	  mrc=0; [ $$trc -ne 0 ] || scripts/molecule_all $(SCENARIOS) || mrc=$$?; \
	  frc=0; wait $$tf || frc=$$?; cat .cache/test-fast.log; \
	  echo "== make test: $$(( $$(date +%s) - t0 )) s (testbed exit $$trc, molecule exit $$mrc, lint + unit exit $$frc)"; \
	  [ $$trc -eq 0 ] && [ $$mrc -eq 0 ] && [ $$frc -eq 0 ]

# scripts/bench_scale rebuilds the lab at several sizes (minutes each): only with
# BENCH_SCALE set to its sizes, e.g. make bench BENCH_SCALE="2 4"; it puts the 2-node lab back.
BENCH_SCALE ?=
bench: venv
	@for b in scripts/bench_*; do \
	  if [ "$$b" = scripts/bench_scale ]; then \
	    [ -n "$(BENCH_SCALE)" ] || { echo "== $$b skipped (minutes per size): make bench BENCH_SCALE=\"2 4\""; continue; }; \
	    echo "== $$b $(BENCH_SCALE)"; "$$b" $(BENCH_SCALE); continue; \
	  fi; \
	  [ -x "$$b" ] && { echo "== $$b"; "$$b"; }; done

# The lab and the benchmarks run linear over Mitogen (opt-in: see ansible.cfg).
lab bench: export ANSIBLE_STRATEGY ?= gpufleet.cluster.mitogen_linear

lab: venv testbed
	scripts/gpufleet lab up
	scripts/gpufleet provision -i inventories/lab

lab-down: venv
	scripts/gpufleet lab down

lab-status: venv
	scripts/gpufleet lab status

clean:
	rm -rf .cache reports
