#!/usr/bin/env bash
# Installs tmux (Debian), the real terminal the CLI tests (agent-runtime e2e `cli_runs`) drive:
# they type commands with send-keys and read the screen with capture-pane. Idempotent.
set -euo pipefail
if command -v tmux >/dev/null 2>&1; then
  echo "install-tmux: $(tmux -V)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq tmux >/dev/null
echo "install-tmux: $(tmux -V)"
