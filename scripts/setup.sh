#!/usr/bin/env bash
# Installs everything the demo and the tests need, idempotently:
#   a JDK 17.0.17+ (4.0 also runs on 21.0.8+, 3.0 documents 17 only; not 23+), Maven, Chromium, buildah, debootstrap, Prometheus (apt); a virtualenv with the project (pip);
#   the Pulsar 4.0.7, 3.0.7 and 4.2.4 broker jars and the 4.0 pulsar-admin's (Maven Central, cached in
#   ~/.cache/pulsar-lens and ~/.m2);
#   the jar of the sticky-key hash Spark runs in its JVM (compiled into ~/.cache/pulsar-lens).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
java_ok() {  # the harness's own rule per tested release: Java 17.0.17+ runs 4.0, 3.0 and 4.2
  # (4.x takes 21.0.8+ too, 3.0 not); stdlib only, no venv needed
  python3 scripts/find_java.py 2>/dev/null
}
java_ok || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# the container image tests (buildah, a debootstrap base) and the alert rules (prometheus, promtool)
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # policy-rc.d 101: packages with a daemon (prometheus) are installed, not started
  policy=/usr/sbin/policy-rc.d; own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null; $SUDO chmod +x "$policy"
    own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    "${need_apt[@]}" >/dev/null
  [ -z "$own_policy" ] || $SUDO rm -f "$policy"
fi
java_ok || { echo "setup: no Java 17.0.17+ after installing openjdk-17-jdk-headless" >&2; exit 1; }

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum < pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-*; touch "$stamp"
fi
# Earlier test runs installed examples/hello-plugin here; the tests now use a throwaway
# directory, so a copy left behind would only add a stray analysis to the dashboard.
if .venv/bin/python -m pip show -q hello-pulsar-lens >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -y -q hello-pulsar-lens
fi

# each release the tests prove the models against, assembled once (a cached one is skipped)
.venv/bin/pulsar-lens pulsar assemble --pulsar 4.0
.venv/bin/pulsar-lens pulsar assemble --pulsar 3.0
.venv/bin/pulsar-lens pulsar assemble --pulsar 4.2
# The sticky-key hash Spark runs in its JVM, compiled once into ~/.cache/pulsar-lens/spark-udf/
# (a process that finds it missing compiles it on first use; this takes that wait out of it).
.venv/bin/python -m pulsar_lens.plugins.spark.jvm >/dev/null
