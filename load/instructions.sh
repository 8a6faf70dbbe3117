#!/usr/bin/env bash
# Instructions per request of the admitted path (pass cookie -> origin), and of a bare Pingora
# proxy (examples/bare_pingora.rs) forwarding the same request, counted by callgrind:
# deterministic for a binary and its inputs, so a change of a few per cent shows on a machine
# shared with compiles, where CPU time per request moves by tens of per cent (BENCHMARKS.md,
# "The admitted path before and after the canonical request").
#
#   load/instructions.sh                         # the release build, N=2000
#   BIN=/tmp/old/waitroom-proxy load/instructions.sh
#
# The proxy runs under `valgrind --tool=callgrind --separate-threads=yes` with one worker
# thread, the memory store, the access log off and nginx as the origin. A client takes a pass,
# sends WARM requests with it on one keep-alive connection, then N more; the same is done with
# N = 0; Ir per request = (Ir of the busiest thread with N - the same thread's with 0) / N. The
# bare proxy is measured the same way (one thread, no pass), and the ratio of the two is the
# admitted path's cost over Pingora's own, in instructions. Prints the admitted path's figure
# and writes load/results/instructions-<time>.md.
#
# Knobs: BIN (default $CARGO_TARGET_DIR/release/waitroom-proxy), N (2000), WARM (200),
# BARE (1: also the bare Pingora proxy, default 1), KEEP_TMP (1: keep the callgrind files).
set -euo pipefail

N=${N:-2000}
WARM=${WARM:-200}
BARE=${BARE:-1}
KEEP_TMP=${KEEP_TMP:-0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
die() {
    echo "instructions: error: $*" >&2
    exit 1
}
log() { echo "instructions: $(date -u +%H:%M:%S) $*" >&2; }
[[ $N =~ ^[1-9][0-9]*$ && $WARM =~ ^[0-9]+$ ]] || die "N must be positive, WARM a number"
for tool in valgrind curl python3; do command -v "$tool" >/dev/null || die "needs $tool"; done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX_BIN ]] || die "needs nginx"
BIN=${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/waitroom-proxy}
[[ -x $BIN ]] || cargo build --release --bin waitroom-proxy
[[ -x $BIN ]] || die "no proxy binary at $BIN"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/waitroom-instr.XXXXXX")
FAILED=1
# shellcheck source=lib/servers.sh
source "$ROOT/load/lib/servers.sh"
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_servers 30
    keep_or_remove_tmp instructions "$FAILED" "$KEEP_TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port ORIGIN_PORT
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<NGINX
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    server { listen 127.0.0.1:$ORIGIN_PORT; location / { return 200 "ok"; } }
}
NGINX
"$NGINX_BIN" -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >"$TMP/nginx/out.log" 2>&1 &
PIDS+=("$!:TERM")
wait_listening "$ORIGIN_PORT" nginx "$!" 10

# One measured run of the proxy (kind waitroom or bare): prints the busiest thread's file name
# and its Ir.
run() { # kind requests label
    local kind=$1 requests=$2 label=$3 port admin pid
    free_port port
    free_port admin
    mkdir -p "$TMP/$label"
    local command=("$BIN" --config "$TMP/$label.toml" --dev)
    [[ $kind == bare ]] && command=("$BARE_BIN" "127.0.0.1:$port" "127.0.0.1:$ORIGIN_PORT" 1)
    cat >"$TMP/$label.toml" <<CONF
[listen]
address = "127.0.0.1:$port"
threads = 1
[origin]
address = "127.0.0.1:$ORIGIN_PORT"
[room]
id = "instr"
name = "Instructions"
total_active_users = 100000
new_users_per_minute = 1000000
burst = 1000000
[pass]
cookie_secure = false
max_requests_per_minute = 1000000000
[store]
backend = "memory"
[admin]
address = "127.0.0.1:$admin"
[log]
access = false
[rate_limit]
tickets_per_ip_per_minute = 0
max_live_tickets_per_ip = 0
CONF
    RUST_LOG=warn valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$TMP/$label/callgrind.out" \
        "${command[@]}" >"$TMP/$label.log" 2>&1 &
    pid=$!
    wait_listening "$port" "$kind under callgrind" "$pid" 120
    python3 - "$port" "$WARM" "$requests" "$kind" <<'PY' || die "client failed: see $TMP"
import socket, sys
port, warm, n, kind = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def answer(f):
    length, cookie = 0, None
    status = f.readline().split()[1]
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
        if name.lower() == "set-cookie" and value.strip().startswith("waitroom="):
            cookie = value.strip().split(";")[0]
    f.read(length)
    return status, cookie

s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
status, cookie = answer(f)
if status != b"200" or (kind == "waitroom" and not cookie):
    sys.exit(f"no pass: {status} {cookie}")
# The same head for both proxies: the bare one forwards the cookie as it is.
cookie = cookie or "waitroom=none"
req = f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode()
for _ in range(warm + n):
    s.sendall(req)
    if answer(f)[0] != b"200":
        sys.exit("a request with the pass was not forwarded")
PY
    kill -INT "$pid"
    wait "$pid" 2>/dev/null || true
    # The busiest thread: the one that served the connection.
    local best="" best_ir=0 file ir
    for file in "$TMP/$label"/callgrind.out*; do
        ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$file")
        if [[ -n $ir ]] && ((ir > best_ir)); then
            best=$file
            best_ir=$ir
        fi
    done
    [[ -n $best ]] || die "no callgrind output in $TMP/$label"
    echo "$(basename "$best") $best_ir"
}

per_request() { # kind label: Ir per request of `kind`, from a run with N and one without
    local kind=$1 label=$2 thread_n ir_n thread_0 ir_0 suffix ir_0_same
    read -r thread_n ir_n < <(run "$kind" "$N" "$label-with")
    read -r thread_0 ir_0 < <(run "$kind" 0 "$label-without")
    # The same thread in both runs (threads are numbered as they are made).
    suffix=${thread_n##*-}
    ir_0_same=$(awk '/^(summary|totals):/ { print $2; exit }' \
        "$TMP/$label-without/callgrind.out-$suffix" 2>/dev/null || echo "$ir_0")
    log "$kind: busiest thread $thread_n: $ir_n Ir with $N, $ir_0_same without"
    awk -v a="$ir_n" -v b="$ir_0_same" -v n="$N" 'BEGIN { printf "%.0f", (a - b) / n }'
}

log "$BIN under callgrind: $WARM + $N requests, then $WARM + 0"
admitted=$(per_request waitroom admitted)
bare="" ratio=""
if [[ $BARE == 1 ]]; then
    bare_pingora_bin "${CARGO_TARGET_DIR:-$ROOT/target}"
    bare=$(per_request bare bare)
    ratio=$(awk -v a="$admitted" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
fi
log "admitted path $admitted Ir per request${bare:+, bare Pingora $bare: ${ratio}x}"
mkdir -p load/results
out="load/results/instructions-$(date -u +%Y%m%d-%H%M%S).md"
{
    echo "## admitted path, instructions per request $(date -u '+%Y-%m-%d %H:%M:%S') UTC"
    echo
    echo "- binary $BIN ($(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')), waitroom $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "- N=$N WARM=$WARM, one worker thread, memory store, nginx origin, callgrind"
    echo "- waitroom admitted path: **$admitted Ir per request**"
    [[ -z $bare ]] || echo "- bare Pingora proxy: **$bare Ir per request**; admitted / bare: **${ratio}x**"
} >"$out"
echo "$admitted${bare:+ $bare $ratio}"
FAILED=0
