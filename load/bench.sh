#!/usr/bin/env bash
# Throughput and latency of waitroom-proxy against nginx, on loopback, with wrk.
#
#   load/bench.sh                         # from the repository root
#   DURATION=30s CONNECTIONS=128 THREADS=1 load/bench.sh
#
# Knobs (environment):
#   DURATION      wrk run per scenario (default 10s)
#   CONNECTIONS   wrk connections (default 64); wrk itself always runs one thread (-t1)
#   THREADS       worker threads of waitroom-proxy and worker processes of both nginx (default 2)
#   WARMUP        untimed wrk run before each scenario, 0 to skip (default 2s)
#   ORIGIN_PATH   path requested: "/" answers "ok", "/1k" answers 1 KiB (default /)
#   SCENARIOS     which scenarios to run, letters a-f (default abcdef)
#   REBUILD       1: run `cargo build --release` even if the binary exists (default 0)
#   CARGO_TARGET_DIR  where the release binary is built/looked for (default target/)
#   KEEP_TMP      1: keep the temp dir (configs, logs, raw wrk output) (default: only on failure)
#
# Scenarios: (a) nginx origin direct, (b) nginx reverse proxy (upstream keepalive 64),
# (c) waitroom-proxy admitted path (valid pass cookie -> origin), (d) waiting-room JSON poll
# (ticket cookie, Accept: application/json), (e) the same poll for the HTML page, (f) new
# visitors (no cookie, room full: each request joins the line and gets a signed ticket).
# Prints one markdown table (requests/s, p50/p99 latency, requests/s relative to the nginx proxy
# and to the waitroom admitted path, CPU per request of the server under test, errors) and writes
# it, with the machine and the knobs, to load/results/bench-<timestamp>.md (git-ignored).
# CPU µs/req is the robust number on a shared or busy machine: requests/s there depends on how much
# CPU the other processes leave. Everything listens on 127.0.0.1 only; every process started here
# is stopped on exit.
set -euo pipefail

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2s}
ORIGIN_PATH=${ORIGIN_PATH:-/}
SCENARIOS=${SCENARIOS:-abcdef}
REBUILD=${REBUILD:-0}
KEEP_TMP=${KEEP_TMP:-0}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

die() {
    echo "bench: error: $*" >&2
    exit 1
}
log() { echo "bench: $*" >&2; }

[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer (got '$THREADS')"
[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || die "CONNECTIONS must be a positive integer"
[[ $DURATION =~ ^[0-9]+[smh]?$ ]] || die "DURATION must look like 10s, 1m (got '$DURATION')"
[[ $WARMUP =~ ^[0-9]+[smh]?$ ]] || die "WARMUP must look like 2s or 0"
[[ $ORIGIN_PATH == / || $ORIGIN_PATH == /1k ]] || die "ORIGIN_PATH must be / or /1k"

# ---------------------------------------------------------------- 1. tools and binary
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v ss >/dev/null 2>&1 || missing+=(iproute2)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

TARGET_DIR=${CARGO_TARGET_DIR:-target}
[[ $TARGET_DIR == /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
BIN="$TARGET_DIR/release/waitroom-proxy"
if [[ ! -x $BIN || $REBUILD == 1 ]]; then
    command -v cmake >/dev/null 2>&1 || {
        log "installing cmake (pingora builds zlib-ng with it)"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null
    }
    log "building $BIN (a cold release build takes several minutes)"
    CARGO_TARGET_DIR="$TARGET_DIR" cargo build --release --bin waitroom-proxy
fi
[[ -x $BIN ]] || die "no binary at $BIN"

# Other work on the machine skews every number: note the load, warn when it is high.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_BEFORE%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    log "warning: load average is $LOAD_BEFORE on $(nproc) CPUs: other work will skew the results"
fi

# ---------------------------------------------------------------- process bookkeeping
TMP=$(mktemp -d "${TMPDIR:-/tmp}/waitroom-bench.XXXXXX")
PIDS=()        # long-running servers, stopped in reverse order
WRK_PID=""
FAILED=1

stop_pid() { # pid signal: signal, wait up to 5 s, then SIGKILL
    local pid=$1 sig=$2 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [[ -n $WRK_PID ]] && stop_pid "$WRK_PID" TERM
    local i entry
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        entry=${PIDS[i]}
        # nginx: TERM is its fast shutdown; Pingora: INT is fast, TERM waits the grace period.
        stop_pid "${entry%%:*}" "${entry#*:}"
    done
    wait 2>/dev/null || true
    if [[ $FAILED == 1 || $KEEP_TMP == 1 ]]; then
        echo "bench: logs and configs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- helpers
USED_PORTS=" "
free_port() { # var-name: sets it to a port nothing on this host uses (listening or connected)
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + RANDOM % 40000))
        [[ $USED_PORTS == *" $p "* ]] && continue
        if [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]]; then
            USED_PORTS+="$p "
            printf -v "$1" '%s' "$p"
            return 0
        fi
    done
    die "no free port found"
}

wait_listening() { # port name pid
    local port=$1 name=$2 pid=$3 i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || die "$name exited at start; see $TMP/$name.log"
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "$name does not listen on 127.0.0.1:$port after 10 s; see $TMP/$name.log"
}

# One request: sets STATUS, BODY, HEADERS (lower-cased names). Args: url [curl args...]
fetch() {
    local url=$1
    shift
    STATUS=$(curl -sS --max-time 5 -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "$@" "$url") ||
        die "curl $url failed"
    BODY=$(cat "$TMP/body")
    HEADERS=$(tr -d '\r' <"$TMP/headers" | sed 's/^[^:]*:/\L&/')
}

cookie_from_headers() { # prints the waitroom= value of the Set-Cookie header, if any
    sed -n 's/^set-cookie: *waitroom=\([^;]*\).*/\1/p' <<<"$HEADERS" | head -n1
}

header_value() { sed -n "s/^$1: *//p" <<<"$HEADERS" | head -n1; }

# ---------------------------------------------------------------- 2./3. nginx origin and proxy
free_port ORIGIN_PORT
free_port NGINX_PROXY_PORT
free_port WR_PORT
free_port ADMIN_PORT
KB_BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')

nginx_conf() { # name server-block
    local name=$1 server=$2
    mkdir -p "$TMP/$name"
    cat >"$TMP/$name/nginx.conf" <<EOF
worker_processes $THREADS;
daemon off;
master_process on;
pid $TMP/$name/nginx.pid;
error_log $TMP/$name.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/$name/client_body;
    proxy_temp_path $TMP/$name/proxy;
    fastcgi_temp_path $TMP/$name/fastcgi;
    uwsgi_temp_path $TMP/$name/uwsgi;
    scgi_temp_path $TMP/$name/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
$server
}
EOF
}

start_nginx() { # name port
    local name=$1 port=$2
    "$NGINX" -p "$TMP/$name" -c "$TMP/$name/nginx.conf" -e "$TMP/$name.log" -t -q ||
        die "nginx config of $name rejected; see $TMP/$name.log"
    "$NGINX" -p "$TMP/$name" -c "$TMP/$name/nginx.conf" -e "$TMP/$name.log" \
        >"$TMP/$name.out" 2>&1 &
    PIDS+=("$!:TERM")
    LAST_PID=$!
    wait_listening "$port" "$name" "$!"
}

nginx_conf origin "
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        default_type text/plain;
        location = / { return 200 \"ok\"; }
        location = /1k { return 200 \"$KB_BODY\"; }
    }"
start_nginx origin "$ORIGIN_PORT"
ORIGIN_PID=$LAST_PID

nginx_conf nginx-proxy "
    upstream origin {
        server 127.0.0.1:$ORIGIN_PORT;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:$NGINX_PROXY_PORT;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
start_nginx nginx-proxy "$NGINX_PROXY_PORT"
NGINX_PROXY_PID=$LAST_PID

# ---------------------------------------------------------------- 4. waitroom-proxy
cat >"$TMP/waitroom.toml" <<EOF
[listen]
address = "127.0.0.1:$WR_PORT"
threads = $THREADS

[origin]
address = "127.0.0.1:$ORIGIN_PORT"

[room]
id = "bench"
name = "Bench drop"
# Everyone fits until the script lowers total_active_users live to 1 (step 5).
total_active_users = 1000000
new_users_per_minute = 1000000
burst = 1000000
# 1 h: no pass renewal (re-signing after a tenth of the session) and no abandoned ticket during a run.
session_duration = "1h"
abandon_after = "1h"
bypass = []

[pass]
cookie_secure = false

[admin]
address = "127.0.0.1:$ADMIN_PORT"
EOF
WR_JWT_SECRET=${WR_JWT_SECRET:-$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')}
WR_ADMIN_TOKEN=${WR_ADMIN_TOKEN:-$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')}
((${#WR_JWT_SECRET} >= 32 && ${#WR_ADMIN_TOKEN} >= 32)) || die "WR_JWT_SECRET/WR_ADMIN_TOKEN need >= 32 bytes"
WR_JWT_SECRET=$WR_JWT_SECRET WR_ADMIN_TOKEN=$WR_ADMIN_TOKEN RUST_LOG=${RUST_LOG:-info} \
    "$BIN" --config "$TMP/waitroom.toml" >"$TMP/waitroom.log" 2>&1 &
PIDS+=("$!:INT")
WR_PID=$!
wait_listening "$WR_PORT" waitroom "$!"
wait_listening "$ADMIN_PORT" waitroom "$!"

# ---------------------------------------------------------------- 5. a pass and a ticket
ORIGIN_URL="http://127.0.0.1:$ORIGIN_PORT$ORIGIN_PATH"
PROXY_URL="http://127.0.0.1:$NGINX_PROXY_PORT$ORIGIN_PATH"
WR_URL="http://127.0.0.1:$WR_PORT$ORIGIN_PATH"

fetch "$ORIGIN_URL"
[[ $STATUS == 200 ]] || die "origin answers $STATUS"
ORIGIN_BODY=$BODY

fetch "$WR_URL"
[[ $STATUS == 200 && $BODY == "$ORIGIN_BODY" ]] ||
    die "first visitor was not admitted to the origin (status $STATUS, body: ${BODY:0:200})"
PASS=$(cookie_from_headers)
[[ -n $PASS ]] || die "no waitroom= pass cookie on the first visitor's response"

fetch "http://127.0.0.1:$ADMIN_PORT/admin/config" -X PUT \
    -H "Authorization: Bearer $WR_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    --data '{"total_active_users": 1}'
[[ $STATUS == 200 ]] || die "PUT /admin/config answered $STATUS: $BODY"

fetch "$WR_URL" -H 'Accept: application/json'
[[ $STATUS == 200 && $BODY == *'"inWaitingRoom":true'* ]] ||
    die "a new visitor in a full room was not queued (status $STATUS, body: ${BODY:0:200})"
TICKET=$(cookie_from_headers)
[[ -n $TICKET ]] || die "no waitroom= ticket cookie for the queued visitor"

# ---------------------------------------------------------------- 6. scenarios
SCEN_NAMES=(
    [0]="(a) origin direct (nginx static)"
    [1]="(b) nginx reverse proxy"
    [2]="(c) waitroom admitted (pass cookie -> origin)"
    [3]="(d) waitroom poll, JSON (ticket cookie)"
    [4]="(e) waitroom poll, HTML page (ticket cookie)"
    [5]="(f) waitroom new visitor (no cookie, joins line)"
)
declare -A RPS P50 P99 ERRS CPU_US
CLK_TCK=$(getconf CLK_TCK)

# CPU time (user + system, in clock ticks) the given processes have used so far.
cpu_ticks() {
    local t=0 p
    for p in "$@"; do
        # After "pid (comm) " the fields start at state: utime and stime are the 12th and 13th.
        t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
    done
    echo "$t"
}
# The server under test: nginx is measured by its workers, waitroom-proxy as a whole.
nginx_workers() { pgrep -P "$1" | xargs; }

to_ms() { # wrk latency such as 812.00us, 1.23ms, 2.01s -> milliseconds
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.2f", n }'
}

run_wrk() { # out-file url [wrk args...]
    local out=$1 url=$2
    shift 2
    wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --timeout 5s --latency "$@" "$url" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || die "wrk failed: $(cat "$out")"
    WRK_PID=""
}

warm_up() { # url [wrk args...]
    [[ $WARMUP =~ ^0+[smh]?$ ]] && return 0
    local url=$1
    shift
    wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" --timeout 5s "$@" "$url" >/dev/null 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || true
    WRK_PID=""
}

scenario() { # index url check-fn "server pids" [wrk -H args...]
    local i=$1 url=$2 check=$3 pids=$4
    shift 4
    local name=${SCEN_NAMES[i]}
    local out="$TMP/wrk-$i.txt"
    "$check" || die "$name: the check request did not hit the intended path"
    log "$name: ${DURATION} x ${CONNECTIONS} connections"
    warm_up "$url" "$@"
    local ticks0 ticks1 total
    # shellcheck disable=SC2086 # a list of pids
    ticks0=$(cpu_ticks $pids)
    run_wrk "$out" "$url" "$@"
    # shellcheck disable=SC2086
    ticks1=$(cpu_ticks $pids)
    total=$(awk '/ requests in / { print $1 }' "$out")
    local rps p50 p99 non2xx sock
    rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")
    p50=$(awk '$1 == "50%" { print $2 }' "$out")
    p99=$(awk '$1 == "99%" { print $2 }' "$out")
    [[ -n $rps && -n $p50 && -n $p99 ]] || die "cannot parse wrk output of $name: $(cat "$out")"
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    sock=$(awk '/Socket errors:/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i; print n + 0 }' "$out")
    RPS[$i]=$rps
    P50[$i]=$(to_ms "$p50")
    P99[$i]=$(to_ms "$p99")
    ERRS[$i]=$((${non2xx:-0} + ${sock:-0}))
    CPU_US[$i]=$(awk -v t=$((ticks1 - ticks0)) -v hz="$CLK_TCK" -v n="${total:-0}" \
        'BEGIN { if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "—" }')
    "$check" || die "$name: after the run the path no longer answers as expected"
}

check_origin() {
    fetch "$ORIGIN_URL"
    [[ $STATUS == 200 && $BODY == "$ORIGIN_BODY" ]]
}
check_proxy() {
    fetch "$PROXY_URL"
    [[ $STATUS == 200 && $BODY == "$ORIGIN_BODY" ]]
}
check_admitted() {
    fetch "$WR_URL" -H "Cookie: waitroom=$PASS"
    # The origin's body, and no new cookie (a renewal or a fresh ticket would mean another path).
    [[ $STATUS == 200 && $BODY == "$ORIGIN_BODY" && -z $(cookie_from_headers) ]] ||
        { log "admitted check: status $STATUS, body ${BODY:0:120}, set-cookie: $(cookie_from_headers)"; return 1; }
}
check_poll_json() {
    fetch "$WR_URL" -H "Cookie: waitroom=$TICKET" -H 'Accept: application/json'
    [[ $STATUS == 200 && $BODY == *'"inWaitingRoom":true'* && $(header_value content-type) == application/json* ]] ||
        { log "JSON poll check: status $STATUS, body ${BODY:0:200}"; return 1; }
}
check_poll_html() {
    fetch "$WR_URL" -H "Cookie: waitroom=$TICKET" -H 'Accept: text/html'
    [[ $STATUS == 200 && $BODY == *'<!doctype html>'* && $BODY == *__waitroom/status* &&
        $(header_value content-type) == text/html* ]] ||
        { log "HTML poll check: status $STATUS, body ${BODY:0:200}"; return 1; }
}
check_newcomer() {
    fetch "$WR_URL" -H 'Accept: text/html'
    [[ $STATUS == 200 && $BODY == *'<!doctype html>'* && -n $(cookie_from_headers) ]] ||
        { log "new-visitor check: status $STATUS, body ${BODY:0:200}"; return 1; }
}

if [[ $SCENARIOS == *a* ]]; then
    scenario 0 "$ORIGIN_URL" check_origin "$(nginx_workers "$ORIGIN_PID")"
fi
if [[ $SCENARIOS == *b* ]]; then
    scenario 1 "$PROXY_URL" check_proxy "$(nginx_workers "$NGINX_PROXY_PID")"
fi
if [[ $SCENARIOS == *c* ]]; then
    scenario 2 "$WR_URL" check_admitted "$WR_PID" -H "Cookie: waitroom=$PASS"
fi
if [[ $SCENARIOS == *d* ]]; then
    scenario 3 "$WR_URL" check_poll_json "$WR_PID" \
        -H "Cookie: waitroom=$TICKET" -H 'Accept: application/json'
fi
if [[ $SCENARIOS == *e* ]]; then
    scenario 4 "$WR_URL" check_poll_html "$WR_PID" -H "Cookie: waitroom=$TICKET" -H 'Accept: text/html'
fi
# Last: it fills the line with hundreds of thousands of tickets.
if [[ $SCENARIOS == *f* ]]; then
    scenario 5 "$WR_URL" check_newcomer "$WR_PID" -H 'Accept: text/html'
fi

# ---------------------------------------------------------------- 7. the table
ratio() { # a b -> a/b with 2 decimals, or an em dash
    [[ -n ${1:-} && -n ${2:-} && ${2:-0} != 0 ]] || { echo "—"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

TABLE="| scenario | requests/s | p50 ms | p99 ms | × nginx proxy | × waitroom admitted | server CPU µs/req | errors |
|---|--:|--:|--:|--:|--:|--:|--:|"
for i in 0 1 2 3 4 5; do
    [[ -n ${RPS[$i]:-} ]] || continue
    TABLE+="
| ${SCEN_NAMES[i]} | ${RPS[$i]} | ${P50[$i]} | ${P99[$i]} | $(ratio "${RPS[$i]}" "${RPS[1]:-}") | $(ratio "${RPS[$i]}" "${RPS[2]:-}") | ${CPU_US[$i]} | ${ERRS[$i]} |"
done

CPU=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || REV+=" (+ uncommitted changes in src/)"
STAMP=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$ROOT/load/results"
RESULT="$ROOT/load/results/bench-$STAMP.md"
{
    echo "## waitroom benchmark $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $CPU, $(uname -sr); load average before the run: $LOAD_BEFORE"
    echo "- knobs: DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS WARMUP=$WARMUP ORIGIN_PATH=$ORIGIN_PATH"
    echo "- wrk -t1 -c$CONNECTIONS -d$DURATION --latency on 127.0.0.1; load generator, proxies and origin share the machine"
    echo "- waitroom $REV, binary $BIN ($(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')); $("$NGINX" -v 2>&1)"
    echo "- ratios: requests/s relative to the nginx proxy row and to the waitroom admitted row"
    echo "- server CPU µs/req: user + system CPU of the server under test only (nginx workers, or the"
    echo "  waitroom-proxy process; not the origin behind a proxy) over the timed run, per request"
    echo
    echo "$TABLE"
    echo
} >>"$RESULT"

echo
echo "$TABLE"
echo
log "written to ${RESULT#"$ROOT"/}"
FAILED=0
