#!/usr/bin/env bash
# Slow clients with a real attack tool: slowhttptest (Debian package) in slowloris mode (request
# heads trickled a few bytes at a time) and in slow-read mode (answers read a few bytes at a time,
# a small receive window), a few thousand connections on loopback, while a normal visitor keeps
# asking for a page on a kept-alive connection. Prints, per mode, the normal visitor's latency
# (p50/p99/max) and errors, and what the proxy's listener counted (/admin/state `listener`).
#
#   load/slowloris.sh                                   # the release build, built if missing
#   BIN=target/debug/waitroom-proxy CONNS=2000 SECONDS_PER_MODE=30 load/slowloris.sh
#
# Knobs: BIN (the proxy binary), CONNS (attack connections, default 3000), SECONDS_PER_MODE
# (default 60), HEADER_TIMEOUT (listen.header_timeout, default the shipped 15s). Listens on
# 127.0.0.1 only; every process started here is stopped on exit. Results are appended to
# load/results/slowloris-<timestamp>.md (git-ignored).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONNS=${CONNS:-3000}
SECONDS_PER_MODE=${SECONDS_PER_MODE:-60}
HEADER_TIMEOUT=${HEADER_TIMEOUT:-15s}
die() { echo "slowloris.sh: $*" >&2; exit 2; }
command -v slowhttptest >/dev/null || die "needs slowhttptest (apt-get install slowhttptest)"
command -v python3 >/dev/null || die "needs python3"
if [[ -z ${BIN:-} ]]; then
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/waitroom-proxy"
    [[ -x $BIN ]] || (cd "$ROOT" && cargo build --release --bin waitroom-proxy)
fi
[[ -x $BIN ]] || die "no proxy binary at $BIN"
(($(ulimit -n) >= CONNS + 1024)) || die "open-file limit $(ulimit -n) too low for CONNS=$CONNS"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port) ADMIN=$(free_port) ORIGIN=$(free_port)
TOKEN=slowloris-admin-token-slowloris-admin!

python3 "$ROOT/load/stub_origin.py" --port "$ORIGIN" >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
cat >"$TMP/room.toml" <<EOF
[listen]
address = "127.0.0.1:$PORT"
threads = 2
header_timeout = "$HEADER_TIMEOUT"
[origin]
address = "127.0.0.1:$ORIGIN"
[room]
id = "slow"
total_active_users = 1000000
new_users_per_minute = 100000000
[pass]
secret = "slowloris-secret-slowloris-secret-slow!"
cookie_secure = false
[admin]
address = "127.0.0.1:$ADMIN"
token = "$TOKEN"
[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
EOF
RUST_LOG=warn "$BIN" --config "$TMP/room.toml" >"$TMP/proxy.log" 2>&1 &
PROXY=$!
PIDS+=($PROXY)
for _ in $(seq 100); do
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/" && break
    sleep 0.1
done

# The normal visitor: one request every 50 ms on a kept-alive connection (a new one after an
# error), each timed; prints p50 p99 max (ms), requests and errors.
visitor() {
    python3 - "$PORT" "$1" <<'PY'
import http.client, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
lat, errors, end = [], 0, time.monotonic() + seconds
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
while time.monotonic() < end:
    t = time.monotonic()
    try:
        conn.request("GET", "/visit", headers={"Host": "shop.example.com"})
        r = conn.getresponse(); r.read()
        if r.status != 200: errors += 1
        else: lat.append((time.monotonic() - t) * 1000)
    except (OSError, http.client.HTTPException):
        errors += 1
        conn.close(); conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    time.sleep(0.05)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
print(f"{q(0.5):.1f} {q(0.99):.1f} {lat[-1] if lat else float('nan'):.1f} {len(lat) + errors} {errors}")
PY
}
listener() {
    curl -fs -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$ADMIN/admin/state" |
        python3 -c 'import json,sys; c=json.load(sys.stdin)["listener"]["connections"]; print(c["open"], c["refused_total"], c["header_timeouts_total"])'
}
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$PROXY/status"; }

declare -A ARGS=(
    [slowloris]="-H -i 10 -x 24"
    [slow-read]="-X -w 512 -y 1024 -n 5 -z 32 -k 3"
)
OUT="$ROOT/load/results/slowloris-$(date -u +%Y%m%dT%H%M%SZ).md"
mkdir -p "$ROOT/load/results"
{
    echo "## load/slowloris.sh $(date -u +%FT%TZ)"
    echo
    echo "$(nproc) CPUs, $(uname -r), binary $BIN, CONNS=$CONNS, SECONDS_PER_MODE=$SECONDS_PER_MODE, header_timeout=$HEADER_TIMEOUT"
    echo
    echo "| mode | visitor p50 ms | p99 ms | max ms | requests | errors | open at mid-run | header timeouts | proxy RSS MiB at mid-run |"
    echo "|---|---|---|---|---|---|---|---|---|"
} | tee -a "$OUT"
baseline=$(visitor 10)
read -r p50 p99 max n err <<<"$baseline"
echo "| none (baseline, 10 s) | $p50 | $p99 | $max | $n | $err | - | - | $(($(rss_kib) / 1024)) |" | tee -a "$OUT"
for mode in slowloris slow-read; do
    # shellcheck disable=SC2086
    slowhttptest ${ARGS[$mode]} -c "$CONNS" -r 1000 -l "$SECONDS_PER_MODE" -p 3 \
        -u "http://127.0.0.1:$PORT/" >"$TMP/$mode.log" 2>&1 &
    ATTACK=$!
    PIDS+=($ATTACK)
    sleep 3
    visitor $((SECONDS_PER_MODE - 6)) >"$TMP/visitor" &
    VISITOR=$!
    sleep $((SECONDS_PER_MODE / 2))
    read -r open _ timeouts <<<"$(listener)"
    rss=$(($(rss_kib) / 1024))
    wait "$VISITOR"
    read -r p50 p99 max n err <"$TMP/visitor"
    wait "$ATTACK" || true
    echo "| $mode | $p50 | $p99 | $max | $n | $err | $open | $timeouts | $rss |" | tee -a "$OUT"
done
echo "(results appended to $OUT)"
