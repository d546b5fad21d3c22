#!/usr/bin/env bash
# Installs the agent CLIs the dispatch tests drive (codex, claude, opencode) from npm.
# Idempotent: a CLI already on PATH is left alone; missing ones install at the versions the
# tests were verified with. Needs node/npm (Debian: apt-get install nodejs npm).
set -euo pipefail

need_npm() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-agent-clis: npm not found; installing nodejs and npm from Debian" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
}

missing=()
command -v codex >/dev/null 2>&1 || missing+=("@openai/codex@0.171.0")
command -v claude >/dev/null 2>&1 || missing+=("@anthropic-ai/claude-code@2.1.197")
command -v opencode >/dev/null 2>&1 || missing+=("opencode-ai@1.18.33")

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-agent-clis: codex, claude and opencode already installed"
else
  need_npm
  echo "install-agent-clis: installing ${missing[*]}"
  npm install -g --no-fund --no-audit "${missing[@]}"
fi

for cli in codex claude opencode; do
  if ! command -v "$cli" >/dev/null 2>&1; then
    echo "install-agent-clis: $cli is still missing after install" >&2
    exit 1
  fi
done
echo "install-agent-clis: codex $(codex --version 2>/dev/null | head -1); claude $(timeout 30 claude --version 2>/dev/null | head -1); opencode $(timeout 30 opencode --version 2>/dev/null | head -1)"
