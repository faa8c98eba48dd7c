.DEFAULT_GOAL := help
VENV := .venv/bin

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

install: ## install JDK, Chromium, the virtualenv and the Pulsar jars (idempotent)
	scripts/setup.sh

demo: install ## README command 1: real local Pulsar + demo workloads + dashboard
	$(VENV)/pulsar-lens demo

test: ## README command 2: every test tier, live broker included
	scripts/test.sh

test-under-load: ## every tier as `make test`, with both cores and the disk kept busy
	scripts/test-under-load.sh

test-spark: install ## only the Spark tier (local[2], a standalone master and Spark Connect)
	.venv/bin/python -m pytest tests/spark

image: ## the container image: docker when an engine runs, else buildah on a Debian stand-in base
	@if docker info >/dev/null 2>&1; then docker build -t pulsar-lens .; \
	else base=$$(scripts/base-image.sh | tail -1) && \
	  buildah --storage-driver vfs build --isolation chroot --network host --layers \
	    --format docker --build-arg BASE_IMAGE=$$base -t localhost/pulsar-lens .; fi

lint: install ## ruff lint + format check
	$(VENV)/ruff check . && $(VENV)/ruff format --check .

fix: install ## ruff autofix + format
	$(VENV)/ruff check --fix . && $(VENV)/ruff format .

typecheck: install ## mypy strict on core/, collectors/ and plugins/
	$(VENV)/python scripts/typecheck.py

bench: install ## every benchmark (each prints ratios against a baseline run side by side)
	@for b in hashing collect bulk_answers store_reads analyses steps key_shared_map scale dashboard plugins_cmd cli_start; do \
	  echo "== benchmarks/$$b.py"; $(VENV)/python -m benchmarks.$$b || exit 1; done

reliability: install ## load and soak (~20 min), figures in artifacts/reliability/
	.venv/bin/python -m pytest reliability -p no:cacheprovider

soak: install ## the hour-long soak alone (figures in artifacts/reliability/soak.json)
	RELIABILITY_SOAK_SECONDS=3600 .venv/bin/python -m pytest reliability/test_soak.py -p no:cacheprovider

SCALE_SIZES ?= 100000,300000,1000000
scale: install ## collect polling a synthetic cluster of SCALE_SIZES topics over loopback HTTP; figures in artifacts/scale/
	$(VENV)/python -m reliability.scale --sizes $(SCALE_SIZES)

serve: install ## dashboard + polling loop against PULSAR_ADMIN_URL
	$(VENV)/pulsar-lens serve

.PHONY: help install demo test test-under-load test-spark image lint fix typecheck bench reliability soak scale serve
