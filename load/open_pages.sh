#!/usr/bin/env bash
# Open waiting pages (issue #13, "Measured, not assumed"): PAGES visitors wait in a full room, each
# with its own ticket and its page's event stream (`GET /__waitroom/events`) open on its own
# connection, as the shipped page keeps it. Measures, in one run:
#
#   1. proxy RSS per idle keep-alive connection: PAGES connections that each asked for a ticket
#      (JSON, no cookie) and stay open; (RSS then - RSS before) / PAGES;
#   2. proxy RSS per open event stream: the same connections, each now holding its stream;
#   3. CPU of IDLE_S seconds while nothing changes (the line does not move: the room is full and
#      nobody leaves; only the 15 s heartbeats): utime + stime from /proc/PID/stat, as % of a
#      core per 10 000 streams;
#   4. push latency: CALL visitors are let in by raising total_active_users live (PATCH
#      /admin/config); from that moment to the event saying "admitted" on each called visitor's
#      stream (p50/p99/max, client clock), the same from the event's own lastUpdated (proxy
#      clock), and to the new position on every other stream;
#   5. nginx holding PAGES idle keep-alive connections (one small answer each), side by side;
#   6. a bare Pingora proxy (examples/bare_pingora.rs: `upstream_peer` only, Pingora's defaults)
#      holding the same PAGES idle keep-alive connections (one request proxied to the origin
#      each): the part of a connection's memory that is Pingora's own.
#
#   load/open_pages.sh                                    # 10 000 pages, the release build
#   PAGES=18000 BIN=/path/to/waitroom-proxy load/open_pages.sh
#   HEAPTRACK=1 PAGES=2000 load/open_pages.sh             # the proxy under heaptrack (see below)
#
# Knobs (environment):
#   PAGES      open waiting pages (default 10000). The proxy and the client are separate
#              processes, each needs PAGES + a few hundred descriptors under the hard limit.
#   THREADS    waitroom-proxy worker threads and nginx worker processes (default 2)
#   IDLE_S     seconds of the idle CPU measurement (default 60)
#   BASE_S     seconds of the proxy's background CPU measured before any connection, subtracted
#              from the idle streams' (default 20; 0 skips it)
#   CALL       visitors let in for the push latency (default 1000; 0 skips it)
#   NGINX_IDLE 1: also nginx holding PAGES idle connections (default 1)
#   BARE       1: also the bare Pingora proxy holding PAGES idle connections (default 1)
#   BARE_BIN   its binary (default $CARGO_TARGET_DIR/release/examples/bare_pingora; built if
#              missing)
#   HEAPTRACK  1: run the proxy under heaptrack, print the top allocation sites by peak memory
#              (heaptrack_print) into the results; its figures of RSS and CPU are heaptrack's,
#              not the proxy's (default 0)
#   BIN        the proxy binary (default $CARGO_TARGET_DIR/release/waitroom-proxy; built if
#              missing, as bench.sh does)
#   FRESH      1: the tickets are asked for over 8 connections, and each page's stream opens on
#              a connection of its own (nothing else ever asked on it): step 1 then measures
#              the tickets alone, step 2 what an open page costs, connection included (default 0:
#              each stream on its ticket's kept-alive connection, as the shipped page does)
#   TOGETHER   1: each page opens its stream as soon as its ticket came, on the same connection,
#              200 pages at a time, as the shipped page does: step 1 then measures open pages
#              (step 2 finds them open); the Pingora state of a page's first request is freed
#              when its stream is taken by the front door and serves the next pages' (default 0)
#   KEEP_TMP   1: keep the temp dir with configs and logs (default: only on failure)
#
# The room: total_active_users 1 (one visitor admitted first), new_users_per_minute and burst
# 1 000 000 (so that raising total_active_users calls the next CALL visitors in one admission
# round), abandon_after 10m, session_duration 1h, refresh_interval the default 20 s (heartbeat
# every 15 s), keepalive_timeout 10m (the idle connections outlive the measurement),
# listen.max_connections and max_event_streams PAGES + 1000, the per-address limits (tickets,
# streams) off (one machine plays the crowd), access log off. Everything listens on 127.0.0.1; every process
# started here is stopped on exit. Results: load/results/open-pages-<time>.md (git-ignored).
set -euo pipefail

PAGES=${PAGES:-10000}
THREADS=${THREADS:-2}
IDLE_S=${IDLE_S:-60}
BASE_S=${BASE_S:-20}
CALL=${CALL:-1000}
NGINX_IDLE=${NGINX_IDLE:-1}
BARE=${BARE:-1}
HEAPTRACK=${HEAPTRACK:-0}
FRESH=${FRESH:-0}
TOGETHER=${TOGETHER:-0}
KEEP_TMP=${KEEP_TMP:-0}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
die() {
    echo "open_pages: error: $*" >&2
    exit 1
}
log() { echo "open_pages: $(date -u +%H:%M:%S) $*" >&2; }

[[ $PAGES =~ ^[1-9][0-9]*$ ]] || die "PAGES must be a positive integer"
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer"
[[ $IDLE_S =~ ^[0-9]+$ && $BASE_S =~ ^[0-9]+$ ]] || die "IDLE_S and BASE_S must be numbers of seconds"
[[ $CALL =~ ^[0-9]+$ ]] || die "CALL must be a number"
((CALL < PAGES)) || die "CALL must be below PAGES"
for tool in curl python3 ss; do command -v "$tool" >/dev/null || die "needs $tool"; done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
[[ $NGINX_IDLE != 1 || -x $NGINX_BIN ]] || die "needs nginx (or NGINX_IDLE=0)"
[[ $HEAPTRACK != 1 ]] || command -v heaptrack >/dev/null || die "needs heaptrack (Debian package)"

if [[ -z ${BIN:-} ]]; then
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/waitroom-proxy"
    [[ -x $BIN ]] || cargo build --release --bin waitroom-proxy
fi
[[ -x $BIN ]] || die "no proxy binary at $BIN"

# Descriptors: the proxy and the client each need PAGES + a margin.
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=$((PAGES + 4096))
ulimit -n "$hard"
((hard >= PAGES + 300)) || die "hard open-file limit $hard is too low for PAGES=$PAGES"
# Loopback ports: PAGES connections at a time to one address, far below the ephemeral range.
read -r port_lo port_hi </proc/sys/net/ipv4/ip_local_port_range
((port_hi - port_lo > PAGES + 1000)) || die "ephemeral port range $port_lo-$port_hi too small"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/waitroom-pages.XXXXXX")
CLIENT_PID=""
FAILED=1
exec 3>/dev/null
WRAPPER_PID=""

# shellcheck source=lib/servers.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/servers.sh"
if [[ $BARE == 1 ]]; then
    bare_pingora_bin "${CARGO_TARGET_DIR:-$ROOT/target}"
fi

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    exec 3>&- || true
    [[ -n $CLIENT_PID ]] && stop_pid "$CLIENT_PID" TERM 10
    # Under heaptrack the proxy is the wrapper's child: stop it even if it was never found.
    if [[ -n ${WRAPPER_PID:-} ]] && kill -0 "$WRAPPER_PID" 2>/dev/null; then
        for child in $(pgrep -P "$WRAPPER_PID" || true); do stop_pid "$child" INT 10; done
    fi
    stop_servers 10
    keep_or_remove_tmp open_pages "$FAILED" "$KEEP_TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


rss_kb() { # pids -> summed VmRSS in kB
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status"))); done
    echo "$t"
}
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # pids -> utime + stime in clock ticks
    local t=0 p
    for p in "$@"; do t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat"))); done
    echo "$t"
}
fds() { ls "/proc/$1/fd" | wc -l; }
load1() { cut -d' ' -f1 /proc/loadavg; }
kib_per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (n > 0 ? (b - a) / n : 0) }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# ---------------------------------------------------------------- the client
CLIENT_OUT=""
start_client() { # port count out-file
    CLIENT_OUT=$3
    rm -f "$TMP/ctl"
    mkfifo "$TMP/ctl"
    local fresh=()
    [[ $FRESH == 1 && $1 == "$WR_PORT" ]] && fresh=(--fresh)
    [[ $TOGETHER == 1 && $1 == "$WR_PORT" ]] && fresh=(--together)
    python3 "$ROOT/load/open_pages.py" --port "$1" --count "$2" "${fresh[@]}" <"$TMP/ctl" >"$CLIENT_OUT" 2>"$CLIENT_OUT.err" &
    CLIENT_PID=$!
    exec 3>"$TMP/ctl"
}
client_wait() { # prefix [timeout s]: waits for a line starting with prefix; prints it
    local prefix=$1 limit=${2:-600} i line
    for ((i = 0; i < limit * 10; i++)); do
        line=$(grep -m1 "^$prefix" "$CLIENT_OUT" || true)
        if [[ -n $line ]]; then
            echo "$line"
            return 0
        fi
        kill -0 "$CLIENT_PID" 2>/dev/null || die "client exited: $(cat "$CLIENT_OUT" "$CLIENT_OUT.err")"
        sleep 0.1
    done
    die "client: no '$prefix' after ${limit}s: $(tail -3 "$CLIENT_OUT.err")"
}
client_cmd() { # command expected-prefix: sends a command, prints its answer line
    local before
    before=$(grep -c "^$2" "$CLIENT_OUT" || true)
    echo "$1" >&3
    local i
    for ((i = 0; i < 6000; i++)); do
        (($(grep -c "^$2" "$CLIENT_OUT" || true) > before)) && break
        kill -0 "$CLIENT_PID" 2>/dev/null || die "client exited: $(cat "$CLIENT_OUT.err")"
        sleep 0.1
    done
    grep "^$2" "$CLIENT_OUT" | tail -n1
}
stop_client() {
    echo quit >&3 || true
    exec 3>&-
    exec 3>/dev/null
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$CLIENT_PID" 2>/dev/null || break; sleep 0.1; done
    stop_pid "$CLIENT_PID" TERM 10
    wait "$CLIENT_PID" 2>/dev/null || true
    CLIENT_PID=""
}
field() { # line name -> the word after name
    awk -v n="$2" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 1); exit } }' <<<"$1"
}

# ---------------------------------------------------------------- origin (nginx or python)
free_port ORIGIN_PORT
nginx_conf() { # name port conns body
    local name=$1 port=$2 conns=$3
    mkdir -p "$TMP/$name"
    local rlimit=$((conns + 1024))
    ((rlimit > hard)) && rlimit=$hard
    cat >"$TMP/$name/nginx.conf" <<NGINX
worker_processes $THREADS;
worker_rlimit_nofile $rlimit;
daemon off;
master_process on;
pid $TMP/$name/nginx.pid;
error_log $TMP/$name.log warn;
events { worker_connections $conns; }
http {
    access_log off;
    client_body_temp_path $TMP/$name/client_body;
    proxy_temp_path $TMP/$name/proxy;
    fastcgi_temp_path $TMP/$name/fastcgi;
    uwsgi_temp_path $TMP/$name/uwsgi;
    scgi_temp_path $TMP/$name/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 10m;
    server {
        listen 127.0.0.1:$port;
        default_type application/json;
        location / { return 200 '{"ok":true}'; }
    }
}
NGINX
}
start_nginx() { # name port
    "$NGINX_BIN" -p "$TMP/$1" -c "$TMP/$1/nginx.conf" -e "$TMP/$1.log" -t -q ||
        die "nginx config $1 rejected; see $TMP/$1.log"
    "$NGINX_BIN" -p "$TMP/$1" -c "$TMP/$1/nginx.conf" -e "$TMP/$1.log" >"$TMP/$1.out" 2>&1 &
    PIDS+=("$!:TERM")
    LAST_PID=$!
    wait_listening "$2" "$1" "$!" 30
}
nginx_workers() { pgrep -P "$1" | xargs; }

nginx_conf origin "$ORIGIN_PORT" 4096
start_nginx origin "$ORIGIN_PORT"

# ---------------------------------------------------------------- waitroom-proxy
WR_JWT_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')
WR_ADMIN_TOKEN=$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')
free_port WR_PORT
free_port ADMIN_PORT
LIMIT=$((PAGES + 1000))
cat >"$TMP/waitroom.toml" <<CONF
[listen]
address = "127.0.0.1:$WR_PORT"
threads = $THREADS
keepalive_timeout = "10m"
max_connections = $LIMIT
max_event_streams = $LIMIT
# One machine opens every page: the per-address share of streams would refuse all but a few.
max_event_streams_per_ip = 0

[origin]
address = "127.0.0.1:$ORIGIN_PORT"

[room]
id = "pages"
name = "Open pages"
total_active_users = 1
new_users_per_minute = 1000000
burst = 1000000
session_duration = "1h"
abandon_after = "10m"
bypass = []

[pass]
cookie_secure = false

[store]
backend = "memory"

[admin]
address = "127.0.0.1:$ADMIN_PORT"

[log]
access = false

[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
CONF
log "proxy $BIN on 127.0.0.1:$WR_PORT (threads $THREADS, PAGES $PAGES, HEAPTRACK $HEAPTRACK)"
WRAPPER_PID=""
if [[ $HEAPTRACK == 1 ]]; then
    WR_JWT_SECRET=$WR_JWT_SECRET WR_ADMIN_TOKEN=$WR_ADMIN_TOKEN RUST_LOG=warn \
        heaptrack -o "$TMP/heaptrack.waitroom" "$BIN" --config "$TMP/waitroom.toml" >"$TMP/waitroom.log" 2>&1 &
    WRAPPER_PID=$!
    PIDS+=("$WRAPPER_PID:TERM")
    WR_PID=""
    for ((i = 0; i < 300; i++)); do
        WR_PID=$(pgrep -P "$WRAPPER_PID" -x "$(basename "$BIN" | cut -c1-15)" || true)
        [[ -n $WR_PID ]] && break
        kill -0 "$WRAPPER_PID" 2>/dev/null || die "heaptrack exited: $(cat "$TMP/waitroom.log")"
        sleep 0.1
    done
    [[ -n $WR_PID ]] || die "no waitroom-proxy under heaptrack"
    PIDS+=("$WR_PID:INT")
else
    WR_JWT_SECRET=$WR_JWT_SECRET WR_ADMIN_TOKEN=$WR_ADMIN_TOKEN RUST_LOG=warn \
        "$BIN" --config "$TMP/waitroom.toml" >"$TMP/waitroom.log" 2>&1 &
    WR_PID=$!
    PIDS+=("$WR_PID:INT")
fi
wait_listening "$WR_PORT" waitroom "$WR_PID" 30
wait_listening "$ADMIN_PORT" waitroom "$WR_PID" 30
ADMIN="http://127.0.0.1:$ADMIN_PORT"
AUTH="Authorization: Bearer $WR_ADMIN_TOKEN"

# The first visitor takes the room's one place: everyone after waits.
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$WR_PORT/")
[[ $code == 200 ]] || die "first visitor: $code"
state() { curl -sS --max-time 10 -H "$AUTH" "$ADMIN/admin/state"; }
json_num() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -n1; }
sleep 2

declare -A R
R[load0]=$(cut -d' ' -f1-3 /proc/loadavg)
R[rss0]=$(rss_kb "$WR_PID")
R[fd0]=$(fds "$WR_PID")
R[cpu_start]=$(cpu_ticks "$WR_PID")
# The proxy's own background (the admission loop's ticks) with no visitor connected.
if ((BASE_S > 0)); then
    log "0. ${BASE_S}s with no connection: the proxy's background CPU (load $(load1))"
    b0=$(cpu_ticks "$WR_PID")
    bw0=$(date +%s.%N)
    sleep "$BASE_S"
    b1=$(cpu_ticks "$WR_PID")
    bw1=$(date +%s.%N)
    R[base_pct]=$(awk -v t=$((b1 - b0)) -v hz="$CLK_TCK" -v a="$bw0" -v b="$bw1" \
        'BEGIN { printf "%.2f", t / hz / (b - a) * 100 }')
    log "   ${R[base_pct]} % of a core"
fi

# ---------------------------------------------------------------- 1. idle keep-alive connections
log "1. $PAGES connections, one ticket request each (load $(load1))"
start_client "$WR_PORT" "$PAGES" "$TMP/client-waitroom.txt"
ready=$(client_wait ready 900)
log "   $ready"
R[open]=$(field "$ready" open)
R[open_failed]=$(field "$ready" failed)
R[statuses]=$(field "$ready" statuses)
R[cookies]=$(field "$ready" cookies)
R[open_s]=$(field "$ready" seconds)
((${R[cookies]} >= PAGES * 99 / 100)) || die "only ${R[cookies]} of $PAGES got a ticket: $ready"
sleep 3
R[rss1]=$(rss_kb "$WR_PID")
R[fd1]=$(fds "$WR_PID")
R[load1]=$(load1)
R[queue]=$(state | json_num queue_length)
log "   RSS $(mib "${R[rss0]}") -> $(mib "${R[rss1]}") MiB, fds ${R[fd0]} -> ${R[fd1]}, queue ${R[queue]}"

# ---------------------------------------------------------------- 2. event streams
log "2. each connection opens its event stream"
st=$(client_cmd streams "streams ")
log "   $st"
R[streams]=$(field "$st" open)
R[refused]=$(field "$st" refused)
R[stream_failed]=$(field "$st" failed)
R[stream_s]=$(field "$st" seconds)
R[stream_statuses]=$(field "$st" statuses)
sleep 3
R[rss2]=$(rss_kb "$WR_PID")
R[fd2]=$(fds "$WR_PID")
R[load2]=$(load1)
log "   RSS $(mib "${R[rss2]}") MiB with ${R[streams]} streams"

# ---------------------------------------------------------------- 3. idle CPU
if ((IDLE_S > 0)); then
    sleep 2
    c0=$(client_cmd count "count ")
    R[load_idle0]=$(cut -d' ' -f1-3 /proc/loadavg)
    t0=$(cpu_ticks "$WR_PID")
    w0=$(date +%s.%N)
    log "3. ${IDLE_S}s while nothing changes (load ${R[load_idle0]})"
    sleep "$IDLE_S"
    t1=$(cpu_ticks "$WR_PID")
    w1=$(date +%s.%N)
    R[load_idle1]=$(cut -d' ' -f1-3 /proc/loadavg)
    c1=$(client_cmd count "count ")
    R[idle_ticks]=$((t1 - t0))
    R[idle_wall]=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.1f", b - a }')
    R[idle_cpu_s]=$(awk -v t="${R[idle_ticks]}" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
    R[idle_pct]=$(awk -v t="${R[idle_ticks]}" -v hz="$CLK_TCK" -v w="${R[idle_wall]}" \
        'BEGIN { printf "%.2f", t / hz / w * 100 }')
    R[idle_pct_10k]=$(awk -v p="${R[idle_pct]}" -v n="${R[streams]}" 'BEGIN { printf "%.2f", (n > 0 ? p * 10000 / n : 0) }')
    R[idle_net_10k]=$(awk -v p="${R[idle_pct]}" -v b="${R[base_pct]:-0}" -v n="${R[streams]}" \
        'BEGIN { printf "%.2f", (n > 0 ? (p - b) * 10000 / n : 0) }')
    R[alive]=$(($(field "$c1" alive) - $(field "$c0" alive)))
    R[data_idle]=$(($(field "$c1" data) - $(field "$c0" data)))
    R[streams_after_idle]=$(field "$c1" streams)
    R[rss3]=$(rss_kb "$WR_PID")
    log "   ${R[idle_cpu_s]} s CPU in ${R[idle_wall]} s = ${R[idle_pct]} % of a core (${R[idle_pct_10k]} % per 10 000); heartbeats ${R[alive]}, data events ${R[data_idle]}"
fi

# ---------------------------------------------------------------- 4. push latency
if ((CALL > 0)); then
    q=$(state)
    adm0=$(json_num admitted_total <<<"$q")
    log "4. calling $CALL visitors: total_active_users 1 -> $((1 + CALL)) (load $(load1))"
    p0=$(cpu_ticks "$WR_PID")
    T0=$(date +%s.%N)
    code=$(curl -sS -o "$TMP/patch.json" -w '%{http_code}' -X PATCH -H "$AUTH" \
        -H 'Content-Type: application/merge-patch+json' \
        -d "{\"total_active_users\": $((1 + CALL))}" "$ADMIN/admin/config")
    [[ $code == 200 ]] || die "PATCH /admin/config: $code $(cat "$TMP/patch.json")"
    # Until the called visitors' streams have ended (each ends after its "admitted" event).
    for ((i = 0; i < 150; i++)); do
        sleep 0.2
        c=$(client_cmd count "count ")
        (($(field "$c" ended) >= CALL)) && break
    done
    sleep 1
    p1=$(cpu_ticks "$WR_PID")
    R[push_cpu_s]=$(awk -v t=$((p1 - p0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
    R[push_load]=$(load1)
    q=$(state)
    R[admitted_delta]=$(($(json_num admitted_total <<<"$q") - ${adm0:-0}))
    out=$(client_cmd "report $T0" "moved ")
    called=$(grep '^called ' "$CLIENT_OUT" | tail -n1)
    server=$(grep '^server ' "$CLIENT_OUT" | tail -n1)
    moved=$(grep '^moved ' "$CLIENT_OUT" | tail -n1)
    log "   $called | $server | $moved"
    for k in called server moved; do
        line=${!k}
        R[${k}_n]=$(field "$line" "$k")
        R[${k}_p50]=$(field "$line" p50)
        R[${k}_p99]=$(field "$line" p99)
        R[${k}_max]=$(field "$line" max)
    done
fi
R[rss_end]=$(rss_kb "$WR_PID")
stop_client
R[cpu_total_s]=$(awk -v t=$(($(cpu_ticks "$WR_PID") - ${R[cpu_start]})) -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", t / hz }')
grep -c -i ' error ' "$TMP/waitroom.log" >"$TMP/errors.count" || true
R[log_errors]=$(cat "$TMP/errors.count")

HEAP=""
HEAP_SITES=""
if [[ $HEAPTRACK == 1 ]]; then
    log "heaptrack: stopping the proxy, reading the profile"
    stop_server "$WR_PID"
    # heaptrack writes its profile after the program exits: let it finish.
    for ((i = 0; i < 1200; i++)); do kill -0 "$WRAPPER_PID" 2>/dev/null || break; sleep 0.1; done
    stop_server "$WRAPPER_PID"
    prof=$(ls "$TMP"/heaptrack.waitroom*.zst "$TMP"/heaptrack.waitroom*.gz 2>/dev/null | head -n1 || true)
    [[ -n $prof ]] || die "no heaptrack profile in $TMP"
    mkdir -p "$ROOT/load/results"
    STAMP=$(date -u +%Y%m%d-%H%M%S)
    cp "$prof" "$ROOT/load/results/open-pages-$STAMP.heaptrack.${prof##*.}"
    heaptrack_print -f "$prof" --print-peaks 1 --print-allocators 0 --print-temporary 0 \
        --print-leaks 0 --peak-limit 25 --sub-peak-limit 4 >"$TMP/heaptrack.txt" 2>&1 || true
    cp "$TMP/heaptrack.txt" "$ROOT/load/results/open-pages-$STAMP.heaptrack.txt"
    HEAP=$(grep -E '^(peak heap memory consumption|peak RSS|total memory leaked|total runtime)' "$TMP/heaptrack.txt" || true)
    HEAP_SITES=$(python3 "$ROOT/load/heaptrack_summary.py" --per "${R[streams]}" --top 8 <"$TMP/heaptrack.txt" || true)
else
    stop_server "$WR_PID"
fi

# PAGES idle keep-alive connections to another server, one request answered on each, its RSS
# before and with them: R[<prefix>_open], _statuses, _rss0, _rss1, _load.
hold_idle() { # prefix port pids...
    local prefix=$1 port=$2 ready
    shift 2
    R[${prefix}_rss0]=$(rss_kb "$@")
    log "   $prefix: $PAGES idle keep-alive connections (load $(load1))"
    start_client "$port" "$PAGES" "$TMP/client-$prefix.txt"
    ready=$(client_wait ready 900)
    log "   $ready"
    R[${prefix}_open]=$(field "$ready" open)
    R[${prefix}_statuses]=$(field "$ready" statuses)
    sleep 3
    R[${prefix}_rss1]=$(rss_kb "$@")
    R[${prefix}_load]=$(load1)
    stop_client
}

# ---------------------------------------------------------------- 5. nginx, idle connections
if [[ $NGINX_IDLE == 1 ]]; then
    free_port NGINX_PORT
    nginx_conf idle "$NGINX_PORT" $((PAGES + 1024))
    start_nginx idle "$NGINX_PORT"
    NG_PID=$LAST_PID
    sleep 1
    # shellcheck disable=SC2046
    NG_PIDS="$NG_PID $(nginx_workers "$NG_PID")"
    log "5. nginx"
    # shellcheck disable=SC2086
    hold_idle ng "$NGINX_PORT" $NG_PIDS
    stop_server "$NG_PID"
fi

# ---------------------------------------------------------------- 6. bare Pingora, idle connections
if [[ $BARE == 1 ]]; then
    free_port BARE_PORT
    start_bare_pingora "$BARE_PORT" "$ORIGIN_PORT" "$THREADS"
    log "6. bare Pingora"
    sleep 1
    hold_idle bare "$BARE_PORT" "$BARE_PID"
    stop_server "$BARE_PID"
fi
R[load_end]=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
per_idle=$(kib_per "${R[rss0]}" "${R[rss1]}" "${R[open]}")
per_stream=$(kib_per "${R[rss0]}" "${R[rss2]}" "${R[streams]}")
per_stream_only=$(kib_per "${R[rss1]}" "${R[rss2]}" "${R[streams]}")
REPORT="| what | connections | RSS before MiB | RSS with them MiB | KiB each | load 1m |
|---|--:|--:|--:|--:|--:|
$(if [[ $FRESH == 1 ]]; then
    echo "| waitroom-proxy: tickets only (asked for over 8 connections, since closed) | ${R[open]} | $(mib "${R[rss0]}") | $(mib "${R[rss1]}") | $per_idle | ${R[load1]} |"
    echo "| waitroom-proxy: open waiting page (its stream on a connection of its own) | ${R[streams]} | $(mib "${R[rss1]}") | $(mib "${R[rss2]}") | **$per_stream_only** ($per_stream with its ticket) | ${R[load2]} |"
elif [[ $TOGETHER == 1 ]]; then
    echo "| waitroom-proxy: open waiting page (its ticket, then its stream on the same connection, 200 pages at a time) | ${R[open]} | $(mib "${R[rss0]}") | $(mib "${R[rss1]}") | **$per_idle** | ${R[load1]} |"
else
    echo "| waitroom-proxy: idle keep-alive connection (one ticket request answered) | ${R[open]} | $(mib "${R[rss0]}") | $(mib "${R[rss1]}") | $per_idle | ${R[load1]} |"
    echo "| waitroom-proxy: open event stream (the same connections, each now streaming) | ${R[streams]} | $(mib "${R[rss0]}") | $(mib "${R[rss2]}") | $per_stream ($per_stream_only over the idle connection) | ${R[load2]} |"
fi)"
if [[ $NGINX_IDLE == 1 ]]; then
    REPORT+="
| nginx $("$NGINX_BIN" -v 2>&1 | sed 's/.*nginx\///'), master + $THREADS workers: idle keep-alive connection (one answer each) | ${R[ng_open]} | $(mib "${R[ng_rss0]}") | $(mib "${R[ng_rss1]}") | $(kib_per "${R[ng_rss0]}" "${R[ng_rss1]}" "${R[ng_open]}") | ${R[ng_load]} |"
fi
if [[ $BARE == 1 ]]; then
    REPORT+="
| bare Pingora proxy (examples/bare_pingora.rs, Pingora's defaults, $THREADS threads): idle keep-alive connection (one request proxied, statuses ${R[bare_statuses]}) | ${R[bare_open]} | $(mib "${R[bare_rss0]}") | $(mib "${R[bare_rss1]}") | $(kib_per "${R[bare_rss0]}" "${R[bare_rss1]}" "${R[bare_open]}") | ${R[bare_load]} |"
fi
REPORT+="

- Opening: ${R[open]} connections in ${R[open_s]} s (failed ${R[open_failed]}, statuses ${R[statuses]}, tickets ${R[cookies]}; queue length ${R[queue]}); streams in ${R[stream_s]} s (refused ${R[refused]}, failed ${R[stream_failed]}, statuses ${R[stream_statuses]}). Proxy descriptors ${R[fd0]} → ${R[fd1]} → ${R[fd2]}."
if ((IDLE_S > 0)); then
    REPORT+="

| idle streams | window s | proxy CPU s (utime+stime) | % of a core | background, no connection: % of a core | % of a core per 10 000 streams (all / above the background) | heartbeats received | data events | RSS after MiB | load before → after |
|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|
| ${R[streams]} | ${R[idle_wall]} | ${R[idle_cpu_s]} | ${R[idle_pct]} | ${R[base_pct]:-—} | ${R[idle_pct_10k]} / ${R[idle_net_10k]} | ${R[alive]} | ${R[data_idle]} | $(mib "${R[rss3]}") | ${R[load_idle0]} → ${R[load_idle1]} |"
fi
if ((CALL > 0)); then
    REPORT+="

| push (from the PATCH that raised total_active_users) | streams | p50 ms | p99 ms | max ms |
|---|--:|--:|--:|--:|
| called visitor: \"admitted\" event read by the client | ${R[called_n]} | ${R[called_p50]} | ${R[called_p99]} | ${R[called_max]} |
| called visitor: the event's own lastUpdated (proxy clock) | ${R[server_n]} | ${R[server_p50]} | ${R[server_p99]} | ${R[server_max]} |
| everyone else: first new position read by the client | ${R[moved_n]} | ${R[moved_p50]} | ${R[moved_p99]} | ${R[moved_max]} |

- Admitted by the round (admin/state admitted_total Δ): ${R[admitted_delta]}; proxy CPU from the PATCH until the called streams ended + 1 s: ${R[push_cpu_s]} s; load after: ${R[push_load]}."
fi
REPORT+="
- Proxy log lines with ERROR during the run: ${R[log_errors]}. Proxy CPU over the whole run: ${R[cpu_total_s]} s."
if [[ -n $HEAP ]]; then
    REPORT+="
- heaptrack (the figures above are under heaptrack): $(tr '\n' ';' <<<"$HEAP")

Top allocation sites by peak memory (heaptrack_print -p, condensed by load/heaptrack_summary.py; per connection = / ${R[streams]}):

\`\`\`
$HEAP_SITES
\`\`\`"
fi

mkdir -p "$ROOT/load/results"
STAMP=${STAMP:-$(date -u +%Y%m%d-%H%M%S)}
RESULT="$ROOT/load/results/open-pages-$STAMP.md"
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
    echo "## open waiting pages $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr); load before: ${R[load0]}, at the end: ${R[load_end]}"
    echo "- knobs: PAGES=$PAGES FRESH=$FRESH TOGETHER=$TOGETHER THREADS=$THREADS IDLE_S=$IDLE_S BASE_S=$BASE_S CALL=$CALL NGINX_IDLE=$NGINX_IDLE HEAPTRACK=$HEAPTRACK"
    echo "- waitroom $REV, binary $BIN ($(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')); memory store; client load/open_pages.py (asyncio, one process)"
    echo
    echo "$REPORT"
    echo
} >>"$RESULT"
echo
echo "$REPORT"
echo
log "written to ${RESULT#"$ROOT"/}"
FAILED=0
