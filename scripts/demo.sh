#!/usr/bin/env bash
# Runs waitroom on this machine with nothing else installed: the in-memory store and a built-in
# demo shop as the origin. Open http://127.0.0.1:8080/ in one browser, then in a second one (or a
# private window): the room holds one visitor, so the second waits in line until the first checks
# out. Admin and metrics: http://127.0.0.1:9091/metrics; the console at
# http://127.0.0.1:9091/admin/console takes the admin token printed at start.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec cargo run --release --bin waitroom-proxy -- --config config/demo.toml --dev
