#!/usr/bin/env bash
# Installs the MCP servers the ar-mcp (and service) tests talk to: the reference
# @modelcontextprotocol/server-everything, pinned in tests/mcp (npm ci). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v npm >/dev/null 2>&1; then
  echo "install-mcp-servers: installing nodejs and npm from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
(cd tests/mcp && npm ci --no-fund --no-audit)
echo "install-mcp-servers: server-everything $(node -p 'require("./tests/mcp/node_modules/@modelcontextprotocol/server-everything/package.json").version')"
