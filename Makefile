# Phrame GitOps: the common tasks for people and CI. `make` alone lists them.
# Every target installs what it needs first (scripts/install-deps is idempotent and quick).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV := .venv/bin
REPO ?= fixtures/phrame-config
PYTEST_ARGS ?=
# modules the benchmarks import, not benchmarks themselves
BENCH_HELPERS := benchmarks/repo_gen.py benchmarks/fleet_repo.py benchmarks/fleet_harness.py \
  benchmarks/fleet_sim.py benchmarks/sim_docker.py benchmarks/figures.py benchmarks/report.py \
  benchmarks/fleet_lite.py benchmarks/mqtt_lite.py
PHRAME_REQUIRE_SERVICES ?=
export PHRAME_REQUIRE_SERVICES
# pytest-xdist workers: three per core, as the integration tests mostly wait (a serial run: wall
# 5x its CPU time; on 2 cores the slow tier took 444 s with 4 workers, 358 s with 6 and 386 s
# with 8, the fast one 89 s and 78 s); WORKERS=0 runs in one process. Tests that share a stack
# or a fixture run on one worker, in file order (tests/support/xdist_groups.py).
WORKERS ?= $(shell echo $$((3 * $$(nproc))))
# Bytecode caches on even where PYTHONDONTWRITEBYTECODE is set: otherwise each worker rewrites
# the asserts of every test module anew (collection 8 s instead of 3 s of CPU, per worker).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(VENV)/pytest -n $(WORKERS) --dist loadgroup

.PHONY: help deps up down status check test test-fast test-slow lint docs validate bench bench-docs clean replay plan

help: ## list the targets
	@echo "Phrame GitOps - make targets:"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'
	@echo "Variables: DEV_ARGS='--listen ... --broker-port ...' (up, down; status: --state-dir), PURGE=1 (down),"
	@echo "  REPO=path (validate), PYTEST_ARGS='...', WORKERS=n and PHRAME_REQUIRE_SERVICES=1 (test)."

deps: ## install Debian packages and the .venv where missing
	@scripts/install-deps

up: deps ## run the whole loop here: broker, config-sync, placement, 2 agents (phrame dev; DEV_ARGS=...)
	@echo "make up: making sure a Docker daemon answers (scripts/ensure-dockerd)"
	@scripts/ensure-dockerd || echo "make up: no Docker daemon; phrame dev runs the process services only"
	$(VENV)/phrame dev $(DEV_ARGS)

down: deps ## stop the dev stack and remove its containers and networks (PURGE=1: its state too)
	$(VENV)/phrame dev --down $(if $(PURGE),--purge) $(DEV_ARGS)

status: deps ## nodes and environments as the dev stack's broker reports them (DEV_ARGS=--state-dir DIR)
	@set -- $(DEV_ARGS); dir=; while [ "$$#" -gt 0 ]; do \
	  case "$$1" in --state-dir) dir=$${2:-}; shift ;; --state-dir=*) dir=$${1#*=} ;; esac; shift; \
	done; \
	PHRAME_DEV_STATE_DIR=$${dir:-$${PHRAME_DEV_STATE_DIR:-}} $(VENV)/phrame status

check: lint ## lint, then the fast tier (unit + integration not marked slow) on every core
	@scripts/ensure-dockerd
	$(PYTEST) -m "not slow"

test: ## every test: the fast tier, then the slow one (PYTEST_ARGS=...: only those, one pytest run)
	@scripts/install-deps --ui
	@scripts/ensure-dockerd
ifeq ($(strip $(PYTEST_ARGS)),)
	$(PYTEST) -m "not slow"
	$(PYTEST) -m slow
else
	$(VENV)/pytest $(PYTEST_ARGS)
endif

test-fast: ## the fast tier alone: unit and integration tests not marked slow, on every core
	@scripts/install-deps
	@scripts/ensure-dockerd
	$(PYTEST) -m "not slow"

test-slow: ## the slow tier alone: stacks, fault cases, fuzzing, browsers, waits of many seconds
	@scripts/install-deps --ui
	@scripts/ensure-dockerd
	$(PYTEST) -m slow

lint: deps ## ruff check, ruff format --check, mypy, lint-imports (layers, SDKs only in adapters)
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy
	$(VENV)/lint-imports --no-cache

docs: deps ## build the documentation site (mkdocs, strict) into out/site
	NO_MKDOCS_2_WARNING=1 $(VENV)/mkdocs build --strict -d out/site

validate: deps ## validate a config repo (REPO=path, default the sample repo)
	$(VENV)/phrame validate $(REPO)

bench: deps ## run benchmarks/*.py; out/bench.json and the table out/bench.md (benchmarks/report.py)
	@mkdir -p out/bench
	@rm -f out/bench/*.json out/bench/*.load
	@for f in $(filter-out $(BENCH_HELPERS),$(wildcard benchmarks/*.py)); do \
	  [ -e "$$f" ] || { echo "no benchmarks/*.py yet"; break; }; \
	  name=$$(basename "$$f" .py); echo "bench: $$name (load $$(cut -d' ' -f1 /proc/loadavg))"; \
	  cp /proc/loadavg "out/bench/$$name.load"; \
	  $(VENV)/python "$$f" > "out/bench/$$name.json" || echo "bench: $$name exited $$? (its row says why)"; \
	done
	$(VENV)/python benchmarks/report.py

bench-docs: deps ## copy out/bench.md (make bench) into docs/performance.md, out/faults.json's table into docs/faults.md
	$(VENV)/python benchmarks/report.py --docs docs

replay: deps ## post a recorded webhook to a running config-sync (EVENT=fixtures/webhooks/push.json URL=... TOKEN_FILE=...)
	$(VENV)/phrame replay $(or $(EVENT),fixtures/webhooks/push.json) --new-key $(if $(URL),--url $(URL)) \
	  $(if $(TOKEN_FILE),--token-file $(TOKEN_FILE))

plan: deps ## per node, what a change adds, changes and removes (REPO=git repo FROM=main TO=ref)
	$(VENV)/phrame plan $(REPO) --from $(or $(FROM),main) $(if $(TO),--to $(TO))

clean: ## remove build, cache and output files (keeps .venv)
	rm -rf out build .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
