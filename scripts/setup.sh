#!/usr/bin/env bash
# Installs everything the demo and the tests need, idempotently:
#   a JDK >= 17.0.17, Maven, Chromium (apt); a virtualenv with the project (pip);
#   the Pulsar 4.0 broker jars (Maven Central, cached in ~/.cache/pulsar-lens and ~/.m2).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local v; v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9._]*\).*/\1/p' | head -1)
  python3 - "$v" <<'PY'
import re, sys
parts = tuple(int(p) for p in re.split(r"[._]", sys.argv[1]) if p.isdigit())
sys.exit(0 if parts >= (17, 0, 17) else 1)
PY
}
java_ok || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
java_ok || { echo "setup: Java >= 17.0.17 is still missing" >&2; exit 1; }

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml examples/hello-plugin/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[spark,dev]'
  rm -f .venv/.installed-*; touch "$stamp"
fi

.venv/bin/pulsar-lens pulsar assemble
