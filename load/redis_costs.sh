#!/usr/bin/env bash
# What each unit of a drop costs Redis (issue 26, item 4): examples/redis_costs.rs against a
# redis-server of its own, VISITORS joining one room. Prints one markdown row per unit (a new
# visitor's per-address claim and join, a waiting visitor's heartbeat, an admitted visitor's round
# share and claim, an instance's idle loop tick, the leader's empty round): Redis CPU µs, commands
# (those run inside the Lua scripts included) and used_memory bytes per unit, from INFO before and
# after each phase. BENCHMARKS.md ("A drop of 1 000 000 visitors") sizes a drop from these rows.
#
#   load/redis_costs.sh                  # from the repository root
#   VISITORS=1000000 load/redis_costs.sh
#
# Knobs (environment):
#   VISITORS  visitors that join the room (default 200000)
#   CARGO_TARGET_DIR  where the release example is built (default target/)
#   KEEP_TMP  1: keep the temp dir (redis-server's log)
set -euo pipefail

VISITORS=${VISITORS:-200000}
KEEP_TMP=${KEEP_TMP:-0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

die() {
    echo "redis_costs: error: $*" >&2
    exit 1
}
TMP=$(mktemp -d -t waitroom-redis-costs.XXXXXX)
# shellcheck source=lib/servers.sh
source "$ROOT/load/lib/servers.sh"
FAILED=1
trap 'stop_servers; keep_or_remove_tmp redis_costs "$FAILED" "$KEEP_TMP"' EXIT

command -v redis-server >/dev/null 2>&1 || die "redis-server not found (scripts/setup.sh installs it)"
cargo build --release --example redis_costs >&2
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

free_port REDIS_PORT
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --maxmemory-policy noeviction >"$TMP/redis.log" 2>&1 &
PIDS+=("$!:TERM")
for ((i = 0; i < 100; i++)); do
    [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && break
    sleep 0.1
done
[[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] || die "redis-server does not answer; see $TMP/redis.log"

echo "redis_costs: $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/redis-server \1/p'), $VISITORS visitors, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
"$TARGET/release/examples/redis_costs" "redis://127.0.0.1:$REDIS_PORT" "$VISITORS"
FAILED=0
