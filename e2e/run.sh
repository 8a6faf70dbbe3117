#!/usr/bin/env bash
# End-to-end browser tests of waitroom-proxy: headless Debian Chromium driven by playwright-core,
# run by Node's built-in test runner. Each test starts its own proxy and stub shop on free ports.
#
#   e2e/run.sh                      # uses target/debug/waitroom-proxy (cargo build first)
#   WAITROOM_BIN=/path/to/waitroom-proxy e2e/run.sh
#   e2e/run.sh tests/closed.test.js # one file (paths relative to e2e/)
#
# Screenshots land in docs/screenshots/. Set E2E_KEEP_TMP=1 to keep each proxy's config and log.
set -euo pipefail
E2E="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$E2E/.." && pwd)"

# The binary: $WAITROOM_BIN (relative paths are taken from where this was run), else the debug
# build that CI makes, relative to the repo root.
if [[ -n "${WAITROOM_BIN:-}" ]]; then
  case "$WAITROOM_BIN" in /*) ;; *) WAITROOM_BIN="$PWD/$WAITROOM_BIN" ;; esac
else
  WAITROOM_BIN="$REPO/target/debug/waitroom-proxy"
fi
if [[ ! -x "$WAITROOM_BIN" ]]; then
  echo "e2e: no proxy binary at $WAITROOM_BIN (run cargo build, or set WAITROOM_BIN)" >&2
  exit 2
fi
export WAITROOM_BIN

# Debian's Chromium (Playwright cannot download its own browser here).
if [[ ! -x /usr/bin/chromium ]]; then
  echo "e2e: installing chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q chromium
fi

cd "$E2E"
if [[ ! -d node_modules/playwright-core || ! -d node_modules/axe-core ]]; then
  npm ci --no-audit --no-fund
fi

if [[ $# -eq 0 ]]; then
  set -- tests/*.test.js
fi
# Two test files at a time (each has its own Chromium, proxy and shop); the whole run is bounded.
exec timeout --kill-after=10 270 node --test --test-concurrency=2 --test-timeout=60000 "$@"
