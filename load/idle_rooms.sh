#!/usr/bin/env bash
# What idle rooms cost (issue 17: "Idle rooms cost next to nothing"): one waitroom-proxy with ROOMS
# rooms (default 50) and nobody visiting, then the same with 1 room, on Redis and on the memory
# store. For each run: the proxy's CPU (% of one core, from /proc/<pid>/stat utime + stime over the
# idle window), redis-server's CPU, and Redis calls per second from INFO commandstats (every
# command, the commands run inside the Lua scripts included), broken down by command and, from a
# short MONITOR sample after the window, by script.
#
#   load/idle_rooms.sh                    # from the repository root
#   ROOMS=50 IDLE=60 STORE=both load/idle_rooms.sh
#
# Knobs (environment):
#   ROOMS     rooms of the many-rooms run (default 50); the comparison run always has 1
#   IDLE      seconds of the measured idle window (default 60)
#   SETTLE    seconds between the proxy listening and the window (connections, first ticks)
#             (default 5)
#   STORE     memory | redis | both (default both). redis: the script starts its own redis-server
#             on a free port (--save '' --appendonly no; never a shared one), flushed before each
#             run; the proxy gets it as WR_REDIS_URL.
#   THREADS   worker threads of the proxy's listener (default 2)
#   SAMPLE    seconds of MONITOR after each Redis window, for the calls per script (default 5; 0
#             skips). MONITOR slows Redis a little: it is never inside the measured window.
#   REBUILD   1: run `cargo build --release` even if the binary exists (default 0)
#   CARGO_TARGET_DIR  where the release binary is built/looked for (default target/)
#   KEEP_TMP  1: keep the temp dir (configs, logs, raw commandstats and MONITOR output)
#
# The rooms are alike (room01 … roomNN, each under its own path prefix /rNN, 100 inside at once,
# 60 per minute, default admission_interval 200 ms and refresh_interval 20 s); nobody visits, so
# every figure is the background cost: the admission loop (one pass over every room per
# admission_interval) and, on Redis, each room's revocation follower (one reload a second).
# Prints markdown tables and appends them, with the machine, the knobs and the load average, to
# load/results/idle-rooms-<timestamp>.md (git-ignored). Everything listens on 127.0.0.1 only;
# every process started here is stopped on exit.
set -euo pipefail

ROOMS=${ROOMS:-50}
IDLE=${IDLE:-60}
SETTLE=${SETTLE:-5}
STORE=${STORE:-both}
THREADS=${THREADS:-2}
SAMPLE=${SAMPLE:-5}
REBUILD=${REBUILD:-0}
KEEP_TMP=${KEEP_TMP:-0}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

die() {
    echo "idle_rooms: error: $*" >&2
    exit 1
}
log() { echo "idle_rooms: $*" >&2; }

[[ $ROOMS =~ ^[1-9][0-9]*$ ]] || die "ROOMS must be a positive integer (got '$ROOMS')"
((ROOMS <= 999)) || die "ROOMS must be at most 999"
[[ $IDLE =~ ^[1-9][0-9]*$ ]] || die "IDLE must be a positive number of seconds"
[[ $SETTLE =~ ^[0-9]+$ ]] || die "SETTLE must be a number of seconds"
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer"
[[ $SAMPLE =~ ^[0-9]+$ ]] || die "SAMPLE must be a number of seconds (0 to skip)"
case $STORE in
memory | redis) STORES=("$STORE") ;;
both) STORES=(redis memory) ;;
*) die "STORE must be memory, redis or both (got '$STORE')" ;;
esac
COUNTS=(1)
((ROOMS > 1)) && COUNTS+=("$ROOMS")

# ---------------------------------------------------------------- tools and binary
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
missing=()
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

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_BEFORE%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    log "warning: load average is $LOAD_BEFORE on $(nproc) CPUs: other work will skew the CPU figures"
fi

# ---------------------------------------------------------------- process bookkeeping
TMP=$(mktemp -d "${TMPDIR:-/tmp}/waitroom-idle.XXXXXX")
FAILED=1

# shellcheck source=lib/servers.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/servers.sh"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_servers
    keep_or_remove_tmp idle_rooms "$FAILED" "$KEEP_TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM



CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # pid: user + system CPU so far, in clock ticks (fields 14 and 15 of /proc/<pid>/stat)
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
threads_of() { awk '/^Threads:/ { print $2 }' "/proc/$1/status"; }
pct() { # ticks seconds -> % of one core
    awk -v t="$1" -v s="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz / s * 100 }'
}
rate() { awk -v c="$1" -v s="$2" 'BEGIN { printf "%.1f", c / s }'; }

# ---------------------------------------------------------------- redis-server
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
# Commands the Lua scripts run inside Redis: commandstats counts those too, one per redis.call.
LUA_CMDS=" $(cat "$ROOT"/src/store/lua/*.lua 2>/dev/null |
    grep -o "redis\.p\?call(['\"][A-Za-z]*" | sed "s/.*['\"]//" | tr '[:upper:]' '[:lower:]' | sort -u | xargs) "
# SHA1 of each script as the proxy loads it (lua/common.lua in front of the room scripts; see
# src/store/redis/scripts.rs), to name the EVALSHA calls of the MONITOR sample.
declare -A SCRIPT_OF
for f in "$ROOT"/src/store/lua/*.lua; do
    name=$(basename "$f" .lua)
    [[ $name == common ]] && continue
    if [[ $name == claim_ticket ]]; then
        sha=$(sha1sum <"$f" | cut -d' ' -f1)
    else
        sha=$(cat "$ROOT/src/store/lua/common.lua" "$f" | sha1sum | cut -d' ' -f1)
    fi
    SCRIPT_OF[$sha]=$name
done

# ---------------------------------------------------------------- one run
# A config of n alike rooms.
write_config() { # file n store wr-port admin-port origin-port
    local file=$1 n=$2 store=$3 i id
    {
        cat <<CONF
[listen]
address = "127.0.0.1:$4"
threads = $THREADS

[origin]
# Nothing listens there: nobody visits, nothing is forwarded.
address = "127.0.0.1:$6"

[pass]
cookie_secure = false

[store]
backend = "$store"

[admin]
address = "127.0.0.1:$5"

[log]
access = false
CONF
        for ((i = 1; i <= n; i++)); do
            printf -v id '%02d' "$i"
            cat <<ROOM

[[rooms]]
id = "room$id"
name = "Room $id"
path = "/r$id"
total_active_users = 100
new_users_per_minute = 60
ROOM
        done
    } >"$file"
}

declare -A CPU PCT_PER_ROOM RCPU ALL CLIENT EVALSHA RSS THR LOADS WINDOW
declare -A CMDS   # "<run>|<command>" -> calls/s
declare -A SCRIPTS # "<run>|<script or command>" -> calls/s (MONITOR sample)
declare -A SEEN_CMD SEEN_SCRIPT
RUNS=()

measure() { # store n
    local store=$1 n=$2 run="$1:$2"
    local conf="$TMP/waitroom-$store-$n.toml" wr_port admin_port origin_port pid
    free_port wr_port
    free_port admin_port
    free_port origin_port
    write_config "$conf" "$n" "$store" "$wr_port" "$admin_port" "$origin_port"
    local env_redis=()
    if [[ $store == redis ]]; then
        [[ -n $REDIS_PID ]] || start_redis
        rcli FLUSHALL >/dev/null
        rcli SCRIPT FLUSH >/dev/null
        env_redis=(WR_REDIS_URL="redis://127.0.0.1:$REDIS_PORT")
    fi
    local secrets=(WR_JWT_SECRET="$JWT" WR_ADMIN_TOKEN="$ADMIN")
    env "${secrets[@]}" ${env_redis[@]+"${env_redis[@]}"} "$BIN" --config "$conf" --test \
        >"$TMP/test-$store-$n.log" 2>&1 || die "config of $n rooms rejected: $(tail -n 5 "$TMP/test-$store-$n.log")"
    log "$store store, $n room(s): starting the proxy"
    env "${secrets[@]}" ${env_redis[@]+"${env_redis[@]}"} RUST_LOG=${RUST_LOG:-info} \
        "$BIN" --config "$conf" >"$TMP/waitroom-$store-$n.log" 2>&1 &
    pid=$!
    PIDS+=("$pid:INT")
    wait_listening "$wr_port" "waitroom-$store-$n" "$pid" 15
    wait_listening "$admin_port" "waitroom-$store-$n" "$pid" 15
    sleep "$SETTLE"
    kill -0 "$pid" 2>/dev/null || die "the proxy exited; see $TMP/waitroom-$store-$n.log"

    log "$store store, $n room(s): idle for ${IDLE}s (load $(cut -d' ' -f1 /proc/loadavg))"
    local t0 t1 c0 c1 r0=0 r1=0 l0 l1 dt
    [[ $store == redis ]] && { rcli CONFIG RESETSTAT >/dev/null; r0=$(cpu_ticks "$REDIS_PID"); }
    c0=$(cpu_ticks "$pid")
    t0=$(date +%s.%N)
    l0=$(cut -d' ' -f1 /proc/loadavg)
    sleep "$IDLE"
    c1=$(cpu_ticks "$pid")
    t1=$(date +%s.%N)
    l1=$(cut -d' ' -f1 /proc/loadavg)
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    RUNS+=("$run")
    WINDOW[$run]=$dt
    CPU[$run]=$(pct $((c1 - c0)) "$dt")
    PCT_PER_ROOM[$run]=$(awk -v p="${CPU[$run]}" -v n="$n" 'BEGIN { printf "%.3f", p / n }')
    RSS[$run]=$(awk -v k="$(rss_kb "$pid")" 'BEGIN { printf "%.1f", k / 1024 }')
    THR[$run]=$(threads_of "$pid")
    LOADS[$run]="$l0 → $l1"

    if [[ $store == redis ]]; then
        r1=$(cpu_ticks "$REDIS_PID")
        RCPU[$run]=$(pct $((r1 - r0)) "$dt")
        local stats="$TMP/commandstats-$store-$n.txt" total=0 client=0 evalsha=0 name calls
        rcli INFO commandstats | tr -d '\r' >"$stats"
        while IFS=' ' read -r name calls; do
            [[ ${name%%|*} == config || ${name%%|*} == info ]] && continue # this script's own
            total=$((total + calls))
            [[ $name == evalsha ]] && evalsha=$((evalsha + calls))
            [[ $LUA_CMDS == *" $name "* ]] || client=$((client + calls))
            CMDS["$run|$name"]=$(rate "$calls" "$dt")
            SEEN_CMD[$name]=1
        done < <(awk -F'[:=,]' '/^cmdstat_/ { n = substr($1, 9); print n, $3 }' "$stats")
        ALL[$run]=$(rate "$total" "$dt")
        CLIENT[$run]=$(rate "$client" "$dt")
        EVALSHA[$run]=$(rate "$evalsha" "$dt")
        if ((SAMPLE > 0)); then
            # Which scripts the EVALSHAs are: a MONITOR sample right after the window.
            local mon="$TMP/monitor-$store-$n.txt"
            timeout "$SAMPLE" redis-cli -p "$REDIS_PORT" MONITOR >"$mon" 2>/dev/null || true
            local what count
            while IFS=' ' read -r what count; do
                [[ -n ${SCRIPT_OF[$what]:-} ]] && what="EVALSHA:${SCRIPT_OF[$what]}"
                SCRIPTS["$run|$what"]=$(rate "$count" "$SAMPLE")
                SEEN_SCRIPT[$what]=1
            done < <(awk '
                / \[[0-9]+ lua\] / { next }                     # commands run by the scripts
                / \[[0-9]+ [0-9.:]+\] / {
                    match($0, /\] "[^"]*"/); cmd = tolower(substr($0, RSTART + 3, RLENGTH - 4))
                    if (cmd == "monitor") next
                    if (cmd == "evalsha") { rest = substr($0, RSTART + RLENGTH + 2)
                        match(rest, /^[0-9a-f]+/); cmd = substr(rest, RSTART, RLENGTH) }
                    else cmd = toupper(cmd)
                    n[cmd]++ }
                END { for (c in n) print c, n[c] }' "$mon")
        fi
    fi
    stop_server "$pid"
}

JWT=$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')
ADMIN=$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')
# The run's order: for each store, 1 room then the many (a fresh proxy and a flushed Redis each).
for store in "${STORES[@]}"; do
    for n in "${COUNTS[@]}"; do
        measure "$store" "$n"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- tables
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "—"; else printf "%.2f", a / b }'; }
TABLE="| store | rooms | proxy CPU % of a core | per room | × (1 room's × rooms) | redis-server CPU % | Redis calls/s (all) | client commands/s | EVALSHA/s | EVALSHA/s per room | proxy RSS MiB | threads | load 1m (start → end) |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for run in "${RUNS[@]}"; do
    store=${run%%:*} n=${run#*:}
    scale="—"
    [[ $n != 1 && -n ${CPU[$store:1]:-} ]] &&
        scale=$(ratio "${CPU[$run]}" "$(awk -v p="${CPU[$store:1]}" -v n="$n" 'BEGIN { print p * n }')")
    per_room="—"
    [[ -n ${EVALSHA[$run]:-} ]] && per_room=$(awk -v e="${EVALSHA[$run]}" -v n="$n" 'BEGIN { printf "%.1f", e / n }')
    TABLE+="
| $store | $n | ${CPU[$run]} | ${PCT_PER_ROOM[$run]} | $scale | ${RCPU[$run]:-—} | ${ALL[$run]:-—} | ${CLIENT[$run]:-—} | ${EVALSHA[$run]:-—} | $per_room | ${RSS[$run]} | ${THR[$run]} | ${LOADS[$run]} |"
done

REDIS_RUNS=()
for run in "${RUNS[@]}"; do [[ $run == redis:* ]] && REDIS_RUNS+=("$run"); done
by_rate() { # table-name key-prefix-array: rows of the seen keys, sorted by the last run's rate
    local -n seen=$1 rates=$2
    local k run line
    for k in "${!seen[@]}"; do
        line="$k"
        for run in "${REDIS_RUNS[@]}"; do line+=" ${rates[$run|$k]:-0}"; done
        echo "$line"
    done | sort -k"$((${#REDIS_RUNS[@]} + 1))" -g -r
}
CMD_TABLE="" SCRIPT_TABLE=""
if ((${#REDIS_RUNS[@]})); then
    head="| command |" sep="|---|"
    for run in "${REDIS_RUNS[@]}"; do head+=" calls/s, ${run#*:} room(s) |"; sep+="--:|"; done
    ((${#REDIS_RUNS[@]} == 2)) && { head+=" ratio |"; sep+="--:|"; }
    CMD_TABLE="$head
$sep"
    while read -r k a b; do
        row="| $k | $a |"
        [[ -n ${b:-} ]] && row+=" $b | $(ratio "$b" "$a") |"
        [[ $LUA_CMDS == *" $k "* ]] && row="${row/| $k |/| $k (in scripts) |}"
        CMD_TABLE+="
$row"
    done < <(by_rate SEEN_CMD CMDS)
    if ((SAMPLE > 0)); then
        head=${head/| command |/| client call |}
        SCRIPT_TABLE="$head
$sep"
        while read -r k a b; do
            row="| ${k/:/ } | $a |"
            [[ -n ${b:-} ]] && row+=" $b | $(ratio "$b" "$a") |"
            SCRIPT_TABLE+="
$row"
        done < <(by_rate SEEN_SCRIPT SCRIPTS)
    fi
fi

CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || REV+=" (+ uncommitted changes in src/)"
REPORT=$(
    echo "### Idle rooms"
    echo
    echo "$TABLE"
    if [[ -n $CMD_TABLE ]]; then
        echo
        echo "### Redis calls per second by command (INFO commandstats over the window)"
        echo
        echo "$CMD_TABLE"
    fi
    if [[ -n $SCRIPT_TABLE ]]; then
        echo
        echo "### Client calls per second by script (MONITOR, ${SAMPLE}s right after the window)"
        echo
        echo "$SCRIPT_TABLE"
    fi
    echo
    echo "- Nobody visits: every figure is background work. Window: ${IDLE}s, starting ${SETTLE}s after the proxy listens; CPU = utime + stime of the process over the window, in % of one core; *all* calls = every cmdstat_* (the commands run inside the Lua scripts included, as Redis counts them), *client commands* = EVALSHA plus the commands the scripts never run (PING, ...): about one per network round trip (the revocation reload's ZRANGEBYSCORE, one per room a second, is counted with the scripts' own ZRANGEBYSCORE; the MONITOR table shows it apart). × (1 room's × rooms): the many-rooms CPU over ROOMS times the 1-room CPU (1.00 = linear)."
)
STAMP=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$ROOT/load/results"
RESULT="$ROOT/load/results/idle-rooms-$STAMP.md"
{
    echo "## waitroom idle rooms $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $CPU_MODEL, $(uname -sr); load average before the runs: $LOAD_BEFORE, after: $LOAD_AFTER"
    echo "- knobs: ROOMS=$ROOMS IDLE=$IDLE SETTLE=$SETTLE STORE=$STORE THREADS=$THREADS SAMPLE=$SAMPLE"
    echo "- waitroom $REV, binary $BIN ($(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC'))"
    [[ -n $REDIS_PID ]] && echo "- redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), its own, on 127.0.0.1:$REDIS_PORT, --save '' --appendonly no, flushed before each run"
    echo
    echo "$REPORT"
    echo
} >>"$RESULT"
echo
echo "$REPORT"
echo
log "load average before: $LOAD_BEFORE, after: $LOAD_AFTER"
log "written to ${RESULT#"$ROOT"/}"
FAILED=0
