#!/usr/bin/env bash
# Installs schemathesis (PyPI), which the API fuzzing test (agent-runtime e2e `fuzz`) runs
# against a real server and its /openapi.json. Pinned; idempotent.
set -euo pipefail
VERSION=4.32.5
if command -v st >/dev/null 2>&1 && st --version 2>/dev/null | grep -q "$VERSION"; then
  echo "install-schemathesis: $(st --version)"
  exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$VERSION"
hash -r
echo "install-schemathesis: $(st --version)"
