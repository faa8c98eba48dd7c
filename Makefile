.DEFAULT_GOAL := help
VENV := .venv/bin

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: ## install JDK, Chromium, the virtualenv and the Pulsar jars (idempotent)
	scripts/setup.sh

demo: install ## README command 1: real local Pulsar + demo workloads + dashboard
	$(VENV)/pulsar-lens demo

test: ## README command 2: every test tier, live broker included
	scripts/test.sh

lint: install ## ruff lint + format check
	$(VENV)/ruff check . && $(VENV)/ruff format --check .

fix: install ## ruff autofix + format
	$(VENV)/ruff check --fix . && $(VENV)/ruff format .

typecheck: install ## mypy strict on core/, collectors/ and plugins/
	$(VENV)/mypy

bench: install ## every benchmark (each prints ratios against a baseline run side by side)
	@for b in hashing collect store_reads analyses key_shared_map dashboard; do \
	  echo "== benchmarks/$$b.py"; $(VENV)/python -m benchmarks.$$b || exit 1; done

serve: install ## dashboard + polling loop against PULSAR_ADMIN_URL
	$(VENV)/pulsar-lens serve

.PHONY: help install demo test lint fix typecheck bench serve
