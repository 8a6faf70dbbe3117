#!/usr/bin/env bash
# Throughput and latency of waitroom-proxy against nginx, on loopback, with wrk; with the memory or
# the Redis store; Redis commands per request, Redis bytes per waiting visitor, and proxy memory
# per idle connection.
#
#   load/bench.sh                         # from the repository root
#   DURATION=30s CONNECTIONS=128 THREADS=1 load/bench.sh
#   STORE=both DURATION=10s load/bench.sh # waitroom scenarios with memory, then Redis, and ratios
#
# Knobs (environment):
#   DURATION      wrk run per scenario (default 10s)
#   CONNECTIONS   wrk connections (default 64); wrk itself always runs one thread (-t1)
#   THREADS       worker threads of waitroom-proxy and worker processes of both nginx (default 2)
#   WARMUP        untimed wrk run before each scenario, 0 to skip (default 2s)
#   ORIGIN_PATH   path requested: "/" answers "ok", "/1k" answers 1 KiB (default /)
#   SCENARIOS     which scenarios to run, letters a-g and p (default abpcdef; g: see below)
#   STORE         memory | redis | both (default memory). redis: the script starts its own
#                 redis-server on a free port (--save '' --appendonly no; never a shared one) and
#                 the proxy gets [store] backend = "redis". both: scenarios a-b once, c-f with
#                 memory and then with Redis (a fresh proxy each), plus a redis/memory ratio table.
#   JOIN_VISITORS new visitors that join the full room to measure memory per waiting visitor
#                 (Redis used_memory and proxy RSS), 0 to skip (default 20000; needs python3)
#   IDLE_CONNS    idle keep-alive connections opened to waitroom-proxy and to the nginx proxy to
#                 measure RSS per connection, 0 to skip (default 10000; once per run, at the end
#                 of the first store's scenarios; needs python3)
#   REBUILD       1: run `cargo build --release` even if the binary exists (default 0)
#   CARGO_TARGET_DIR  where the release binary is built/looked for (default target/)
#   KEEP_TMP      1: keep the temp dir (configs, logs, raw wrk output) (default: only on failure)
#
# Scenarios: (a) nginx origin direct, (b) nginx reverse proxy (upstream keepalive 64), (p) a bare
# Pingora proxy (examples/bare_pingora.rs: `upstream_peer` only; the floor of the admitted path),
# (c) waitroom-proxy admitted path (valid pass cookie -> origin), (d) waiting-room JSON poll
# (ticket cookie, Accept: application/json), (e) the same poll for the HTML page, (f) new
# visitors (no cookie, room full: each request joins the line and gets a signed ticket).
# (g) open waiting pages: PAGES (default 10000) visitors in a full room, each with its own ticket
# and its event stream open; proxy RSS per stream and per idle keep-alive connection, CPU per
# 10 000 idle streams, push latency from the admission round to the page, nginx side by side.
# It is load/open_pages.sh (its header has the method and the knobs), run after the others with
# this script's binary and THREADS; SCENARIOS=g runs it alone.
#
# The poll scenarios (d, e) measure the steady-state poll path (PRD "The poll path"): the bench
# room has abandon_after = 10s, the script waits until the proxy has known the store's epoch for
# an abandon_after (before that every poll is an exact store look-up), and wrk keeps the ticket
# cookie the proxy re-issues (a small Lua cookie jar: the ticket itself only lives abandon_after).
# All connections share that one ticket, like tabs of one visitor: polls are answered from the
# ticket, except one exact look-up per min(120 s, abandon_after/2) = 5 s, plus the polls already
# in flight when it falls due. Before part 3 and (f) the script sets abandon_after to 1h live,
# so that nobody in the line is abandoned during those measurements.
#
# Prints markdown tables and appends them, with the machine and the knobs, to
# load/results/bench-<timestamp>.md (git-ignored):
#   - per scenario: requests/s, p50/p99 latency, requests/s relative to the nginx proxy and to the
#     waitroom admitted path, CPU per request of the server under test (and of redis-server),
#     errors;
#   - STORE=both: redis/memory ratios of new visitors/s (f), JSON polls/s (d), admitted/s (c);
#   - Redis: commands per request of each waitroom scenario (CONFIG RESETSTAT before the timed run,
#     INFO commandstats after), next to the admission loop's background rate measured idle;
#   - bytes per waiting visitor (JOIN_VISITORS join the full room); RSS per idle connection.
# CPU µs/req is the robust number on a shared or busy machine: requests/s there depends on how much
# CPU the other processes leave. Everything listens on 127.0.0.1 only; every process started here
# is stopped on exit.
set -euo pipefail

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2s}
ORIGIN_PATH=${ORIGIN_PATH:-/}
SCENARIOS=${SCENARIOS:-abpcdef}
STORE=${STORE:-memory}
JOIN_VISITORS=${JOIN_VISITORS:-20000}
IDLE_CONNS=${IDLE_CONNS:-10000}
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
[[ $JOIN_VISITORS =~ ^[0-9]+$ ]] || die "JOIN_VISITORS must be a number (0 to skip)"
[[ $IDLE_CONNS =~ ^[0-9]+$ ]] || die "IDLE_CONNS must be a number (0 to skip)"
case $STORE in
memory | redis) STORES=("$STORE") ;;
both) STORES=(memory redis) ;;
*) die "STORE must be memory, redis or both (got '$STORE')" ;;
esac
[[ $SCENARIOS =~ [cdef] ]] || [[ $STORE == memory ]] ||
    die "STORE=$STORE needs at least one waitroom scenario (c-f) in SCENARIOS"
# abandon_after of the bench room, in seconds (see the header: the poll path's settling time).
ABANDON_S=10

# ---------------------------------------------------------------- 1. tools and binary
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v ss >/dev/null 2>&1 || missing+=(iproute2)
if [[ $STORE != memory ]]; then
    { command -v redis-server && command -v redis-cli; } >/dev/null 2>&1 || missing+=(redis-server)
fi
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if ((JOIN_VISITORS > 0 || IDLE_CONNS > 0)); then
    command -v python3 >/dev/null 2>&1 || die "JOIN_VISITORS/IDLE_CONNS need python3 (or set them to 0)"
fi
CLIENTS="$ROOT/load/bench_clients.py"

# Idle connections need file descriptors: in this shell (inherited by the proxies) and in nginx.
if ((IDLE_CONNS > 0)); then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] && hard=$((IDLE_CONNS * 2 + 4096))
    ulimit -n "$hard" 2>/dev/null || true
    (($(ulimit -n) >= IDLE_CONNS + 1024)) ||
        die "open-file limit $(ulimit -n) is too low for IDLE_CONNS=$IDLE_CONNS (raise ulimit -Hn or lower IDLE_CONNS)"
fi
NGINX_CONNS=$((IDLE_CONNS + 1024 > 4096 ? IDLE_CONNS + 1024 : 4096))

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

# (g) alone: nothing else of this script is needed.
if [[ $SCENARIOS == g ]]; then
    BIN=$BIN THREADS=$THREADS exec "$ROOT/load/open_pages.sh"
fi

# Other work on the machine skews every number: note the load, warn when it is high.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_BEFORE%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    log "warning: load average is $LOAD_BEFORE on $(nproc) CPUs: other work will skew the results"
fi

# ---------------------------------------------------------------- process bookkeeping
TMP=$(mktemp -d "${TMPDIR:-/tmp}/waitroom-bench.XXXXXX")
WRK_PID=""     # the running load client (wrk or bench_clients.py), if any
FAILED=1


# shellcheck source=lib/servers.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/servers.sh"
if [[ $SCENARIOS == *p* ]]; then
    bare_pingora_bin "$TARGET_DIR"
fi

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [[ -n $WRK_PID ]] && stop_pid "$WRK_PID" TERM
    stop_servers
    keep_or_remove_tmp bench "$FAILED" "$KEEP_TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- helpers


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
KB_BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')

nginx_conf() { # name server-block
    local name=$1 server=$2
    mkdir -p "$TMP/$name"
    # worker_connections also covers IDLE_CONNS idle connections landing on one worker.
    cat >"$TMP/$name/nginx.conf" <<NGINX
worker_processes $THREADS;
worker_rlimit_nofile $((NGINX_CONNS + 1024));
daemon off;
master_process on;
pid $TMP/$name/nginx.pid;
error_log $TMP/$name.log warn;
events { worker_connections $NGINX_CONNS; }
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
NGINX
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

ORIGIN_URL="http://127.0.0.1:$ORIGIN_PORT$ORIGIN_PATH"
PROXY_URL="http://127.0.0.1:$NGINX_PROXY_PORT$ORIGIN_PATH"

fetch "$ORIGIN_URL"
[[ $STATUS == 200 ]] || die "origin answers $STATUS"
ORIGIN_BODY=$BODY

WR_JWT_SECRET=${WR_JWT_SECRET:-$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')}
WR_ADMIN_TOKEN=${WR_ADMIN_TOKEN:-$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')}
((${#WR_JWT_SECRET} >= 32 && ${#WR_ADMIN_TOKEN} >= 32)) || die "WR_JWT_SECRET/WR_ADMIN_TOKEN need >= 32 bytes"

# ---------------------------------------------------------------- 4. redis-server (STORE=redis|both)
REDIS_PORT=""
REDIS_PID=""
start_redis() {
    free_port REDIS_PORT
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --maxmemory-policy noeviction >"$TMP/redis.log" 2>&1 &
    PIDS+=("$!:TERM")
    REDIS_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server exited at start; see $TMP/redis.log"
        [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && return 0
        sleep 0.1
    done
    die "redis-server does not answer on 127.0.0.1:$REDIS_PORT; see $TMP/redis.log"
}
rcli() { redis-cli -p "$REDIS_PORT" "$@"; }
redis_used_memory() { rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
# Commands the Lua scripts run inside Redis (commandstats counts those too, one per redis.call).
LUA_CMDS=" $(cat "$ROOT"/src/store/lua/*.lua 2>/dev/null |
    grep -o "redis\.p\?call(['\"][A-Za-z]*" | sed "s/.*['\"]//" | tr '[:upper:]' '[:lower:]' | sort -u | xargs) "
# Calls since the last CONFIG RESETSTAT, without the bench's own CONFIG and INFO:
# "all evalsha client", all = every cmdstat_* (commands run inside scripts included),
# client = EVALSHA plus every command the scripts never run: about one per network round trip.
redis_calls() { # [file to keep the raw commandstats in]
    rcli INFO commandstats | tr -d '\r' | tee "${1:-/dev/null}" | awk -F'[:=,]' -v lua="$LUA_CMDS" '
        /^cmdstat_/ { name = substr($1, 9); sub(/\|.*/, "", name)
                      if (name == "config" || name == "info") next
                      total += $3; if (name == "evalsha") evalsha += $3
                      if (index(lua, " " name " ") == 0) client += $3 }
        END { print total + 0, evalsha + 0, client + 0 }'
}

# ---------------------------------------------------------------- 5. waitroom-proxy, one per store
# Starts a fresh proxy for the store; sets WR_PID, WR_PORT, ADMIN_PORT, WR_URL, WR_STARTED.
start_waitroom() { # store
    local store=$1 store_conf
    free_port WR_PORT
    free_port ADMIN_PORT
    if [[ $store == redis ]]; then
        [[ -n $REDIS_PID ]] || start_redis
        store_conf="backend = \"redis\"
url = \"redis://127.0.0.1:$REDIS_PORT\""
    else
        store_conf='backend = "memory"'
    fi
    cat >"$TMP/waitroom-$store.toml" <<CONF
[listen]
address = "127.0.0.1:$WR_PORT"
threads = $THREADS

[origin]
address = "127.0.0.1:$ORIGIN_PORT"

[room]
id = "bench"
name = "Bench drop"
# Everyone fits until the script lowers total_active_users live to 1.
total_active_users = 1000000
new_users_per_minute = 1000000
burst = 1000000
# 1 h: no pass renewal (re-signing after a tenth of the session) during a run.
session_duration = "1h"
# 10 s: the poll path settles abandon_after after the proxy first sees the store's epoch (every
# poll is exact before); the script waits for that before (d). Set to 1h live before part 3/(f).
abandon_after = "${ABANDON_S}s"
bypass = []

[pass]
cookie_secure = false
# wrk asks with one pass tens of thousands of times a second: far over what one person asks, so
# the per-pass rate would refuse it. Set out of reach rather than off, so that the per-pass
# accounting (issue 22) is part of what the admitted path costs here.
max_requests_per_minute = 1000000000

[store]
$store_conf

[admin]
address = "127.0.0.1:$ADMIN_PORT"

# Like the nginx proxy's access_log off: a line per request is a write per request.
[log]
access = false

# One machine plays the whole crowd from one address: the per-address limit on new tickets
# would refuse it. Off here; on (the defaults) in front of a real shop.
[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
CONF
    WR_JWT_SECRET=$WR_JWT_SECRET WR_ADMIN_TOKEN=$WR_ADMIN_TOKEN RUST_LOG=${RUST_LOG:-info} \
        "$BIN" --config "$TMP/waitroom-$store.toml" >"$TMP/waitroom-$store.log" 2>&1 &
    PIDS+=("$!:INT")
    WR_PID=$!
    wait_listening "$WR_PORT" "waitroom-$store" "$WR_PID"
    wait_listening "$ADMIN_PORT" "waitroom-$store" "$WR_PID"
    WR_STARTED=$(date +%s.%N)
    WR_URL="http://127.0.0.1:$WR_PORT$ORIGIN_PATH"
}

admin_put() { # json
    fetch "http://127.0.0.1:$ADMIN_PORT/admin/config" -X PUT \
        -H "Authorization: Bearer $WR_ADMIN_TOKEN" -H 'Content-Type: application/json' --data "$1"
    [[ $STATUS == 200 ]] || die "PUT /admin/config $1 answered $STATUS: $BODY"
}
queue_length() {
    fetch "http://127.0.0.1:$ADMIN_PORT/admin/state" -H "Authorization: Bearer $WR_ADMIN_TOKEN"
    [[ $STATUS == 200 ]] || die "GET /admin/state answered $STATUS"
    sed -n 's/.*"queue_length":\([0-9]*\).*/\1/p' <<<"$BODY"
}

# A pass (the first visitor, admitted), then a full room (total_active_users 1).
pass_and_full_room() {
    fetch "$WR_URL"
    [[ $STATUS == 200 && $BODY == "$ORIGIN_BODY" ]] ||
        die "first visitor was not admitted to the origin (status $STATUS, body: ${BODY:0:200})"
    PASS=$(cookie_from_headers)
    [[ -n $PASS ]] || die "no waitroom= pass cookie on the first visitor's response"
    admin_put '{"total_active_users": 1}'
}

new_ticket() { # a new visitor in the full room: sets TICKET
    fetch "$WR_URL" -H 'Accept: application/json'
    [[ $STATUS == 200 && $BODY == *'"inWaitingRoom":true'* ]] ||
        die "a new visitor in a full room was not queued (status $STATUS, body: ${BODY:0:200})"
    TICKET=$(cookie_from_headers)
    [[ -n $TICKET ]] || die "no waitroom= ticket cookie for the queued visitor"
}

# The poll path answers from the ticket only once the proxy has known the store's epoch for an
# abandon_after (plus a loop tick and some margin).
settle() {
    local left
    left=$(awk -v s="$WR_STARTED" -v now="$(date +%s.%N)" -v a="$ABANDON_S" \
        'BEGIN { d = s + a + 1.5 - now; if (d > 0) printf "%.1f", d; else print 0 }')
    if [[ $left != 0 ]]; then
        log "waiting ${left}s: the poll path settles abandon_after (${ABANDON_S}s) after the proxy starts"
        sleep "$left"
    fi
}

# wrk cookie jar for (d)/(e): every connection sends the newest waitroom= cookie the proxy set
# (one visitor's tabs); done() prints it ("ticket: ...") and how often it changed.
cat >"$TMP/ticket-jar.lua" <<'LUA'
cookie = nil
renewals = 0
local req = nil
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) cookie = args[1] end
function request()
    if not req then
        wrk.headers["Cookie"] = "waitroom=" .. cookie
        req = wrk.format()
    end
    return req
end
function response(status, headers, body)
    local sc = headers["set-cookie"] or headers["Set-Cookie"]
    if sc then
        local v = sc:match("^%s*waitroom=([^;]*)")
        if v and v ~= "" and v ~= cookie then
            cookie = v
            renewals = renewals + 1
            req = nil
        end
    end
end
function done(summary, latency, requests)
    for _, t in ipairs(threads) do
        io.write("ticket: " .. tostring(t:get("cookie")) .. "\n")
        io.write("ticket renewals: " .. tostring(t:get("renewals")) .. "\n")
    end
end
LUA

# ---------------------------------------------------------------- 6. scenarios
SCEN_NAMES=(
    [0]="(a) origin direct (nginx static)"
    [1]="(b) nginx reverse proxy"
    [2]="(c) waitroom admitted (pass cookie -> origin)"
    [3]="(d) waitroom poll, JSON (ticket cookie)"
    [4]="(e) waitroom poll, HTML page (ticket cookie)"
    [5]="(f) waitroom new visitor (no cookie, joins line)"
    [6]="(p) bare Pingora proxy (examples/bare_pingora.rs)"
)
# Results by key: "0", "1" for the nginx rows, "<index>:<store>" for the waitroom rows.
declare -A RPS P50 P99 ERRS CPU_US REDIS_CPU_US TOTAL RCALLS REVALSHA RCLIENT LOADAVG
ROWS=()
CLK_TCK=$(getconf CLK_TCK)
WRK_TAIL=() # script arguments after the URL (the ticket for the cookie jar)

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
per_req_us() { # ticks requests
    awk -v t="$1" -v hz="$CLK_TCK" -v n="${2:-0}" \
        'BEGIN { if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "—" }'
}

run_wrk() { # out-file url [wrk args...]
    local out=$1 url=$2
    shift 2
    wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --timeout 5s --latency "$@" "$url" \
        ${WRK_TAIL[@]+"${WRK_TAIL[@]}"} >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || die "wrk failed: $(cat "$out")"
    WRK_PID=""
}

warm_up() { # url [wrk args...]
    [[ $WARMUP =~ ^0+[smh]?$ ]] && return 0
    local url=$1
    shift
    wrk -t1 -c"$CONNECTIONS" -d"$WARMUP" --timeout 5s "$@" "$url" \
        ${WRK_TAIL[@]+"${WRK_TAIL[@]}"} >/dev/null 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || true
    WRK_PID=""
}

scenario() { # key index url check-fn "server pids" [wrk args...]
    local key=$1 i=$2 url=$3 check=$4 pids=$5
    shift 5
    local name=${SCEN_NAMES[i]}
    local store=${key#*:}
    [[ $key == *:* ]] || store=""
    local out="$TMP/wrk-${key/:/-}.txt"
    "$check" || die "$name: the check request did not hit the intended path"
    log "$name${store:+ [$store]}: ${DURATION} x ${CONNECTIONS} connections (load $(cut -d' ' -f1 /proc/loadavg))"
    warm_up "$url" "$@"
    local ticks0 ticks1 rticks0=0 rticks1=0 total
    local redis=0
    [[ $store == redis ]] && redis=1
    if ((redis)); then
        rcli CONFIG RESETSTAT >/dev/null
        rticks0=$(cpu_ticks "$REDIS_PID")
    fi
    # shellcheck disable=SC2086 # a list of pids
    ticks0=$(cpu_ticks $pids)
    run_wrk "$out" "$url" "$@"
    # shellcheck disable=SC2086
    ticks1=$(cpu_ticks $pids)
    if ((redis)); then
        rticks1=$(cpu_ticks "$REDIS_PID")
        local calls evalsha client
        read -r calls evalsha client < <(redis_calls "$TMP/commandstats-${key/:/-}.txt")
        RCALLS[$key]=$calls
        REVALSHA[$key]=$evalsha
        RCLIENT[$key]=$client
    fi
    total=$(awk '/ requests in / { print $1 }' "$out")
    local rps p50 p99 non2xx sock
    rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")
    p50=$(awk '$1 == "50%" { print $2 }' "$out")
    p99=$(awk '$1 == "99%" { print $2 }' "$out")
    [[ -n $rps && -n $p50 && -n $p99 ]] || die "cannot parse wrk output of $name: $(cat "$out")"
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    sock=$(awk '/Socket errors:/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i; print n + 0 }' "$out")
    ROWS+=("$key")
    RPS[$key]=$rps
    P50[$key]=$(to_ms "$p50")
    P99[$key]=$(to_ms "$p99")
    ERRS[$key]=$((${non2xx:-0} + ${sock:-0}))
    TOTAL[$key]=${total:-0}
    CPU_US[$key]=$(per_req_us $((ticks1 - ticks0)) "$total")
    ((redis)) && REDIS_CPU_US[$key]=$(per_req_us $((rticks1 - rticks0)) "$total")
    LOADAVG[$key]=$(cut -d' ' -f1 /proc/loadavg)
    # The cookie jar's last ticket (the one the run started with may have expired).
    local last
    last=$(awk '$1 == "ticket:" { print $2 }' "$out" | tail -n1)
    [[ -n $last && $last != nil ]] && TICKET=$last
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
check_bare() {
    fetch "$BARE_URL"
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

rss_kb() { # pids -> summed VmRSS in kB
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status"))); done
    echo "$t"
}

# ---------------------------------------------------------------- part 3: bytes per waiting visitor
# "key bytes" for every Redis key, sorted, in one round trip; the heartbeat shards
# (…:beats:<n>) summed as one, …:beats:*.
key_sizes() {
    local keys
    keys=$(rcli --scan | sort)
    [[ -n $keys ]] || return 0
    paste -d' ' <(echo "$keys") <(sed 's/.*/MEMORY USAGE & SAMPLES 0/' <<<"$keys" | rcli) |
        awk '{ k = $1; sub(/:beats:[0-9]+$/, ":beats:*", k); b[k] += $2 }
            END { for (k in b) print k, b[k] }' | sort
}
declare -A JOINED QBEFORE QAFTER RMEM_D PRSS_D JOIN_RATE RKEYS
join_visitors() { # store
    local store=$1
    local out="$TMP/join-$store.txt" q0 q1 m0=0 m1=0 r0 r1 k
    local -A key0
    # Settle pending state, then measure.
    sleep 1
    q0=$(queue_length)
    r0=$(rss_kb "$WR_PID")
    if [[ $store == redis ]]; then
        m0=$(redis_used_memory)
        while read -r k b; do key0[$k]=$b; done < <(key_sizes)
    fi
    log "part 3 [$store]: $JOIN_VISITORS new visitors join the full room"
    python3 "$CLIENTS" join --port "$WR_PORT" --count "$JOIN_VISITORS" --path "$ORIGIN_PATH" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || die "join failed: $(cat "$out")"
    WRK_PID=""
    sleep 1 # a loop tick or more: the room view (queue_length) catches up
    q1=$(queue_length)
    r1=$(rss_kb "$WR_PID")
    JOINED[$store]=$(awk '{ print $2 }' "$out")
    JOIN_RATE[$store]=$(awk '{ print $8 }' "$out")
    QBEFORE[$store]=$q0
    QAFTER[$store]=$q1
    PRSS_D[$store]=$(((r1 - r0) * 1024))
    if [[ $store == redis ]]; then
        m1=$(redis_used_memory)
        RMEM_D[$store]=$((m1 - m0))
        local parts=() b1 n=$((q1 - q0))
        while read -r k b1; do
            ((b1 - ${key0[$k]:-0} > 1024)) &&
                parts+=("\`${k}\` $(awk -v d=$((b1 - ${key0[$k]:-0})) -v n="$n" 'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }')")
        done < <(key_sizes)
        local joined
        joined=$(
            IFS=,
            echo "${parts[*]}"
        )
        RKEYS[$store]=${joined//,/, }
    fi
}

# ---------------------------------------------------------------- part 4: RSS per idle connection
declare -A IDLE_OPEN IDLE_STILL RSS0 RSS1 IDLE_NOTE
IDLE_ROWS=()
idle_conns() { # label port cookie pids...
    local label=$1 port=$2 cookie=$3
    shift 3
    local out="$TMP/idle-${label// /_}.txt" i ready=""
    RSS0[$label]=$(rss_kb "$@")
    log "part 4: $IDLE_CONNS idle keep-alive connections to $label"
    python3 "$CLIENTS" idle --port "$port" --count "$IDLE_CONNS" --cookie "$cookie" \
        --path "$ORIGIN_PATH" >"$out" 2>&1 &
    WRK_PID=$!
    for ((i = 0; i < 1200; i++)); do
        ready=$(sed -n 's/^ready //p' "$out")
        [[ -n $ready ]] && break
        kill -0 "$WRK_PID" 2>/dev/null || die "idle connections to $label: $(cat "$out")"
        sleep 0.1
    done
    [[ -n $ready ]] || die "idle connections to $label not open after 120 s"
    sleep 2 # let the server finish with the last ones
    RSS1[$label]=$(rss_kb "$@")
    kill -USR1 "$WRK_PID"
    wait "$WRK_PID" || true
    WRK_PID=""
    IDLE_OPEN[$label]=$(awk '{ print $2 }' <<<"$ready")
    IDLE_STILL[$label]=$(sed -n 's/^still_open //p' "$out")
    IDLE_NOTE[$label]="failed $(awk '{ print $4 }' <<<"$ready"), statuses $(awk '{ print $6 }' <<<"$ready")"
    IDLE_ROWS+=("$label")
}

# ---------------------------------------------------------------- the runs
if [[ $SCENARIOS == *a* ]]; then
    scenario 0 0 "$ORIGIN_URL" check_origin "$(nginx_workers "$ORIGIN_PID")"
fi
if [[ $SCENARIOS == *b* ]]; then
    scenario 1 1 "$PROXY_URL" check_proxy "$(nginx_workers "$NGINX_PROXY_PID")"
fi
if [[ $SCENARIOS == *p* ]]; then
    free_port BARE_PORT
    start_bare_pingora "$BARE_PORT" "$ORIGIN_PORT" "$THREADS"
    BARE_URL="http://127.0.0.1:$BARE_PORT$ORIGIN_PATH"
    scenario 6 6 "$BARE_URL" check_bare "$BARE_PID"
    stop_server "$BARE_PID"
fi

declare -A BG_RATE BG_EVALSHA_RATE BG_CLIENT_RATE
FIRST_STORE=${STORES[0]}
for store in "${STORES[@]}"; do
    log "---- store: $store"
    start_waitroom "$store"
    pass_and_full_room
    if [[ $SCENARIOS == *c* ]]; then
        scenario "2:$store" 2 "$WR_URL" check_admitted "$WR_PID" -H "Cookie: waitroom=$PASS"
    fi
    if [[ $SCENARIOS == *[de]* ]]; then
        settle
        if [[ $store == redis ]]; then
            # The admission loop's own Redis traffic, with nobody polling (5 s).
            rcli CONFIG RESETSTAT >/dev/null
            sleep 5
            read -r c e t < <(redis_calls "$TMP/commandstats-idle-$store.txt")
            BG_RATE[$store]=$(awk -v c="$c" 'BEGIN { printf "%.1f", c / 5 }')
            BG_EVALSHA_RATE[$store]=$(awk -v c="$e" 'BEGIN { printf "%.1f", c / 5 }')
            BG_CLIENT_RATE[$store]=$(awk -v c="$t" 'BEGIN { printf "%.1f", c / 5 }')
        fi
    fi
    WRK_TAIL=()
    if [[ $SCENARIOS == *d* ]]; then
        new_ticket
        WRK_TAIL=("$TICKET")
        scenario "3:$store" 3 "$WR_URL" check_poll_json "$WR_PID" \
            -s "$TMP/ticket-jar.lua" -H 'Accept: application/json'
        WRK_TAIL=()
    fi
    if [[ $SCENARIOS == *e* ]]; then
        new_ticket
        WRK_TAIL=("$TICKET")
        scenario "4:$store" 4 "$WR_URL" check_poll_html "$WR_PID" \
            -s "$TMP/ticket-jar.lua" -H 'Accept: text/html'
        WRK_TAIL=()
    fi
    # From here on nobody in the line may be abandoned during a measurement.
    admin_put '{"abandon_after": "1h"}'
    if ((JOIN_VISITORS > 0)); then
        join_visitors "$store"
    fi
    # (f) fills the line with hundreds of thousands of tickets.
    if [[ $SCENARIOS == *f* ]]; then
        scenario "5:$store" 5 "$WR_URL" check_newcomer "$WR_PID" -H 'Accept: text/html'
    fi
    # Idle connections last: the memory they free would hide what part 3 adds to the RSS.
    if [[ $store == "$FIRST_STORE" ]] && ((IDLE_CONNS > 0)); then
        idle_conns "waitroom-proxy ($store store)" "$WR_PORT" "$PASS" "$WR_PID"
        # shellcheck disable=SC2046 # a list of pids
        idle_conns "nginx reverse proxy (master + $THREADS workers)" "$NGINX_PROXY_PORT" "" \
            "$NGINX_PROXY_PID" $(nginx_workers "$NGINX_PROXY_PID")
    fi
    stop_server "$WR_PID"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- 7. the tables
ratio() { # a b -> a/b with 2 decimals, or an em dash
    [[ -n ${1:-} && -n ${2:-} && $1 != — && $2 != — ]] || { echo "—"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "—"; else printf "%.2f", a / b }'
}
sum_us() { # a b -> a+b, or an em dash
    [[ -n ${1:-} && -n ${2:-} && $1 != — && $2 != — ]] || { echo "—"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a + b }'
}
HAS_REDIS=0
[[ $STORE != memory ]] && HAS_REDIS=1

RHEAD="" RSEP=""
if ((HAS_REDIS)); then RHEAD=" redis-server CPU µs/req |" RSEP="--:|"; fi
TABLE="| scenario | requests/s | p50 ms | p99 ms | × nginx proxy | × waitroom admitted | server CPU µs/req |$RHEAD errors | load 1m |
|---|--:|--:|--:|--:|--:|--:|$RSEP--:|--:|"
for key in "${ROWS[@]}"; do
    i=${key%%:*}
    store=${key#*:}
    name=${SCEN_NAMES[i]}
    admitted=""
    if [[ $key == *:* ]]; then
        name+=" [$store]"
        admitted=${RPS[2:$store]:-}
    fi
    rcol=""
    if ((HAS_REDIS)); then rcol=" ${REDIS_CPU_US[$key]:-—} |"; fi
    TABLE+="
| $name | ${RPS[$key]} | ${P50[$key]} | ${P99[$key]} | $(ratio "${RPS[$key]}" "${RPS[1]:-}") | $(ratio "${RPS[$key]}" "$admitted") | ${CPU_US[$key]} |$rcol ${ERRS[$key]} | ${LOADAVG[$key]} |"
done

# The admitted path against its floor, the bare Pingora proxy: CPU per request, same run.
BARE_LINE=""
if [[ -n ${CPU_US[6]:-} ]]; then
    for store in "${STORES[@]}"; do
        [[ -n ${CPU_US[2:$store]:-} ]] || continue
        BARE_LINE+="- admitted path [$store] / bare Pingora, server CPU per request: ${CPU_US[2:$store]} / ${CPU_US[6]} µs = **$(ratio "${CPU_US[2:$store]}" "${CPU_US[6]}")x** (requests/s $(ratio "${RPS[2:$store]}" "${RPS[6]}")x)
"
    done
fi

# Part 1: redis/memory side by side.
RATIO_TABLE=""
if [[ $STORE == both ]]; then
    RATIO_TABLE="| scenario | memory req/s | redis req/s | redis/memory req/s | memory: proxy CPU µs/req | redis: proxy CPU µs/req | redis: redis-server CPU µs/req | redis: proxy + redis-server CPU / memory |
|---|--:|--:|--:|--:|--:|--:|--:|"
    for i in 5 3 2; do
        m="$i:memory" r="$i:redis"
        [[ -n ${RPS[$m]:-} && -n ${RPS[$r]:-} ]] || continue
        RATIO_TABLE+="
| ${SCEN_NAMES[i]} | ${RPS[$m]} | ${RPS[$r]} | $(ratio "${RPS[$r]}" "${RPS[$m]}") | ${CPU_US[$m]} | ${CPU_US[$r]} | ${REDIS_CPU_US[$r]:-—} | $(ratio "$(sum_us "${CPU_US[$r]}" "${REDIS_CPU_US[$r]:-}")" "${CPU_US[$m]}") |"
    done
fi

# Part 2: Redis commands per request.
CALLS_TABLE=""
CALLS_NOTES=""
per() { awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.4f", c / n; else print "—" }'; }
if ((HAS_REDIS)); then
    dsec=$(awk -v d="$DURATION" 'BEGIN { n = d + 0; u = d; sub(/^[0-9]+/, "", u)
        if (u == "m") n *= 60; else if (u == "h") n *= 3600; print n }')
    CALLS_TABLE="| scenario [redis] | requests (wrk) | all calls | all calls/request | EVALSHA | EVALSHA/request | client commands/request | EVALSHA/request above the idle loop |
|---|--:|--:|--:|--:|--:|--:|--:|"
    for i in 2 3 4 5; do
        k="$i:redis"
        [[ -n ${RCALLS[$k]:-} ]] || continue
        net="—"
        [[ -n ${BG_EVALSHA_RATE[redis]:-} ]] &&
            net=$(per "$(awk -v c="${REVALSHA[$k]}" -v r="${BG_EVALSHA_RATE[redis]}" -v s="$dsec" \
                'BEGIN { print c - r * s }')" "${TOTAL[$k]}")
        CALLS_TABLE+="
| ${SCEN_NAMES[i]} | ${TOTAL[$k]} | ${RCALLS[$k]} | $(per "${RCALLS[$k]}" "${TOTAL[$k]}") | ${REVALSHA[$k]} | $(per "${REVALSHA[$k]}" "${TOTAL[$k]}") | $(per "${RCLIENT[$k]}" "${TOTAL[$k]}") | $net |"
    done
    CALLS_NOTES="- Window: CONFIG RESETSTAT after the warm-up to INFO commandstats right after the timed ${DURATION} run (the bench's own CONFIG/INFO left out); everything the proxy sent in that window counts, its admission loop included. *all calls* = the sum of every cmdstat_*, which in Redis also counts each redis.call made inside a Lua script; *client commands* = EVALSHA plus the commands the scripts never run (PING, HGET, ...): about one per network round trip."
    [[ -n ${BG_RATE[redis]:-} ]] && CALLS_NOTES+="
- Idle loop, nobody polling, 5 s before (d): ${BG_RATE[redis]} calls/s, ${BG_EVALSHA_RATE[redis]} EVALSHA/s, ${BG_CLIENT_RATE[redis]} client commands/s (a loop tick every 200 ms: lease, admission round, room view; revocation reload every second). The last column subtracts that EVALSHA rate × ${dsec} s."
    CALLS_NOTES+="
- (d)/(e) measure the steady-state poll path: the run starts once the proxy has known the store's epoch for abandon_after (${ABANDON_S}s; before that every poll is an exact look-up, one EVALSHA each). All $CONNECTIONS connections share one ticket (one visitor's tabs) whose re-issued cookie wrk keeps. Polls are then answered from the ticket and the room view; the loop sends the polled ids in one keep-alive batch per tick; one exact look-up (one EVALSHA) falls due per ticket every min(120 s, abandon_after/2) = 5 s, plus the polls already in flight at that moment (up to ~$CONNECTIONS). So these figures are the floor: a real visitor polls every refresh_interval (20 s by default) and has an exact look-up every 2 min (abandon_after 5 min), i.e. about 1 poll in 6 costs one EVALSHA.
- (c): a pass is checked locally (signature, expiry, revocation list): Redis sees only the loop. (f), room full: no direct-admission attempt while the room view shows a line; concurrent joins go to Redis as one join script call per batch, so EVALSHA/request is about 1 / the batch size."
fi

# Part 3: bytes per waiting visitor.
JOIN_TABLE=""
if ((JOIN_VISITORS > 0)); then
    JOIN_TABLE="| store | visitors joined | queue length before → after | joins/s | Redis used_memory Δ | Redis bytes/waiting visitor | proxy RSS Δ | proxy RSS bytes/waiting visitor |
|---|--:|--:|--:|--:|--:|--:|--:|"
    for store in "${STORES[@]}"; do
        [[ -n ${QAFTER[$store]:-} ]] || continue
        n=$((QAFTER[$store] - QBEFORE[$store]))
        rm="—" rb="—"
        if [[ -n ${RMEM_D[$store]:-} ]]; then
            rm=${RMEM_D[$store]}
            rb=$(awk -v d="$rm" -v n="$n" 'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }')
        fi
        JOIN_TABLE+="
| $store | ${JOINED[$store]} | ${QBEFORE[$store]} → ${QAFTER[$store]} | ${JOIN_RATE[$store]} | $rm | $rb | ${PRSS_D[$store]} | $(awk -v d="${PRSS_D[$store]}" -v n="$n" 'BEGIN { printf "%.0f", (n > 0 ? d / n : 0) }') |"
    done
    JOIN_NOTES="- The room is full (total_active_users 1) and abandon_after is 1h, so every new visitor stays in the line; bytes per visitor = Δ / Δ queue length (Redis: INFO memory used_memory; proxy: VmRSS, a lower bound: the allocator first reuses memory freed by the earlier scenarios; with Redis the proxy keeps nothing per waiting visitor)."
    [[ -n ${RKEYS[redis]:-} ]] && JOIN_NOTES+="
- Redis bytes per waiting visitor by key (MEMORY USAGE SAMPLES 0, Δ / Δ queue length): ${RKEYS[redis]}."
fi

# Part 4: RSS per idle connection.
IDLE_TABLE=""
if ((${#IDLE_ROWS[@]})); then
    IDLE_TABLE="| server | connections open | still open at the end | RSS before MiB | RSS with them open MiB | Δ RSS MiB | bytes/connection |
|---|--:|--:|--:|--:|--:|--:|"
    for label in "${IDLE_ROWS[@]}"; do
        IDLE_TABLE+="
| $label | ${IDLE_OPEN[$label]} | ${IDLE_STILL[$label]:-?} | $(awk -v k="${RSS0[$label]}" 'BEGIN { printf "%.1f", k / 1024 }') | $(awk -v k="${RSS1[$label]}" 'BEGIN { printf "%.1f", k / 1024 }') | $(awk -v a="${RSS0[$label]}" -v b="${RSS1[$label]}" 'BEGIN { printf "%.1f", (b - a) / 1024 }') | $(awk -v a="${RSS0[$label]}" -v b="${RSS1[$label]}" -v n="${IDLE_OPEN[$label]}" 'BEGIN { printf "%.0f", (n > 0 ? (b - a) * 1024 / n : 0) }') |"
    done
    IDLE_NOTES="- One HTTP/1.1 keep-alive request per connection (waitroom: with the pass cookie, forwarded to the origin), response read, socket left open; RSS from /proc/PID/status VmRSS (nginx: master + workers summed) 2 s after the last one opened; waitroom-proxy measured after its scenarios, so its RSS before includes the tickets of (f). Clients: $(for l in "${IDLE_ROWS[@]}"; do echo -n "$l: ${IDLE_NOTE[$l]}; "; done)"
fi

CPU=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || REV+=" (+ uncommitted changes in src/)"
STAMP=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$ROOT/load/results"
RESULT="$ROOT/load/results/bench-$STAMP.md"
STORE_LINE="store: ${STORES[*]}"
((HAS_REDIS)) && STORE_LINE+=" (redis: own redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$REDIS_PORT, --save '' --appendonly no)"
REPORT=$(
    echo "- $STORE_LINE"
    echo
    echo "### Scenarios"
    echo
    echo "$TABLE"
    if [[ -n $BARE_LINE ]]; then
        echo
        echo -n "$BARE_LINE"
    fi
    if [[ -n $RATIO_TABLE ]]; then
        echo
        echo "### Redis / memory"
        echo
        echo "$RATIO_TABLE"
    fi
    if [[ -n $CALLS_TABLE ]]; then
        echo
        echo "### Redis calls per request"
        echo
        echo "$CALLS_TABLE"
        echo
        echo "$CALLS_NOTES"
    fi
    if [[ -n $JOIN_TABLE ]]; then
        echo
        echo "### Memory per waiting visitor"
        echo
        echo "$JOIN_TABLE"
        echo
        echo "$JOIN_NOTES"
    fi
    if [[ -n $IDLE_TABLE ]]; then
        echo
        echo "### Memory per idle connection ($IDLE_CONNS)"
        echo
        echo "$IDLE_TABLE"
        echo
        echo "$IDLE_NOTES"
    fi
)
{
    echo "## waitroom benchmark $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $CPU, $(uname -sr); load average before the run: $LOAD_BEFORE, after: $LOAD_AFTER"
    echo "- knobs: DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS WARMUP=$WARMUP ORIGIN_PATH=$ORIGIN_PATH STORE=$STORE JOIN_VISITORS=$JOIN_VISITORS IDLE_CONNS=$IDLE_CONNS"
    echo "- wrk -t1 -c$CONNECTIONS -d$DURATION --latency on 127.0.0.1; load generator, proxies, origin (and Redis) share the machine"
    echo "- waitroom $REV, binary $BIN ($(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')); $("$NGINX" -v 2>&1)"
    echo "- ratios: requests/s relative to the nginx proxy row and to the waitroom admitted row (same store)"
    echo "- server CPU µs/req: user + system CPU of the server under test only (nginx workers, or the"
    echo "  waitroom-proxy process; not the origin behind a proxy) over the timed run, per request;"
    echo "  redis-server CPU µs/req: the Redis process over the same run; load 1m: load average after the run"
    echo "- (d)/(e): steady-state poll path, see the notes under \"Redis calls per request\" and the script's header"
    echo "$REPORT"
    echo
} >>"$RESULT"

echo
echo "$REPORT"
echo
log "load average before: $LOAD_BEFORE, after: $LOAD_AFTER"
log "written to ${RESULT#"$ROOT"/}"
if [[ $SCENARIOS == *g* ]]; then
    log "(g) open waiting pages: load/open_pages.sh"
    BIN=$BIN THREADS=$THREADS "$ROOT/load/open_pages.sh"
fi
FAILED=0
