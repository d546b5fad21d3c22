#!/usr/bin/env bash
# Installs what the console's browser test needs: Debian's chromium (apt) and the pinned
# playwright-core in tests/browser (npm ci). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "install-browser: installing chromium from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-browser: installing nodejs and npm from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
(cd tests/browser && npm ci --no-fund --no-audit)
echo "install-browser: $(chromium --version 2>/dev/null | head -1); playwright-core $(node -p 'require("./tests/browser/node_modules/playwright-core/package.json").version')"
